// cusync conv backend: a CUTLASS 2.x implicit-GEMM Conv2D fprop (NHWC) that takes its tile from the stage's
// tile order, waits for the producer rows its R x S window reads, and posts its output tile after the epilogue.
//
// Nothing of CUTLASS is copied: the kernel is cutlass::conv::kernel::ImplicitGemmConvolutionWithFusedEpilogue
// built by DefaultConv2dFpropWithBroadcast (sm80 mma.sync mainloop, optimized NHWC iterators), with two
// substitutions: the threadblock swizzle (BlockTileSwizzle returns the tile chosen at block entry) and the
// epilogue functor (BiasActivation: CUTLASS's residual-block functor, which reads the residual only when the
// stage has one). The waits run before CUTLASS's kernel body, the post after it.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/conv/conv2d_problem_size.h"
#include "cutlass/conv/device/implicit_gemm_convolution.h"
#include "cutlass/conv/kernel/default_conv2d_fprop_with_broadcast.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination_residual_block.h"
#include "cutlass/functional.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

#include "cusync/conv/chain.h"
#include "cusync/stage.cuh"
#include "cusync/status.h"

namespace cusync::conv {

// Hands CUTLASS's kernel the tile that begin_tile() chose (every thread reads it from shared memory);
// the host-side grid math is CUTLASS's identity swizzle.
struct BlockTileSwizzle : cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1> {
  CUTLASS_DEVICE cutlass::gemm::GemmCoord get_tile_offset(int /*log_tile*/) const {
    return cutlass::gemm::GemmCoord(cusync_block_tile.m, cusync_block_tile.n, 0);
  }
};

// D = Act(accumulator + bias + residual) with a residual, Act(accumulator + bias) without one. The residual
// form is CUTLASS's LinearCombinationResidualBlock (Identity, plus, Act); without a residual the epilogue
// calls the four-operand form, and never reads the source tensor (is_source_needed() is false).
template <typename Element, int Count, template <typename> class Act, bool kResidual>
struct BiasActivation
    : cutlass::epilogue::thread::LinearCombinationResidualBlock<Element, float, float, Element, Count,
                                                                cutlass::epilogue::thread::Identity, cutlass::plus, Act> {
  using Base = cutlass::epilogue::thread::LinearCombinationResidualBlock<Element, float, float, Element, Count,
                                                                         cutlass::epilogue::thread::Identity,
                                                                         cutlass::plus, Act>;
  using typename Base::FragmentAccumulator;
  using typename Base::FragmentCompute;
  using typename Base::FragmentOutput;
  using Base::Base;
  using Base::operator();

  CUTLASS_HOST_DEVICE bool is_source_needed() const { return kResidual; }

  CUTLASS_HOST_DEVICE void operator()(FragmentOutput& frag_z, FragmentOutput&, FragmentAccumulator const& ab,
                                      FragmentCompute const& bias) const {
    Act<FragmentCompute> act;
    cutlass::NumericArrayConverter<float, float, Count> to_compute;
    cutlass::NumericArrayConverter<Element, float, Count> to_output;
    frag_z = to_output(act(to_compute(ab) + bias));
  }
};

// What a consumer tile of a convolution reads of its producer: the input rows of its output pixels' R x S
// windows. Pixels are flattened NHWC rows: output pixel m = (n * P + p) * Q + q, input pixel (n * H + h) * W + w.
// A tile of output pixels [m0, m1) spans images n0..n1 and output rows p0 (of n0) .. p1 (of n1); it reads
// input rows h_lo(p0) of image n0 through h_hi(p1) of image n1, every column: one contiguous range of
// producer pixels, clamped at the image borders (padding reads no producer data). cusync_gen/conv_plan.py
// computes the same range, and cusync_gen/verify_conv.py proves it covers every pixel the window reads.
struct ConvWindow {
  int32_t h = 0, w = 0;        // the input image (the producer's output)
  int32_t p = 0, q = 0;        // the output image
  int32_t r = 1;               // filter rows
  int32_t stride = 1, pad = 0, dilation = 1;

  __host__ __device__ int32_t first_row(int32_t out_row) const {  // the first input row output row p reads
    int32_t const h0 = out_row * stride - pad;
    return h0 > 0 ? h0 : 0;
  }
  __host__ __device__ int32_t last_row(int32_t out_row) const {
    int32_t const h1 = out_row * stride - pad + (r - 1) * dilation;
    return h1 < h - 1 ? h1 : h - 1;
  }
  // Producer pixels [first, last] that output pixels [m0, m1) read.
  __host__ __device__ int64_t first_pixel(int64_t m0) const {
    int64_t const pq = int64_t(p) * q;
    int64_t const n = m0 / pq;
    int32_t const pr = int32_t((m0 % pq) / q);
    return (n * h + first_row(pr)) * w;
  }
  __host__ __device__ int64_t last_pixel(int64_t m1) const {
    int64_t const pq = int64_t(p) * q;
    int64_t const n = (m1 - 1) / pq;
    int32_t const pr = int32_t(((m1 - 1) % pq) / q);
    return (n * h + last_row(pr)) * w + (w - 1);
  }
};

// One semaphore a tile waits for: which edge it belongs to, which producer tile row.
struct RowWait {
  InputWait const* edge;
  int32_t producer_tile_m;
};

// The waits of one tile, polled by one warp in parallel: lane i polls semaphore i of the list (base + i for
// lists longer than 32), every poll an ld.acquire.gpu; the warp leaves once a vote says every lane's
// semaphore is complete. Backs off with __nanosleep from 32 ns, doubling up to kMaxSleepNs: short, since
// a tile row of the producer completes in microseconds, and a long sleep would delay the wake-up by as
// much. Bounded: after timeout_ns (or once another waiter gave up) the first lane whose semaphore is still
// short records the tile and that semaphore (the host's describe() names both), and the warp goes on.
// `at(i)` gives wait i of `count`. The caller's barrier then publishes the lanes' acquires to the block.
constexpr unsigned kMaxSleepNs = 256;

// assume_posted (profiling): every semaphore counts as complete once its first poll returns.
template <typename At>
__device__ __forceinline__ void wait_rows_warp(int32_t count, At const& at, uint32_t epoch, TileCoord self,
                                               uint64_t timeout_ns, bool assume_posted) {
  unsigned const lane = threadIdx.x % 32;
  for (int32_t base = 0; base < count; base += 32) {  // warp-uniform trip count
    int32_t const i = base + int32_t(lane);
    bool const mine = i < count;
    RowWait const w = at(mine ? i : base);
    InputWait const& edge = *w.edge;
    int32_t const index = edge.policy.semaphore_of(w.producer_tile_m, 0);
    uint64_t const expected = assume_posted ? 0u : tagged(epoch, uint32_t(edge.policy.posts));
    uint64_t const* sem = edge.semaphores + index;
    uint64_t seen = mine ? ptx::ld_acquire_gpu(sem) : expected;
    if (__all_sync(0xFFFFFFFFu, seen >= expected)) continue;
    uint64_t const start = ptx::globaltimer_ns();
    unsigned sleep_ns = 32;
    while (true) {
      __nanosleep(sleep_ns);
      sleep_ns = sleep_ns < kMaxSleepNs ? sleep_ns * 2 : kMaxSleepNs;
      if (seen < expected) seen = ptx::ld_acquire_gpu(sem);  // a complete semaphore stays complete this epoch
      if (__all_sync(0xFFFFFFFFu, seen >= expected)) break;
      bool const late = ptx::globaltimer_ns() - start > timeout_ns ||
                        (edge.state != nullptr && ptx::ld_relaxed_gpu(&edge.state->error.flag) != 0u);
      unsigned const short_lanes = __ballot_sync(0xFFFFFFFFu, seen < expected);
      if (__any_sync(0xFFFFFFFFu, late)) {
        if (lane == unsigned(__ffs(short_lanes) - 1)) {  // the first lane still short names its semaphore
          WaitSite const site{edge.stage, edge.producer, self.m, self.n, w.producer_tile_m, 0, index};
          record_timeout(&edge.state->error, site, expected, seen);
        }
        return;  // the run is lost (the host says so); do not time out once per list entry
      }
    }
  }
}

// The edges of one conv stage: its producer through the window, and an earlier stage's output added as the
// residual (same pixels as the output tile). Both producers post RowSync semaphores (one per tile row of
// output pixels, all of the row's channel tiles).
struct ConvWaits {
  ConvWindow window{};
  int64_t pixels = 0;                 // output pixels, N * P * Q
  int32_t tile_m = 0;                 // this stage's output pixels per tile
  int32_t producer_tiles_m = 0;
  int32_t residual_tiles_m = 0;
  InputWait residual{};               // disabled: no residual, or the chain input
  // Back to back chained with programmatic dependent launch (sm90): this kernel may start while the one
  // before it on the stream still runs; griddepcontrol.wait, before any load, waits for that whole kernel
  // (and its memory). What it saves is the launch: the blocks are already resident when it ends.
  bool wait_primary_first = false;
  unsigned hooks = 0;                 // ConvHooks bits (cusync/conv/chain.h); 0 where the run is not synced

  // Warp 0 of the block (all 32 lanes), before any load of producer data; the caller's barrier publishes
  // the acquires. The producer tile rows of the window, then those of the residual, one lane each.
  __device__ __noinline__ void wait(InputWait const& input, uint32_t epoch, TileCoord tile) const {
    int64_t const m0 = int64_t(tile.m) * tile_m;
    int64_t const m1 = m0 + tile_m < pixels ? m0 + tile_m : pixels;
    int32_t first = 0, last = -1;
    if (input.enabled) {
      // The window's rows, widened to the next tile row's first one (and, for the first and last tile rows,
      // to the producer's first and last): a stride larger than the window's reach leaves producer rows that
      // no window reads, and every producer tile must still be waited for by someone before the run closes
      // (close_run in cusync/stage.cuh bumps the epoch that the producer's posts are tagged with).
      int64_t const tiles = (pixels + tile_m - 1) / tile_m;
      int32_t const ptm = input.policy.tile_m;
      first = tile.m == 0 ? 0 : int32_t(window.first_pixel(m0) / ptm);
      last = int32_t(window.last_pixel(m1) / ptm);
      if (tile.m + 1 < tiles) {
        int32_t const next = int32_t(window.first_pixel(m1) / ptm) - 1;
        last = next > last ? next : last;
      } else {
        last = producer_tiles_m - 1;
      }
      last = last < producer_tiles_m - 1 ? last : producer_tiles_m - 1;
    }
    int32_t r_first = 0, r_last = -1;
    if (residual.enabled) {
      r_first = int32_t(m0 / residual.policy.tile_m);
      r_last = int32_t((m1 - 1) / residual.policy.tile_m);
      r_last = r_last < residual_tiles_m - 1 ? r_last : residual_tiles_m - 1;
    }
    int32_t const n_input = last - first + 1;
    int32_t const count = n_input + (r_last - r_first + 1);
    InputWait const* const edge_input = &input;
    InputWait const* const edge_residual = &residual;
    auto at = [&](int32_t i) {
      return i < n_input ? RowWait{edge_input, first + i} : RowWait{edge_residual, r_first + (i - n_input)};
    };
    wait_rows_warp(count, at, epoch, tile, input.enabled ? input.timeout_ns : residual.timeout_ns,
                   (hooks & kHookAssumePosted) != 0u);
  }
};

// The epoch of this block's run, read once at block entry by thread 0 (kHookEpochOnce) and used by its post.
// It cannot move while the block runs: the run closes only after every tile of it has been waited for (a
// producer tile's post) or has counted its finish (a sink tile), and the next run starts after this one.
static __shared__ uint32_t cusync_conv_epoch;

// After the tile, with the lean hooks (kHookEpochOnce set): the post, tagged with the epoch read at entry; the
// sink's finish count unless it was counted early (`finish`: its answer, thread 0); the close of the run by the
// last block to count; the exit wait of a programmatic stage, in every block or (kHookOneExitWait) in the grid's
// last block only. A sink tile has nothing to publish: no barrier.
__device__ __forceinline__ void end_tile_lean(StageSync const& sync, unsigned hooks, TileCoord tile, uint32_t finish) {
  if (!sync.enabled) return;
  if (sync.output.enabled()) {
    __syncthreads();  // every thread's stores of the tile before thread 0's fence and post
    if (threadIdx.x == 0) post_add(sync.out_semaphores + sync.output.semaphore_of(tile.m, tile.n), cusync_conv_epoch);
  }
  if (sync.counts_finish && threadIdx.x == 0) {
    if ((hooks & kHookEarlyFinish) == 0u) {
      ptx::fence_acq_rel_gpu();
      finish = atomicAdd(&sync.state->finished, 1u);
    }
    if (finish == sync.run_blocks - 1u) close_run(sync);
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // One waiting block is enough to keep the grid from ending before the kernel it was launched behind.
  if (sync.wait_primary_at_exit && ((hooks & kHookOneExitWait) == 0u || blockIdx.x + 1 == gridDim.x))
    asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

// The kernel: CUTLASS's implicit-GEMM convolution between begin_tile (ticket or block order, tile order) + the
// waits, and the post (end_tile, or end_tile_lean with the lean hooks).
template <typename ConvKernel_>
struct TileSyncedConv : ConvKernel_ {
  using Base = ConvKernel_;
  using SharedStorage = typename Base::SharedStorage;

  struct Params {
    typename Base::Params conv;
    StageSync sync;
    ConvWaits waits;
  };

  CUTLASS_DEVICE static void invoke(Params const& params, SharedStorage& shared) {
    TileCoord const tile = begin_tile(params.sync);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    if (params.waits.wait_primary_first) asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
    unsigned const hooks = params.waits.hooks;
    bool const lean = (hooks & kHookEpochOnce) != 0u;
    uint32_t finish = 0;  // thread 0 of a sink block with kHookEarlyFinish: the finish count before its own
    if (params.sync.enabled) {
      if (threadIdx.x < 32) {
        uint32_t const epoch = current_epoch(params.sync.state);
        params.waits.wait(params.sync.input, epoch, tile);
        if (threadIdx.x == 0) cusync_conv_epoch = epoch;
      }
      __syncthreads();
      if (lean && (hooks & kHookEarlyFinish) != 0u && params.sync.counts_finish && threadIdx.x == 0) {
        // Release: this block's start and (through the barrier) its warp's acquires before the count. The
        // answer is first read after the tile, so the atomic's round trip overlaps the mainloop.
        ptx::fence_acq_rel_gpu();
        finish = atomicAdd(&params.sync.state->finished, 1u);
      }
    }
    Base conv;
    conv(params.conv, shared);
    if (lean) {
      end_tile_lean(params.sync, hooks, tile, finish);
    } else {
      end_tile(params.sync, tile);
    }
  }
};

// kMinBlocks: __launch_bounds__'s minimum blocks per SM (1: the plain kernel; more: ptxas caps the registers so
// that this many blocks fit, at the cost of a few spills).
template <typename Kernel, int kMinBlocks>
__global__ void __launch_bounds__(Kernel::kThreadCount, kMinBlocks)
    tile_synced_conv_kernel(__grid_constant__ typename Kernel::Params const params) {
  extern __shared__ __align__(16) unsigned char cusync_dynamic_smem[];
  Kernel::invoke(params, *reinterpret_cast<typename Kernel::SharedStorage*>(cusync_dynamic_smem));
}

// One convolution of the chain: NHWC activations, KRSC filters, NPQK output, fp32 accumulation.
template <typename Element, typename ThreadblockShape, typename WarpShape, typename InstructionShape, int Stages,
          template <typename> class Act, bool kResidual>
struct SyncedConv {
  static int const kAlignment = 128 / cutlass::sizeof_bits<Element>::value;
  using Layout = cutlass::layout::TensorNHWC;
  using EpilogueOp = BiasActivation<Element, kAlignment, Act, kResidual>;
  using Default = typename cutlass::conv::kernel::DefaultConv2dFpropWithBroadcast<
      Element, Layout, Element, Layout, Element, Layout, float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80,
      ThreadblockShape, WarpShape, InstructionShape, EpilogueOp, BlockTileSwizzle, Stages,
      cutlass::arch::OpMultiplyAdd, cutlass::conv::IteratorAlgorithm::kOptimized>;
  using Kernel = TileSyncedConv<typename Default::Kernel>;
  using Device = cutlass::conv::device::ImplicitGemmConvolution<typename Default::Kernel>;
  using Params = typename Kernel::Params;
  static int const kSmemBytes = int(sizeof(typename Kernel::SharedStorage));
  // The bounded kernel: as many blocks per SM as the shared memory of an sm_90 SM allows (228 KB, 1 KB of it
  // reserved per block), at most 3. The plain kernel's registers (~190 for a 128 x 64 tile of 4 warps) hold it to
  // 2; the register cap makes room for a third where the tile's shared memory fits three times. run() takes
  // it only for stages of one main-loop iteration, past one wave, where the device's occupancy calculator says
  // it holds more blocks (ConvChain::bounded).
  static int const kSmemBlocks = (228 << 10) / (kSmemBytes + (1 << 10));
  static int const kMinBlocks = kSmemBlocks < 1 ? 1 : kSmemBlocks > 3 ? 3 : kSmemBlocks;
  template <bool kBounded>
  static constexpr auto kernel() { return tile_synced_conv_kernel<Kernel, kBounded ? kMinBlocks : 1>; }

  static_assert(Stages >= 3, "tile.stages: the conv kernels need a multistage (cp.async) mainloop, stages >= 3");

  struct Problem {
    int n, h, w, c, k, r, s, p, q, pad, stride, dilation;
    Element const* x;         // [n, h, w, c]
    Element const* filter;    // [k, r, s, c]
    Element const* bias;      // [k], or null
    Element const* residual;  // [n, p, q, k], or null (kResidual: required)
    Element* y;               // [n, p, q, k]
  };

  // carveout: the bounded kernel asks for the largest shared-memory carve-out (its kMinBlocks blocks fill it);
  // the plain one leaves the driver's choice, which keeps more L1 (a 3x3 conv's windows re-read their rows
  // through it; with the largest carve-out the plain kernel ran the 3x3 convs ~10% slower at batch 32).
  template <typename Fn>
  static cudaError_t prepare_kernel(Fn fn, bool carveout) {
    cudaError_t err = cudaSuccess;
    if (kSmemBytes >= (48 << 10)) err = cudaFuncSetAttribute(fn, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    if (err == cudaSuccess && carveout)
      err = cudaFuncSetAttribute(fn, cudaFuncAttributePreferredSharedMemoryCarveout, int(cudaSharedmemCarveoutMaxShared));
    return err;
  }

  static Status prepare() {
    if (prepare_kernel(kernel<false>(), false) != cudaSuccess || prepare_kernel(kernel<true>(), true) != cudaSuccess)
      return Status::kCudaError;
    return Status::kSuccess;
  }

  // Thread blocks of this kernel one SM holds at once (its threads, registers and shared memory).
  static int occupancy(bool bounded) {
    int blocks = 0;
    cudaError_t const err = bounded
        ? cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel<true>(), Kernel::kThreadCount, kSmemBytes)
        : cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, kernel<false>(), Kernel::kThreadCount, kSmemBytes);
    return err == cudaSuccess ? blocks : 0;
  }

  static cutlass::conv::Conv2dProblemSize problem_size(Problem const& pr) {
    return cutlass::conv::Conv2dProblemSize(
        cutlass::Tensor4DCoord(pr.n, pr.h, pr.w, pr.c), cutlass::Tensor4DCoord(pr.k, pr.r, pr.s, pr.c),
        cutlass::Tensor4DCoord(pr.pad, pr.pad, pr.pad, pr.pad), cutlass::MatrixCoord(pr.stride, pr.stride),
        cutlass::MatrixCoord(pr.dilation, pr.dilation), cutlass::Tensor4DCoord(pr.n, pr.p, pr.q, pr.k),
        cutlass::conv::Mode::kCrossCorrelation, 1, 1);
  }

  // programmatic: launched as a programmatic dependent of the kernel before it on `stream` (sm90), which may
  // still be running; the tile waits order this stage after the producer rows it reads.
  // bounded: the kernel with kMinBlocks blocks per SM (see kMinBlocks).
  static Status launch(Problem const& pr, StageSync sync, ConvWaits waits, bool programmatic, bool bounded,
                       cudaStream_t stream) {
    if (kResidual && pr.residual == nullptr) return Status::kInvalidArgument;
    cutlass::conv::Conv2dProblemSize const size = problem_size(pr);
    using Arguments = typename Device::Arguments;
    Element* const y = pr.y;
    Element* const residual = const_cast<Element*>(kResidual ? pr.residual : pr.y);  // read only with a residual
    using Ref = cutlass::TensorRef<Element, Layout>;
    Arguments args(size, Ref(const_cast<Element*>(pr.x), Layout::packed(cutlass::Tensor4DCoord(pr.n, pr.h, pr.w, pr.c))),
                   Ref(const_cast<Element*>(pr.filter), Layout::packed(cutlass::Tensor4DCoord(pr.k, pr.r, pr.s, pr.c))),
                   Ref(residual, Layout::packed(cutlass::Tensor4DCoord(pr.n, pr.p, pr.q, pr.k))), Ref(y, Layout::packed(cutlass::Tensor4DCoord(pr.n, pr.p, pr.q, pr.k))),
                   typename EpilogueOp::Params(1.0f, 1.0f), cutlass::conv::SplitKMode::kSerial,
                   const_cast<Element*>(pr.bias), nullptr, 0, 0);
    if (Device::can_implement(args) != cutlass::Status::kSuccess) return Status::kCutlassError;
    Params params{typename Kernel::Base::Params(args, nullptr), sync, waits};
    cudaLaunchConfig_t config{};
    config.gridDim = dim3(unsigned(sync.tiles_m * sync.tiles_n));
    config.blockDim = dim3(unsigned(Kernel::kThreadCount));
    config.dynamicSmemBytes = size_t(kSmemBytes);
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = programmatic ? 1 : 0;
    cudaError_t const err = bounded ? cudaLaunchKernelEx(&config, kernel<true>(), params)
                                    : cudaLaunchKernelEx(&config, kernel<false>(), params);
    return err == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }
};

}  // namespace cusync::conv
