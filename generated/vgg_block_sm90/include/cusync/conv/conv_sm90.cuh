// cusync conv backend, Hopper kernels: a CUTLASS 3.x implicit-GEMM Conv2D fprop (NHWC; TMA im2col loads of the
// activations, TMA loads of the filters, wgmma, one producer and one consumer warp group, one tile per block)
// whose load warp waits for the producer rows its R x S windows read, and whose epilogue posts the tile once
// its TMA stores have completed.
//
// Nothing of CUTLASS is copied: the kernel is cutlass::conv::kernel::ConvUniversal over the collectives that
// CUTLASS's conv and epilogue CollectiveBuilders pick, with two derived collectives:
//   WindowMainloop  (load): the block's tile in row-major order (below), the window and residual waits
//                   (ConvWaits, cusync/conv/window.cuh) by the whole load warp, fence.proxy.async.global,
//                   then CUTLASS's own load() of every K-block;
//   TiledEpilogue   (load, store): the same tile for the residual's loads and the output's stores, over
//                   PostingEpilogue (cusync/sm90/posting_epilogue.cuh: cp.async.bulk.wait_group 0, then a
//                   release post, or the sink's finish count).
// CUTLASS's kernel takes its tile from (blockIdx.x, blockIdx.y) = (pixel tile, channel tile), so the hardware
// would start every pixel tile of channel tile 0 before any of channel tile 1, and no producer tile row would
// be complete until the last wave. Both collectives instead read the tile of the block's linear index in
// row-major order (channel tiles fastest: TileOrder::kRowMajor, the sm80 kernel's order), so tile rows, the
// unit a consumer waits for, complete in the order the blocks start.
//
// Compiled without CUTLASS_ENABLE_GDC_FOR_SM90 (its griddepcontrol.wait would hold every consumer tile until the
// whole producer kernel ended): the kernel below triggers the next stage's launch at block entry, waits for
// the kernel before it only where the run is chained back to back (ConvWaits::wait_primary_first), and, as a
// programmatic stage of the overlap, once more at exit (the grid ends after the one it was launched behind).
#pragma once

#include <atomic>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/conv/collective/collective_builder.hpp"
#include "cutlass/conv/convnd_problem_shape.hpp"
#include "cutlass/conv/dispatch_policy.hpp"
#include "cutlass/conv/kernel/conv_universal.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"

#include "cusync/conv/chain.h"
#include "cusync/conv/window.cuh"
#include "cusync/sm90/collective_hooks.cuh"
#include "cusync/sm90/posting_epilogue.cuh"
#include "cusync/sm90/ticket_scheduler.cuh"
#include "cusync/stage.cuh"
#include "cusync/status.h"

namespace cusync::conv {

// The tile of this block: its linear index in the grid (tiles_m x tiles_n, CUTLASS's get_grid_shape), taken
// in row-major tile order.
CUTLASS_DEVICE TileCoord row_major_block_tile() {
  uint32_t const linear = blockIdx.x + gridDim.x * blockIdx.y;
  return TileCoord{int32_t(linear / gridDim.y), int32_t(linear % gridDim.y)};
}

// CUTLASS's (m, n, k, l) tile coordinate with (m, n) replaced by this block's tile.
template <class Coord>
CUTLASS_DEVICE auto with_block_tile(Coord const& coord, TileCoord tile) {
  return cute::make_coord(int(tile.m), int(tile.n), cute::get<2>(coord), cute::get<3>(coord));
}

// What the load warp needs: the stage's synchronization and the waits of its tiles.
struct ConvLoadHooks {
  StageSync sync{};
  ConvWaits waits{};
};

// params.hooks: this stage's ConvLoadHooks.
template <class Base>
struct WindowMainloop : sm90::WithHooks<Base, ConvLoadHooks> {
  using Hooked = sm90::WithHooks<Base, ConvLoadHooks>;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  using typename Hooked::Params;

  // The whole load warp (CUTLASS calls load() in all 32 lanes and elects one to issue the copies).
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    TileCoord const tile = row_major_block_tile();
    StageSync const& sync = params.hooks.sync;
    if (sync.trace != nullptr && cute::elect_one_sync()) TileTrace::record(sync.trace, tile.m, tile.n, sync.tiles_n, 0);
    if (params.hooks.waits.wait_primary_first) asm volatile("griddepcontrol.wait;" : : : "memory");
    if (sync.enabled) {
      // Every lane polls its share of the window's producer rows (and the residual's) with ld.acquire.gpu;
      // the warp barrier orders those acquires before the elected lane's loads, and the proxy fence orders
      // them before the TMA (async proxy) reads of the data they guard, the residual's included.
      params.hooks.waits.wait_inline(sync.input, current_epoch(sync.state), tile);
      __syncwarp();
      asm volatile("fence.proxy.async.global;" : : : "memory");
    }
    if (sync.trace != nullptr && cute::elect_one_sync())
      TileTrace::record(sync.trace, tile.m, tile.n, sync.tiles_n, TileTrace::kReady);
    Base::load(params, pipeline, smem_pipe_write, load_inputs, with_block_tile(blk_coord, tile), k_tile_iter,
               k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
  }
};

template <class Base>
struct TiledEpilogue : Base {
  using typename Base::LoadPipeline;
  using typename Base::LoadPipelineState;
  using typename Base::StorePipeline;
  using typename Base::StorePipelineState;
  using typename Base::TensorStorage;
  using Base::Base;

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class TiledMma>
  CUTLASS_DEVICE auto load(LoadPipeline load_pipeline, LoadPipelineState load_pipe_producer_state,
                           ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                           TileCoordMNKL tile_coord_mnkl, TiledMma tiled_mma, int thread_idx,
                           TensorStorage& shared_tensors, int subtile_idx = -1) {
    return Base::load(load_pipeline, load_pipe_producer_state, problem_shape_mnkl, tile_shape_MNK,
                      with_block_tile(tile_coord_mnkl, row_major_block_tile()), tiled_mma, thread_idx, shared_tensors,
                      subtile_idx);
  }

  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class AccEngine, class AccLayout,
            class TiledMma>
  CUTLASS_DEVICE auto store(LoadPipeline load_pipeline, LoadPipelineState load_pipe_consumer_state,
                            StorePipeline store_pipeline, StorePipelineState store_pipe_producer_state,
                            ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                            TileCoordMNKL tile_coord_mnkl, cute::Tensor<AccEngine, AccLayout> accumulators,
                            TiledMma tiled_mma, int thread_idx, TensorStorage& shared_tensors, int subtile_idx = -1) {
    return Base::store(load_pipeline, load_pipe_consumer_state, store_pipeline, store_pipe_producer_state,
                       problem_shape_mnkl, tile_shape_MNK, with_block_tile(tile_coord_mnkl, row_major_block_tile()),
                       accumulators, tiled_mma, thread_idx, shared_tensors, subtile_idx);
  }
};

// The block's hooks around CUTLASS's kernel body (the one-tile ConvUniversal, and the persistent GemmUniversal
// below): the next stage's launch released at entry (every block of this one then holds its SM slot before any
// block of the next is scheduled), the start counted (the two-stream overlap's wait kernel waits for it), and the
// exit wait of a programmatic stage of the overlap.
template <class Kernel>
__global__ void __launch_bounds__(Kernel::MaxThreadsPerBlock, Kernel::MinBlocksPerMultiprocessor)
    synced_conv_sm90_kernel(__grid_constant__ typename Kernel::Params const params) {
  extern __shared__ __align__(128) char cusync_conv_sm90_smem[];
  StageSync const& sync = params.mainloop.hooks.sync;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (sync.trigger_dependents) asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
#endif
  if (sync.enabled && threadIdx.x == 0) ptx::red_add_relaxed_gpu(&sync.state->started[sync.stage], 1u);
  Kernel op;
  op(params, cusync_conv_sm90_smem);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // One waiting block is enough to keep the grid from ending before the kernel it was launched behind.
  bool const last = blockIdx.x + 1 == gridDim.x && blockIdx.y + 1 == gridDim.y;
  if (sync.wait_primary_at_exit && threadIdx.x == 0 && ((params.mainloop.hooks.waits.hooks & kHookOneExitWait) == 0u || last))
    asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

// The epilogue's arguments of either kernel kind: D = Act(acc (+ bias) (+ residual)) at the output strides given,
// posting through `sync`.
template <bool kBias, bool kResidual, class EpilogueArguments, class Problem, class StrideC, class StrideD>
void set_epilogue(EpilogueArguments& e, Problem const& pr, StrideC dC, StrideD dD, StageSync const& sync) {
  e.thread.alpha = 1.0f;
  e.thread.beta = kResidual ? 1.0f : 0.0f;
  if constexpr (kBias) e.thread.bias_ptr = pr.bias;
  if constexpr (kResidual) e.ptr_C = pr.residual;
  e.dC = dC;
  e.ptr_D = pr.y;
  e.dD = dD;
  e.hooks = sync;
}

// A stage kernel's entry (synced_conv_sm90_kernel over CUTLASS's kernel), its dynamic shared memory and the
// blocks one SM holds at once: the same for both kernel kinds.
template <class Kernel, int kSmemBytes>
struct ConvSm90Entry {
  static constexpr auto kernel() { return synced_conv_sm90_kernel<Kernel>; }

  static Status prepare() {
    cudaError_t const err = cudaFuncSetAttribute(kernel(), cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    return err == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }

  static int occupancy() {
    int blocks = 0;
    cudaError_t const err =
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel(), int(Kernel::MaxThreadsPerBlock), kSmemBytes);
    return err == cudaSuccess ? blocks : 0;
  }

  // Clusters of `cluster` CTAs the current device holds at once (0 on error): fewer CTAs than SMs where a GPC's SMs
  // do not divide into whole clusters. Queried once per device and kernel (the last device's answer is kept, as
  // device << 32 | clusters, in one atomic: host threads may launch at once).
  static int max_active_clusters(dim3 cluster) {
    static std::atomic<int64_t> cached{-1};
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return 0;
    int64_t const known = cached.load(std::memory_order_relaxed);
    if (known >= 0 && int(known >> 32) == device) return int(known & 0xffffffff);
    cudaLaunchConfig_t config{};
    config.gridDim = cluster;
    config.blockDim = dim3(unsigned(Kernel::MaxThreadsPerBlock));
    config.dynamicSmemBytes = size_t(kSmemBytes);
    cudaLaunchAttribute attribute = cluster_attribute(cluster);
    config.attrs = &attribute;
    config.numAttrs = 1;
    int clusters = 0;
    if (cudaOccupancyMaxActiveClusters(&clusters, kernel(), &config) != cudaSuccess) {
      (void)cudaGetLastError();
      return 0;
    }
    cached.store(int64_t(device) << 32 | int64_t(uint32_t(clusters)), std::memory_order_relaxed);
    return clusters;
  }
};

// The epilogue's fusion: D = Act(acc (+ bias) (+ residual)), fp32 compute; the residual is CUTLASS's source C
// (beta = 1), the bias its per-column (per output channel) broadcast.
template <template <class> class Act, class Element, class ElementC, bool kBias>
using ConvFusion = std::conditional_t<
    kBias, cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Act, Element, float, Element, ElementC, float>,
    cutlass::epilogue::fusion::LinCombEltAct<Act, Element, float, ElementC, float>>;

// One convolution of the chain on sm90: NHWC activations, KRSC filters, NPQK output, fp32 accumulation, tiles
// of kBlockM output pixels x kBlockN output channels, kBlockK channels per K-block. The same interface as
// SyncedConv (cusync/conv/conv.cuh), so the chain drives both alike; there is no bounded variant (the
// pipeline takes the shared memory: one block per SM).
template <typename Element, int kBlockM, int kBlockN, int kBlockK, template <typename> class Act, bool kBias,
          bool kResidual>
struct SyncedConvSm90 {
  static_assert(kBlockM == 64 || kBlockM == 128, "tile.threadblock[0] of an sm90 conv must be 64 or 128");
  static_assert(kBlockN % 64 == 0 && kBlockN <= 256 && kBlockM * kBlockN <= 128 * 128,
                "tile.threadblock[1] of an sm90 conv: 64, 128 (or 256 with 64 pixels): one warp group's accumulators");
  static_assert(kBlockK == 64, "tile.threadblock[2] of an sm90 conv must be 64 (one 128-byte swizzle atom)");
  static_assert(cute::sizeof_bits_v<Element> == 16, "dtype of an sm90 conv must be fp16 or bf16");

  static constexpr bool kPersistent = false;  // one block per tile
  static constexpr int kAlignment = 128 / cutlass::sizeof_bits<Element>::value;
  using Layout = cutlass::layout::TensorNHWC;
  using ElementC = std::conditional_t<kResidual, Element, void>;
  using TileShape = cute::Shape<cute::Int<kBlockM>, cute::Int<kBlockN>, cute::Shape<cute::Int<kBlockK>>>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;

  using StockEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      ElementC, Layout, kAlignment,   // the residual (or none)
      Element, Layout, kAlignment,    // the output
      cutlass::epilogue::TmaWarpSpecialized, ConvFusion<Act, Element, ElementC, kBias>>::CollectiveOp;
  using StockMainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,
      Element, Layout, kAlignment, Element, Layout, kAlignment, float, TileShape, ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<int(sizeof(typename StockEpilogue::SharedStorage))>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;
  using Mainloop = WindowMainloop<StockMainloop>;
  using Epilogue = TiledEpilogue<sm90::PostingEpilogue<StockEpilogue>>;
  using Kernel = cutlass::conv::kernel::ConvUniversal<typename StockMainloop::ProblemShape, Mainloop, Epilogue>;
  using Params = typename Kernel::Params;
  static constexpr int kSmemBytes = int(Kernel::SharedStorageSize);

  struct Problem {
    int n, h, w, c, k, r, s, p, q, pad, stride, dilation;
    Element const* x;         // [n, h, w, c]
    Element const* filter;    // [k, r, s, c]
    Element const* bias;      // [k] (kBias: required)
    Element const* residual;  // [n, p, q, k] (kResidual: required)
    Element* y;               // [n, p, q, k]
  };

  using Entry = ConvSm90Entry<Kernel, kSmemBytes>;
  static constexpr auto kernel() { return Entry::kernel(); }
  static Status prepare() { return Entry::prepare(); }
  static int occupancy(bool /*bounded*/) { return Entry::occupancy(); }  // no bounded variant on sm90

  static typename StockMainloop::ProblemShape problem_shape(Problem const& pr) {
    using Shape = typename StockMainloop::ProblemShape;
    return Shape(cutlass::conv::Mode::kCrossCorrelation, typename Shape::TensorExtent{pr.n, pr.h, pr.w, pr.c},
                 typename Shape::TensorExtent{pr.k, pr.r, pr.s, pr.c}, typename Shape::ShapePadding{pr.pad, pr.pad},
                 typename Shape::ShapePadding{pr.pad, pr.pad}, typename Shape::TraversalStride{pr.stride, pr.stride},
                 typename Shape::ShapeDilation{pr.dilation, pr.dilation}, 1);
  }

  // An NPQK tensor as the epilogue's ((q, p, n), k) stride.
  template <class Stride>
  static Stride output_stride(Problem const& pr) {
    Stride stride{};
    cute::get<0, 0>(stride) = int64_t(pr.k);
    cute::get<0, 1>(stride) = int64_t(pr.q) * pr.k;
    cute::get<0, 2>(stride) = int64_t(pr.p) * pr.q * pr.k;
    return stride;
  }

  // programmatic: launched as a programmatic dependent of the kernel before it on `stream`.
  static Status launch(Problem const& pr, StageSync sync, ConvWaits waits, bool programmatic, bool /*bounded*/,
                       cudaStream_t stream) {
    if ((kResidual && pr.residual == nullptr) || (kBias && pr.bias == nullptr)) return Status::kInvalidArgument;
    typename Kernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = problem_shape(pr);
    args.mainloop.ptr_A = pr.x;
    args.mainloop.ptr_B = pr.filter;
    args.mainloop.hooks = ConvLoadHooks{sync, waits};
    set_epilogue<kBias, kResidual>(args.epilogue, pr, output_stride<typename Kernel::StrideC>(pr),
                                   output_stride<typename Kernel::StrideD>(pr), sync);
    if (!Kernel::can_implement(args)) return Status::kCutlassError;
    Params const params = Kernel::to_underlying_arguments(args, nullptr);
    dim3 const grid = Kernel::get_grid_shape(params);
    // The plan's tiles are CUTLASS's: the semaphores and the run's block count are sized from them.
    if (int64_t(grid.x) != sync.tiles_m || int64_t(grid.y) != sync.tiles_n || grid.z != 1u) return Status::kInvalidArgument;
    return launch_stage_kernel(kernel(), grid, dim3(unsigned(Kernel::MaxThreadsPerBlock)), size_t(kSmemBytes),
                               programmatic, stream, params);
  }
};


// ---------------------------------------------------------------------------------------------------------
// The persistent kernel (ConvTables::persistent): CUTLASS's sm90 ping-pong GEMM kernel
// (cutlass::gemm::kernel::GemmUniversal, KernelTmaWarpSpecializedPingpong) over the same conv mainloop, so that
// one CTA per SM walks many tiles: the load warp polls the next tile's window rows and issues its loads while
// the math warp groups compute and store the tiles before it, and the two math warp groups take alternate
// tiles, one's epilogue (and post) under the other's MMAs. CUTLASS 4.2's conv dispatch refuses persistent
// schedules; its GEMM kernel takes any collective with the GEMM mainloop's interface, which the conv mainloop
// has but for four seams that PersistentConvMainloop fills (nothing is copied):
//   - the kernel's problem is the implicit GEMM's (CUTLASS's linearized M = N*P*Q, N = K, K = (C, S, R)), while
//     the collective lowers its TMA descriptors from the convolution's shape: Arguments carries that (`conv`);
//   - the kernel reads a batch mode L of B that the conv filter tensor lacks: load_init appends a unit mode to
//     it, load() drops it again;
//   - the schedule tag, the producer's thread-event count and rank-3 stride types the GEMM kernel reads from
//     its mainloop (in static checks only: the collective keeps its own strides).
// The output and the residual are dense NPQK tensors, i.e. row-major [N*P*Q, K] matrices: the epilogue is the
// GEMM's TMA epilogue on those rows. Tiles come from the sm90 GEMMs' ticket scheduler in row-major order
// (TicketTileScheduler: tickets where the stage waits for a producer, else CTA b takes tiles b, b + grid, ...).

// Shared memory the ticket ring and the poll warp's count take after the kernel's SharedStorage, kept out of the
// mainloop's stage budget.
constexpr uint32_t kPolledAfterRing = uint32_t(sizeof(sm90::detail::TicketRing) + 15) / 16 * 16;
constexpr int kPersistentRingBytes = int((kPolledAfterRing + 16 + 127) / 128 * 128);

// What the persistent kernel's load warps need: the stage's synchronization, the waits of its tiles and the
// tile queue.
struct PersistentConvHooks {
  StageSync sync{};
  ConvWaits waits{};
  sm90::TileQueue queue{};
};

// The GEMM kernel's dispatch reads the schedule from the mainloop's policy; the collective's own code keeps its
// policy. The policy also gives the kernel its auxiliary load warp (below).
template <class BasePolicy>
struct PersistentConvPolicy : BasePolicy {
  using Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
};

}  // namespace cusync::conv

// CUTLASS's ping-pong kernel runs a fourth producer warp, which calls the mainloop's load_auxiliary() once per
// tile in the same tile sequence as the load warp, where the mainloop's policy says it has one: here it is the
// poll warp.
namespace cutlass::gemm::kernel::detail {
template <class BasePolicy>
struct HasAuxiliaryLoad<cusync::conv::PersistentConvPolicy<BasePolicy>> : cute::true_type {};
}  // namespace cutlass::gemm::kernel::detail

namespace cusync::conv {

// The poll warp's count, in dynamic shared memory at `offset` (after the ticket ring): the waits of the CTA's
// first `count` tiles are satisfied. The poll warp's release of it follows its lanes' acquires of the semaphores
// (ordered by its warp barrier); a loader's acquire of it, then its fence.proxy.async.global, order them before
// its TMA reads.
__device__ __forceinline__ uint32_t* polled_count(uint32_t offset) {
  extern __shared__ __align__(16) unsigned char cusync_dynamic_smem[];
  return reinterpret_cast<uint32_t*>(cusync_dynamic_smem + offset);
}

// The persistent conv kernel's tile scheduler: the sm90 GEMMs' ticket scheduler whose construction (every thread,
// at kernel entry) also clears the poll warp's count where the launch uses one, behind a barrier. (In the ticket
// scheduler itself that code cost the GEMM kernels' math warps spills.)
struct PolledTicketScheduler {};  // the tag that selects it in GemmUniversal

constexpr int kPollWarp = 3;  // the ping-pong kernel's MainloopAux: the producer warp group's fourth warp

class PolledTicketTileScheduler : public sm90::TicketTileScheduler {
  using Base = sm90::TicketTileScheduler;
  using PersistentTileSchedulerSm90 = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  struct Arguments : Base::Arguments {
    uint32_t polled_at = 0;  // ConvWaits::polled_at (0: no poll warp)
  };
  struct Params : Base::Params {
    uint32_t polled_at = 0;
  };

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape tile_shape,
                                        ClusterShape cluster_shape, cutlass::KernelHardwareInfo const& hw_info,
                                        Arguments const& arguments, void* workspace = nullptr,
                                        uint32_t epilogue_subtile = 1, uint32_t ktile_start_alignment_count = 1u) {
    // CUTLASS's persistent scheduler's parameters, for any cluster shape: the ticket scheduler refuses clusters
    // (a ticket is one CTA's tile), but in static order a 1 x 2 cluster's CTAs take neighbouring tiles in step
    // (static_tile); PersistentConvSm90::launch never asks for tickets with clusters.
    Params params;
    static_cast<PersistentTileSchedulerSm90::Params&>(params) = PersistentTileSchedulerSm90::to_underlying_arguments(
        problem_shape_mnkl, tile_shape, cluster_shape, hw_info, arguments, workspace, epilogue_subtile,
        ktile_start_alignment_count);
    params.queue = arguments.queue;
    params.polled_at = arguments.polled_at;
    return params;
  }

  CUTLASS_HOST_DEVICE PolledTicketTileScheduler() {}
  CUTLASS_DEVICE explicit PolledTicketTileScheduler(Params const& params)
      : Base(params), idle_poll_warp_(params.polled_at == 0u && cutlass::canonical_warp_idx_sync() == kPollWarp) {
    if (params.polled_at != 0u) {
      if (threadIdx.x == 0) sm90::detail::atom_relaxed_cta_store(reinterpret_cast<int32_t*>(polled_count(params.polled_at)), 0);
      __syncthreads();
    }
  }

  // Every warp asks once, before the kernel splits into roles. Without waits to poll (ticket order, or a stage that
  // waits for nothing) the poll warp gets no tile and leaves, instead of following the ticket ring for the whole
  // kernel with its 32 lanes; TileQueue::reader_warps does not count it.
  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape cluster_shape) {
    if (idle_poll_warp_) return WorkTileInfo::invalid_work_tile();
    return Base::initial_work_tile_info(cluster_shape);
  }

 private:
  bool idle_poll_warp_ = false;
};

}  // namespace cusync::conv

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<cusync::conv::PolledTicketScheduler, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = cusync::conv::PolledTicketTileScheduler;
};
}  // namespace cutlass::gemm::kernel::detail

namespace cusync::conv {

// A loader (the load warp, or the epilogue-load warp for the residual), all lanes: waits until the poll warp has
// passed the waits of its sequence number `seq`. The poll warp's own waits are bounded by the chain's timeout (it
// records the tile it gave up on and goes on): at most one timeout for the window and one for the residual
// (each wait_rows_warp call is bounded as a whole, and after a record the other returns at once), so this spin
// ends; its own bound, four timeouts, only guards against a broken kernel (a trap, as the ticket ring's
// handshakes do).
__device__ __forceinline__ void wait_polled(uint32_t ring_offset, uint32_t seq, uint64_t timeout_ns) {
  sm90::detail::spin_until_at_least(polled_count(ring_offset), seq + 1u, 4u * timeout_ns);
  asm volatile("fence.proxy.async.global;" : : : "memory");
}

template <class Base>  // CUTLASS's sm90 conv collective (built for its non-persistent schedule)
struct PersistentConvMainloop : Base {
  using DispatchPolicy = PersistentConvPolicy<typename Base::DispatchPolicy>;
  static constexpr int NumProducerThreadEvents = 1;  // one elected lane arrives per stage (TMA transaction bytes)
  using StrideA = cute::Stride<int64_t, cute::_1, cute::_0>;
  using StrideB = cute::Stride<int64_t, cute::_1, cute::_0>;
  using ConvShape = typename Base::ProblemShape;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;

  struct Arguments : Base::Arguments {
    ConvShape conv{};
    PersistentConvHooks hooks{};
  };
  struct Params : Base::Params {
    PersistentConvHooks hooks{};
  };

  template <class GemmShape>
  static Params to_underlying_arguments(GemmShape const&, Arguments const& args, void* workspace) {
    Params params;
    static_cast<typename Base::Params&>(params) = Base::to_underlying_arguments(args.conv, args, workspace);
    params.hooks = args.hooks;
    return params;
  }

  template <class GemmShape>
  static bool can_implement(GemmShape const&, Arguments const& args) {
    return Base::can_implement(args.conv, args);
  }

  template <class ProblemShapeMNKL>
  CUTLASS_DEVICE auto load_init(ProblemShapeMNKL const& problem_shape_mnkl, Params const& params) {
    auto inputs = Base::load_init(problem_shape_mnkl, params);
    return cute::make_tuple(cute::get<0>(inputs), with_unit_batch(cute::get<1>(inputs)));
  }

  // The whole load warp, once per tile in its sequence (CUTLASS elects the lane that issues the copies).
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState smem_pipe_write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int thread_idx,
                           uint32_t block_rank_in_cluster, TensorStorage& shared_tensors) {
    PersistentConvHooks const& hooks = params.hooks;
    StageSync const& sync = hooks.sync;
    TileCoord const tile{int32_t(cute::get<0>(blk_coord)), int32_t(cute::get<1>(blk_coord))};
    if (!started_) {
      started_ = true;
      if (hooks.waits.wait_primary_first) asm volatile("griddepcontrol.wait;" : : : "memory");
      if (sync.enabled) epoch_ = current_epoch(sync.state);  // fixed for the whole kernel (see close_run)
    }
    if (hooks.waits.polled_at != 0u) {
      // The poll warp has waited for this tile's rows (a tile or more ahead, usually): read its count.
      wait_polled(hooks.waits.polled_at, tiles_loaded_, hooks.queue.timeout_ns);
    } else if (sync.enabled && sync.input.enabled) {
      // Every lane polls its share of the window's producer rows with ld.acquire.gpu; the warp barrier orders
      // those acquires before the elected lane's loads, the proxy fence before the TMA (async proxy) reads.
      hooks.waits.wait_window_inline(sync.input, epoch_, tile);
      __syncwarp();
      asm volatile("fence.proxy.async.global;" : : : "memory");
    }
    if (sync.trace != nullptr && cute::elect_one_sync())
      TileTrace::record(sync.trace, tile.m, tile.n, sync.tiles_n, TileTrace::kReady);
    Base::load(params, pipeline, smem_pipe_write,
               cute::make_tuple(cute::get<0>(load_inputs), without_batch(cute::get<1>(load_inputs))),
               blk_coord, k_tile_iter, k_tile_count, thread_idx, block_rank_in_cluster, shared_tensors);
    // This tile's loads are issued: the ticket of the warp's next sequence number.
    sm90::TicketTileScheduler::publish_next(hooks.queue, ++tiles_loaded_);
  }

  // The poll warp (the kernel's auxiliary producer warp, all lanes), once per tile of the same sequence as the
  // load warp: where the host gave it the waits (ConvWaits::polled_at: static tile order, a synced stage with a
  // producer), it waits for the tile's window rows and residual rows, one semaphore per lane with ld.acquire.gpu,
  // and counts the tile as polled. It runs ahead of the load warp by as many tiles as the producers allow, so the
  // polls' round trips leave the load warp's path. Elsewhere it has left before its first tile
  // (PolledTicketTileScheduler::initial_work_tile_info).
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load_auxiliary(Params const& params, MainloopPipeline, PipelineState,
                                     cute::tuple<TensorA, TensorB> const&, BlockCoord const& blk_coord,
                                     KTileIterator, int, int, uint32_t, TensorStorage&) {
    PersistentConvHooks const& hooks = params.hooks;
    if (hooks.waits.polled_at == 0u) return;
    StageSync const& sync = hooks.sync;
    if (!started_) {
      started_ = true;
      epoch_ = current_epoch(sync.state);  // fixed for the whole kernel (see close_run)
    }
    TileCoord const tile{int32_t(cute::get<0>(blk_coord)), int32_t(cute::get<1>(blk_coord))};
    hooks.waits.wait_inline(sync.input, epoch_, tile);  // the window's rows and the residual's
    __syncwarp();  // every lane's acquires before the elected lane's release
    if (cute::elect_one_sync()) sm90::detail::red_release_cta_add(polled_count(hooks.waits.polled_at), 1u);
    __syncwarp();
    hooks_ = &hooks;
    ++tiles_polled_;
  }

  // CUTLASS calls it in the load warp and in the poll warp; only the load warp's pipeline state is its own.
  // The poll warp of a sink (kHookEarlyFinish, PersistentConvSm90::launch) counts the CTA's tiles as finished
  // here, once their waits have all passed: all that the run's sinks read is then posted, which is all the epoch
  // bump (close_run) must follow; the math warps' stores need not, since nothing waits for a sink. So the count's
  // fence and atomic, and the run's close, leave the last tile's epilogue (2.3-2.9 us a sink stage measured there).
  CUTLASS_DEVICE void load_tail(MainloopPipeline pipeline, PipelineState smem_pipe_write) {
    int const warp = cutlass::canonical_warp_idx_sync() % cutlass::NumWarpsPerWarpGroup;
    if (warp == 0) Base::load_tail(pipeline, smem_pipe_write);
    if (warp == kPollWarp && hooks_ != nullptr && hooks_->sync.counts_finish &&
        (hooks_->waits.hooks & kHookEarlyFinish) != 0u) {
      StageSync const& sync = hooks_->sync;
      bool closes = false;
      if (cute::elect_one_sync()) {
        ptx::fence_acq_rel_gpu();  // this warp's acquires of the semaphores before the count
        closes = atomicAdd(&sync.state->finished, tiles_polled_) + tiles_polled_ == sync.run_blocks;
      }
      if (__any_sync(0xffffffffu, closes)) close_run_lanes(sync, closes, int(threadIdx.x % 32), 32);
      __syncwarp();
    }
  }

 private:
  template <class Tensor>
  CUTLASS_DEVICE static auto with_unit_batch(Tensor const& t) {
    return cute::make_tensor(t.data(), cute::append(t.layout(), cute::Layout<cute::_1, cute::_0>{}));
  }
  template <class Tensor>
  CUTLASS_DEVICE static auto without_batch(Tensor const& t) {
    return cute::make_tensor(t.data(), cute::take<0, 4>(t.layout()));
  }

  uint32_t epoch_ = 0;
  uint32_t tiles_loaded_ = 0;  // load() calls so far: the load warp's sequence number
  uint32_t tiles_polled_ = 0;  // the poll warp's tiles (load_auxiliary calls that waited)
  PersistentConvHooks const* hooks_ = nullptr;  // the poll warp's, once it waited for a tile
  bool started_ = false;
};

// The epilogue of the persistent kernel: PostingEpilogue (the post after each tile's TMA stores completed) whose
// residual loads, issued by the kernel's epilogue-load warp, first wait for the residual's rows of the tile (and,
// chained back to back, for the kernel before it).
template <class Base>  // sm90::PostingEpilogue<CUTLASS's TMA epilogue>
struct ResidualWaitingEpilogue : Base {
  using typename Base::LoadPipeline;
  using typename Base::LoadPipelineState;
  using typename Base::TensorStorage;

  struct Arguments : Base::Arguments {
    ConvWaits conv_waits{};
  };
  struct Params : Base::Params {
    ConvWaits conv_waits{};
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& problem_shape, Arguments const& args, void* workspace) {
    // CUTLASS's epilogue types its TMA descriptors for a run-time batch extent; the implicit GEMM's is a static 1.
    auto const shape = cute::make_shape(cute::get<0>(problem_shape), cute::get<1>(problem_shape),
                                        cute::get<2>(problem_shape), int(cute::get<3>(problem_shape)));
    Params params;
    static_cast<typename Base::Params&>(params) = Base::to_underlying_arguments(shape, args, workspace);
    params.conv_waits = args.conv_waits;
    return params;
  }

  CUTLASS_HOST_DEVICE ResidualWaitingEpilogue(Params const& params, TensorStorage& storage)
      : Base(params, storage), waits_(params.conv_waits), sync_(params.hooks) {}

  // The epilogue-load warp (all lanes), once per tile that loads the residual.
  template <class ProblemShapeMNKL, class TileShapeMNK, class TileCoordMNKL, class TiledMma>
  CUTLASS_DEVICE auto load(LoadPipeline load_pipeline, LoadPipelineState load_pipe_producer_state,
                           ProblemShapeMNKL problem_shape_mnkl, TileShapeMNK tile_shape_MNK,
                           TileCoordMNKL tile_coord_mnkl, TiledMma tiled_mma, int thread_idx,
                           TensorStorage& shared_tensors, int subtile_idx = -1) {
    if (!started_) {
      started_ = true;
      if (waits_.wait_primary_first) asm volatile("griddepcontrol.wait;" : : : "memory");
      if (sync_.enabled) epoch_ = current_epoch(sync_.state);
    }
    if (waits_.polled_at != 0u) {
      // The poll warp waited for the residual's rows with the window's: read its count.
      if (waits_.residual.enabled) wait_polled(waits_.polled_at, tiles_loaded_, waits_.residual.timeout_ns);
      ++tiles_loaded_;
    } else if (sync_.enabled && waits_.residual.enabled) {
      TileCoord const tile{int32_t(cute::get<0>(tile_coord_mnkl)), int32_t(cute::get<1>(tile_coord_mnkl))};
      waits_.wait_residual_inline(epoch_, tile);
      __syncwarp();
      asm volatile("fence.proxy.async.global;" : : : "memory");
    }
    return Base::load(load_pipeline, load_pipe_producer_state, problem_shape_mnkl, tile_shape_MNK, tile_coord_mnkl,
                      tiled_mma, thread_idx, shared_tensors, subtile_idx);
  }

 private:
  ConvWaits const& waits_;
  StageSync const& sync_;
  uint32_t epoch_ = 0;
  uint32_t tiles_loaded_ = 0;  // load() calls so far: this warp's sequence number
  bool started_ = false;
};

// One convolution on the persistent kernel: the interface of SyncedConvSm90, the grid at most `grid_limit` CTAs.
//
// kClusterN > 1: thread block clusters of 1 x kClusterN CTAs (the overlap's consumers, ConvStageInfo::cluster_n),
// in static tile order only. A cluster's CTAs walk the tiles (m, kClusterN j .. kClusterN j + kClusterN - 1) in
// step (TicketTileScheduler::static_tile over a grid of (clusters, kClusterN)), load the activations they share
// once (CUTLASS's multicast along N: each CTA loads 1 / kClusterN of the box for all) and are placed together by
// the hardware. Each CTA still waits for its own tile's window (the same rows: a window depends on m only) before
// its share of the loads, so the data every CTA receives was read after an acquire of its producer rows.
template <typename Element, int kBlockM, int kBlockN, int kBlockK, template <typename> class Act, bool kBias,
          bool kResidual, int kClusterN = 1>
struct PersistentConvSm90 {
  static constexpr bool kPersistent = true;  // at most grid_limit CTAs, each walking tiles of the queue
  using OneTile = SyncedConvSm90<Element, kBlockM, kBlockN, kBlockK, Act, kBias, kResidual>;  // its checks, its types
  static_assert(kClusterN == 1 || kClusterN == 2 || kClusterN == 4, "clusters of 1 x 1, 1 x 2 or 1 x 4 CTAs");
  static constexpr int kAlignment = OneTile::kAlignment;
  using TileShape = typename OneTile::TileShape;
  using ClusterShape = cute::Shape<cute::_1, cute::Int<kClusterN>, cute::_1>;
  using ElementC = typename OneTile::ElementC;

  using StockEpilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      ElementC, cutlass::layout::RowMajor, kAlignment,   // the residual: [N*P*Q, K] rows (or none)
      Element, cutlass::layout::RowMajor, kAlignment,    // the output: [N*P*Q, K] rows
      cutlass::epilogue::TmaWarpSpecialized, ConvFusion<Act, Element, ElementC, kBias>>::CollectiveOp;
  using StockMainloop = typename cutlass::conv::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, cutlass::conv::Operator::kFprop,
      Element, typename OneTile::Layout, kAlignment, Element, typename OneTile::Layout, kAlignment, float, TileShape,
      ClusterShape,
      cutlass::conv::collective::StageCountAutoCarveout<int(sizeof(typename StockEpilogue::SharedStorage)) +
                                                        kPersistentRingBytes>,
      cutlass::conv::collective::KernelScheduleAuto>::CollectiveOp;
  using Mainloop = PersistentConvMainloop<StockMainloop>;
  using Epilogue = ResidualWaitingEpilogue<sm90::PostingEpilogue<StockEpilogue, /*kFinishOnce=*/true>>;
  using GemmShape = decltype(cutlass::conv::detail::get_linearized_problem_shape_MNKL(typename StockMainloop::ProblemShape{}));
  using Kernel = cutlass::gemm::kernel::GemmUniversal<GemmShape, Mainloop, Epilogue, PolledTicketScheduler>;
  static_assert(Kernel::IsMainloopAuxiliaryLoadNeeded, "the poll warp is the ping-pong kernel's auxiliary load warp");
  using Params = typename Kernel::Params;
  using Problem = typename OneTile::Problem;
  static constexpr uint32_t kRingOffset = uint32_t(Kernel::SharedStorageSize + 15) / 16 * 16;
  static constexpr uint32_t kPolledOffset = kRingOffset + kPolledAfterRing;  // the poll warp's count
  static constexpr int kSmemBytes = int(kPolledOffset) + 16;
  static_assert(kSmemBytes <= 227 * 1024, "the persistent conv kernel's shared memory (pipeline, epilogue, ticket ring)");
  static constexpr int kMathWarps = int(Kernel::NumMMAThreads) / 32;  // one math warp group's

  using Entry = ConvSm90Entry<Kernel, kSmemBytes>;  // the same entry hooks as the one-tile kernel
  static constexpr auto kernel() { return Entry::kernel(); }
  static Status prepare() { return Entry::prepare(); }
  static int occupancy(bool /*bounded*/) { return Entry::occupancy(); }

  // An [N*P*Q, K] row-major matrix's stride (the dense NPQK tensor).
  template <class Stride>
  static Stride rows_stride(Problem const& pr) {
    Stride stride{};
    cute::get<0>(stride) = int64_t(pr.k);
    cute::get<2>(stride) = int64_t(pr.n) * pr.p * pr.q * pr.k;
    return stride;
  }

  static Status launch(Problem const& pr, StageSync sync, ConvWaits waits, bool programmatic, int grid_limit,
                       cudaStream_t stream) {
    if ((kResidual && pr.residual == nullptr) || (kBias && pr.bias == nullptr)) return Status::kInvalidArgument;
    auto const conv = OneTile::problem_shape(pr);
    typename Kernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = cutlass::conv::detail::get_linearized_problem_shape_MNKL(conv);
    args.mainloop.ptr_A = pr.x;
    args.mainloop.ptr_B = pr.filter;
    args.mainloop.conv = conv;
    int const tiles = sync.tiles_m * sync.tiles_n;
    int ctas = tiles < grid_limit ? tiles : grid_limit;
    if constexpr (kClusterN > 1) {
      // Whole clusters, no more than the GPU holds at once (a CTA that starts late holds its static tiles back).
      if (sync.tiles_n % kClusterN != 0) return Status::kInvalidArgument;
      int const clusters = Entry::max_active_clusters(dim3(1u, unsigned(kClusterN), 1u));
      if (clusters <= 0) return Status::kCudaError;
      if (ctas > clusters * kClusterN) ctas = clusters * kClusterN;
      ctas -= ctas % kClusterN;
    }
    unsigned const grid = unsigned(ctas);
    // Tickets where this stage waits on a producer and the chain asks for the ticket order (its CTAs start as
    // the producer's leave and take the tiles whose inputs are ready first); otherwise CTA b takes tiles b,
    // b + grid, ... (the one-stream programmatic launch's kHookBlockOrder: every producer CTA is resident before
    // any of this stage's, and none waits for this stage, so any order completes).
    bool const waits_on_producer = sync.input.enabled || waits.residual.enabled;
    bool const dynamic = sync.enabled && sync.dynamic_order && waits_on_producer;
    if (kClusterN > 1 && dynamic) return Status::kInvalidArgument;  // a ticket is one CTA's tile
    // In static order every warp knows the CTA's tiles in advance: the poll warp waits for them ahead of the
    // loads (kHookPollAhead), and a sink's math warp groups count their finished tiles once (kHookFinishOnce;
    // a group's tiles are 2 grid apart: the ping-pong groups take alternate ones).
    waits.polled_at = sync.enabled && !dynamic && waits_on_producer && (waits.hooks & kHookPollAhead) != 0u ? kPolledOffset : 0u;
    // A sink's finish count: by the poll warp once its CTA's waits have all passed (kHookEarlyFinish, where there
    // is a poll warp; PersistentConvMainloop::load_tail), else by each math warp group once, after its last tile
    // (kHookFinishOnce), else after every tile. The epilogue's copy of the stage's sync says which.
    bool const poll_finishes = waits.polled_at != 0u && sync.counts_finish && (waits.hooks & kHookEarlyFinish) != 0u;
    StageSync epilogue_sync = sync;
    epilogue_sync.counts_finish = sync.counts_finish && !poll_finishes;
    epilogue_sync.finish_stride = sync.enabled && !dynamic && epilogue_sync.counts_finish && sync.order == TileOrder::kRowMajor &&
                                          (waits.hooks & kHookFinishOnce) != 0u
                                      ? int32_t(2u * grid)
                                      : 0;
    set_epilogue<kBias, kResidual>(args.epilogue, pr, rows_stride<typename Kernel::StrideC>(pr),
                                   rows_stride<typename Kernel::StrideD>(pr), epilogue_sync);
    args.epilogue.conv_waits = waits;
    args.hw_info.sm_count = grid_limit;
    sm90::TileQueue queue{};
    queue.next = &sync.state->queue_next[sync.stage];
    queue.exited = &sync.state->queue_exited[sync.stage];
    queue.tiles_m = sync.tiles_m;
    queue.tiles_n = sync.tiles_n;
    queue.order = sync.order;
    queue.dynamic = dynamic;
    // The warps that read each sequence number besides the load warp, in ticket order: one math warp group's, and
    // the epilogue-load warp where the tile loads a residual (the poll warp has no waits to poll there and leaves).
    queue.reader_warps = kMathWarps + (kResidual ? 1 : 0);
    queue.tiles_at_entry = 2;  // the two math warp groups start on tiles of their own
    if (sync.timeout_ns > queue.timeout_ns) queue.timeout_ns = sync.timeout_ns;
    queue.trigger_dependents = false;   // the entry hook releases the next stage
    queue.wait_primary_at_exit = false; // and waits at exit
    queue.ring_offset = kRingOffset;
    queue.trace = sync.trace;
    args.scheduler.queue = queue;  // the scheduler (every warp's tiles) and the load warp (publish_next) share it
    args.scheduler.polled_at = waits.polled_at;
    args.mainloop.hooks = PersistentConvHooks{sync, waits, queue};
    if (!Kernel::can_implement(args)) return Status::kCutlassError;
    Params const params = Kernel::to_underlying_arguments(args, nullptr);
    // A cluster's CTAs along y: its rank in the cluster is blockIdx.y, which CUTLASS's multicast and pipeline
    // masks read as the CTA's place along N in the 1 x kClusterN cluster.
    return launch_stage_kernel(kernel(), dim3(grid / unsigned(kClusterN), unsigned(kClusterN)),
                               dim3(unsigned(Kernel::MaxThreadsPerBlock)), size_t(kSmemBytes), programmatic, stream,
                               params, dim3(1u, unsigned(kClusterN), 1u));
  }
};

}  // namespace cusync::conv
