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

  // Thread 0 of the block, before any load of producer data; the caller's barrier publishes the acquires.
  __device__ void wait(InputWait const& input, uint32_t epoch, TileCoord tile) const {
    int64_t const m0 = int64_t(tile.m) * tile_m;
    int64_t const m1 = m0 + tile_m < pixels ? m0 + tile_m : pixels;
    if (input.enabled) {
      // The window's rows, widened to the next tile row's first one (and, for the first and last tile rows,
      // to the producer's first and last): a stride larger than the window's reach leaves producer rows that
      // no window reads, and every producer tile must still be waited for by someone before the run closes
      // (close_run in cusync/stage.cuh bumps the epoch that the producer's posts are tagged with).
      int64_t const tiles = (pixels + tile_m - 1) / tile_m;
      int32_t const ptm = input.policy.tile_m;
      int32_t const first = tile.m == 0 ? 0 : int32_t(window.first_pixel(m0) / ptm);
      int32_t last = int32_t(window.last_pixel(m1) / ptm);
      if (tile.m + 1 < tiles) {
        int32_t const next = int32_t(window.first_pixel(m1) / ptm) - 1;
        last = next > last ? next : last;
      } else {
        last = producer_tiles_m - 1;
      }
      last = last < producer_tiles_m - 1 ? last : producer_tiles_m - 1;
      for (int32_t pm = first; pm <= last; ++pm) input.wait_for(pm * ptm, 0, epoch, tile);
    }
    if (residual.enabled) {
      int32_t const first = int32_t(m0 / residual.policy.tile_m);
      int32_t last = int32_t((m1 - 1) / residual.policy.tile_m);
      last = last < residual_tiles_m - 1 ? last : residual_tiles_m - 1;
      for (int32_t pm = first; pm <= last; ++pm) residual.wait_for(pm * residual.policy.tile_m, 0, epoch, tile);
    }
  }
};

// The kernel: CUTLASS's implicit-GEMM convolution between begin_tile (ticket, tile order) + the waits, and
// end_tile (post).
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
    if (params.sync.enabled) {
      if (threadIdx.x == 0) params.waits.wait(params.sync.input, current_epoch(params.sync.state), tile);
      __syncthreads();
    }
    Base conv;
    conv(params.conv, shared);
    end_tile(params.sync, tile);
  }
};

template <typename Kernel>
__global__ void __launch_bounds__(Kernel::kThreadCount)
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

  static_assert(Stages >= 3, "tile.stages: the conv kernels need a multistage (cp.async) mainloop, stages >= 3");

  struct Problem {
    int n, h, w, c, k, r, s, p, q, pad, stride, dilation;
    Element const* x;         // [n, h, w, c]
    Element const* filter;    // [k, r, s, c]
    Element const* bias;      // [k], or null
    Element const* residual;  // [n, p, q, k], or null (kResidual: required)
    Element* y;               // [n, p, q, k]
  };

  static Status prepare() {
    if (kSmemBytes >= (48 << 10)) {
      cudaError_t err = cudaFuncSetAttribute(tile_synced_conv_kernel<Kernel>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
      if (err != cudaSuccess) return Status::kCudaError;
    }
    return Status::kSuccess;
  }

  // Thread blocks of this kernel one SM holds at once (its threads, registers and shared memory).
  static int occupancy() {
    int blocks = 0;
    if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, tile_synced_conv_kernel<Kernel>, Kernel::kThreadCount,
                                                      kSmemBytes) != cudaSuccess)
      return 0;
    return blocks;
  }

  static cutlass::conv::Conv2dProblemSize problem_size(Problem const& pr) {
    return cutlass::conv::Conv2dProblemSize(
        cutlass::Tensor4DCoord(pr.n, pr.h, pr.w, pr.c), cutlass::Tensor4DCoord(pr.k, pr.r, pr.s, pr.c),
        cutlass::Tensor4DCoord(pr.pad, pr.pad, pr.pad, pr.pad), cutlass::MatrixCoord(pr.stride, pr.stride),
        cutlass::MatrixCoord(pr.dilation, pr.dilation), cutlass::Tensor4DCoord(pr.n, pr.p, pr.q, pr.k),
        cutlass::conv::Mode::kCrossCorrelation, 1, 1);
  }

  static Status launch(Problem const& pr, StageSync sync, ConvWaits waits, cudaStream_t stream) {
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
    dim3 const grid(unsigned(sync.tiles_m * sync.tiles_n));
    tile_synced_conv_kernel<Kernel><<<grid, Kernel::kThreadCount, kSmemBytes, stream>>>(params);
    return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }
};

}  // namespace cusync::conv
