// cusync sm90 attention: the layer's small kernels of our own (rotary + cache append, split-KV decode
// and its combine) and the fused prompt stage derived from CUTLASS's Hopper FMHA
// (CUTLASS_DIR/examples/88_hopper_fmha: TMA loads, warp-specialized wgmma, online softmax in registers).
//
// Buffers (one layer, one GPU's shard; G = heads / kv_heads query heads share one KV head):
//   qkv     [rows, (Hq + 2 Hkv) dh]      the qkv GEMM's output, rows = batch x new tokens
//   q       [rows, Hq dh]                rotated queries, token-major (head h at columns h dh)
//   k_cache [batch, capacity, Hkv, dh]   keys, rotated; the new tokens appended at cache_len[b] + t
//   v_cache [batch, capacity, Hkv, dh]
//   o       [rows, Hq dh]                attention output, token-major: proj's A operand as is
//
// GQA packing: with Hkv = 1 (or G = 1) query row r = t G + g of a sequence is head g of token t, at
// r x (Hkv dh) elements: one stride. So the FMHA's "query length" is new_tokens x G and one CTA's K and V
// tiles serve G heads (as FA2/FA3 pack GQA heads at decode). Causal masking is bottom-right aligned:
// token t of a sequence with L cached tokens sees keys [0, L + t].
#pragma once

#include <cstdint>
#include <cuda_runtime.h>

#include "cutlass/cutlass.h"
#include "cutlass/numeric_types.h"
#include "cute/tensor.hpp"

// CUTLASS_DIR/examples/88_hopper_fmha (cusync-gen fetch-cutlass copies it there).
#include "collective/fmha_fusion.hpp"
#include "device/device_universal.hpp"
#include "kernel/fmha_kernel_builder.hpp"

namespace cusync::attention_sm90 {

// ------------------------------------------------------------------------------------------------
// PDL: a kernel launched with programmatic stream serialization may start while the previous kernel
// drains; griddepcontrol.wait returns once that kernel has completed and its writes are visible.
__device__ __forceinline__ void wait_for_previous_kernel() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

template <class T>
__device__ __forceinline__ float to_float(T x) { return float(x); }

// ------------------------------------------------------------------------------------------------
// Rotary embedding (LLaMA's, in the half-split pairing of Hugging Face's rotate_half: element i pairs
// with i + dh/2; frequency base^(-2i/dh), angle = position x frequency, fp32) and the cache append.
// One thread per (row, head slot, 8 pairs): 16-byte loads and stores of elements [i, i + 8) and
// [i + dh/2, i + dh/2 + 8). Slots: Hq query heads, Hkv key heads, Hkv value heads (copied).
constexpr int kRopeVector = 8;

// The sequence of a row: row / new_tokens, or with seq_start (a varlen prompt's first row of each of the
// `batch` sequences, ascending) the last sequence starting at or before it.
__device__ __forceinline__ int sequence_of_row(int row, int new_tokens, int const* __restrict__ seq_start, int batch) {
  if (seq_start == nullptr) return row / new_tokens;
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    int const mid = (lo + hi + 1) / 2;
    if (seq_start[mid] <= row) lo = mid; else hi = mid - 1;
  }
  return lo;
}

template <class T, int kHeadDim>
__global__ void rope_append(T const* __restrict__ qkv, T* __restrict__ q, T* __restrict__ k_cache,
                            T* __restrict__ v_cache, int const* __restrict__ cache_len,
                            int const* __restrict__ seq_start, int batch, int rows, int new_tokens,
                            int heads, int kv_heads, int capacity, float rotary_base, bool rotary) {
  static_assert(kHeadDim % (2 * kRopeVector) == 0, "head_dim must be a multiple of 16");
  wait_for_previous_kernel();
  constexpr int kHalf = kHeadDim / 2, kVectors = kHalf / kRopeVector;
  int const slots = heads + 2 * kv_heads;
  int64_t const i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= int64_t(rows) * slots * kVectors) return;
  int const pair = int(i % kVectors) * kRopeVector;
  int const slot = int((i / kVectors) % slots);
  int const row = int(i / (int64_t(kVectors) * slots));
  int const b = sequence_of_row(row, new_tokens, seq_start, batch);
  int const t = seq_start == nullptr ? row % new_tokens : row - seq_start[b];
  int const pos = cache_len[b] + t;
  bool const is_cache = slot >= heads;
  if (is_cache && (pos < 0 || pos >= capacity)) return;  // past the sequence's slot: never into the next one's
  T const* src = qkv + int64_t(row) * slots * kHeadDim + int64_t(slot) * kHeadDim;
  uint4 lo = *reinterpret_cast<uint4 const*>(src + pair), hi = *reinterpret_cast<uint4 const*>(src + pair + kHalf);
  bool const is_v = slot >= heads + kv_heads;
  if (rotary && !is_v) {
    T* x0 = reinterpret_cast<T*>(&lo);
    T* x1 = reinterpret_cast<T*>(&hi);
#pragma unroll
    for (int e = 0; e < kRopeVector; ++e) {
      float const freq = exp2f(-float(2 * (pair + e)) / float(kHeadDim) * log2f(rotary_base));
      float sn, cs;
      sincosf(float(pos) * freq, &sn, &cs);
      float const a = to_float(x0[e]), c = to_float(x1[e]);
      x0[e] = T(a * cs - c * sn);
      x1[e] = T(c * cs + a * sn);
    }
  }
  T* dst;
  if (slot < heads) {
    dst = q + int64_t(row) * heads * kHeadDim + int64_t(slot) * kHeadDim;
  } else {
    int const kvh = is_v ? slot - heads - kv_heads : slot - heads;
    T* cache = is_v ? v_cache : k_cache;
    dst = cache + ((int64_t(b) * capacity + pos) * kv_heads + kvh) * kHeadDim;
  }
  *reinterpret_cast<uint4*>(dst + pair) = lo;
  *reinterpret_cast<uint4*>(dst + pair + kHalf) = hi;
}

// ------------------------------------------------------------------------------------------------
// Generation (one new token per sequence): flash-decoding. A CTA takes kSplit consecutive keys of one
// sequence's KV head and all G query heads of that KV head (their K and V loads shared), and writes an
// unnormalized fp32 partial output with its row max and sum; the combine kernel reduces the splits in
// a fixed order (deterministic, and the split size does not depend on the batch). CUDA cores, fp32:
// the stage is bound by reading the cache (G x dh x 4 FLOP per 4 dh bytes of K and V).
constexpr int kDecodeSimtSplit = 128;  // keys per CTA = threads per CTA (the CUDA-core kernel)
constexpr int kDecodeThreads = 128;

template <int kHeadDim, int kGroup>
struct DecodeSmem {
  static constexpr int kRowPad = 8;  // 16 bytes: rows 16 B apart in banks, so 8 lanes' 16-byte loads hit 32 banks
  static constexpr int kKRow = kHeadDim + kRowPad;
  template <class T>
  static constexpr size_t bytes() {
    return size_t(kDecodeSimtSplit) * kKRow * sizeof(T) + size_t(kDecodeSimtSplit) * kHeadDim * sizeof(T) +
           size_t(kGroup) * kHeadDim * sizeof(float) + size_t(kGroup) * kDecodeSimtSplit * sizeof(float) +
           size_t(2) * (kDecodeThreads / 32) * kGroup * sizeof(float);
  }
};

__device__ __forceinline__ void cp_async_16(void* smem, void const* gmem, bool valid) {
  unsigned const s = unsigned(__cvta_generic_to_shared(smem));
  int const bytes = valid ? 16 : 0;  // 0: zero-fill (keys past the sequence's length)
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(s), "l"(gmem), "r"(bytes) : "memory");
}

// The keys sequence b attends to at a generation step: its cache and the new token. A cache_len outside
// 0 .. capacity - 1 (where rope_append appended nothing) is clamped into the sequence's slot, 1 .. capacity
// keys: that sequence's output is then meaningless (the host documents the bound; the device value cannot
// be checked without a synchronization), but no kernel reads outside its slot or the partial buffers.
__device__ __forceinline__ int decode_keys(int const* __restrict__ cache_len, int b, int capacity) {
  int const len = cache_len[b];
  return len < 0 ? 1 : len >= capacity ? capacity : len + 1;
}

template <class T, int kHeadDim, int kGroup>
__global__ void __launch_bounds__(kDecodeThreads)
decode_split(T const* __restrict__ q, T const* __restrict__ k_cache, T const* __restrict__ v_cache,
             int const* __restrict__ cache_len, float* __restrict__ o_part, float* __restrict__ ml_part,
             int kv_heads, int capacity, int max_splits, float scale_log2) {
  static_assert(kHeadDim % 8 == 0 && kHeadDim <= kDecodeThreads && kDecodeThreads % kHeadDim == 0,
                "head_dim must be 64 or 128 for the decode kernel");
  static_assert(kGroup >= 1 && kGroup <= 16, "kv_heads must leave at most 16 query heads per KV head");
  using Smem = DecodeSmem<kHeadDim, kGroup>;
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* sK = reinterpret_cast<T*>(smem_raw);                              // (kSplit, kKRow)
  T* sV = sK + kDecodeSimtSplit * Smem::kKRow;                             // (kSplit, dh)
  float* sQ = reinterpret_cast<float*>(sV + kDecodeSimtSplit * kHeadDim);  // (G, dh), pre-scaled by scale_log2
  float* sP = sQ + kGroup * kHeadDim;                                  // (G, kSplit)
  float* sRed = sP + kGroup * kDecodeSimtSplit;                            // (2, warps, G)

  wait_for_previous_kernel();
  int const split = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
  int const keys = decode_keys(cache_len, b, capacity);  // the new token was appended
  int const first = split * kDecodeSimtSplit;
  if (first >= keys) return;          // the combine reads only ceil(keys / kSplit) splits
  int const valid = min(kDecodeSimtSplit, keys - first);
  int const tid = threadIdx.x, lane = tid % 32, warp = tid / 32;

  // K and V rows [first, first + kSplit) of (b, kvh): 16-byte cp.async, rows past `keys` zero-filled.
  constexpr int kChunks = kHeadDim / 8;
  for (int c = tid; c < kDecodeSimtSplit * kChunks; c += kDecodeThreads) {
    int const key = c / kChunks, col = (c % kChunks) * 8;
    bool const ok = key < valid;
    int64_t const off = ((int64_t(b) * capacity + first + (ok ? key : 0)) * kv_heads + kvh) * kHeadDim + col;
    cp_async_16(sK + key * Smem::kKRow + col, k_cache + off, ok);
    cp_async_16(sV + key * kHeadDim + col, v_cache + off, ok);
  }
  asm volatile("cp.async.commit_group;" ::: "memory");
  // The G query heads of this KV head: q row b (one token), heads kvh G .. kvh G + G - 1.
  for (int i = tid; i < kGroup * kHeadDim; i += kDecodeThreads) {
    sQ[i] = to_float(q[(int64_t(b) * kv_heads * kGroup + int64_t(kvh) * kGroup) * kHeadDim + i]) * scale_log2;
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");
  __syncthreads();

  // Scores: thread tid owns key tid, for every head g (log2 units).
  float s[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) s[g] = 0.f;
  T const* krow = sK + tid * Smem::kKRow;
#pragma unroll 4
  for (int d = 0; d < kHeadDim; d += 8) {
    uint4 const raw = *reinterpret_cast<uint4 const*>(krow + d);
    T const* kv8 = reinterpret_cast<T const*>(&raw);
    float kf[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) kf[j] = to_float(kv8[j]);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
#pragma unroll
      for (int j = 0; j < 8; ++j) s[g] = fmaf(sQ[g * kHeadDim + d + j], kf[j], s[g]);
    }
  }
  bool const live = tid < valid;
  // Row max over the split (warp shuffles, then across warps).
  float m[kGroup], l[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    float v = live ? s[g] : -INFINITY;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    if (lane == 0) sRed[warp * kGroup + g] = v;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    float v = sRed[g];
#pragma unroll
    for (int w = 1; w < kDecodeThreads / 32; ++w) v = fmaxf(v, sRed[w * kGroup + g]);
    m[g] = v;  // finite: key `first` is always live
    float const p = live ? exp2f(s[g] - v) : 0.f;
    sP[g * kDecodeSimtSplit + tid] = p;
    float sum = p;
#pragma unroll
    for (int o = 16; o > 0; o /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, o);
    if (lane == 0) sRed[(kDecodeThreads / 32 + warp) * kGroup + g] = sum;
  }
  __syncthreads();
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    float v = 0.f;
#pragma unroll
    for (int w = 0; w < kDecodeThreads / 32; ++w) v += sRed[(kDecodeThreads / 32 + w) * kGroup + g];
    l[g] = v;
  }

  // P V: thread owns column d = tid % dh of heads g = tid / dh, tid / dh + per_col, ...
  constexpr int kPerCol = kDecodeThreads / kHeadDim;
  int const d = tid % kHeadDim, g0 = tid / kHeadDim;
  float acc[kGroup];
#pragma unroll
  for (int g = 0; g < kGroup; ++g) acc[g] = 0.f;
  for (int key = 0; key < valid; ++key) {
    float const v = to_float(sV[key * kHeadDim + d]);
#pragma unroll
    for (int g = 0; g < kGroup; ++g) {
      if (g % kPerCol == g0) acc[g] = fmaf(sP[g * kDecodeSimtSplit + key], v, acc[g]);
    }
  }
  // Partials: o_part (b, kvh, split, g, dh); ml_part (b, kvh, split, g, {m, l}).
  int64_t const base = (int64_t(b) * kv_heads + kvh) * max_splits + split;
#pragma unroll
  for (int g = 0; g < kGroup; ++g) {
    if (g % kPerCol == g0) o_part[(base * kGroup + g) * kHeadDim + d] = acc[g];
  }
  if (tid < kGroup) {
    ml_part[(base * kGroup + tid) * 2 + 0] = m[tid];
    ml_part[(base * kGroup + tid) * 2 + 1] = l[tid];
  }
}

// The same split on tensor cores (mma.sync m16n8k16, fp32 accumulation), as FlashAttention-2 decodes:
// the G query heads are rows of one 16-row A tile (rows past G are zero), each warp scores 32 of the
// split's keys (S = Q K^T: B fragments read straight from the K tile), keeps its probabilities in
// registers as the A fragments of P V (V's B fragments by ldmatrix.trans), and the four warps' partial
// outputs (all scaled by the split's max) are summed in a fixed order. Per key it issues a few shared
// loads where the CUDA-core kernel issues G multiply-adds, so the split is bound by its cache reads.
template <class T>
__device__ __forceinline__ uint32_t pack2(float lo, float hi) {
  T const a = T(lo), b = T(hi);
  uint16_t const ua = reinterpret_cast<uint16_t const&>(a), ub = reinterpret_cast<uint16_t const&>(b);
  return uint32_t(ua) | (uint32_t(ub) << 16);
}

template <class T>
__device__ __forceinline__ void mma_16816(float (&c)[4], uint32_t const (&a)[4], uint32_t b0, uint32_t b1) {
  if constexpr (std::is_same_v<T, cutlass::bfloat16_t>) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                 : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}

// One split = kSplit consecutive keys (the plan's decode_split, a multiple of kDecodeStageKeys) of one
// (sequence, KV head): a work unit. Units are numbered u = (b x kv_heads + kvh) x splits + split
// (split_major = false: a sequence's splits side by side) or u = split x batch x kv_heads + b x kv_heads +
// kvh (true: the same split of every sequence side by side), and CTA c takes units c, c + gridDim.x, ...
// (the default grid has a CTA per unit; a persistent grid has the CTAs that fit at once). A CTA walks the
// stages of its units as one sequence through a kStages-deep cp.async ring of kDecodeStageKeys-key stages
// (K and V, 64 x 2 x dh x 2 B = 32 KB at dh 128): the loads of stage n + kStages - 1 are issued before
// stage n is computed, across unit boundaries, so kStages - 1 stages are in flight while it computes.
// Two CTAs fit on an SM (3 x 34 KB each); every thread issues 16-byte cp.async (keys past the unit's end
// zero-filled).
// Each warp takes 16 keys of every stage and keeps its own online softmax state (row max, sum, output
// fragments) across the unit's stages; at the unit's end the four warps' states are merged in warp order
// through the ring slot of the unit's last stage (free: the loads in flight fill the other slots). A
// unit's arithmetic does not depend on which CTA runs it, the grid or the ring: bitwise the same results.
constexpr int kDecodeStageKeys = 64;
constexpr int kDecodeStages = 3;

template <int kHeadDim>
struct DecodeMmaSmem {
  static constexpr int kRow = kHeadDim + 8;  // 16 bytes of padding: 8 rows' 16-byte pieces fall in 32 banks
  static constexpr int kStageElems = 2 * kDecodeStageKeys * kRow;  // K then V
  template <class T>
  static constexpr size_t bytes() {
    return size_t(kDecodeStages) * kStageElems * sizeof(T) + size_t(2) * (kDecodeThreads / 32) * 16 * sizeof(float);
  }
};

// This CTA's next unit with keys at or after unit u (units past a sequence's keys are skipped), or none.
struct DecodeUnit {
  int u = 0, b = 0, kvh = 0, split = 0, first = 0, valid = 0, stages = 0;
  static constexpr int kNone = -1;

  template <int kSplit>
  __device__ __forceinline__ static DecodeUnit find(int u, int units, int splits, int kv_heads, bool split_major,
                                                    int const* __restrict__ cache_len, int capacity) {
    DecodeUnit w;
    int const heads = units / splits;  // batch x kv_heads
    for (; u < units; u += int(gridDim.x)) {
      w.split = split_major ? u / heads : u % splits;
      int const bh = split_major ? u % heads : u / splits;
      w.kvh = bh % kv_heads, w.b = bh / kv_heads;
      int const keys = decode_keys(cache_len, w.b, capacity);
      w.first = w.split * kSplit;
      if (w.first < keys) {
        w.u = u;
        w.valid = min(kSplit, keys - w.first);
        w.stages = (w.valid + kDecodeStageKeys - 1) / kDecodeStageKeys;
        return w;
      }
    }
    w.u = kNone;
    return w;
  }
};

template <class T, int kHeadDim, int kGroup, int kSplit>
__global__ void __launch_bounds__(kDecodeThreads, 2)
decode_split_mma(T const* __restrict__ q, T const* __restrict__ k_cache, T const* __restrict__ v_cache,
                 int const* __restrict__ cache_len, float* __restrict__ o_part, float* __restrict__ ml_part,
                 int kv_heads, int capacity, int max_splits, int splits, int units, bool split_major, float scale_log2) {
  static_assert(kHeadDim % 16 == 0, "head_dim must be a multiple of 16 for the mma decode");
  static_assert(kGroup >= 1 && kGroup <= 16, "at most 16 query heads per KV head (one 16-row mma tile)");
  static_assert(kDecodeStageKeys == 4 * 16 && kDecodeThreads == 128, "four warps of 16 keys per stage");
  static_assert(kSplit % kDecodeStageKeys == 0 && kSplit > 0, "the decode split is whole ring stages");
  constexpr int kStages = kDecodeStages;
  constexpr int kWarps = kDecodeThreads / 32, kRow = DecodeMmaSmem<kHeadDim>::kRow;
  constexpr int kStageElems = DecodeMmaSmem<kHeadDim>::kStageElems;
  static_assert(kWarps * 16 * kHeadDim * sizeof(float) <= kStageElems * sizeof(T),
                "the warps' partial outputs fit in one ring slot");
  extern __shared__ __align__(16) unsigned char smem_raw[];
  T* ring = reinterpret_cast<T*>(smem_raw);                                      // kStages x (K, V) stages
  float* sMax = reinterpret_cast<float*>(ring + kStages * kStageElems);          // (warps, 16)
  float* sSum = sMax + kWarps * 16;                                              // (warps, 16)

  wait_for_previous_kernel();
  int const tid = threadIdx.x, lane = tid % 32, warp = tid / 32;
  int const gid = lane / 4, quad = (lane % 4) * 2;  // mma fragment row and column pair

  // The load cursor runs kStages - 1 stages ahead of the compute cursor, across units.
  DecodeUnit ld = DecodeUnit::find<kSplit>(int(blockIdx.x), units, splits, kv_heads, split_major, cache_len, capacity);
  DecodeUnit cp = ld;
  if (cp.u == DecodeUnit::kNone) return;
  int ld_j = 0;  // the load cursor's next stage in its unit
  // Stage j of unit w into ring slot `slot`: keys [first + 64 j, +64) of (b, kvh); keys past `valid` zero-filled.
  constexpr int kChunks = kHeadDim / 8;
  auto load_next = [&](int slot) {
    if (ld.u == DecodeUnit::kNone) return;
    T* sK = ring + slot * kStageElems;
    T* sV = sK + kDecodeStageKeys * kRow;
    for (int c = tid; c < kDecodeStageKeys * kChunks; c += kDecodeThreads) {
      int const key = c / kChunks, col = (c % kChunks) * 8;
      int const k = ld_j * kDecodeStageKeys + key;
      bool const ok = k < ld.valid;
      int64_t const off = ((int64_t(ld.b) * capacity + ld.first + (ok ? k : 0)) * kv_heads + ld.kvh) * kHeadDim + col;
      cp_async_16(sK + key * kRow + col, k_cache + off, ok);
      cp_async_16(sV + key * kRow + col, v_cache + off, ok);
    }
    if (++ld_j == ld.stages) {
      ld = DecodeUnit::find<kSplit>(ld.u + int(gridDim.x), units, splits, kv_heads, split_major, cache_len, capacity);
      ld_j = 0;
    }
  };
#pragma unroll
  for (int j = 0; j < kStages - 1; ++j) {
    load_next(j);
    asm volatile("cp.async.commit_group;" ::: "memory");  // empty groups keep the count uniform
  }

  constexpr int kSteps = kHeadDim / 16;
  int n = 0;  // the CTA's stage sequence number: ring slot n % kStages
  while (cp.u != DecodeUnit::kNone) {
    // Q as A fragments for all of head_dim: rows gid and gid + 8 (query heads; zero past G).
    uint32_t qa[kSteps][4];
    T const* qrow = q + (int64_t(cp.b) * kv_heads * kGroup + int64_t(cp.kvh) * kGroup) * kHeadDim;
#pragma unroll
    for (int ks = 0; ks < kSteps; ++ks) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // a0/a2: columns quad, a1/a3 rows + 8; half 1: columns + 8
        int const col = ks * 16 + half * 8 + quad;
        uint32_t lo = 0, hi = 0;
        if (gid < kGroup) lo = *reinterpret_cast<uint32_t const*>(qrow + gid * kHeadDim + col);
        if (gid + 8 < kGroup) hi = *reinterpret_cast<uint32_t const*>(qrow + (gid + 8) * kHeadDim + col);
        qa[ks][half * 2 + 0] = lo;
        qa[ks][half * 2 + 1] = hi;
      }
    }

    // This warp's online softmax state: rows gid (h = 0) and gid + 8 (h = 1), log2 units.
    float m[2] = {-INFINITY, -INFINITY}, sum[2] = {0.f, 0.f};
    float o[kHeadDim / 8][4];
#pragma unroll
    for (int nd = 0; nd < kHeadDim / 8; ++nd) o[nd][0] = o[nd][1] = o[nd][2] = o[nd][3] = 0.f;
    int const key0 = warp * 16;  // this warp's keys in every stage

    for (int j = 0; j < cp.stages; ++j, ++n) {
      asm volatile("cp.async.wait_group %0;" ::"n"(kStages - 2) : "memory");  // stage n landed (this thread's part)
      __syncthreads();  // every thread's part of stage n landed, and every warp is done with stage n - 1's slot
      load_next((n + kStages - 1) % kStages);  // into stage n - 1's slot
      asm volatile("cp.async.commit_group;" ::: "memory");
      T const* sK = ring + (n % kStages) * kStageElems;
      T const* sV = sK + kDecodeStageKeys * kRow;

      // S = Q K^T for this warp's 16 keys: 2 n-tiles of 8 keys.
      float s[2][4];
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        s[t][0] = s[t][1] = s[t][2] = s[t][3] = 0.f;
        T const* krow = sK + (key0 + t * 8 + gid) * kRow + quad;
#pragma unroll
        for (int ks = 0; ks < kSteps; ++ks) {
          uint32_t const b0 = *reinterpret_cast<uint32_t const*>(krow + ks * 16);
          uint32_t const b1 = *reinterpret_cast<uint32_t const*>(krow + ks * 16 + 8);
          mma_16816<T>(s[t], qa[ks], b0, b1);
        }
      }
      // Scale, mask keys past the split's valid ones, and update the running max.
      float mx[2] = {m[0], m[1]};
#pragma unroll
      for (int t = 0; t < 2; ++t) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          int const key = j * kDecodeStageKeys + key0 + t * 8 + quad + (e & 1);
          s[t][e] = key < cp.valid ? s[t][e] * scale_log2 : -INFINITY;
          mx[e >> 1] = fmaxf(mx[e >> 1], s[t][e]);
        }
      }
      float ref[2], alpha[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 1));
        mx[h] = fmaxf(mx[h], __shfl_xor_sync(0xffffffffu, mx[h], 2));
        ref[h] = mx[h] == -INFINITY ? 0.f : mx[h];  // no live key yet: every p and alpha below is 0
        alpha[h] = exp2f(m[h] - ref[h]);
        m[h] = mx[h];
        sum[h] *= alpha[h];
      }
#pragma unroll
      for (int nd = 0; nd < kHeadDim / 8; ++nd) {
        o[nd][0] *= alpha[0], o[nd][1] *= alpha[0], o[nd][2] *= alpha[1], o[nd][3] *= alpha[1];
      }
      uint32_t pa[4];  // P as the A fragment of one k-step: n-tile 0 (columns quad), n-tile 1 (columns + 8)
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        float p[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          p[e] = exp2f(s[t][e] - ref[e >> 1]);
          sum[e >> 1] += p[e];
        }
        pa[t * 2 + 0] = pack2<T>(p[0], p[1]);
        pa[t * 2 + 1] = pack2<T>(p[2], p[3]);
      }
      // O += P V over the warp's 16 keys; V's B fragments by ldmatrix.trans, two n-tiles (16 columns) at a time.
#pragma unroll
      for (int nd = 0; nd < kHeadDim / 8; nd += 2) {
        T const* src = sV + (key0 + (lane & 15)) * kRow + nd * 8 + (lane >> 4) * 8;
        unsigned const addr = unsigned(__cvta_generic_to_shared(src));
        uint32_t b0, b1, b2, b3;
        asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
                     : "=r"(b0), "=r"(b1), "=r"(b2), "=r"(b3) : "r"(addr));
        mma_16816<T>(o[nd], pa, b0, b1);
        mma_16816<T>(o[nd + 1], pa, b2, b3);
      }
    }
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 1);
      sum[h] += __shfl_xor_sync(0xffffffffu, sum[h], 2);
    }
    // The warps' partial outputs go over the slot of the unit's last stage (n - 1): every warp is done
    // with it after this barrier, and the loads in flight fill the two other slots.
    float* sO = reinterpret_cast<float*>(ring + ((n - 1) % kStages) * kStageElems);  // (warps, 16, dh)
    __syncthreads();
    if (quad == 0) {
      sMax[warp * 16 + gid] = m[0], sMax[warp * 16 + gid + 8] = m[1];
      sSum[warp * 16 + gid] = sum[0], sSum[warp * 16 + gid + 8] = sum[1];
    }
#pragma unroll
    for (int nd = 0; nd < kHeadDim / 8; ++nd) {
      if (gid < kGroup) {
        *reinterpret_cast<float2*>(sO + (warp * 16 + gid) * kHeadDim + nd * 8 + quad) = make_float2(o[nd][0], o[nd][1]);
      }
      if (gid + 8 < kGroup) {
        *reinterpret_cast<float2*>(sO + (warp * 16 + gid + 8) * kHeadDim + nd * 8 + quad) = make_float2(o[nd][2], o[nd][3]);
      }
    }
    __syncthreads();
    // The warps' states merged in warp order (deterministic): the split's max M is finite (key `first` is
    // warp 0's and live); a warp that saw no live key has m = -inf, weight 0 and o = 0.
    int64_t const base = (int64_t(cp.b) * kv_heads + cp.kvh) * max_splits + cp.split;
    for (int i = tid; i < kGroup * kHeadDim; i += kDecodeThreads) {
      int const g = i / kHeadDim, d = i % kHeadDim;
      float mm = sMax[g];
#pragma unroll
      for (int w = 1; w < kWarps; ++w) mm = fmaxf(mm, sMax[w * 16 + g]);
      float acc = 0.f;
#pragma unroll
      for (int w = 0; w < kWarps; ++w) acc = fmaf(exp2f(sMax[w * 16 + g] - mm), sO[(w * 16 + g) * kHeadDim + d], acc);
      o_part[(base * kGroup + g) * kHeadDim + d] = acc;
    }
    if (tid < kGroup) {
      float mm = sMax[tid], l = 0.f;
#pragma unroll
      for (int w = 1; w < kWarps; ++w) mm = fmaxf(mm, sMax[w * 16 + tid]);
#pragma unroll
      for (int w = 0; w < kWarps; ++w) l = fmaf(exp2f(sMax[w * 16 + tid] - mm), sSum[w * 16 + tid], l);
      ml_part[(base * kGroup + tid) * 2 + 0] = mm;
      ml_part[(base * kGroup + tid) * 2 + 1] = l;
    }
    // The next unit's first stage waits at the loop's barrier, which also keeps sMax, sSum and this slot
    // until every thread has read them (the slot is refilled only after that barrier).
    cp = DecodeUnit::find<kSplit>(cp.u + int(gridDim.x), units, splits, kv_heads, split_major, cache_len, capacity);
  }
  asm volatile("cp.async.wait_group 0;" ::: "memory");  // only empty groups are left
}

// The splits of (b, head) in a fixed order: O = sum_s 2^(m_s - M) o_s / sum_s 2^(m_s - M) l_s.
template <class T, int kHeadDim, int kGroup>
__global__ void __launch_bounds__(kHeadDim)
decode_combine(float const* __restrict__ o_part, float const* __restrict__ ml_part, int const* __restrict__ cache_len,
               T* __restrict__ o, int kv_heads, int capacity, int max_splits, int split_keys) {
  wait_for_previous_kernel();
  int const h = blockIdx.x, b = blockIdx.y, d = threadIdx.x;
  int const kvh = h / kGroup, g = h % kGroup;
  int const splits = (decode_keys(cache_len, b, capacity) + split_keys - 1) / split_keys;  // split_keys: the decode kernel's
  int64_t const base = (int64_t(b) * kv_heads + kvh) * max_splits;
  float mx = -INFINITY;
  for (int s = 0; s < splits; ++s) mx = fmaxf(mx, ml_part[((base + s) * kGroup + g) * 2]);
  float num = 0.f, den = 0.f;
  for (int s = 0; s < splits; ++s) {
    float const w = exp2f(ml_part[((base + s) * kGroup + g) * 2] - mx);
    den = fmaf(w, ml_part[((base + s) * kGroup + g) * 2 + 1], den);
    num = fmaf(w, o_part[((base + s) * kGroup + g) * kHeadDim + d], num);
  }
  o[(int64_t(b) * kv_heads * kGroup + h) * kHeadDim + d] = T(num / den);
}

// ------------------------------------------------------------------------------------------------
// Prompt: CUTLASS's FMHA with our mask. The fusion is default-constructed by the collective, so what it
// needs comes from the problem shape (B, H, Q = new_tokens x G, K = cached + new, D) and kGroup.
template <int kGroup>
struct BottomRightCausalFusion : cutlass::fmha::collective::DefaultFusion {
  // Keys that query row r sees: [0, K - Q/G + r/G].
  template <class ProblemSize>
  CUTLASS_DEVICE static int keys_seen(int row, ProblemSize const& ps) {
    return cute::get<3>(ps) - cute::get<2>(ps) / kGroup + row / kGroup + 1;
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_trip_count(BlkCoord const& blk, TileShape const& tile, ProblemSize const& ps) {
    int const bm = cute::get<0>(tile), bn = cute::get<1>(tile);
    int const last_row = cute::min((int(cute::get<0>(blk)) + 1) * bm, int(cute::get<2>(ps))) - 1;
    int const keys = cute::min(keys_seen(last_row, ps), int(cute::get<3>(ps)));
    return cute::ceil_div(keys, bn);
  }

  // The masked (diagonal) iterations come last: all but the key blocks every row of the tile sees whole.
  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_masked_trip_count(BlkCoord const& blk, TileShape const& tile, ProblemSize const& ps) {
    int const first_row = int(cute::get<0>(blk)) * int(cute::get<0>(tile));
    int const whole = cute::min(keys_seen(first_row, ps), int(cute::get<3>(ps))) / int(cute::get<1>(tile));
    return get_trip_count(blk, tile, ps) - whole;
  }

  template <class BlkCoord, class TileShape, class ProblemSize>
  CUTLASS_DEVICE int get_unmasked_trip_count(BlkCoord const& blk, TileShape const& tile, ProblemSize const& ps) {
    return get_trip_count(blk, tile, ps) - get_masked_trip_count(blk, tile, ps);
  }

  template <class AccQK, class IndexQK, class ProblemSize>
  CUTLASS_DEVICE void before_softmax(AccQK& acc_qk, IndexQK const& index_qk, ProblemSize const& ps) {
    CUTLASS_PRAGMA_UNROLL
    for (int i = 0; i < cute::size(acc_qk); i++) {
      auto const pos = index_qk(i);
      int const key = cute::get<1>(pos);
      if (key >= keys_seen(int(cute::get<0>(pos)), ps) || key >= int(cute::get<3>(ps))) acc_qk(i) = -INFINITY;
    }
  }
};

// Our strides: (rows, dh, (batch, head)), dh contiguous.
using StrideQKV = cute::tuple<int, cute::_1, cute::tuple<int, int>>;
using StrideLSE = cute::tuple<cute::_1, cute::tuple<int, int>>;
// K and V when the FMHA's (batch, head) modes are (KV head, query head of its group): every query head of
// a group reads its KV head's keys, a static zero stride (CuTe leaves the mode out of the TMA descriptor).
using StrideKVShared = cute::tuple<int, cute::_1, cute::tuple<int, cute::_0>>;

// The FMHA's schedules for a prompt:
//   kCooperative   CUTLASS's cooperative kernel: both consumer warp groups on one 128-row tile, one CTA per
//                  tile, tiles handed out in query-block order within each (batch, head);
//   kHeaviestFirst the layer's default: the same kernel with the tiles launched last query block first,
//                  across every (batch, head): under the causal mask the last query block sees the most
//                  keys, so the longest tiles start first and the grid's last wave holds the shortest
//                  (longest-processing-time first, as FlashAttention orders causal tiles); the tiles and
//                  their arithmetic are the same, so the output is too;
//   kPingpong      CUTLASS's other schedule for dh 128 (two consumer warp groups on alternate tiles, a
//                  persistent grid of one CTA per SM, Q loaded separately).
enum class FmhaSchedule { kCooperative, kHeaviestFirst, kPingpong };

// CUTLASS's one-CTA-per-tile scheduler (grid: x query blocks, y batch, z heads) with the tiles re-dealt in
// launch order (x fastest) so that every (batch, head)'s last query block comes first, then every one's
// second to last, and so on: the whole grid longest first, not only each head's own blocks.
struct HeaviestFirstTileScheduler : cutlass::fmha::kernel::IndividualTileScheduler {
  using cutlass::fmha::kernel::IndividualTileScheduler::IndividualTileScheduler;
  CUTLASS_DEVICE auto get_block_coord() {
    unsigned const heads_batches = gridDim.y * gridDim.z;
    unsigned const launch = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    unsigned const rest = launch % heads_batches;
    return cute::make_coord(gridDim.x - 1u - launch / heads_batches, cute::_0{},
                            cute::make_coord(rest % gridDim.y, rest / gridDim.y));
  }
};

template <class Builder, FmhaSchedule kSchedule>
struct FmhaKernelOf {
  using type = typename Builder::Kernel;
};
template <class Builder>
struct FmhaKernelOf<Builder, FmhaSchedule::kHeaviestFirst> {
  using type = cutlass::fmha::kernel::FmhaKernelTmaWarpSpecialized<
      typename Builder::CollectiveMainloop, typename Builder::CollectiveEpilogue, HeaviestFirstTileScheduler>;
};

// kGroup: query heads packed into the query rows (row r = t G + g; 1: none). kSharedKv: the (batch, head)
// modes are (KV head, query head of its group), K and V shared through StrideKVShared (one launch per
// sequence; the layer's layout for 1 < kv_heads < heads, where the packed rows would need two strides).
template <class T, int kHeadDim, int kGroup, bool kCausal, FmhaSchedule kSchedule = FmhaSchedule::kCooperative,
          bool kSharedKv = false>
struct PromptAttention {
  static_assert(!kSharedKv || kGroup == 1, "shared K/V heads take unpacked query rows");
  using StrideKV = std::conditional_t<kSharedKv, StrideKVShared, StrideQKV>;
  using Element = std::conditional_t<std::is_same_v<T, cutlass::bfloat16_t>, cutlass::bfloat16_t, cutlass::half_t>;
  // (q rows, keys, dh): CUTLASS's choice for dh 128; 64 wide for heads up to 64; as wide as the head where it
  // is a multiple of 32 (96: measured 1.05-1.17x faster than the padded 128), else 128 (80: no faster exact,
  // its 32-byte swizzle). The problem's head_dim may be narrower than the tile's (CUTLASS's FMHA checks only
  // <=): TMA zero-fills Q, K and V past it (so the scores and P V are exact) and clips O's store, and the
  // softmax scale is 1 / sqrt(the problem's head_dim).
  static constexpr int kTileDim = kHeadDim <= 64 ? 64 : kHeadDim % 32 == 0 ? kHeadDim : 128;
  static_assert(kHeadDim % 8 == 0 && kHeadDim <= 128, "head_dim must be a multiple of 8 up to 128 for the FMHA");
  using TileShape = cute::Shape<cute::_128, cute::_128, cute::Int<kTileDim>>;
  using Fusion = std::conditional_t<kCausal, BottomRightCausalFusion<kGroup>, cutlass::fmha::collective::ResidualFusion>;
  using Schedule = std::conditional_t<kSchedule == FmhaSchedule::kPingpong, cutlass::gemm::KernelTmaWarpSpecializedPingpong,
                                      cutlass::gemm::KernelTmaWarpSpecializedCooperative>;
  using Builder = cutlass::fmha::kernel::FmhaBuilder<Element, float, float, TileShape, StrideQKV, StrideKV, StrideKV,
                                                     Fusion, Schedule>;
  using Kernel = typename FmhaKernelOf<Builder, kSchedule>::type;
  using Operation = cutlass::device::Universal<Kernel>;
};

}  // namespace cusync::attention_sm90
