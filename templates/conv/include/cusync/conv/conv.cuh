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
#include "cusync/conv/window.cuh"
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
    if (params.sync.trace != nullptr && threadIdx.x == 0)
      TileTrace::record(params.sync.trace, tile.m, tile.n, params.sync.tiles_n, TileTrace::kReady);
    Base conv;
    conv(params.conv, shared);
    if (lean) {
      if (params.sync.trace != nullptr) {  // end_tile records it itself
        __syncthreads();
        if (threadIdx.x == 0) TileTrace::record(params.sync.trace, tile.m, tile.n, params.sync.tiles_n, 1);
      }
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
  static constexpr bool kPersistent = false;  // one block per tile
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
    return launch_stage_kernel(bounded ? kernel<true>() : kernel<false>(), dim3(unsigned(sync.tiles_m * sync.tiles_n)),
                               dim3(unsigned(Kernel::kThreadCount)), size_t(kSmemBytes), programmatic, stream, params);
  }
};

}  // namespace cusync::conv
