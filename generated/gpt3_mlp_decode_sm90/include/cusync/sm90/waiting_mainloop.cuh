// cusync sm90 backend: a CUTLASS 3.x TMA mainloop whose load warp waits for the producer's tiles.
//
// Only load() is extended, and without copying it: the wait happens between calls of CUTLASS's own
// load(), which takes its K range as (iterator, count) and leaves the pipeline state to the caller.
//   RowSync:  one wait for the A rows of this tile, then CUTLASS loads all K-blocks.
//   TileSync: K is cut at the producer's tile columns; before each piece the load warp waits for the
//             producer tiles of this tile's rows in that column, so the first K-blocks load while later
//             producer tiles are still being computed.
// The load warp runs ahead of the math warps by the pipeline depth, so each wait overlaps the MMAs of
// the K-blocks (and tiles) already loaded. After the acquire, fence.proxy.async.global orders the
// generic-proxy acquire before the TMA (async proxy) reads of the data it guards.
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cute/tensor.hpp"

#include "cusync/sm90/collective_hooks.cuh"
#include "cusync/sm90/ticket_scheduler.cuh"
#include "cusync/stage.cuh"

namespace cusync::sm90 {

struct MainloopWait {
  InputWait input{};              // policy, semaphores, timeout; input.enabled == false: no waits
  int32_t producer_tiles_m = 0;   // rows of producer tiles in this run (clamps the last row's wait)
  TileQueue queue{};              // the scheduler's tile queue: this warp publishes its tickets (publish_next)
};

// params.hooks: this stage's MainloopWait.
template <class Base>
struct WaitingMainloop : WithHooks<Base, MainloopWait> {
  using Hooked = WithHooks<Base, MainloopWait>;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Base::TileShape;
  using typename Hooked::Arguments;
  using typename Hooked::Params;

  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    InputWait const& input = params.hooks.input;
    if (!input.enabled) {
      Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count, thread_idx,
                 block_rank_in_cluster, shared_tensors);
    } else {
      load_waiting(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, k_tile_count, thread_idx,
                   block_rank_in_cluster, shared_tensors);
    }
    // This tile's loads are issued: the ticket of the load warp's next sequence number (the kernel calls
    // load() once per tile, for every sequence number in order).
    TicketTileScheduler::publish_next(params.hooks.queue, ++tiles_loaded_);
  }

 private:
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load_waiting(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                                   cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                                   KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                                   uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    InputWait const& input = params.hooks.input;
    constexpr int kBlockM = cute::size<0>(TileShape{});
    constexpr int kBlockK = cute::size<2>(TileShape{});
    // The epoch is fixed for the whole kernel (the run's last sink tile bumps it after every wait of the
    // run), so one load at the first tile is enough.
    if (!have_epoch_) {
      epoch_ = current_epoch(input.state);
      have_epoch_ = true;
    }
    int32_t const tile_m = int32_t(cute::get<0>(blk_coord));
    WaitRange const range{tile_m * kBlockM, (tile_m + 1) * kBlockM, params.hooks.producer_tiles_m,
                          TileCoord{tile_m, int32_t(cute::get<1>(blk_coord))}};
    // K-blocks per piece: all of K for RowSync (one semaphore covers the row), one producer tile column
    // for TileSync (the plan checks that the producer's tile N is a multiple of BLK_K).
    int const piece = input.policy.kind == PolicyKind::kRow ? k_tile_count : input.policy.tile_n / kBlockK;
    int const pieces = (k_tile_count + piece - 1) / piece;
    int const k_begin = int(*k_tile_iter);
    // Each poll finds the run of consecutive posted pieces from `p` on; CUTLASS then loads that whole run
    // with one call, so a tile whose producer data is all there costs one poll, one fence and one load().
    for (int p = 0; p < pieces;) {
      int const ready = wait_pieces(input, range, k_begin * kBlockK, piece * kBlockK, p, pieces);
      // The acquire above was a generic-proxy read; the TMA loads that follow read through the async proxy.
      asm volatile("fence.proxy.async.global;" : : : "memory");
      int const count = (ready * piece < k_tile_count ? ready * piece : k_tile_count) - p * piece;
      Base::load(params, pipeline, smem_pipe_write, load_inputs, blk_coord, k_tile_iter, count, thread_idx,
                 block_rank_in_cluster, shared_tensors);
      smem_pipe_write.advance(count);
      for (int i = 0; i < count; ++i) ++k_tile_iter;  // CuTe's coordinate iterator only steps forward by one
      p = ready;
    }
  }

  struct WaitRange {
    int32_t row_begin;          // A rows this tile reads
    int32_t row_end;
    int32_t producer_tiles_m;
    TileCoord self;
  };

  // Warp-collective: lane l checks piece first + l (its columns, all its producer row tiles) with one
  // acquire load per semaphore, so a tile's whole K range costs one round trip when it is ready, instead
  // of one per piece. If piece `first` is not ready, lane 0 spins on it (bounded). Returns the end of the
  // run of consecutive posted pieces starting at `first` (at least first + 1).
  CUTLASS_DEVICE int wait_pieces(InputWait const& input, WaitRange const& range, int32_t col_begin,
                                 int32_t piece_cols, int first, int pieces) const {
    int const lane = int(threadIdx.x % 32);
    int const p = first + lane;
    uint64_t const expected = tagged(epoch_, uint32_t(input.policy.posts));
    int32_t const pm_begin = input.policy.first_row_tile(range.row_begin);
    int32_t const pm_end = input.policy.last_row_tile(range.row_end, range.producer_tiles_m);
    bool ready = true;
    if (p < pieces) {
      int32_t const pn = (col_begin + p * piece_cols) / input.policy.tile_n;
      for (int32_t pm = pm_begin; pm <= pm_end; ++pm) {
        ready = ready && ptx::ld_acquire_gpu(input.semaphores + input.policy.semaphore_of(pm, pn)) >= expected;
      }
    }
    uint32_t const posted = __ballot_sync(0xffffffffu, ready);
    // __syncwarp orders every lane's acquire before the loads that the elected lane issues next (a vote
    // alone is not a memory barrier).
    __syncwarp();
    if (posted & 1u) {
      int const run = posted == 0xffffffffu ? 32 : __ffs(~posted) - 1;
      return first + run;
    }
    if (lane == 0) {
      input.template wait_for_rows</*kInline=*/true>(range.row_begin, range.row_end, col_begin + first * piece_cols, range.producer_tiles_m,
                          epoch_, range.self);
    }
    __syncwarp();
    return first + 1;
  }

  uint32_t epoch_ = 0;
  bool have_epoch_ = false;
  uint32_t tiles_loaded_ = 0;  // load() calls so far: the load warp's sequence number
};

}  // namespace cusync::sm90
