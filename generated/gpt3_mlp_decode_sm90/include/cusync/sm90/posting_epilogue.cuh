// cusync sm90 backend: a CUTLASS 3.x TMA epilogue that posts each output tile once it is in memory.
//
// Only store() is extended: CUTLASS's store() issues (and commits) every TMA store of the tile from the
// math threads' warp 0 and returns. That warp then waits for the stores to COMPLETE
// (cp.async.bulk.wait_group 0: the writes are performed, not merely read out of shared memory as
// .read would say), fences the async proxy against the generic one, and its elected lane posts the
// tile with a release (fence.acq_rel.gpu + red). The other math warps go straight on to the next tile;
// CUTLASS's named barrier inside store() already ordered their shared-memory writes before the TMA.
// A sink stage (nothing consumes it) posts nothing; it only counts finished tiles, and the last tile
// of a run opens the next epoch (close_run).
//
// Over an epilogue that stores from registers (GatedEpilogue, through CUTLASS's
// Sm90TmaWarpSpecializedAdapter: GmemTiledCopyD is void) every math thread wrote part of the tile, so
// all of them meet at a named barrier (CUTLASS reserves EpilogueBarrier for the epilogue, which this
// one does not otherwise use) before warp 0 posts: the barrier orders their stores before the poster's
// fence.acq_rel.gpu, whose cumulativity publishes them with the post.
#pragma once

#include <cstdint>

#include <type_traits>

#include "cutlass/arch/barrier.h"
#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"

#include "cusync/sm90/collective_hooks.cuh"
#include "cusync/stage.cuh"

namespace cusync::sm90 {

// params.hooks: this stage's StageSync. kFinishOnce: a sink may count its finished tiles once per math warp
// group (StageSync::finish_stride); a template parameter, since the code for it cost the GEMM kernels' math
// warps spills where they never use it.
template <class Base, bool kFinishOnce = false>
struct PostingEpilogue : WithHooks<Base, StageSync> {
  using Hooked = WithHooks<Base, StageSync>;
  using typename Base::LoadPipeline;
  using typename Base::LoadPipelineState;
  using typename Base::StorePipeline;
  using typename Base::StorePipelineState;
  using typename Base::TensorStorage;
  // TMA stores (CUTLASS's TMA epilogue) or every math thread's own stores (an adapted register epilogue).
  static constexpr bool kTmaStores = !std::is_void_v<typename Base::GmemTiledCopyD>;

  using typename Hooked::Arguments;
  using typename Hooked::Params;

  CUTLASS_HOST_DEVICE PostingEpilogue(Params const& params, TensorStorage& storage)
      : Hooked(params, storage), sync_(params.hooks) {}

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                            StorePipeline store_pipeline, StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage& shared_tensors, int subtile_idx = -1) {
    auto next = Base::store(load_pipeline, load_pipe_consumer_state, store_pipeline, store_pipe_producer_state,
                            problem_shape_mnkl, tile_shape_MNK, tile_coord_mnkl, accumulators, tiled_mma, thread_idx,
                            shared_tensors, subtile_idx);
    // Warp 0 of the math threads issued the TMA stores (CUTLASS: issue_tma_store).
    if (sync_.trace != nullptr && thread_idx == 0) {
      TileTrace::record(sync_.trace, int32_t(cute::get<0>(tile_coord_mnkl)), int32_t(cute::get<1>(tile_coord_mnkl)),
                        sync_.tiles_n, 1);
    }
    // Only warp 0 of the math threads posts, and it decides that with values broadcast from lane 0: a
    // branch the compiler can prove warp-uniform, with one elected lane doing the work. A per-thread
    // condition here (threadIdx, or a field read through the parameters) made ptxas keep the math warps'
    // wgmma descriptors out of uniform registers for the whole kernel (64 instead of 48 instructions per
    // K-block).
    if constexpr (!kTmaStores) {
      if (sync_.enabled) {
        cutlass::arch::NamedBarrier::sync(int(cute::size(TiledMma{})), cutlass::arch::ReservedNamedBarriers::EpilogueBarrier);
      }
    }
    int const posting = __shfl_sync(0xffffffffu, int(sync_.enabled && thread_idx < cutlass::NumThreadsPerWarp), 0);
    if (posting) {
      TileCoord const tile{int32_t(cute::get<0>(tile_coord_mnkl)), int32_t(cute::get<1>(tile_coord_mnkl))};
      if constexpr (kTmaStores) {
        if (sync_.output.enabled()) {
          asm volatile("cp.async.bulk.wait_group 0;" : : : "memory");
          asm volatile("fence.proxy.async.global;" : : : "memory");
        }
      }
      __syncwarp();
      // A sink counts its finished tiles: each one with an atomic (its round trip in the math warps' path), or
      // where the host gave a stride (a persistent kernel's static order) all of the warp group's at once, after
      // its last tile. Every lane keeps the count, so the branch below stays straight-line code.
      uint32_t finished = 1;
      bool last = true;
      if (kFinishOnce && sync_.finish_stride > 0) {
        finished = ++unfinished_;
        last = tile.m * sync_.tiles_n + tile.n + sync_.finish_stride >= sync_.tiles_m * sync_.tiles_n;
        if (last) unfinished_ = 0;
      }
      bool closes = false;  // this lane counted the run's last finished tile
      if (cute::elect_one_sync()) {
        if (sync_.output.enabled()) {
          // The epoch is fixed for the whole kernel: load it once, at the first post.
          if (!have_epoch_) {
            epoch_ = current_epoch(sync_.state);
            have_epoch_ = true;
          }
          uint64_t* sem = sync_.out_semaphores + sync_.output.semaphore_of(tile.m, tile.n);
          if (sync_.store_post) {
            post_store(sem, epoch_);
          } else {
            post_add(sem, epoch_);
          }
        }
        if (sync_.counts_finish && last) {
          ptx::fence_acq_rel_gpu();
          closes = atomicAdd(&sync_.state->finished, finished) + finished == sync_.run_blocks;
        }
      }
      // The elected lane's branch stays straight-line code; the close (loops over the stages and, once
      // every 2^32 runs, the pool) runs in the whole warp under a warp-uniform vote. No call in a
      // warp-specialized kernel (see spin_wait_inline).
      if (__any_sync(0xffffffffu, closes)) close_run_lanes(sync_, closes, int(threadIdx.x % 32), 32);
      __syncwarp();
    }
    return next;
  }

 private:
  StageSync const& sync_;
  uint32_t epoch_ = 0;
  uint32_t unfinished_ = 0;  // finish_stride: this warp group's finished tiles not counted yet
  bool have_epoch_ = false;
};

}  // namespace cusync::sm90
