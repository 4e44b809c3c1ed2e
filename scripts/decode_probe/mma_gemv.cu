// NOTES d41's probe: one decode GEMM Y [M, N] = X [M, K] W^T with W column-major ([N, K], each output column's
// weights contiguous: torch.nn.Linear's layout), at M = 1, 2, 4, 8, two ways on the same data:
//   cuda-core  a warp per column, lanes along K in 16-byte vectors (8 in flight), fp32 FMAs per row, a shuffle
//              tree: the slab kernel's dot_col (cusync/sm90/slab_chain.cuh);
//   mma        16 columns per warp and part of K (a CTA's warps split its column groups along K so that every
//              warp streams), mma.sync m16n8k16 (fp32 accumulate): lane (g, t) loads 16 bytes of columns
//              g and g + 8 at K offset 8 t + 32 i (i < kIn: kIn x 64 contiguous bytes per column per step), and
//              X row g's same 8 elements from shared memory (zero where g >= M). The K order inside each mma is a
//              permutation (slot 2t <-> 8t, 2t+8 <-> 8t+2, the next mma 8t+4..), the same for A and B, so the sum
//              is the GEMM's. No unpacking, no per-row FMAs, no shuffle tree;
// beside a streaming read of W's bytes. Each kernel: one CTA of 512 threads per SM, columns split statically.
// Question: does the 16-column access pattern (64-256 contiguous bytes per column per request) stream as fast as
// whole columns, and how much does the mma save at M = 2-8 (d36: the CUDA cores add ~4-5 us a row on GPT-3)?
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a scripts/decode_probe/mma_gemv.cu -o mma_gemv
//   ./mma_gemv [reps]      (prints RESULT lines; checks mma against cuda-core within 1e-3 relative)
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_common.cuh"


constexpr int kThreads = 512, kWarps = kThreads / 32;

// X [M, K] into shared memory (rows as given, 16-byte copies).
template <int M>
__device__ __forceinline__ void load_x(__half const* x, int k, __half* xs) {
  for (int i = int(threadIdx.x); i < M * (k / 8); i += kThreads)
    reinterpret_cast<uint4*>(xs)[i] = reinterpret_cast<uint4 const*>(x)[i];
  __syncthreads();
}

// cuda-core: warp w of the grid takes columns w, w + warps, ...
template <int M>
__global__ void __launch_bounds__(kThreads, 1) gemv_cuda_core(__half const* x, __half const* w, __half* y, int n, int k) {
  extern __shared__ __align__(16) unsigned char smem[];
  __half* xs = reinterpret_cast<__half*>(smem);
  load_x<M>(x, k, xs);
  int const lane = int(threadIdx.x) % 32, kv = k / 8;
  int const warps = int(gridDim.x) * kWarps;
  for (int c = int(blockIdx.x) * kWarps + int(threadIdx.x) / 32; c < n; c += warps) {
    float acc[M] = {};
    __half const* col = w + int64_t(c) * k;
#pragma unroll 8
    for (int q = lane; q < kv; q += 32) {
      uint4 const v = ld_stream(col + int64_t(q) * 8);
      __half2 const* h2 = reinterpret_cast<__half2 const*>(&v);
      float f[8];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float2 const p = __half22float2(h2[i]);
        f[2 * i] = p.x, f[2 * i + 1] = p.y;
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        uint4 const xv = reinterpret_cast<uint4 const*>(xs + m * k)[q];
        __half2 const* x2 = reinterpret_cast<__half2 const*>(&xv);
#pragma unroll
        for (int i = 0; i < 4; ++i) {
          float2 const p = __half22float2(x2[i]);
          acc[m] = fmaf(f[2 * i], p.x, acc[m]);
          acc[m] = fmaf(f[2 * i + 1], p.y, acc[m]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m)
#pragma unroll
      for (int o = 16; o > 0; o /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
    if (lane < M) {
#pragma unroll
      for (int m = 0; m < M; ++m)
        if (lane == m) y[int64_t(m) * n + c] = __float2half(acc[m]);
    }
  }
}

__device__ __forceinline__ void mma16816(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                         uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

// mma: CTA b takes the 16-column groups [G b / grid, G (b + 1) / grid) of G = n / 16; its 16 warps split them
// as groups x parts (parts = 16 / groups, at least 1): warp w computes group w % groups over the part w / groups
// of K (in 32-element chunks), kIn 16-byte vectors per column per lane in flight; the parts' partial sums meet
// in shared memory and are added in part order (fixed, bitwise run to run). Requires k % 32 == 0, n % 16 == 0.
template <int M, int kIn>
__global__ void __launch_bounds__(kThreads, 1) gemv_mma(__half const* x, __half const* w, __half* y, int n, int k) {
  extern __shared__ __align__(16) unsigned char smem[];
  __half* xs = reinterpret_cast<__half*>(smem);
  float* red = reinterpret_cast<float*>(smem + size_t(M) * k * 2);  // [kWarps][32 lanes][4]
  load_x<M>(x, k, xs);
  int const lane = int(threadIdx.x) % 32, warp = int(threadIdx.x) / 32, g = lane / 4, t = lane % 4;
  int const all = n / 16, g0 = int(int64_t(all) * blockIdx.x / gridDim.x), g1 = int(int64_t(all) * (blockIdx.x + 1) / gridDim.x);
  int const groups = g1 - g0;
  if (groups <= 0) return;
  for (int base = 0; base < groups; base += kWarps) {  // more groups than warps: rounds of 16, one part each
    int const here = groups - base < kWarps ? groups - base : kWarps;
    int const parts = kWarps / here;
    int const grp = base + warp % here, part = warp / here;
    float d[2][4] = {};  // two accumulators (even and odd vectors) break the mma dependency chain
    if (part < parts) {
      int const chunks = k / 32, c0 = chunks * part / parts, c1 = chunks * (part + 1) / parts;
      __half const* lo = w + int64_t((g0 + grp) * 16 + g) * k + 8 * t;
      __half const* hi = lo + int64_t(8) * k;
      __half const* xr = xs + g * k + 8 * t;
      for (int kc = c0; kc < c1; kc += kIn) {
        uint4 a[kIn], b[kIn];
#pragma unroll
        for (int i = 0; i < kIn; ++i) {
          bool const in = kc + i < c1;
          a[i] = in ? ld_stream(lo + 32 * (kc + i)) : make_uint4(0, 0, 0, 0);
          b[i] = in ? ld_stream(hi + 32 * (kc + i)) : make_uint4(0, 0, 0, 0);
        }
#pragma unroll
        for (int i = 0; i < kIn; ++i) {
          uint4 const xv = g < M && kc + i < c1 ? *reinterpret_cast<uint4 const*>(xr + 32 * (kc + i)) : make_uint4(0, 0, 0, 0);
          mma16816(d[i & 1], a[i].x, b[i].x, a[i].y, b[i].y, xv.x, xv.y);
          mma16816(d[i & 1], a[i].z, b[i].z, a[i].w, b[i].w, xv.z, xv.w);
        }
      }
#pragma unroll
      for (int r = 0; r < 4; ++r) red[(warp * 32 + lane) * 4 + r] = d[0][r] + d[1][r];
    }
    __syncthreads();
    // Warp q < here adds the parts of its group in order; lane (g, t) holds column g (d 0, 1) and g + 8 (d 2, 3)
    // at rows 2t, 2t + 1.
    if (warp < here) {
      float sum[4] = {};
      for (int p = 0; p < parts; ++p)
#pragma unroll
        for (int r = 0; r < 4; ++r) sum[r] += red[((p * here + warp) * 32 + lane) * 4 + r];
      int const c = (g0 + base + warp) * 16 + g;
#pragma unroll
      for (int r = 0; r < 2; ++r) {
        int const m = 2 * t + r;
        if (m < M) {
          y[int64_t(m) * n + c] = __float2half(sum[r]);
          y[int64_t(m) * n + c + 8] = __float2half(sum[2 + r]);
        }
      }
    }
    __syncthreads();
  }
}

template <int M>
static void run_shape(char const* name, int n, int k, int reps, int sms, cudaStream_t s) {
  size_t const nw = size_t(n) * k;
  __half *x, *w, *y0, *y1, *y2;
  unsigned* sink;
  CK(cudaMalloc(&x, size_t(M) * k * 2));
  CK(cudaMalloc(&w, nw * 2));
  CK(cudaMalloc(&y0, size_t(M) * n * 2));
  CK(cudaMalloc(&y1, size_t(M) * n * 2));
  CK(cudaMalloc(&y2, size_t(M) * n * 2));
  CK(cudaMalloc(&sink, 4));
  fill<<<1024, 256, 0, s>>>(x, size_t(M) * k, 1u, 1.0f);
  fill<<<4096, 256, 0, s>>>(w, nw, 2u, 1.0f / std::sqrt(float(k)));
  int const smem = M * k * 2, smem_mma = smem + kWarps * 32 * 4 * 4;
  CK(cudaFuncSetAttribute(gemv_cuda_core<M>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(gemv_mma<M, 4>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_mma));
  CK(cudaFuncSetAttribute(gemv_mma<M, 8>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_mma));
  auto core = [&] { gemv_cuda_core<M><<<sms, kThreads, smem, s>>>(x, w, y0, n, k); };
  auto mma4 = [&] { gemv_mma<M, 4><<<sms, kThreads, smem_mma, s>>>(x, w, y1, n, k); };
  auto mma8 = [&] { gemv_mma<M, 8><<<sms, kThreads, smem_mma, s>>>(x, w, y2, n, k); };
  auto read = [&] { stream_read<<<sms * 4, 512, 0, s>>>(reinterpret_cast<uint4 const*>(w), nw * 2 / 16, sink); };
  core(), mma4(), mma8();
  CK(cudaStreamSynchronize(s));
  CK(cudaGetLastError());
  std::vector<__half> a(size_t(M) * n), b(a.size()), c(a.size());
  CK(cudaMemcpy(a.data(), y0, a.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(b.data(), y1, b.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(c.data(), y2, c.size() * 2, cudaMemcpyDeviceToHost));
  double err = 0, mag = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double const r = __half2float(a[i]);
    mag = std::max(mag, std::fabs(r));
    err = std::max({err, std::fabs(double(__half2float(b[i])) - r), std::fabs(double(__half2float(c[i])) - r)});
  }
  bool const ok = err <= 1e-3 * mag + 2e-3;
  // Each variant as one CUDA graph of 10 launches; ~0.7 s preheat each; then round robin, events around each.
  auto ten = [&](auto fn) {  // each variant's graph: 10 launches
    return graph_of(s, [&] {
      for (int i = 0; i < 10; ++i) fn();
    });
  };
  std::vector<cudaGraphExec_t> const ex = {ten(core), ten(mma4), ten(mma8), ten(read)};
  std::vector<std::vector<float>> tv = round_robin_us(s, ex, reps, 20);
  for (auto& v : tv)
    for (float& us : v) us /= 10.f;  // us per launch
  double const gb = double(nw) * 2 * 1e-3;
  std::printf("RESULT {\"shape\": \"%s\", \"n\": %d, \"k\": %d, \"m\": %d, \"cuda_core_us\": %.2f, \"mma4_us\": %.2f, "
              "\"mma8_us\": %.2f, \"read_us\": %.2f, \"read_tbps\": %.2f, \"check\": %s, \"max_diff\": %.3g}\n",
              name, n, k, M, median(tv[0]), median(tv[1]), median(tv[2]), median(tv[3]), gb / median(tv[3]) * 1e-3,
              ok ? "true" : "false", err);
  for (auto& e : ex) cudaGraphExecDestroy(e);
  cudaFree(x), cudaFree(w), cudaFree(y0), cudaFree(y1), cudaFree(y2), cudaFree(sink);
}

template <int M>
static void shapes(int reps, int sms, cudaStream_t s) {
  run_shape<M>("gpt3 W1", 6144, 12288, reps, sms, s);   // 12288 -> 6144
  run_shape<M>("gpt3 W2", 12288, 6144, reps, sms, s);   // 6144 -> 12288
  run_shape<M>("l7b W1", 11008, 4096, reps, sms, s);    // 4096 -> 11008
  run_shape<M>("l7b W2", 4096, 11008, reps, sms, s);    // 11008 -> 4096 (k % 32 == 0: 11008 = 344 x 32)
}

int main(int argc, char** argv) {
  int const reps = argc > 1 ? std::atoi(argv[1]) : 50;
  cudaStream_t s;
  int const sms = probe_device(&s);
  shapes<1>(reps, sms, s);
  shapes<2>(reps, sms, s);
  shapes<4>(reps, sms, s);
  shapes<8>(reps, sms, s);
  return 0;
}
