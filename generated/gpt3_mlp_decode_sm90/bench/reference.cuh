// Reference math and check helpers for the bench driver (not part of the library).
// The reference computes every stage in fp32 from the same fp16/bf16 inputs the stage read.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include <cuda_runtime.h>

namespace bench {

// kSwiglu: a gated GEMM (epilogue swiglu): B holds [gate | up], 2n columns, and out = silu(gate) * up.
// kGeluTanh: the tanh approximation of GELU (epilogue gelu_tanh, GPT-2's gelu_new), with the exact tanhf.
enum class Activation : int { kIdentity = 0, kRelu = 1, kGelu = 2, kSilu = 3, kSwiglu = 4, kGeluTanh = 5 };

__device__ __forceinline__ float activate(Activation act, float x) {
  switch (act) {
    case Activation::kRelu: return x > 0.0f ? x : 0.0f;
    case Activation::kGelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::kGeluTanh: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Activation::kSilu:
    case Activation::kSwiglu: return x / (1.0f + expf(-x));
    default: return x;
  }
}

// C[m, n] = act(A[m, k] x B), B [k, n] row-major or (b_col) [n, k] row-major; fp32 accumulate.
// kSwiglu: B is [k, 2n] ([2n, k]) holding gate | up, and C = silu(A x gate) * (A x up).
template <typename T>
__global__ void reference_gemm_kernel(T const* a, T const* b, bool b_col, float* c, int m, int n, int k, Activation act,
                                      T const* bias = nullptr) {  // bias: [n], added before the activation
  __shared__ float tile_a[16][17];
  __shared__ float tile_b[2][16][17];
  bool const gated = act == Activation::kSwiglu;
  int const b_cols = gated ? 2 * n : n;
  int const row = blockIdx.y * 16 + threadIdx.y;
  int const col = blockIdx.x * 16 + threadIdx.x;
  float acc[2] = {0.0f, 0.0f};
  for (int k0 = 0; k0 < k; k0 += 16) {
    int const ka = k0 + threadIdx.x;
    int const kb = k0 + threadIdx.y;
    tile_a[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? float(a[int64_t(row) * k + ka]) : 0.0f;
    for (int h = 0; h < (gated ? 2 : 1); ++h) {
      int const bcol = col + h * n;  // the up half starts n columns in
      float bv = 0.0f;
      if (col < n && kb < k) bv = float(b_col ? b[int64_t(bcol) * k + kb] : b[int64_t(kb) * b_cols + bcol]);
      tile_b[h][threadIdx.y][threadIdx.x] = bv;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 16; ++i) {
      acc[0] += tile_a[threadIdx.y][i] * tile_b[0][i][threadIdx.x];
      if (gated) acc[1] += tile_a[threadIdx.y][i] * tile_b[1][i][threadIdx.x];
    }
    __syncthreads();
  }
  if (row < m && col < n) {
    float const with_bias = acc[0] + (bias != nullptr ? float(bias[col]) : 0.0f);  // a gated GEMM has no bias
    c[int64_t(row) * n + col] = gated ? activate(act, acc[0]) * acc[1] : activate(act, with_bias);
  }
}

// out[m, n] = silu(gate) * up, both [m, n] views with leading dimension ld (gate | up halves of one
// [m, 2n] tensor: ld = 2n, up = gate + n; two tensors: ld = n).
template <typename T>
__global__ void reference_swiglu_kernel(T const* gate, T const* up, int64_t ld, float* out, int m, int n) {
  int64_t const i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(m) * n) return;
  int64_t const row = i / n, col = i % n;
  float const g = float(gate[row * ld + col]);
  float const u = float(up[row * ld + col]);
  out[i] = g / (1.0f + expf(-g)) * u;
}

// sums[0] += (out - ref)^2, sums[1] += ref^2, sums[2] += count of non-finite outputs.
template <typename T>
__global__ void error_sums_kernel(T const* out, float const* ref, int64_t count, double* sums) {
  double diff2 = 0.0, ref2 = 0.0, bad = 0.0;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    float const o = float(out[i]);
    float const r = ref[i];
    if (!isfinite(o)) bad += 1.0;
    else diff2 += double(o - r) * double(o - r);
    ref2 += double(r) * double(r);
  }
  atomicAdd(&sums[0], diff2);
  atomicAdd(&sums[1], ref2);
  atomicAdd(&sums[2], bad);
}

// Uniform in [-scale, scale) from a counter-based hash: reproducible, never all zeros.
template <typename T>
__global__ void fill_uniform_kernel(T* data, int64_t count, uint32_t seed, float scale) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 0x9E3779B9u ^ seed * 0x85EBCA6Bu ^ uint32_t(i >> 32) * 0xC2B2AE35u;
    x ^= x >> 16; x *= 0x7FEB352Du; x ^= x >> 15; x *= 0x846CA68Bu; x ^= x >> 16;
    float const u = float(x >> 8) * (1.0f / 16777216.0f);
    data[i] = T((2.0f * u - 1.0f) * scale);
  }
}

// Relative L2 error ||out - ref|| / ||ref||; infinity if any output is NaN/Inf (e.g. an unwritten,
// poisoned element).
template <typename T>
double relative_error(T const* out, float const* ref, int64_t count, double* sums_device) {
  cudaMemset(sums_device, 0, 3 * sizeof(double));
  error_sums_kernel<T><<<264, 256>>>(out, ref, count, sums_device);
  double sums[3] = {0, 0, 0};
  cudaMemcpy(sums, sums_device, sizeof(sums), cudaMemcpyDeviceToHost);
  if (sums[2] > 0) return INFINITY;
  return sums[1] > 0 ? std::sqrt(sums[0] / sums[1]) : std::sqrt(sums[0]);
}

inline std::vector<unsigned char> to_host(void const* device, size_t bytes) {
  std::vector<unsigned char> host(bytes);
  cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost);
  return host;
}

inline bool bitwise_equal(void const* device, std::vector<unsigned char> const& expected) {
  std::vector<unsigned char> const got = to_host(device, expected.size());
  return std::memcmp(got.data(), expected.data(), expected.size()) == 0;
}

}  // namespace bench
