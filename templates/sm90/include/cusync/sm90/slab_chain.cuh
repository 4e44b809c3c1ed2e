// cusync sm90 backend: run() mode kStream's kernel at M <= kSlabMaxM, the slab chain: a two-GEMM chain
// Y = act2(act1(X W1 + b1) W2 + b2) in which no CTA waits for another's gemm1 output.
//
// CTA j owns a slab S_j of the hidden columns (whole columns of column-major W1, units of 8 of row-major W1). It
// computes H[:, S_j] = act1(X W1[:, S_j] + b1[S_j]) from the weights as the caller laid them out (column-major
// [N1, K1]: a warp per column; row-major [K1, N1]: a strip of each row), rounds it to the element type (the
// chain's intermediate; also stored where the chain keeps it), and at once its partial of the output,
// P_j = H[:, S_j] W2[S_j, :] over all N2 columns, from W2's rows S_j (contiguous in a row-major [K2, N2] weight).
// Gemm2's K slab is the H slab the same CTA just made, so every SM streams its share of both
// weights from the first cycle to the last, with no hand-over between the GEMMs.
//
// The synchronization left is the output's reduction. Each CTA writes P_j (fp32) to its workspace slot and
// posts slab j's semaphore (after __syncthreads, one thread: fence.acq_rel.gpu and an epoch-tagged release
// store). CTA q then owns a range of Y's columns: its warp 0 waits for every slab's post (one lane per slab,
// ld.acquire.gpu with __nanosleep backoff, bounded by %globaltimer; a timeout records the slab it waited on in
// the chain's SyncErrorInfo and the run goes on, so nothing hangs), and the CTA sums the slots in slot order
// (kGroups fixed ranges in parallel, then the ranges in order: the same bits run to run), adds b2, applies act2
// and stores Y. The cost is the partials' traffic, grid x M x N2 x 4 bytes each way, which is why the mode's
// kernel is this one only up to kSlabMaxM rows.
//
// With column-major W2 ([N2, K2], w2_col: torch.nn.Linear's layout) there are no partials (gather_phase): each
// CTA posts its slab as soon as its H is stored, then computes whole output columns from all of H once every
// slab is posted, each column's weights one contiguous run; it issues its first weight loads before the wait.
//
// All CTAs wait on each other, so the launch is cooperative (one CTA per SM, all resident at once). Each run
// reads its epoch from the run state; the last CTA to finish opens the next (close_run): no host reset, a
// CUDA graph replays correctly. Weights are read once per run with L1-bypassing loads; X sits in shared memory.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "cusync/ptx.cuh"
#include "cusync/semaphore.cuh"
#include "cusync/sm90/stream_gemm.cuh"
#include "cusync/sm90/stream_mode.h"
#include "cusync/sync_error.h"

namespace cusync::sm90::slab {

constexpr int kThreads = 512;
constexpr int kWarps = kThreads / 32;
constexpr int kUnit = kSlabUnit;
constexpr int kGroups = 16;  // the reduction's fixed slot ranges

// Hidden columns per unit of a slab: a 16-byte vector of row-major first weights (their strips are read in
// vectors), one column of column-major ones (each read whole by a warp), which keeps the widest slab within one
// column of the mean (the second phase waits for the widest).
__host__ __device__ constexpr int slab_unit(bool w1_col) { return w1_col ? 1 : kUnit; }
// Slab j of `grid`: hidden units [j U / grid, (j + 1) U / grid) of U = hidden / unit.
__host__ __device__ constexpr int slab_begin(int hidden, int grid, int j, int unit) {
  return int(int64_t(hidden / unit) * j / grid) * unit;
}
__host__ __device__ constexpr int max_slab(int hidden, int grid, int unit) {
  return ((hidden / unit + grid - 1) / grid) * unit;
}
// Output float4 columns [q0, q1) that CTA q reduces.
__host__ __device__ constexpr int out_begin(int n2, int grid, int q) { return int(int64_t(n2 / 4) * q / grid); }

using cusync::stream::detail::from_f;
using cusync::stream::detail::to_f;

namespace detail {

__device__ __forceinline__ uint4 ld_stream(void const* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p));
  return v;
}

__device__ __forceinline__ float act(int a, float r) {
  using namespace cusync::stream::detail;
  switch (a) {
    case int(cusync::stream::Act::kRelu): return fmaxf(r, 0.f);
    case int(cusync::stream::Act::kGelu): return gelu_erf(r);
    case int(cusync::stream::Act::kGeluTanh): return gelu_tanh(r);
    case int(cusync::stream::Act::kSilu): return silu(r);
    default: return r;
  }
}

template <typename T>
__device__ __forceinline__ void unpack8(uint4 v, float (&f)[8]) {
  T const* e = reinterpret_cast<T const*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_f(e[i]);
}

template <typename T>
__device__ __forceinline__ T round_t(float v) {
  return from_f<T>(v);
}

// acc[m] += f . vs[m][8 q .. 8 q + 8) for the kMPad rows of vs ([kMPad][8 kv] in shared memory).
template <typename T, int kMPad>
__device__ __forceinline__ void fma_vec(float const (&f)[8], T const* vs, int kv, int q, float (&acc)[kMPad]) {
#pragma unroll
  for (int m = 0; m < kMPad; ++m) {
    float xv[8];
    slab::detail::unpack8<T>(reinterpret_cast<uint4 const*>(vs + int64_t(m) * kv * 8)[q], xv);
#pragma unroll
    for (int i = 0; i < 8; ++i) acc[m] = fmaf(f[i], xv[i], acc[m]);
  }
}

// One warp's dot products of a contiguous weight column w (kv 16-byte vectors) with the kMPad rows of vs, from
// vector q0 on: lane l takes vectors q0 + l, q0 + l + 32, ... (the caller then sums the lanes, warp_sum).
template <typename T, int kMPad>
__device__ __forceinline__ void dot_col(T const* w, T const* vs, int kv, int q0, int lane, float (&acc)[kMPad]) {
  constexpr int kVecsInFlight = kMPad <= 2 ? 8 : 4;  // loads in flight within 128 registers
#pragma unroll kVecsInFlight
  for (int q = q0 + lane; q < kv; q += 32) {
    float f[8];
    slab::detail::unpack8<T>(slab::detail::ld_stream(w + int64_t(q) * 8), f);
    slab::detail::fma_vec<T, kMPad>(f, vs, kv, q, acc);
  }
}

// The lanes' sums in a fixed shuffle tree (every lane gets the total).
template <int kMPad>
__device__ __forceinline__ void warp_sum(float (&acc)[kMPad]) {
#pragma unroll
  for (int m = 0; m < kMPad; ++m)
#pragma unroll
    for (int o = 16; o > 0; o /= 2) acc[m] += __shfl_xor_sync(0xffffffffu, acc[m], o);
}

}  // namespace detail

// Shared memory of one CTA at kMPad rows (bytes): X, the slab's H, and the reductions (or with w2_col the
// gathered H), which reuse X's space.
template <int kMPad>
__host__ __device__ constexpr int64_t smem_bytes(int k1, int hidden, int n2, int grid, bool w1_col, bool w2_col) {
  int64_t const x = int64_t(kMPad) * k1 * 2;
  int64_t const red1 = int64_t(kThreads) * kUnit * kMPad * 4;                           // phase 1's per-thread sums
  int64_t const red3 = w2_col ? int64_t(kMPad) * hidden * 2                            // the gathered H
                              : int64_t(kGroups) * ((n2 / 4 + grid - 1) / grid) * kMPad * 16;  // phase 3's sums
  int64_t const big = x > red1 ? (x > red3 ? x : red3) : (red1 > red3 ? red1 : red3);
  return big + int64_t(kMPad) * 3 * max_slab(hidden, grid, slab_unit(w1_col)) * 4 + 16;
}

// With column-major second weights (w2_col): CTA j has posted its slab of H (stored where the chain keeps it);
// it owns output columns [n2 j / grid, n2 (j + 1) / grid), each a contiguous column of W2 ([n2, hidden]). Each
// warp issues the first loads of its first column (they do not depend on H), then warp 0 waits for every slab's
// post (a lane per slab, bounded), the CTA copies all of H from L2 into shared memory, and a warp per column
// computes its dot products as phase 1 does: no partials and no reduction pass, only the wait.
template <typename T, int kMPad>
__device__ __forceinline__ void gather_phase(SlabArgs const& a, unsigned char* smem, uint32_t epoch,
                                             SyncErrorInfo* error, uint64_t timeout_ns) {
  int const g = int(gridDim.x), j = int(blockIdx.x);
  int const warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (threadIdx.x == 0 && j != a.skip_post) post_store(a.posts + j, epoch);  // H's stores: the barrier before
  int const c0 = int(int64_t(a.n2) * j / g), c1 = int(int64_t(a.n2) * (j + 1) / g);
  int const kv = a.hidden / 8;
  T const* w2 = static_cast<T const*>(a.w2);
  constexpr int kAhead = kMPad <= 2 ? 8 : 4;
  int const first = c0 + warp;
  uint4 ahead[kAhead];
#pragma unroll
  for (int i = 0; i < kAhead; ++i) {
    int const q = lane + 32 * i;
    ahead[i] = first < c1 && q < kv ? detail::ld_stream(w2 + int64_t(first) * a.ldw2 + int64_t(q) * 8)
                                    : make_uint4(0, 0, 0, 0);
  }
  if (threadIdx.x < 32) {
    for (int p = lane; p < g; p += 32) {
      WaitSite const site{a.stage[1], a.stage[0], 0, j, 0, p, p};
      spin_wait_inline(a.posts + p, tagged(epoch, 1), timeout_ns, error, site);
    }
    __syncwarp();
  }
  __syncthreads();
  T* hg = reinterpret_cast<T*>(smem);  // [kMPad][hidden], rows past m zero
  for (int i = int(threadIdx.x); i < kMPad * kv; i += kThreads) {
    int const m = i / kv, v = i % kv;
    uint4 val = make_uint4(0, 0, 0, 0);
    if (m < a.m) val = __ldcg(reinterpret_cast<uint4 const*>(static_cast<T const*>(a.h) + m * a.ldh + int64_t(v) * 8));
    reinterpret_cast<uint4*>(hg)[i] = val;
  }
  __syncthreads();
  for (int c = first; c < c1; c += kWarps) {
    float acc[kMPad];
#pragma unroll
    for (int m = 0; m < kMPad; ++m) acc[m] = 0.f;
    int q0 = 0;
    if (c == first) {  // the loads issued before the wait, in the order dot_col takes them
#pragma unroll
      for (int i = 0; i < kAhead; ++i) {
        if (lane + 32 * i < kv) {
          float f[8];
          detail::unpack8<T>(ahead[i], f);
          detail::fma_vec<T, kMPad>(f, hg, kv, lane + 32 * i, acc);
        }
      }
      q0 = 32 * kAhead;
    }
    detail::dot_col<T, kMPad>(w2 + int64_t(c) * a.ldw2, hg, kv, q0, lane, acc);
    detail::warp_sum<kMPad>(acc);
    float const b = a.b2 != nullptr ? to_f(static_cast<T const*>(a.b2)[c]) : 0.f;
#pragma unroll
    for (int m = 0; m < kMPad; ++m)
      if (lane == m && m < a.m) static_cast<T*>(a.y)[m * a.ldy + c] = detail::round_t<T>(detail::act(a.act2, acc[m] + b));
  }
}

template <typename T, int kMPad>
__global__ void __launch_bounds__(kThreads, 1)
    slab_chain_kernel(SlabArgs const __grid_constant__ a, cusync::stream::StreamState* state, SyncErrorInfo* error,
                      uint64_t timeout_ns) {
  extern __shared__ __align__(16) unsigned char smem[];
  uint32_t const epoch = ptx::ld_relaxed_gpu(&state->epoch);
  int const g = int(gridDim.x), j = int(blockIdx.x);
  int const unit = slab_unit(a.w1_col);
  int const hcol = slab_begin(a.hidden, g, j, unit);
  int const s = slab_begin(a.hidden, g, j + 1, unit) - hcol;         // this slab's hidden columns
  int const loaded = a.gate == kNoGate ? s : 2 * s;                 // gemm1 weight columns it reads
  int const smax = max_slab(a.hidden, g, unit);
  int64_t const big =
      smem_bytes<kMPad>(a.k1, a.hidden, a.n2, g, a.w1_col, a.w2_col) - int64_t(kMPad) * 3 * smax * 4 - 16;
  T* xs = reinterpret_cast<T*>(smem);                               // [kMPad][k1]
  float* red = reinterpret_cast<float*>(smem);                      // reuses X after phase 1's loop
  float* hs = reinterpret_cast<float*>(smem + big);                 // [kMPad][3 smax]: gemm1's values, then H

  // X into shared memory (rows past m are zero), 16-byte copies.
  for (int i = int(threadIdx.x); i < kMPad * (a.k1 / 8); i += kThreads) {
    int const m = i / (a.k1 / 8), v = i % (a.k1 / 8);
    uint4 val = make_uint4(0, 0, 0, 0);
    if (m < a.m) val = *reinterpret_cast<uint4 const*>(static_cast<T const*>(a.x) + m * a.ldx + int64_t(v) * 8);
    reinterpret_cast<uint4*>(xs)[i] = val;
  }
  __syncthreads();

  // Phase 1: gemm1's value of each of the slab's weight columns, plus its bias, into hs.
  // The weight column of loaded column c: the slab's columns, or its gates then its ups. Interleaved gate | up
  // (groups of kUnit) column-major are addressed per hidden column (slabs of any width); row-major ones are read
  // in whole groups (slabs of whole units), loaded in their interleaved order.
  auto weight_col = [&](int c) {
    int const h = hcol + (c < s ? c : c - s), up = c < s ? 0 : 1;
    if (a.gate == kHalves) return h + up * a.hidden;
    if (a.gate == kInterleaved) return a.w1_col ? 2 * kUnit * (h / kUnit) + h % kUnit + up * kUnit : 2 * hcol + c;
    return hcol + c;
  };
  auto bias_of = [&](int c) { return a.b1 != nullptr ? to_f(static_cast<T const*>(a.b1)[weight_col(c)]) : 0.f; };
  int const kv = a.k1 / 8;
  int const warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
  if (a.w1_col) {
    // Column-major W1 ([n1w, k1], each weight column contiguous): a warp per column, lanes along K in 16-byte
    // vectors, then a fixed shuffle tree.
    for (int c = warp; c < loaded; c += kWarps) {
      float acc[kMPad];
#pragma unroll
      for (int m = 0; m < kMPad; ++m) acc[m] = 0.f;
      detail::dot_col<T, kMPad>(static_cast<T const*>(a.w1) + int64_t(weight_col(c)) * a.ldw1, xs, kv, 0, lane, acc);
      detail::warp_sum<kMPad>(acc);
#pragma unroll
      for (int m = 0; m < kMPad; ++m)
        if (lane == 0) hs[m * 3 * smax + c] = acc[m] + bias_of(c);
    }
    __syncthreads();
  } else {
    // Row-major W1 ([k1, n1w]): thread (kl, v) sums rows k = kl, kl + KL, ... of the slab's 8-column vector v,
    // then the k-lanes in order. Each row gives this CTA a strip of 16 bytes per vector: slower than whole
    // columns (the strips of all CTAs reach the memory out of order).
    int const nvec = loaded / kUnit;
    int const lanes_k = nvec > 0 ? kThreads / nvec : 0;
    int const v = nvec > 0 ? int(threadIdx.x) % nvec : 0, kl = nvec > 0 ? int(threadIdx.x) / nvec : kThreads;
    float acc[kMPad][8];
#pragma unroll
    for (int m = 0; m < kMPad; ++m)
#pragma unroll
      for (int i = 0; i < 8; ++i) acc[m][i] = 0.f;
    if (kl < lanes_k) {
      T const* w = static_cast<T const*>(a.w1) + weight_col(v * kUnit);
      constexpr int kRowsInFlight = kMPad <= 2 ? 8 : 4;  // loads in flight within 128 registers
#pragma unroll kRowsInFlight
      for (int k = kl; k < a.k1; k += lanes_k) {
        float f[8];
        detail::unpack8<T>(detail::ld_stream(w + int64_t(k) * a.ldw1), f);
#pragma unroll
        for (int m = 0; m < kMPad; ++m) {
          float const xv = to_f(xs[m * a.k1 + k]);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[m][i] = fmaf(f[i], xv, acc[m][i]);
        }
      }
    }
    __syncthreads();  // X is no longer read: `red` takes its space
    if (kl < lanes_k) {
#pragma unroll
      for (int m = 0; m < kMPad; ++m)
#pragma unroll
        for (int i = 0; i < 8; ++i) red[(int64_t(kl) * loaded + v * kUnit + i) * kMPad + m] = acc[m][i];
    }
    __syncthreads();
    for (int t = int(threadIdx.x); t < loaded * kMPad; t += kThreads) {
      int const c = t / kMPad, m = t % kMPad;
      float sum = 0.f;
      for (int l = 0; l < lanes_k; ++l) sum += red[(int64_t(l) * loaded + c) * kMPad + m];
      hs[m * 3 * smax + c] = sum + bias_of(c);
    }
    __syncthreads();
  }
  // H (the element type's rounding, as the chain's intermediate holds it), stored and kept for phase 2.
  for (int t = int(threadIdx.x); t < s * kMPad; t += kThreads) {
    int const c = t % s, m = t / s;
    float const* row = hs + m * 3 * smax;
    float hv;
    if (a.gate == kNoGate) {
      hv = detail::act(a.act1, row[c]);
    } else if (a.gate == kInterleaved) {  // the fused gated epilogue: silu(gate) * up from the fp32 sums
      int const gc = a.w1_col ? c : 2 * kUnit * (c / kUnit) + c % kUnit, uc = a.w1_col ? s + c : gc + kUnit;
      hv = cusync::stream::detail::silu(row[gc]) * row[uc];
    } else {  // gemm1 stores gate | up, and the SwiGLU stage reads them back
      T const gt = detail::round_t<T>(row[c]), up = detail::round_t<T>(row[s + c]);
      if (m < a.m && a.h_raw != nullptr) {
        T* raw = static_cast<T*>(a.h_raw) + m * a.ldh_raw;
        raw[hcol + c] = gt;
        raw[a.hidden + hcol + c] = up;
      }
      hv = cusync::stream::detail::silu(to_f(gt)) * to_f(up);
    }
    T const ht = detail::round_t<T>(hv);
    if (m < a.m) static_cast<T*>(a.h)[m * a.ldh + hcol + c] = ht;
    hs[m * 3 * smax + 2 * smax + c] = to_f(ht);  // the row's last third: H
  }
  __syncthreads();
  if (a.w2_col) {
    gather_phase<T, kMPad>(a, smem, epoch, error, timeout_ns);
    cusync::stream::close_run(state, epoch);
    return;
  }

  // Phase 2: P_j = H[:, S_j] W2[S_j, :]; a thread per 8-column vector of Y (two at a time), over the slab's rows.
  int const nv = a.n2 / 8;
  float* slot = a.ws + int64_t(j) * kMPad * a.n2;
  for (int v0 = int(threadIdx.x); v0 < nv; v0 += 2 * kThreads) {
    int const va = v0, vb = v0 + kThreads;
    bool const has_b = vb < nv;
    float pa[kMPad][8], pb[kMPad][8];
#pragma unroll
    for (int m = 0; m < kMPad; ++m)
#pragma unroll
      for (int i = 0; i < 8; ++i) pa[m][i] = pb[m][i] = 0.f;
    T const* w = static_cast<T const*>(a.w2) + int64_t(hcol) * a.ldw2;
    constexpr int kRowsInFlight = kMPad <= 2 ? 8 : 3;  // loads in flight within 128 registers
#pragma unroll kRowsInFlight
    for (int r = 0; r < s; ++r) {
      T const* row = w + int64_t(r) * a.ldw2;
      float fa[8], fb[8];
      detail::unpack8<T>(detail::ld_stream(row + int64_t(va) * 8), fa);
      detail::unpack8<T>(has_b ? detail::ld_stream(row + int64_t(vb) * 8) : make_uint4(0, 0, 0, 0), fb);
#pragma unroll
      for (int m = 0; m < kMPad; ++m) {
        float const hv = hs[m * 3 * smax + 2 * smax + r];
#pragma unroll
        for (int i = 0; i < 8; ++i) {
          pa[m][i] = fmaf(fa[i], hv, pa[m][i]);
          pb[m][i] = fmaf(fb[i], hv, pb[m][i]);
        }
      }
    }
#pragma unroll
    for (int m = 0; m < kMPad; ++m) {
      float4* da = reinterpret_cast<float4*>(slot + int64_t(m) * a.n2 + int64_t(va) * 8);
      da[0] = make_float4(pa[m][0], pa[m][1], pa[m][2], pa[m][3]);
      da[1] = make_float4(pa[m][4], pa[m][5], pa[m][6], pa[m][7]);
      if (has_b) {
        float4* db = reinterpret_cast<float4*>(slot + int64_t(m) * a.n2 + int64_t(vb) * 8);
        db[0] = make_float4(pb[m][0], pb[m][1], pb[m][2], pb[m][3]);
        db[1] = make_float4(pb[m][4], pb[m][5], pb[m][6], pb[m][7]);
      }
    }
  }
  // Post slab j: every thread's partials stored, then one thread's fence and release store.
  __syncthreads();
  if (threadIdx.x == 0 && j != a.skip_post) post_store(a.posts + j, epoch);

  // Phase 3: wait for every slab (warp 0, a lane per slab), then sum this CTA's output columns in slot order.
  if (threadIdx.x < 32) {
    for (int p = int(threadIdx.x); p < g; p += 32) {
      WaitSite const site{a.stage[1], a.stage[0], 0, j, 0, p, p};
      spin_wait_inline(a.posts + p, tagged(epoch, 1), timeout_ns, error, site);
    }
    __syncwarp();
  }
  __syncthreads();
  int const q0 = out_begin(a.n2, g, j), q1 = out_begin(a.n2, g, j + 1), nq = q1 - q0;
  int const items = nq * a.m;
  float4* part = reinterpret_cast<float4*>(smem);  // [kGroups][items]
  for (int t = int(threadIdx.x); t < items * kGroups; t += kThreads) {
    int const grp = t / items, it = t % items;
    int const m = it / nq, q = q0 + it % nq;
    int const s0 = int(int64_t(g) * grp / kGroups), s1 = int(int64_t(g) * (grp + 1) / kGroups);
    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll 4
    for (int p = s0; p < s1; ++p) {  // written by other CTAs: L2, not L1
      float4 const v4 = __ldcg(reinterpret_cast<float4 const*>(a.ws + (int64_t(p) * kMPad + m) * a.n2) + q);
      sum.x += v4.x, sum.y += v4.y, sum.z += v4.z, sum.w += v4.w;
    }
    part[grp * items + it] = sum;
  }
  __syncthreads();
  for (int it = int(threadIdx.x); it < items; it += kThreads) {
    int const m = it / nq, q = q0 + it % nq;
    float4 sum = part[it];
    for (int grp = 1; grp < kGroups; ++grp) {
      float4 const v4 = part[grp * items + it];
      sum.x += v4.x, sum.y += v4.y, sum.z += v4.z, sum.w += v4.w;
    }
    float o[4] = {sum.x, sum.y, sum.z, sum.w};
    alignas(8) T out[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      float const b = a.b2 != nullptr ? to_f(static_cast<T const*>(a.b2)[4 * q + i]) : 0.f;
      out[i] = detail::round_t<T>(detail::act(a.act2, o[i] + b));
    }
    *reinterpret_cast<uint2*>(static_cast<T*>(a.y) + m * a.ldy + 4 * int64_t(q)) = *reinterpret_cast<uint2 const*>(out);
  }
  cusync::stream::close_run(state, epoch);
}

// ---- host side ----

// nullptr if the kernel can take `a` on `grid` CTAs at kMPad rows, else what is wrong.
template <int kMPad>
inline char const* slab_problem(SlabArgs const& a, int grid, int max_smem) {
  auto misaligned = [](void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) != 0; };
  if (a.m < 1 || a.m > kMPad) return "m must be 1 .. kMPad";
  if (grid < 1) return "grid must be at least 1";
  if (a.k1 % 8 || a.hidden % kUnit || a.n2 % 8 || a.k1 < 8 || a.hidden < kUnit || a.n2 < 8)
    return "k1, hidden and n2 must be positive multiples of 8";
  if (a.ldx % 8 || a.ldw1 % 8 || a.ldw2 % 8 || a.ldy % 4 || a.ldh < a.hidden || a.ldx < a.k1 || a.ldy < a.n2)
    return "leading dimensions must hold a row (x, w1, w2 in multiples of 8 elements, y of 4)";
  if (a.ldw1 < (a.w1_col ? a.k1 : a.gate == kNoGate ? a.hidden : 2 * a.hidden) || a.ldw2 < (a.w2_col ? a.hidden : a.n2))
    return "a weight's ld is below its row";
  if (a.w2_col && (a.ldh % 8 || misaligned(a.h))) return "with column-major w2, h must be 16-byte aligned, ldh a multiple of 8";
  if (a.gate == kHalves && (a.h_raw != nullptr && a.ldh_raw < 2 * a.hidden)) return "ldh_raw is below 2 hidden";
  if (misaligned(a.x) || misaligned(a.w1) || misaligned(a.w2) || (reinterpret_cast<uintptr_t>(a.y) & 7u) != 0 ||
      misaligned(a.ws))
    return "x, w1, w2 and the workspace must be 16-byte aligned, y 8-byte";
  if (a.h == nullptr || a.y == nullptr || (a.ws == nullptr && !a.w2_col) || a.posts == nullptr) return "null pointer";
  if (smem_bytes<kMPad>(a.k1, a.hidden, a.n2, grid, a.w1_col, a.w2_col) > max_smem)
    return "k1 too large for X in shared memory";
  return nullptr;
}

// The current device's opt-in shared memory per block, queried once per device (run() is on the hot path).
inline cudaError_t optin_smem(int* bytes) {
  constexpr int kDevices = 64;
  static std::atomic<int> cached[kDevices] = {};
  int dev = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e != cudaSuccess) return e;
  if (dev >= 0 && dev < kDevices && (*bytes = cached[dev].load(std::memory_order_relaxed)) > 0) return cudaSuccess;
  e = cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
  if (e == cudaSuccess && dev >= 0 && dev < kDevices) cached[dev].store(*bytes, std::memory_order_relaxed);
  return e;
}

template <typename T, int kMPad>
inline cudaError_t slab_prepare() {
  int optin = 0;
  cudaError_t e = optin_smem(&optin);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(slab_chain_kernel<T, kMPad>, cudaFuncAttributeMaxDynamicSharedMemorySize, optin);
  return e;
}

// A cooperative launch (every CTA resident at once: they wait on each other's posts).
template <typename T, int kMPad>
inline cudaError_t slab_launch(SlabArgs const& a, int grid, cusync::stream::StreamState* state, SyncErrorInfo* error,
                               uint64_t timeout_ns, cudaStream_t stream) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(unsigned(kThreads));
  cfg.dynamicSmemBytes = size_t(smem_bytes<kMPad>(a.k1, a.hidden, a.n2, grid, a.w1_col, a.w2_col));
  cfg.stream = stream;
  cudaLaunchAttribute attr;
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  return cudaLaunchKernelEx(&cfg, slab_chain_kernel<T, kMPad>, a, state, error, timeout_ns);
}

template <typename F>
inline void with_m_pad(int m, F&& f) {
  if (m <= 1) f(std::integral_constant<int, 1>{});
  else if (m <= 2) f(std::integral_constant<int, 2>{});
  else f(std::integral_constant<int, 4>{});
}

template <typename T>
Status prepare() {
  cudaError_t e = cudaSuccess;
  for (int m : {1, 2, 4}) {
    with_m_pad(m, [&](auto mc) {
      if (e == cudaSuccess) e = slab_prepare<T, decltype(mc)::value>();
    });
  }
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

template <typename T>
Status run(SlabRun const& r, cudaStream_t stream, char const** why) {
  char const* problem = r.state == nullptr ? "no run state" : r.args.m > kSlabMaxM ? "m above kSlabMaxM" : nullptr;
  int optin = 0;
  if (optin_smem(&optin) != cudaSuccess) return Status::kCudaError;
  cudaError_t e = cudaSuccess;
  with_m_pad(r.args.m, [&](auto mc) {
    constexpr int kMPad = decltype(mc)::value;
    if (problem == nullptr) problem = slab_problem<kMPad>(r.args, r.grid, optin);
    if (problem == nullptr) {
      e = slab_launch<T, kMPad>(r.args, r.grid, static_cast<cusync::stream::StreamState*>(r.state), r.error,
                                r.timeout_ns, stream);
    }
  });
  if (problem != nullptr) {
    if (why != nullptr) *why = problem;
    return Status::kInvalidArgument;
  }
  return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

}  // namespace cusync::sm90::slab

namespace cusync::sm90 {

static_assert(sizeof(cusync::stream::StreamState) <= size_t(kStreamStateBytes), "the run state fits its bytes");

// The function table of the slab kernel for element type T (__half or __nv_bfloat16).
template <typename T>
SlabKernels const& slab_kernels() {
  static constexpr SlabKernels kKernels{&slab::prepare<T>, &slab::run<T>};
  return kKernels;
}

}  // namespace cusync::sm90
