// The cuBLAS baseline of the bench (sm90 projects; not part of the library): each GEMM through
// cublasGemmEx, the activation as a separate elementwise kernel as PyTorch runs it, and the FLOP
// rate of a large cuBLAS GEMM that the results call the floor. Compiled only where CMake found cuBLAS
// (CUSYNC_BENCH_CUBLAS); without it the bench reports these baselines as null.
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "reference.cuh"

#if defined(CUSYNC_BENCH_CUBLAS)
#include <cublas_v2.h>
#endif

namespace bench {

// x = act(x) in place, 8 elements (16 bytes) per thread.
template <typename T>
__global__ void activation_inplace_kernel(T* x, int64_t count, Activation act) {
  int64_t const i = (int64_t(blockIdx.x) * blockDim.x + threadIdx.x) * 8;
  if (i + 8 > count) {
    for (int64_t j = i; j < count; ++j) x[j] = T(activate(act, float(x[j])));
    return;
  }
  uint4 v = *reinterpret_cast<uint4 const*>(x + i);
  T* e = reinterpret_cast<T*>(&v);
#pragma unroll
  for (int j = 0; j < 8; ++j) e[j] = T(activate(act, float(e[j])));
  *reinterpret_cast<uint4*>(x + i) = v;
}

// out[m, n] = silu(gate) * up, gate and up [m, n] views with leading dimension ld; one fused kernel
// (PyTorch runs silu and the product as two).
template <typename T>
__global__ void swiglu_kernel(T const* gate, T const* up, int64_t ld, T* out, int m, int n) {
  int64_t const i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(m) * n) return;
  int64_t const row = i / n, col = i % n;
  float const g = float(gate[row * ld + col]);
  float const u = float(up[row * ld + col]);
  out[i] = T(g / (1.0f + expf(-g)) * u);
}

#if defined(CUSYNC_BENCH_CUBLAS)
constexpr bool kHaveCublas = true;

template <typename T>
constexpr cudaDataType_t cuda_type() {
  return sizeof(T) == 2 && std::is_same<T, __half>::value ? CUDA_R_16F : CUDA_R_16BF;
}

// Row-major D[m, n] = A[m, k] x B as column-major D^T = B^T A^T. B is [k, n] row-major (b_col false)
// or [n, k] row-major (b_col true).
template <typename T>
cublasStatus_t gemm(cublasHandle_t handle, T const* a, T const* b, bool b_col, T* d, int m, int n, int k) {
  float const alpha = 1.0f, beta = 0.0f;
  return cublasGemmEx(handle, b_col ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b, cuda_type<T>(),
                      b_col ? k : n, a, cuda_type<T>(), k, &beta, d, cuda_type<T>(), n, CUBLAS_COMPUTE_32F,
                      CUBLAS_GEMM_DEFAULT);
}

struct Cublas {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  bool ok = false;

  Cublas() {
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return;
    // A fixed workspace keeps cuBLAS from allocating inside stream capture.
    size_t const bytes = size_t(64) << 20;
    if (cudaMalloc(&workspace, bytes) != cudaSuccess) return;
    ok = cublasSetWorkspace(handle, workspace, bytes) == CUBLAS_STATUS_SUCCESS;
  }
  ~Cublas() {
    if (handle != nullptr) cublasDestroy(handle);
    if (workspace != nullptr) cudaFree(workspace);
  }
  bool set_stream(cudaStream_t stream) { return ok && cublasSetStream(handle, stream) == CUBLAS_STATUS_SUCCESS; }
};
#else
constexpr bool kHaveCublas = false;
#endif

}  // namespace bench
