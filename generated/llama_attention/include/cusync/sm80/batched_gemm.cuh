// cusync sm80 backend: a CUTLASS 2.x GemmUniversal in pointer-array mode (one GEMM per z, each with its
// own A, B and D), for the attention chain: every tile waits for all of its inputs at entry, then runs
// CUTLASS's mainloop and epilogue unchanged, then posts.
//
// Waiting at entry instead of per K-block (WaitingIteratorA) is what the attention edges need: a scores
// tile reads producer data through both operands (Q through A, K through B), and the other edges are
// RowSync, where the per-K-block wait happens once, before the first K-block, anyway.
// Nothing of CUTLASS is copied: the kernel is DefaultGemmUniversal's GemmKernel with the tile-assigning
// swizzle of cusync/sm80/gemm.cuh.
#pragma once

#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/gemm/gemm.h"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/gemm/kernel/default_gemm_universal.h"

#include "cusync/attention.cuh"
#include "cusync/sm80/gemm.cuh"
#include "cusync/stage.cuh"
#include "cusync/status.h"

namespace cusync::sm80 {

template <typename GemmKernel_>
struct EntryWaitingGemm : GemmKernel_ {
  using Base = GemmKernel_;
  using SharedStorage = typename Base::SharedStorage;

  struct Params {
    typename Base::Params gemm;
    StageSync sync;
    AttentionTile tile;
  };

  CUTLASS_DEVICE static void invoke(Params const& params, SharedStorage& shared) {
    TileCoord const v = begin_tile(params.sync);  // v.m is the virtual row z * tiles_m + m
    if (!params.tile.skipped(v)) {                 // uniform across the block
      if (params.sync.input.enabled) {
        if (threadIdx.x == 0) params.tile.wait_inputs(params.sync.input, params.sync.input_b, v, current_epoch(params.sync.state));
        __syncthreads();
      }
      AssignedTileSwizzle swizzle;
      // k() is z: the pointer-array index, or the K slice of a serial split-K GEMM.
      swizzle.tile = cutlass::gemm::GemmCoord(params.tile.m_of(v), v.n, params.tile.z_of(v));
      Base gemm;
      gemm.run_with_swizzle(params.gemm, shared, swizzle);
    }
    end_tile(params.sync, params.tile.post_tile(v));
  }
};

// D_z = alpha * A_z B_z for z < batch: A row-major [m, k], B [k, n] (RowMajor) or [n, k] row-major
// (ColumnMajor), D row-major [m, n]; leading dimensions are shared by all z, pointers are per z.
// Or, with split_k > 1 (batch 1), one GEMM whose K is cut into split_k slices that run side by side and
// are summed into D in slice order by CUTLASS's serial reduction (its per-tile semaphore, in
// split_semaphores: one int per tile, zero before the first launch; the last slice resets it). That
// fills the GPU when the M x N grid alone cannot (a generation step's few rows).
template <typename Element, typename LayoutB, typename ThreadblockShape, typename WarpShape,
          typename InstructionShape, int Stages>
struct BatchedSyncedGemm {
  static int const kAlignment = 128 / cutlass::sizeof_bits<Element>::value;
  using EpilogueOp = cutlass::epilogue::thread::LinearCombination<Element, kAlignment, float, float>;
  using Default = typename cutlass::gemm::kernel::DefaultGemmUniversal<
      Element, cutlass::layout::RowMajor, cutlass::ComplexTransform::kNone, kAlignment,  // A
      Element, LayoutB, cutlass::ComplexTransform::kNone, kAlignment,                    // B
      Element, cutlass::layout::RowMajor,                                                // C, D
      float, cutlass::arch::OpClassTensorOp, cutlass::arch::Sm80, ThreadblockShape, WarpShape, InstructionShape,
      EpilogueOp, AssignedTileSwizzle, Stages, cutlass::arch::OpMultiplyAdd>::GemmKernel;
  using Kernel = EntryWaitingGemm<Default>;
  using Params = typename Kernel::Params;
  static int const kSmemBytes = int(sizeof(typename Kernel::SharedStorage));

  static_assert(Stages >= 3, "tile.stages: the sm80 backend needs a multistage (cp.async) mainloop, stages >= 3");

  struct Problem {
    int m, n, k, batch;
    void const* const* a;  // device array of `batch` pointers
    void const* const* b;
    void* const* d;
    int64_t lda, ldb, ldd;
    float alpha;
    int split_k;                  // > 1: serial split-K over the operands below (batch must be 1)
    void const* a0;
    void const* b0;
    void* d0;
    int* split_semaphores;
  };

  static Status prepare() {
    if (kSmemBytes >= (48 << 10)) {
      cudaError_t err = cudaFuncSetAttribute(tile_synced_gemm_kernel<Kernel>,
                                             cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
      if (err != cudaSuccess) return Status::kCudaError;
    }
    return Status::kSuccess;
  }

  static Status launch(Problem const& problem, StageSync sync, AttentionTile tile, cudaStream_t stream) {
    using Arguments = typename Kernel::Base::Arguments;
    cutlass::gemm::GemmCoord const size(problem.m, problem.n, problem.k);
    bool const split = problem.split_k > 1;
    // beta = 0: CUTLASS never reads C (except, split, the slices after the first: the partial sum in D).
    // In kArray mode CUTLASS takes each operand as an untyped pointer to its array of pointers.
    Arguments const args = split
        ? Arguments(cutlass::gemm::GemmUniversalMode::kGemm, size, problem.split_k,
                    typename EpilogueOp::Params(problem.alpha, 0.0f), problem.a0, problem.b0, problem.d0, problem.d0,
                    0, 0, 0, 0, problem.lda, problem.ldb, problem.ldd, problem.ldd)
        : Arguments(cutlass::gemm::GemmUniversalMode::kArray, size, problem.batch,
                    typename EpilogueOp::Params(problem.alpha, 0.0f), problem.a, problem.b, problem.d,
                    const_cast<void**>(problem.d), 0, 0, 0, 0, problem.lda, problem.ldb, problem.ldd, problem.ldd);
    if (Kernel::Base::can_implement(args) != cutlass::Status::kSuccess) return Status::kCutlassError;
    Params params{typename Kernel::Base::Params(args, /*device_sms=*/0, /*sm_occupancy=*/0), sync, tile};
    if (split) {
      // The chain counts split_k slices per tile (blocks, posts): CUTLASS must cut K the same way.
      if (params.gemm.grid_tiled_shape.k() != problem.split_k || problem.split_semaphores == nullptr) return Status::kCutlassError;
      params.gemm.semaphore = problem.split_semaphores;
    }
    dim3 const grid(unsigned(sync.tiles_m * sync.tiles_n));
    tile_synced_gemm_kernel<Kernel><<<grid, Kernel::kThreadCount, kSmemBytes, stream>>>(params);
    return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }
};

}  // namespace cusync::sm80
