// cusync sm80 backend: a CUTLASS 2.x GemmUniversal that takes its tile from the stage's tile order,
// waits for its A rows through WaitingIteratorA, and posts its output tile after the epilogue.
//
// Nothing of CUTLASS is copied: the kernel is cutlass::gemm::kernel::GemmUniversal built by
// DefaultGemmUniversal, with two substitutions: the threadblock swizzle (AssignedTileSwizzle returns
// the tile chosen at block entry) and the A global iterator (WaitingIteratorA wraps CUTLASS's own).
#pragma once

#include <algorithm>
#include <type_traits>

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/epilogue/thread/linear_combination_generic.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/gemm/kernel/default_gemm_universal.h"
#include "cutlass/gemm/kernel/gemm_universal.h"
#include "cutlass/gemm/threadblock/mma_multistage.h"
#include "cutlass/gemm/threadblock/threadblock_swizzle.h"

#include "cusync/stage.cuh"
#include "cusync/status.h"
#include "cusync/sm80/waiting_iterator.cuh"

namespace cusync::sm80 {

// D = gelu_tanh(alpha * accumulator + beta * source): the epilogue `gelu_tanh` (GPT-2's gelu_new), built as
// CUTLASS builds LinearCombinationGELU (its erf GELU) but with CUTLASS's tanh GELU, GELU_taylor, which the
// sm90 backend uses too. CUTLASS has no alias of its own for it.
template <typename ElementOutput, int Count, typename ElementAccumulator = ElementOutput,
          typename ElementCompute = ElementOutput>
using LinearCombinationGeluTanh =
    cutlass::epilogue::thread::LinearCombinationGeneric<cutlass::epilogue::thread::GELU_taylor, ElementOutput, Count,
                                                        ElementAccumulator, ElementCompute,
                                                        cutlass::epilogue::thread::ScaleType::Default,
                                                        cutlass::FloatRoundStyle::round_to_nearest, true>;

// Hands run_with_swizzle the tile that begin_tile() chose; host-side grid math is CUTLASS's identity.
struct AssignedTileSwizzle : cutlass::gemm::threadblock::GemmIdentityThreadblockSwizzle<1> {
  cutlass::gemm::GemmCoord tile{};
  CUTLASS_DEVICE cutlass::gemm::GemmCoord get_tile_offset(int /*log_tile*/) const { return tile; }
};

// Rebuilds a CUTLASS MmaMultistage with its A global iterator wrapped; every other parameter is kept.
template <typename Mma, template <typename> class Wrap>
struct WithIteratorA;

template <typename Shape, typename IteratorA, typename SmemIteratorA, cutlass::arch::CacheOperation::Kind CacheOpA,
          typename IteratorB, typename SmemIteratorB, cutlass::arch::CacheOperation::Kind CacheOpB,
          typename ElementC, typename LayoutC, typename Policy, int Stages,
          cutlass::gemm::SharedMemoryClearOption Clear, typename Enable, template <typename> class Wrap>
struct WithIteratorA<cutlass::gemm::threadblock::MmaMultistage<Shape, IteratorA, SmemIteratorA, CacheOpA, IteratorB,
                                                              SmemIteratorB, CacheOpB, ElementC, LayoutC, Policy,
                                                              Stages, Clear, Enable>,
                     Wrap> {
  using type = cutlass::gemm::threadblock::MmaMultistage<Shape, Wrap<IteratorA>, SmemIteratorA, CacheOpA, IteratorB,
                                                         SmemIteratorB, CacheOpB, ElementC, LayoutC, Policy, Stages,
                                                         Clear, Enable>;
};

// reorder_tile_loads: the B tile does not depend on the producer, so its first K-blocks are fetched
// into L2 before the block waits for A. CUTLASS's prologue then finds them in L2 instead of DRAM, which
// overlaps B's DRAM latency with the wait without touching CUTLASS's mainloop.
struct PrefetchB {
  char const* b = nullptr;   // nullptr: off
  int64_t ld_bytes = 0;      // bytes between consecutive rows of the stored B
  bool column_major = false; // stored as [N, K] (rows are output columns)
  int32_t k_extent = 0;      // K elements to prefetch: (stages - 1) * BLK_K, clamped to K
  int32_t element_bytes = 2;

  template <int kBlockN>
  CUTLASS_DEVICE void issue(int32_t tile_n) const {
    if (b == nullptr) return;
    // Rows of the stored matrix and the contiguous bytes to fetch in each.
    int32_t const rows = column_major ? kBlockN : k_extent;
    int32_t const row_bytes = (column_major ? k_extent : kBlockN) * element_bytes;
    int64_t const first_row = column_major ? int64_t(tile_n) * kBlockN : 0;
    int64_t const col_offset = column_major ? 0 : int64_t(tile_n) * kBlockN * element_bytes;
    int32_t const lines_per_row = (row_bytes + 127) / 128;
    for (int32_t i = int32_t(threadIdx.x); i < rows * lines_per_row; i += int32_t(blockDim.x)) {
      char const* line = b + (first_row + i / lines_per_row) * ld_bytes + col_offset + (i % lines_per_row) * 128;
      asm volatile("prefetch.global.L2 [%0];" : : "l"(line));
    }
  }
};

// The kernel: CUTLASS's GemmUniversal between begin_tile (ticket, tile order) and end_tile (post).
template <typename GemmKernel_>
struct TileSyncedGemm : GemmKernel_ {
  using Base = GemmKernel_;
  using SharedStorage = typename Base::SharedStorage;

  struct Params {
    typename Base::Params gemm;
    StageSync sync;
    PrefetchB prefetch_b;
  };

  CUTLASS_DEVICE static void invoke(Params const& params, SharedStorage& shared) {
    TileCoord const tile = begin_tile(params.sync);
    if (params.sync.input.enabled) params.prefetch_b.template issue<Base::Mma::Shape::kN>(tile.n);
    AssignedTileSwizzle swizzle;
    swizzle.tile = cutlass::gemm::GemmCoord(tile.m, tile.n, 0);
    Base gemm;
    gemm.run_with_swizzle(params.gemm, shared, swizzle);
    end_tile(params.sync, tile);
  }
};

// __grid_constant__: CUTLASS's iterators and our waits keep pointers into the parameters; without it
// nvcc copies the whole Params block to every thread's stack (seen: a 592-byte stack frame).
template <typename Kernel>
__global__ void __launch_bounds__(Kernel::kThreadCount)
    tile_synced_gemm_kernel(__grid_constant__ typename Kernel::Params const params) {
  extern __shared__ __align__(16) unsigned char cusync_dynamic_smem[];
  Kernel::invoke(params, *reinterpret_cast<typename Kernel::SharedStorage*>(cusync_dynamic_smem));
}

// A row-major A [M, K] times B ([K, N] row-major or [N, K] row-major = column-major [K, N]) into a
// row-major D [M, N], fp32 accumulation, with the given CUTLASS epilogue functor.
template <typename Element, typename LayoutB, typename ThreadblockShape, typename WarpShape,
          typename InstructionShape, typename EpilogueOp, int Stages>
struct SyncedGemm {
  static int const kAlignment = 128 / cutlass::sizeof_bits<Element>::value;
  using Default = typename cutlass::gemm::kernel::DefaultGemmUniversal<
      Element, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, kAlignment,  // A
      Element, LayoutB, cutlass::ComplexTransform::kNone, kAlignment,                    // B
      Element, cutlass::layout::RowMajor,                                                // C, D
      float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,
      EpilogueOp, AssignedTileSwizzle, Stages, cutlass::arch::OpMultiplyAdd>::GemmKernel;
  using Mma = typename WithIteratorA<typename Default::Mma, WaitingIteratorA>::type;
  using Kernel = TileSyncedGemm<cutlass::gemm::kernel::GemmUniversal<Mma, typename Default::Epilogue, AssignedTileSwizzle>>;
  using Params = typename Kernel::Params;
  static int const kSmemBytes = int(sizeof(typename Kernel::SharedStorage));

  static_assert(Stages >= 3, "tile.stages: the sm80 backend needs a multistage (cp.async) mainloop, stages >= 3");

  struct Problem {
    int m, n, k;
    Element const* a;  // [m, k] row-major
    Element const* b;  // [k, n] (RowMajor) or [n, k] (ColumnMajor)
    Element* d;        // [m, n] row-major
    int64_t lda;       // elements between rows of a, of b as stored, and of d
    int64_t ldb;
    int64_t ldd;
    Element const* bias;  // [n], added before the activation, or null
  };

  // Raises the dynamic shared memory limit once; call before the first launch (and outside capture).
  static Status prepare() {
    if (kSmemBytes >= (48 << 10)) {
      cudaError_t err = cudaFuncSetAttribute(tile_synced_gemm_kernel<Kernel>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
      if (err != cudaSuccess) return Status::kCudaError;
    }
    return Status::kSuccess;
  }

  // reorder_b: prefetch B's first K-blocks into L2 before waiting for A (reorder_tile_loads).
  static Status launch(Problem const& problem, StageSync sync, bool reorder_b, cudaStream_t stream) {
    using Arguments = typename Kernel::Base::Arguments;
    cutlass::gemm::GemmCoord const size(problem.m, problem.n, problem.k);
    int64_t const ldb = problem.ldb;
    // A bias is CUTLASS's source operand C read with row stride 0 (every row of C is the bias vector), with
    // beta = 1: D = act(A x B + bias). Without one, beta = 0 and the epilogue never reads C.
    bool const bias = problem.bias != nullptr;
    Arguments args(cutlass::gemm::GemmUniversalMode::kGemm, size, /*batch_count=*/1,
                   typename EpilogueOp::Params(1.0f, bias ? 1.0f : 0.0f), problem.a, problem.b,
                   bias ? problem.bias : problem.d, problem.d, 0, 0, 0, 0, problem.lda, ldb, bias ? 0 : problem.ldd,
                   problem.ldd);
    if (Kernel::Base::can_implement(args) != cutlass::Status::kSuccess) return Status::kCutlassError;
    Params params{typename Kernel::Base::Params(args, /*device_sms=*/0, /*sm_occupancy=*/0), sync, PrefetchB{}};
    params.gemm.params_A.wait = sync.input;
    if (reorder_b) {
      bool const column_major = !std::is_same<LayoutB, cutlass::layout::RowMajor>::value;
      params.prefetch_b = PrefetchB{reinterpret_cast<char const*>(problem.b), ldb * int64_t(sizeof(Element)), column_major,
                                    std::min(problem.k, (Stages - 1) * ThreadblockShape::kK), int32_t(sizeof(Element))};
    }
    dim3 const grid(unsigned(sync.tiles_m * sync.tiles_n));
    tile_synced_gemm_kernel<Kernel><<<grid, Kernel::kThreadCount, kSmemBytes, stream>>>(params);
    return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }
};

}  // namespace cusync::sm80
