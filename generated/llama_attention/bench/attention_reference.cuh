// Reference math for the attention bench (not part of the library): each stage in fp32 from exactly
// the fp16/bf16 inputs the stage read, with the same strided views the library uses.
#pragma once

#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

namespace bench {

// C[m, n] (fp32, ldc) = alpha * A[m, k] (lda) x B: B[k, n] (ldb) or, b_col, B^T stored as [n, k] rows (ldb).
template <typename T>
__global__ void strided_gemm_kernel(T const* a, int64_t lda, T const* b, int64_t ldb, bool b_col, float* c, int64_t ldc,
                                    int m, int n, int k, float alpha) {
  __shared__ float tile_a[16][17];
  __shared__ float tile_b[16][17];
  int const row = blockIdx.y * 16 + threadIdx.y;
  int const col = blockIdx.x * 16 + threadIdx.x;
  float acc = 0.0f;
  for (int k0 = 0; k0 < k; k0 += 16) {
    int const ka = k0 + threadIdx.x;
    int const kb = k0 + threadIdx.y;
    tile_a[threadIdx.y][threadIdx.x] = (row < m && ka < k) ? float(a[row * lda + ka]) : 0.0f;
    float bv = 0.0f;
    if (col < n && kb < k) bv = float(b_col ? b[col * ldb + kb] : b[kb * ldb + col]);
    tile_b[threadIdx.y][threadIdx.x] = bv;
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 16; ++i) acc += tile_a[threadIdx.y][i] * tile_b[i][threadIdx.x];
    __syncthreads();
  }
  if (row < m && col < n) c[row * ldc + col] = alpha * acc;
}

template <typename T>
void strided_gemm(T const* a, int64_t lda, T const* b, int64_t ldb, bool b_col, float* c, int64_t ldc, int m, int n,
                  int k, float alpha) {
  dim3 const grid(unsigned((n + 15) / 16), unsigned((m + 15) / 16));
  strided_gemm_kernel<T><<<grid, dim3(16, 16)>>>(a, lda, b, ldb, b_col, c, ldc, m, n, k, alpha);
}

// One thread per row of `rows` x `keys`: causal rows see keys [0, cache + row]; masked keys are 0.
template <typename T>
__global__ void softmax_kernel(T const* s, float* p, int rows, int keys, int cache, bool causal) {
  int const row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  T const* in = s + int64_t(row) * keys;
  float* out = p + int64_t(row) * keys;
  int const visible = causal ? min(cache + row + 1, keys) : keys;
  float max_v = -INFINITY;
  for (int c = 0; c < visible; ++c) max_v = fmaxf(max_v, float(in[c]));
  float sum = 0.0f;
  for (int c = 0; c < visible; ++c) sum += expf(float(in[c]) - max_v);
  for (int c = 0; c < keys; ++c) out[c] = c < visible ? expf(float(in[c]) - max_v) / sum : 0.0f;
}

// sums[0] += (out - ref)^2, sums[1] += ref^2, sums[2] += non-finite outputs, over a rows x cols view;
// with last_col_offset >= 0 only columns c <= last_col_offset + r count (causal scores: what softmax reads).
template <typename T>
__global__ void strided_error_kernel(T const* out, int64_t ld_out, float const* ref, int64_t ld_ref, int rows, int cols,
                                     int last_col_offset, double* sums) {
  double diff2 = 0.0, ref2 = 0.0, bad = 0.0;
  int64_t const count = int64_t(rows) * cols;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t const r = i / cols, c = i % cols;
    if (last_col_offset >= 0 && c > last_col_offset + r) continue;
    float const o = float(out[r * ld_out + c]);
    float const e = ref[r * ld_ref + c];
    if (!isfinite(o)) bad += 1.0;
    else diff2 += double(o - e) * double(o - e);
    ref2 += double(e) * double(e);
  }
  atomicAdd(&sums[0], diff2);
  atomicAdd(&sums[1], ref2);
  atomicAdd(&sums[2], bad);
}

}  // namespace bench
