// cusync conv bench (not part of the library): a direct convolution, one thread per output element, as
// the reference the tile-synced kernels are checked against, and the random fill of the bench's tensors.
#pragma once

#include <cstdint>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace cusync::bench {

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <typename T> __device__ __forceinline__ T from_float(float x);
template <> __device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

struct ConvShape {
  int n, h, w, c, k, r, s, p, q, pad, stride, dilation;
  bool relu;
};

// y[n, p, q, k] = act(sum over r, s, c of x[n, p*stride - pad + r*dil, q*stride - pad + s*dil, c] * f[k, r, s, c]
//                 + bias[k] + residual[n, p, q, k]), in fp32 (not rounded: the caller compares with a tolerance).
template <typename T>
__global__ void reference_conv(ConvShape sh, T const* x, T const* f, T const* bias, T const* residual, float* y) {
  int64_t const total = int64_t(sh.n) * sh.p * sh.q * sh.k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int const k = int(i % sh.k);
    int64_t const pixel = i / sh.k;
    int const q = int(pixel % sh.q), p = int((pixel / sh.q) % sh.p), n = int(pixel / (int64_t(sh.q) * sh.p));
    float acc = 0.0f;
    for (int r = 0; r < sh.r; ++r) {
      int const h = p * sh.stride - sh.pad + r * sh.dilation;
      if (h < 0 || h >= sh.h) continue;
      for (int s = 0; s < sh.s; ++s) {
        int const w = q * sh.stride - sh.pad + s * sh.dilation;
        if (w < 0 || w >= sh.w) continue;
        T const* xp = x + ((int64_t(n) * sh.h + h) * sh.w + w) * sh.c;
        T const* fp = f + ((int64_t(k) * sh.r + r) * sh.s + s) * sh.c;
        for (int c = 0; c < sh.c; ++c) acc += to_float(xp[c]) * to_float(fp[c]);
      }
    }
    if (bias != nullptr) acc += to_float(bias[k]);
    if (residual != nullptr) acc += to_float(residual[i]);
    y[i] = sh.relu && acc < 0.0f ? 0.0f : acc;
  }
}

// Uniform values in [-scale, scale) from a hash of (seed, index): the same tensors on every run.
template <typename T>
__global__ void fill_uniform(T* data, int64_t count, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t v = uint32_t(i) * 0x9E3779B1u ^ seed * 0x85EBCA77u ^ uint32_t(i >> 32) * 0xC2B2AE3Du;
    v ^= v >> 15; v *= 0x2C1B3C6Du; v ^= v >> 12; v *= 0x297A2D39u; v ^= v >> 15;
    data[i] = from_float<T>((float(v) * (1.0f / 4294967296.0f) * 2.0f - 1.0f) * scale);
  }
}

}  // namespace cusync::bench
