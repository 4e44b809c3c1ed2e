// cusync sm90 backend: a chain's GEMM through cuBLASLt (run() mode kCublasLt, cusync/sm90/dispatch.h).
//
// Where cuBLAS's own kernels are faster than every CUTLASS configuration we instantiate (measured on the
// H200 at small M, where cuBLAS splits K or picks narrow tiles), run() can compute
// the chain with them. D[M, N] = Activation(A[M, K] x B (+ bias: cuBLASLt's BIAS epilogue)) as cuBLASLt's
// column-major D^T = B^T A^T, fp32 accumulation (the last 64 shapes' plans cached), then the activation
// in place with the same CUTLASS functor the fused epilogues use (cuBLASLt has no erf GELU or SiLU
// epilogue). Another summation order than CUTLASS's: checked by relative error, not bitwise.
// The algorithm: the first of cuBLASLt's heuristic, unless the chain's autotune() ran at this M: then the
// one of the heuristic's first kLtSearchAlgos that ran the whole chain fastest on this GPU (as PyTorch's
// TunableOp tunes its GEMMs, but timed in the chain's graph: timed alone, back to back, a GEMM ranked
// differently; measured on the H200, the heuristic's first is 1-7% slower than the best of eight at most
// shapes from M = 1024). The attention layer's autotune() searches its two GEMMs the same way.
// Each candidate's K splits and reduction scheme are reported with the choice (LtContext::stage_splitk):
// cuBLASLt's split-K reductions (in place with ordering counters, or through the workspace) are fixed-order
// on one stream, so a chosen algorithm gives the same bits run to run; the benches check it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "cutlass/epilogue/thread/activation.h"
#include "cutlass/numeric_types.h"

#include "cusync/sm90/cublaslt_context.h"
#include "cusync/sm90/gemm.cuh"
#include "cusync/status.h"

namespace cusync::sm90 {

#if !CUSYNC_HAVE_CUBLASLT
// Built without cuBLASLt: the mode reports kLibraryError (run() never picks it: dispatch.h).
template <class Element, class LayoutB, template <class> class Activation>
struct LtGemm {
  static Status launch(LtContext const*, GemmProblem const&, cudaStream_t) { return Status::kLibraryError; }
};
#else

// x = Activation(x) in place over [rows, cols] with `ld` elements between rows (the padding is not
// touched), 8 elements (16 bytes) per thread; cols and ld are multiples of 8.
template <class Element, template <class> class Activation>
__global__ void activation_in_place(Element* x, int64_t rows, int64_t cols, int64_t ld) {
  int64_t const vector = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  int64_t const per_row = cols / 8;
  if (vector >= rows * per_row) return;
  int64_t const i = (vector / per_row) * ld + (vector % per_row) * 8;
  uint4 v = *reinterpret_cast<uint4 const*>(x + i);
  Element* e = reinterpret_cast<Element*>(&v);
  Activation<float> const act{};
#pragma unroll
  for (int j = 0; j < 8; ++j) e[j] = Element(act(float(e[j])));
  *reinterpret_cast<uint4*>(x + i) = v;
}

template <class Element, class LayoutB, template <class> class Activation>
struct LtGemm {
  static constexpr bool kBColumn = std::is_same_v<LayoutB, cutlass::layout::ColumnMajor>;  // B is [N, K]
  static constexpr bool kIdentity =
      std::is_same_v<Activation<float>, cutlass::epilogue::thread::Identity<float>>;
  static constexpr cudaDataType_t kType = std::is_same_v<Element, cutlass::half_t> ? CUDA_R_16F : CUDA_R_16BF;
  static_assert(std::is_same_v<Element, cutlass::half_t> || std::is_same_v<Element, cutlass::bfloat16_t>,
                "dtype of an sm90 chain must be fp16 or bf16");

  // One shape's descriptors and algorithm, made on first use.
  struct Plan {
    int device, m, n, k;
    int64_t lda, ldb, ldd;
    bool bias;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t a = nullptr, b = nullptr, d = nullptr;
    cublasLtMatmulAlgo_t algo{};                     // the one launch() runs: candidates[chosen]
    cublasLtMatmulAlgo_t candidates[kLtSearchAlgos]{};  // the heuristic's first, in its order
    int candidate_count = 0, chosen = 0;
    int splitk[kLtSearchAlgos]{}, reduction[kLtSearchAlgos]{};  // each candidate's K splits and reduction scheme
    bool ok = false;
    ~Plan() {
      if (d != nullptr) cublasLtMatrixLayoutDestroy(d);
      if (b != nullptr) cublasLtMatrixLayoutDestroy(b);
      if (a != nullptr) cublasLtMatrixLayoutDestroy(a);
      if (op != nullptr) cublasLtMatmulDescDestroy(op);
    }
  };

  // The shapes seen last (most recent at the back), at most kMaxPlans: an application that runs many M
  // keeps the memory bounded (a shape evicted is planned again when it comes back).
  static constexpr size_t kMaxPlans = 64;

  // Finds or makes the plan of (device, the problem's shape and leading dimensions); the caller holds the mutex.
  static Plan* plan_locked(std::vector<std::unique_ptr<Plan>>& plans, LtContext const& ctx, int device,
                                 GemmProblem const& problem) {
    int const m = problem.m, n = problem.n, k = problem.k;
    int64_t const lda = problem.lda != 0 ? problem.lda : k, ldd = problem.ldd != 0 ? problem.ldd : n;
    int64_t const ldb = problem.ldb != 0 ? problem.ldb : (kBColumn ? k : n);
    for (size_t i = 0; i < plans.size(); ++i) {
      Plan const& q = *plans[i];
      if (q.device == device && q.m == m && q.n == n && q.k == k && q.lda == lda && q.ldb == ldb && q.ldd == ldd &&
          q.bias == (problem.bias != nullptr)) {
        std::rotate(plans.begin() + i, plans.begin() + i + 1, plans.end());  // most recent last
        return plans.back()->ok ? plans.back().get() : nullptr;
      }
    }
    if (plans.size() >= kMaxPlans) plans.erase(plans.begin());
    auto p = std::make_unique<Plan>();
    p->device = device, p->m = m, p->n = n, p->k = k, p->lda = lda, p->ldb = ldb, p->ldd = ldd;
    p->bias = problem.bias != nullptr;
    // A bias: cuBLASLt's BIAS epilogue adds it per row of its D^T [n, m], i.e. per column of D (the
    // pointer is set per call, the plan keeps only that there is one); the activation follows in place.
    cublasLtEpilogue_t const epilogue = p->bias ? CUBLASLT_EPILOGUE_BIAS : CUBLASLT_EPILOGUE_DEFAULT;
    // Column-major view: D^T [n, m] = op(B^T) [n, k] x A^T [k, m]; B^T is B [n, k] transposed when B is [N, K].
    cublasOperation_t const ta = kBColumn ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    bool ok = cublasLtMatmulDescCreate(&p->op, CUBLAS_COMPUTE_32F, CUDA_R_32F) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatmulDescSetAttribute(p->op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof(epilogue)) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p->a, kType, kBColumn ? k : n, kBColumn ? n : k, ldb) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p->b, kType, k, m, lda) == CUBLAS_STATUS_SUCCESS &&
              cublasLtMatrixLayoutCreate(&p->d, kType, n, m, ldd) == CUBLAS_STATUS_SUCCESS;
    if (ok) {
      cublasLtMatmulPreference_t pref = nullptr;
      size_t const bytes = ctx.workspace_bytes;
      cublasLtMatmulHeuristicResult_t results[kLtSearchAlgos]{};
      int found = 0;
      ok = cublasLtMatmulPreferenceCreate(&pref) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof(bytes)) == CUBLAS_STATUS_SUCCESS &&
           cublasLtMatmulAlgoGetHeuristic(ctx.handle, p->op, p->a, p->b, p->d, p->d, pref, kLtSearchAlgos, results, &found) ==
               CUBLAS_STATUS_SUCCESS;
      if (pref != nullptr) cublasLtMatmulPreferenceDestroy(pref);
      for (int i = 0; ok && i < found && i < kLtSearchAlgos; ++i) {
        if (results[i].state != CUBLAS_STATUS_SUCCESS) continue;
        int const c = p->candidate_count++;
        p->candidates[c] = results[i].algo;
        int32_t splits = 1;
        uint32_t scheme = 0;
        size_t written = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits),
                                                 &written) == CUBLAS_STATUS_SUCCESS) {
          p->splitk[c] = int(splits);
        }
        if (cublasLtMatmulAlgoConfigGetAttribute(&results[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                 sizeof(scheme), &written) == CUBLAS_STATUS_SUCCESS) {
          p->reduction[c] = int(scheme);
        }
      }
      ok = ok && p->candidate_count > 0;
      if (ok) p->algo = p->candidates[0];
    }
    p->ok = ok;
    plans.push_back(std::move(p));
    return ok ? plans.back().get() : nullptr;
  }

  static Status launch(LtContext const* ctx, GemmProblem const& p, cudaStream_t stream) {
    if (ctx == nullptr || ctx->handle == nullptr) return Status::kNotInitialized;
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return Status::kCudaError;
    {
      // The plan is used (the GEMM enqueued) under the lock, so that no other thread evicts it meanwhile.
      static std::mutex mutex;
      static std::vector<std::unique_ptr<Plan>> plans;
      std::lock_guard<std::mutex> lock(mutex);
      Plan* plan = plan_locked(plans, *ctx, device, p);
      if (plan == nullptr) return Status::kLibraryError;
      float const alpha = 1.0f, beta = 0.0f;
      if (p.bias != nullptr && cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &p.bias,
                                                              sizeof(p.bias)) != CUBLAS_STATUS_SUCCESS) {
        return Status::kLibraryError;
      }
      // autotune()'s search (Chain::search_lt_algorithms) makes this stage's plan take one of its
      // candidates; the choice stays with the shape. It reads how many candidates there are.
      if (ctx->stage >= 0 && ctx->stage < kLtMaxStages) {
        ctx->stage_candidates[ctx->stage] = plan->candidate_count;
        if (ctx->select_stage == ctx->stage) {
          plan->chosen = ctx->select_candidate < plan->candidate_count ? ctx->select_candidate : 0;
          plan->algo = plan->candidates[plan->chosen];
        }
        ctx->stage_algorithm[ctx->stage] = plan->chosen;
        ctx->stage_splitk[ctx->stage] = plan->splitk[plan->chosen];
        ctx->stage_reduction[ctx->stage] = plan->reduction[plan->chosen];
      }
      if (cublasLtMatmul(ctx->handle, plan->op, &alpha, p.b, plan->a, p.a, plan->b, &beta, p.d, plan->d, p.d, plan->d,
                         &plan->algo, ctx->workspace, ctx->workspace_bytes, stream) != CUBLAS_STATUS_SUCCESS) {
        return Status::kLibraryError;
      }
    }
    if constexpr (!kIdentity) {
      int64_t const threads = int64_t(p.m) * (p.n / 8);
      activation_in_place<Element, Activation><<<unsigned((threads + 255) / 256), 256, 0, stream>>>(
          static_cast<Element*>(p.d), p.m, p.n, p.ldd != 0 ? p.ldd : p.n);
      if (cudaGetLastError() != cudaSuccess) return Status::kCudaError;
    }
    return Status::kSuccess;
  }
};

#endif  // CUSYNC_HAVE_CUBLASLT

}  // namespace cusync::sm90
