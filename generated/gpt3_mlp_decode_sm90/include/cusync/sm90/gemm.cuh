// cusync sm90 backend: CUTLASS 3.x GEMMs (TMA + wgmma, warp-specialized cooperative, persistent) with
// tile-level synchronization, and the stock kernel of the same configuration for the baselines.
//
// Nothing of CUTLASS is copied. Both kernels are cutlass::gemm::kernel::GemmUniversal over the
// collectives CUTLASS's CollectiveBuilder picks for the tile shape; the synced one substitutes
//   WaitingMainloop  (ours, derived): the load warp waits for the producer tiles before loading A;
//   PostingEpilogue  (ours, derived): warp 0 posts each tile after its TMA stores completed;
//   TicketScheduler  (ours, derived): tiles come from a per-stage atomic counter in the stage's order.
// The synced kernel is compiled without CUTLASS_ENABLE_GDC_FOR_SM90: CUTLASS's griddepcontrol.wait in
// the load warps would hold every consumer tile until the whole producer kernel ended. Stock kernels
// live in their own translation unit compiled with it (the PDL baseline).
#pragma once

#include <cstdint>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/kernel_hardware_info.h"
#include "cutlass/util/packed_stride.hpp"

#include "cusync/stage.cuh"
#include "cusync/status.h"
#include "cusync/sm90/dispatch.h"
#include "cusync/sm90/gated_epilogue.cuh"
#include "cusync/sm90/posting_epilogue.cuh"
#include "cusync/sm90/ticket_scheduler.cuh"
#include "cusync/sm90/waiting_mainloop.cuh"

namespace cusync::sm90 {

// Selects StreamKTileScheduler below in cutlass::gemm::kernel::GemmUniversal (the tile scheduler tag).
struct StreamKScheduler {};

// CUTLASS 4.2's sm90 stream-K scheduler, unchanged but for is_last_tile(): the cooperative kernel calls
// it only when built with CUTLASS_ENABLE_GDC_FOR_SM90 (to let the next kernel launch a little early),
// and CUTLASS's own version does not compile there (a const member bound to a non-const reference).
// Here it answers "not yet", so the next programmatic launch is released when this kernel ends: the
// same results (CUTLASS documents the call as a hint that only moves timing), and griddepcontrol.wait
// before the first load still orders this kernel after the one before it.
template <class TileShape, class ClusterShape>
class StreamKTileScheduler
    : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape> {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90StreamK<TileShape, ClusterShape>;

 public:
  using Base::Base;

  CUTLASS_DEVICE bool is_last_tile(typename Base::WorkTileInfo, uint32_t = 1) const { return false; }
};

}  // namespace cusync::sm90

namespace cutlass::gemm::kernel::detail {

template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<cusync::sm90::StreamKScheduler, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = cusync::sm90::StreamKTileScheduler<TileShape, ClusterShape>;
};

}  // namespace cutlass::gemm::kernel::detail

namespace cusync::sm90 {

// Shared memory the ticket ring takes after the kernel's SharedStorage, kept out of the mainloop's
// stage budget.
constexpr int kRingBytes = int((sizeof(detail::TicketRing) + 127) / 128 * 128);
constexpr int kSchedulerSmemCarveout = kRingBytes;

// The epilogue's fusion: D = Act(acc), or with kBias D = Act(acc + bias) for a bias vector [N] that
// CUTLASS broadcasts down the rows (its "per-column" bias; bias_ptr in the fusion's arguments).
template <template <class> class Activation, class Element, bool kBias>
using FusionOf = std::conditional_t<
    kBias, cutlass::epilogue::fusion::LinCombPerColBiasEltAct<Activation, Element, float, Element, void, float>,
    cutlass::epilogue::fusion::LinCombEltAct<Activation, Element, float, void, float>>;

// The collective epilogue of a configuration: CUTLASS's TMA epilogue for D = Act(acc (+ bias)), or
// (kGated) the fused gated-MLP epilogue D[M, N / 2] = Act(gate) * up over interleaved weights
// (gated_epilogue.cuh).
template <bool kGated, bool kBias, class Element, template <class> class Activation, class TileShape,
          class ClusterShape, class Schedule>
struct EpilogueFor {
  static constexpr int kAlignment = 128 / cutlass::sizeof_bits<Element>::value;
  using type = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, TileShape, ClusterShape,
      cutlass::epilogue::collective::EpilogueTileAuto, float, float,
      void, cutlass::layout::RowMajor, kAlignment,             // no C operand
      Element, cutlass::layout::RowMajor, kAlignment,          // D
      Schedule, FusionOf<Activation, Element, kBias>>::CollectiveOp;
};
template <bool kBias, class Element, template <class> class Activation, class TileShape, class ClusterShape,
          class Schedule>
struct EpilogueFor<true, kBias, Element, Activation, TileShape, ClusterShape, Schedule> {
  static_assert(!kBias, "a gated GEMM takes no bias (the spec refuses bias with epilogue: swiglu)");
  static_assert(cute::size<1>(TileShape{}) % (2 * kGateGroup) == 0, "a gated GEMM's tile N holds whole gate | up groups");
  using type = GatedCollectiveEpilogue<Element, Activation>;
};

// CUTLASS's sm90 mainloop for A row-major and B in LayoutB (16-byte vectors), fp32 accumulation, its
// pipeline sized by CUTLASS to fill the shared memory left after kCarveoutBytes (the epilogue's storage,
// and the ticket ring where a synced kernel has one).
template <class Element, class LayoutB, class TileShape, class ClusterShape, int kCarveoutBytes, class KernelSchedule>
using MainloopFor = typename cutlass::gemm::collective::CollectiveBuilder<
    cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp,
    Element, cutlass::layout::RowMajor, 128 / cutlass::sizeof_bits<Element>::value,  // A
    Element, LayoutB, 128 / cutlass::sizeof_bits<Element>::value,                     // B
    float, TileShape, ClusterShape, cutlass::gemm::collective::StageCountAutoCarveout<kCarveoutBytes>,
    KernelSchedule>::CollectiveOp;

// One GEMM configuration: D[M, N] = Act(A[M, K] x B (+ bias)), A and D row-major, fp32 accumulation
// (kGated: D[M, N / 2] = Act(gate) * up, B's gate and up columns interleaved by interleave_gate_up).
// LayoutB is CUTLASS's tag for B as a K x N matrix: RowMajor = [K, N] (N contiguous), ColumnMajor = [N, K].
// ClusterShape_: thread block clusters of CUTLASS's own kernels (2x1x1: two CTAs of one tile column
// share each B tile through TMA multicast); the synced kernel hands out single-CTA tiles (1x1x1).
template <class Element, class LayoutB, class TileShape, template <class> class Activation,
          class ClusterShape_ = cute::Shape<cute::_1, cute::_1, cute::_1>, bool kBias = false, bool kGated = false>
struct GemmConfig {
  // Preconditions (the spec checks them first; these keep hand-written instantiations honest).
  static_assert(cute::size<0>(TileShape{}) == 128 || cute::size<0>(TileShape{}) == 256,
                "tile.threadblock[0] of an sm90 GEMM must be 128 or 256: two math warp groups split BLK_M");
  static_assert(cute::size<1>(TileShape{}) % 64 == 0 && cute::size<1>(TileShape{}) <= 256,
                "tile.threadblock[1] of an sm90 GEMM must be 64, 128, 192 or 256");
  static_assert(cute::size<2>(TileShape{}) == 64, "tile.threadblock[2] of an sm90 GEMM must be 64 (one 128-byte swizzle atom)");
  static_assert(cute::sizeof_bits_v<Element> == 16, "dtype of an sm90 chain must be fp16 or bf16");

  using ClusterShape = ClusterShape_;
  using Epilogue = typename EpilogueFor<kGated, kBias, Element, Activation, TileShape, ClusterShape,
                                        cutlass::epilogue::TmaWarpSpecializedCooperative>::type;
  using Mainloop = MainloopFor<Element, LayoutB, TileShape, ClusterShape,
                               static_cast<int>(sizeof(typename Epilogue::SharedStorage)) + kSchedulerSmemCarveout,
                               cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using ProblemShape = cute::Shape<int, int, int, int>;

  using SyncedKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, WaitingMainloop<Mainloop>,
                                                            PostingEpilogue<Epilogue>, TicketScheduler>;
  static constexpr int kTilesAtEntry = 1;  // both math warp groups work on each tile
  using StockKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue,
                                                           cutlass::gemm::PersistentScheduler>;
  // CUTLASS's stream-K scheduler over the same collectives: where the tiles leave the last wave partly
  // idle, whole tiles and K-slices of tiles are spread over every SM (data-parallel, split-K or stream-K
  // by CUTLASS's own heuristic). Its partial sums change the accumulation order: not bitwise equal.
  using StreamKKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue, StreamKScheduler>;
};

// CUTLASS's ping-pong kernel (run() mode kPingpong) for the same GEMM, in 128x128 tiles whatever the
// spec's tile: its two math warp groups take alternate tiles, so one group's epilogue runs under the
// other's MMAs. Measured on the H200 on the MLP shards'
// GEMMs at M >= 1024: within 2% of cuBLASLt's best algorithm or faster, where the cooperative 128x256
// kernel is 0.82x of it (geometric mean). The tile-synced ping-pong kernel is SyncedPingpongConfig.
template <class Element, class LayoutB, template <class> class Activation, bool kBias = false, bool kGated = false>
struct PingpongConfig {
  static_assert(cute::sizeof_bits_v<Element> == 16, "dtype of an sm90 chain must be fp16 or bf16");
  using TileShape = cute::Shape<cute::Int<kPingpongTile>, cute::Int<kPingpongTile>, cute::_64>;
  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Epilogue = typename EpilogueFor<kGated, kBias, Element, Activation, TileShape, ClusterShape,
                                        cutlass::epilogue::TmaWarpSpecialized>::type;
  using Mainloop = MainloopFor<Element, LayoutB, TileShape, ClusterShape,
                               static_cast<int>(sizeof(typename Epilogue::SharedStorage)),
                               cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using ProblemShape = cute::Shape<int, int, int, int>;
  using StockKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, Mainloop, Epilogue,
                                                           cutlass::gemm::PersistentScheduler>;
};

// The tile-synced ping-pong kernel (spec `schedule: pingpong`): CUTLASS's ping-pong kernel over the same
// hooks as GemmConfig's synced kernel. Each math warp group computes whole tiles of TileShape (BLK_M 64
// or 128: one warp group's wgmma rows), the two groups on alternate tiles from the ticket queue, so one
// group's epilogue (and post) runs under the other's MMAs. The ticket scheduler serves its
// advance_to_next_work(2) and takes a ticket per group at entry (kTilesAtEntry).
template <class Element, class LayoutB, class TileShape, template <class> class Activation, bool kBias = false,
          bool kGated = false>
struct SyncedPingpongConfig {
  static_assert(cute::size<0>(TileShape{}) == 64 || cute::size<0>(TileShape{}) == 128,
                "tile.threadblock[0] of a ping-pong GEMM must be 64 or 128: one math warp group computes the whole tile");
  static_assert(cute::size<0>(TileShape{}) * cute::size<1>(TileShape{}) <= 128 * 128,
                "a ping-pong tile holds at most 128x128 fp32 accumulators per warp group (128 registers a thread)");
  static_assert(cute::size<1>(TileShape{}) % 64 == 0 && cute::size<1>(TileShape{}) <= 256,
                "tile.threadblock[1] of an sm90 GEMM must be 64, 128, 192 or 256");
  static_assert(cute::size<2>(TileShape{}) == 64, "tile.threadblock[2] of an sm90 GEMM must be 64 (one 128-byte swizzle atom)");
  static_assert(cute::sizeof_bits_v<Element> == 16, "dtype of an sm90 chain must be fp16 or bf16");

  using ClusterShape = cute::Shape<cute::_1, cute::_1, cute::_1>;
  using Epilogue = typename EpilogueFor<kGated, kBias, Element, Activation, TileShape, ClusterShape,
                                        cutlass::epilogue::TmaWarpSpecialized>::type;
  using Mainloop = MainloopFor<Element, LayoutB, TileShape, ClusterShape,
                               static_cast<int>(sizeof(typename Epilogue::SharedStorage)) + kSchedulerSmemCarveout,
                               cutlass::gemm::KernelTmaWarpSpecializedPingpong>;
  using ProblemShape = cute::Shape<int, int, int, int>;
  using SyncedKernel = cutlass::gemm::kernel::GemmUniversal<ProblemShape, WaitingMainloop<Mainloop>,
                                                            PostingEpilogue<Epilogue>, TicketScheduler>;
  static constexpr int kTilesAtEntry = 2;  // the math warp groups start on tiles of their own
};

// The tile order of CUTLASS's persistent scheduler: CUTLASS's defaults (heuristic raster order, no
// swizzle) for the stock baseline; the ping-pong mode walks tiles down M in bands of 4 tile columns
// (along M, swizzle 4: the measured best of orders {M, N} x swizzles {1, 2, 4, 8}; swizzle 8 lost up
// to 2x where M has 12 tile rows).
using RasterOrder = cutlass::gemm::kernel::detail::RasterOrderOptions;
constexpr RasterOrder kPingpongRaster = RasterOrder::AlongM;
constexpr int kPingpongSwizzle = 4;

struct GemmProblem {
  int m, n, k;    // n: the GEMM's N (of a gated GEMM: gate and up columns, twice the output's)
  void const* a;  // [m, k] row-major
  void const* b;  // [k, n] row-major (LayoutB RowMajor) or [n, k] row-major (ColumnMajor)
  void* d;        // [m, n] row-major
  int64_t lda = 0;  // elements between rows of a, of b as stored, and of d (0: dense); multiples of 8
  int64_t ldb = 0;  // (TMA needs 16-byte strides: the chain checks them at initialize() and update())
  int64_t ldd = 0;
  void const* bias = nullptr;  // [n], for a configuration with kBias (which then requires it)
};

// Whether a kernel's epilogue adds a bias (its fusion arguments have bias_ptr).
template <class Thread, class = void>
constexpr bool kHasBias = false;
template <class Thread>
constexpr bool kHasBias<Thread, std::void_t<decltype(std::declval<Thread&>().bias_ptr)>> = true;

// A bias exactly where the kernel adds one (the chain passes it only to the stages the spec gives one).
template <class Kernel>
bool bias_matches(GemmProblem const& p) {
  return kHasBias<decltype(typename Kernel::Arguments{}.epilogue.thread)> == (p.bias != nullptr);
}

// A packed CuTe stride with its one dynamic non-batch mode (the leading dimension) set to `ld` elements;
// ld = 0 keeps it packed. A row-major [rows, cols] operand has stride (ld, _1) or, seen transposed, (_1, ld).
template <class Stride>
Stride with_leading_dimension(Stride stride, int64_t ld) {
  if (ld == 0) return stride;
  if constexpr (cute::is_static_v<cute::remove_cvref_t<decltype(cute::get<0>(stride))>>) {
    cute::get<1>(stride) = ld;
  } else {
    cute::get<0>(stride) = ld;
  }
  return stride;
}

// Arguments common to both kernels; the synced kernel adds its waits, posts and tile queue.
template <class Kernel>
typename Kernel::Arguments make_arguments(GemmProblem const& p, int sm_count) {
  using ElementA = typename Kernel::ElementA;
  using ElementB = typename Kernel::ElementB;
  using ElementD = typename Kernel::ElementD;
  typename Kernel::Arguments args{};
  args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
  args.problem_shape = typename Kernel::ProblemShape{p.m, p.n, p.k, 1};
  args.mainloop.ptr_A = static_cast<ElementA const*>(p.a);
  args.mainloop.dA = with_leading_dimension(
      cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, cute::make_shape(p.m, p.k, 1)), p.lda);
  args.mainloop.ptr_B = static_cast<ElementB const*>(p.b);
  args.mainloop.dB = with_leading_dimension(
      cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, cute::make_shape(p.n, p.k, 1)), p.ldb);
  args.epilogue.thread.alpha = 1.0f;
  args.epilogue.thread.beta = 0.0f;
  if constexpr (kHasBias<decltype(args.epilogue.thread)>) {
    args.epilogue.thread.bias_ptr = static_cast<ElementD const*>(p.bias);
  }
  args.epilogue.ptr_C = nullptr;
  args.epilogue.dC = with_leading_dimension(
      cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, cute::make_shape(p.m, p.n, 1)), p.ldd);
  args.epilogue.ptr_D = static_cast<ElementD*>(p.d);
  // A gated epilogue writes [m, n / 2] (p.n is the GEMM's N: gate and up).
  int const d_cols = IsGatedEpilogue<typename Kernel::CollectiveEpilogue>::value ? p.n / 2 : p.n;
  args.epilogue.dD = with_leading_dimension(
      cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, cute::make_shape(p.m, d_cols, 1)), p.ldd);
  args.hw_info.sm_count = sm_count;
  return args;
}

// Launches a CUTLASS 3.x kernel with its Params by value (__grid_constant__ in cutlass::device_kernel),
// optionally as a programmatic dependent launch of the kernel before it on the stream.
// extra_smem: bytes after the kernel's SharedStorage (the ticket ring of synced kernels).
template <class Kernel, int kExtraSmem = 0>
struct KernelLauncher {
  static constexpr int kSmemBytes = int(Kernel::SharedStorageSize) + kExtraSmem;

  static Status prepare() {
    cudaError_t const err = cudaFuncSetAttribute(cutlass::device_kernel<Kernel>,
                                                 cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    return err == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }

  static Status launch(typename Kernel::Params const& params, dim3 grid, bool programmatic, cudaStream_t stream) {
    using ClusterShape = typename Kernel::ClusterShape;
    cudaLaunchConfig_t config{};
    config.gridDim = grid;
    config.blockDim = dim3(Kernel::MaxThreadsPerBlock, 1, 1);
    config.dynamicSmemBytes = size_t(kSmemBytes);
    config.stream = stream;
    cudaLaunchAttribute attribute[2];
    unsigned count = 0;
    if (cute::size(ClusterShape{}) > 1) {  // the grid is in whole clusters (get_grid_shape)
      attribute[count].id = cudaLaunchAttributeClusterDimension;
      attribute[count].val.clusterDim.x = unsigned(cute::size<0>(ClusterShape{}));
      attribute[count].val.clusterDim.y = unsigned(cute::size<1>(ClusterShape{}));
      attribute[count].val.clusterDim.z = unsigned(cute::size<2>(ClusterShape{}));
      ++count;
    }
    if (programmatic) {
      attribute[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute[count].val.programmaticStreamSerializationAllowed = 1;
      ++count;
    }
    config.attrs = attribute;
    config.numAttrs = count;
    cudaError_t const err = cudaLaunchKernelEx(&config, cutlass::device_kernel<Kernel>, params);
    return err == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }
};

// The synced GEMM of one stage. The TMA descriptors depend only on the problem, so the Params of the
// last problem are kept and only the synchronization fields are rewritten per launch.
template <class Config>
struct SyncedGemm {
  using Kernel = typename Config::SyncedKernel;
  using Params = typename Kernel::Params;
  static constexpr int kMathWarps = int(Kernel::NumMMAThreads) / 32;  // of one tile: 8 cooperative, 4 ping-pong

  struct Cache {
    GemmProblem problem{};
    int sm_count = 0;
    Params params{};
    bool valid = false;
  };

  using Launcher = KernelLauncher<Kernel, kRingBytes>;
  static constexpr uint32_t kRingOffset = uint32_t(Kernel::SharedStorageSize + 15) / 16 * 16;
  static_assert(kRingOffset + sizeof(detail::TicketRing) <= uint32_t(Launcher::kSmemBytes), "ticket ring outside the allocation");

  static Status prepare() { return Launcher::prepare(); }

  static Status launch(Cache& cache, GemmProblem const& p, StageSync const& sync, int sm_count, bool programmatic,
                       cudaStream_t stream) {
    bool const same = cache.valid && cache.sm_count == sm_count && cache.problem.m == p.m && cache.problem.n == p.n &&
                      cache.problem.k == p.k && cache.problem.a == p.a && cache.problem.b == p.b &&
                      cache.problem.d == p.d && cache.problem.lda == p.lda && cache.problem.ldb == p.ldb &&
                      cache.problem.ldd == p.ldd && cache.problem.bias == p.bias;
    if (!same) {
      if (!bias_matches<Kernel>(p)) return Status::kInvalidArgument;
      typename Kernel::Arguments args = make_arguments<Kernel>(p, sm_count);
      if (Kernel::can_implement(args) != true) return Status::kCutlassError;
      cache.params = Kernel::to_underlying_arguments(args, nullptr);
      cache.problem = p;
      cache.sm_count = sm_count;
      cache.valid = true;
    }
    Params params = cache.params;
    params.mainloop.hooks.input = sync.input;
    params.mainloop.hooks.producer_tiles_m =
        sync.input.policy.tile_m > 0 ? (p.m + sync.input.policy.tile_m - 1) / sync.input.policy.tile_m : 0;
    params.epilogue.hooks = sync;
    TileQueue& queue = params.scheduler.queue;
    queue.next = &sync.state->queue_next[sync.stage];
    queue.exited = &sync.state->queue_exited[sync.stage];
    queue.tiles_m = sync.tiles_m;
    queue.tiles_n = sync.tiles_n;
    queue.order = sync.order;
    // Tickets where this stage waits on a producer (its CTAs start as the producer's leave and must take
    // the tiles whose inputs are ready first); otherwise the static persistent assignment, as CUTLASS's.
    queue.dynamic = sync.enabled && (sync.input.enabled || sync.input_b.enabled);
    queue.reader_warps = kMathWarps;  // the warps that read each sequence number (ping-pong: one group's)
    queue.tiles_at_entry = Config::kTilesAtEntry;
    if (sync.timeout_ns > queue.timeout_ns) queue.timeout_ns = sync.timeout_ns;  // never before a sync wait would
    queue.trigger_dependents = sync.trigger_dependents;
    queue.wait_primary_at_exit = sync.wait_primary_at_exit;
    queue.ring_offset = kRingOffset;
    queue.trace = sync.trace;
    params.mainloop.hooks.queue = queue;  // the load warp takes the tickets after each tile's loads
    // One CTA per SM (the mainloop takes the shared memory): a persistent grid, never more than a wave.
    int const tiles = sync.tiles_m * sync.tiles_n;
    dim3 const grid(unsigned(tiles < sm_count ? tiles : sm_count), 1, 1);
    return Launcher::launch(params, grid, programmatic, stream);
  }
};

// CUTLASS's own kernel for the same configuration, for the back-to-back and PDL baselines (and, over
// PingpongConfig, the ping-pong mode), its persistent tiles in the order kRaster, kSwizzle.
template <class Config, RasterOrder kRaster = RasterOrder::Heuristic, int kSwizzle = 1>
struct StockGemm {
  using Kernel = typename Config::StockKernel;

  static Status prepare() { return KernelLauncher<Kernel>::prepare(); }

  static Status launch(GemmProblem const& p, int sm_count, bool programmatic, cudaStream_t stream) {
    if (!bias_matches<Kernel>(p)) return Status::kInvalidArgument;
    typename Kernel::Arguments args = make_arguments<Kernel>(p, sm_count);
    args.scheduler.raster_order = kRaster;
    args.scheduler.max_swizzle_size = kSwizzle;
    if (Kernel::can_implement(args) != true) return Status::kCutlassError;
    typename Kernel::Params const params = Kernel::to_underlying_arguments(args, nullptr);
    return KernelLauncher<Kernel>::launch(params, Kernel::get_grid_shape(params), programmatic, stream);
  }
};

// CUTLASS's stream-K kernel for the same configuration. It needs a workspace (partial sums and the
// barriers that order their reduction) whose barrier part must be zero before each launch: clear() does
// that on the stream with CUTLASS's own initialize_workspace (a memset, so a run clears every stream-K
// stage first and then launches its kernels back to back, keeping their programmatic chain unbroken).
template <class Config>
struct StreamKGemm {
  using Kernel = typename Config::StreamKKernel;

  static Status prepare() { return KernelLauncher<Kernel>::prepare(); }

  static size_t workspace_size(GemmProblem const& p, int sm_count) {
    return Kernel::get_workspace_size(make_arguments<Kernel>(p, sm_count));
  }

  static Status clear(GemmProblem const& p, int sm_count, void* workspace, cudaStream_t stream) {
    typename Kernel::Arguments const args = make_arguments<Kernel>(p, sm_count);
    return Kernel::initialize_workspace(args, workspace, stream) == cutlass::Status::kSuccess ? Status::kSuccess
                                                                                               : Status::kCutlassError;
  }

  static Status launch(GemmProblem const& p, int sm_count, void* workspace, bool programmatic, cudaStream_t stream) {
    if (!bias_matches<Kernel>(p)) return Status::kInvalidArgument;
    typename Kernel::Arguments args = make_arguments<Kernel>(p, sm_count);
    if (Kernel::can_implement(args) != true) return Status::kCutlassError;
    typename Kernel::Params const params = Kernel::to_underlying_arguments(args, workspace);
    return KernelLauncher<Kernel>::launch(params, Kernel::get_grid_shape(params), programmatic, stream);
  }
};

}  // namespace cusync::sm90
