// cusync sm90: the register-streaming split-K GEMM stage for decode-size M (1..32), and its tile-synchronized
// two-GEMM chain (Y = act(X @ W1 [+ b1]) @ W2).
//
// WHY NO SHARED MEMORY. At M <= 32 a GEMM is a weight stream: every weight byte is used M times and never
// again. The shared-memory kernels (stream_gemm.cuh) spend most of their issue slots moving weights through
// shared memory and ldmatrix (measured: issue-bound at 70% of DRAM bandwidth). Here every thread loads its
// weights with 16-byte global loads straight into the registers that mma.sync reads, so a weight byte costs
// one load, a quarter of a byte permute and 1/256 of an mma: about 28 instructions per warp per 2 KB.
//
// FRAGMENTS. Swap-AB: the warp computes Y^T (N,M) = W^T (N,K) X^T (K,M) with mma.sync.m16n8k16, 16 weight
// columns on the A side and 8 batch rows on the B side. W is row-major (K,N) (N contiguous). For one k-step
// of 16, lane (g = lane/4, t = lane%4) loads the 8 columns [n0 + 8g, n0 + 8g + 8) of the four rows
// k + 2t, k + 2t + 1, k + 2t + 8, k + 2t + 9: four 16-byte loads; per instruction the warp reads 4 rows x 128
// contiguous bytes. __byte_perm pairs rows (2t, 2t+1) and (2t+8, 2t+9) column by column, which is exactly
// the A fragment of 4 mma tiles: tile j has logical row g = column n0 + 8g + 2j and row g + 8 = column
// n0 + 8g + 2j + 1 (the k order is the natural one). The B fragment (X^T, batch column g, k = 2t, 2t+1 and
// 2t+8, 2t+9) is two 32-bit loads of X. A warp therefore covers 64 columns, and a CTA of 4 warps splits its K
// range into 4 consecutive parts of the same 64 columns (kWarpsN = 1), or its warps sit side by side on
// 64 * kWarpsN columns and split K by 4 / kWarpsN: wider CTAs read longer contiguous row segments
// (128 bytes x kWarpsN per weight row and step).
//
// PIPELINE. kDepth k-steps per warp are in flight in registers (loads of step s + kDepth are issued right after
// the mmas of step s); 4 CTAs of 4 warps per SM keep ~110 KB of weights in flight per SM. Weight loads bypass
// L1 (L1::no_allocate) and carry an L2 evict_first policy, so X, H, the partials and the counters stay in L2.
// Measured on the H200: that depth streams at ~3.8 TB/s, below cuBLASLt at M <= 32 (the decode results file
// has the numbers and the settings tried). The generated library does not run this stage: run() mode kStream
// (bulk_chain.cuh) uses its packed weights, fragment math and epilogue.
//
// SPLIT-K, DETERMINISTIC. The grid is tiles x splits CTAs; CTA (tile, split) reads W[k0:k0+kc, n0:n0+64].
// Its 4 warps' partials are summed in shared memory in warp order; with one split that is the result,
// otherwise it goes to workspace slot (tile, split), the CTA arrives on the tile's counter, and the CTA that
// arrives last sums the slots in split order (a fixed order whoever arrives last), applies bias and the
// activation (identity / relu / gelu-erf / SwiGLU on gate|up columns interleaved in groups of 8), stores, and
// posts the tile's semaphore. Same shape and grid => bitwise-identical results. Counters, semaphores and
// epochs are those of stream_gemm.cuh (64-bit epoch-tagged words, never reset; graph replay works).
//
// TILE SYNC (K-range). Split j of gemm2 reads H columns [k0, k0 + kc); a warp waits for producer tile
// k / wait_tile_cols before its first X load in that tile, after the weight loads of the same step are
// issued (weights never depend on gemm1). gemm1's CTAs run tile by tile (CTA = tile * splits + split), so H
// tiles complete in column order; gemm2's CTAs run split by split (CTA = split * tiles + tile), so early
// gemm2 CTAs read early H tiles. gemm1 executes griddepcontrol.launch_dependents at CTA entry and gemm2 is a
// programmatic dependent launch: its CTAs take SM slots only after every gemm1 CTA has started, so a waiting
// gemm2 CTA never holds the slot of an unscheduled gemm1 CTA. The wait is bounded (%globaltimer); a timeout is
// recorded in SyncErrorInfo with the stage and the producer tile, and the kernel goes on.
//
// PRECONDITIONS (reg_check): 1 <= M <= M_pad (8, 16, 32); N and K multiples of 8, ldw and ldx multiples of 8,
// pointers 16-byte aligned; SwiGLU: N a multiple of 16; a consumer's producer tile width a multiple of 16.
#pragma once

#include "cusync/sm90/stream_gemm.cuh"

namespace cusync::stream::reg {

constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
constexpr int kWarpN = 64;                  // weight columns per warp
constexpr int kStepK = 16;                  // k per mma step

// A CTA's tile: kWarpsN warps side by side (cta_n = 64 * kWarpsN columns), 4 / kWarpsN warps along K.
__host__ __device__ constexpr int cta_n_of(int warps_n) { return kWarpN * warps_n; }
__host__ __device__ constexpr int chunk_k_of(int warps_n) { return (kWarps / warps_n) * kStepK; }
__host__ __device__ constexpr int tiles_of(int n, int cta_n) { return (n + cta_n - 1) / cta_n; }
// Producer tile width in H columns (after SwiGLU a tile of cta_n columns gives cta_n / 2 outputs).
__host__ __device__ constexpr int out_tile_cols(int act, int cta_n) { return act == int(Act::kSwiglu) ? cta_n / 2 : cta_n; }

// One stage as launched: the GEMM, its split, the CTA order.
struct RegStage {
  StageArgs a;
  int cta_n;        // columns per CTA tile (64 * kWarpsN)
  int tiles;        // tiles_of(n, cta_n)
  int splits;       // CTAs per tile
  int kc;           // K per CTA (multiple of chunk_k_of(kWarpsN))
  int split_major;  // CTA order: 0 tile by tile, 1 split by split
  int packed;       // 1: a.w is the weights packed by reg_pack (each warp's loads contiguous), 0: row-major W
};

// PACKED WEIGHTS: the same bytes reordered once, so that every warp streams one contiguous range.
// 16-byte chunk ((tile * ksteps + s) * warps_n + wn) * 128 + i * 32 + lane holds what lane loads as s.w[i]
// at k-step s (k = 16 s) in warp column wn of tile: W[16 s + {2t, 2t+1, 2t+8, 2t+9}[i], n .. n + 8),
// n = tile * 64 warps_n + 64 wn + 8 g; zeros past K or N. A warp's load instruction reads 512 contiguous
// bytes and its k-steps follow each other (warps_n = 1: a split's whole K range is one contiguous block).
__host__ __device__ constexpr int64_t reg_ksteps(int k) { return (k + kStepK - 1) / kStepK; }
__host__ __device__ constexpr int64_t reg_packed_chunks(int n, int k, int warps_n) {
  return int64_t(tiles_of(n, cta_n_of(warps_n))) * reg_ksteps(k) * warps_n * 128;
}

namespace detail {

__device__ __forceinline__ uint4 ld_stream_16(void const* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0,%1,%2,%3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint32_t ld_cg_32(void const* p) {
  uint32_t v;
  asm volatile("ld.global.cg.u32 %0, [%1];" : "=r"(v) : "l"(p));
  return v;
}

// One k-step of a warp: w, the lane's four 16-byte weight chunks (rows k+2t, k+2t+1, k+2t+8, k+2t+9; columns
// n0+8g .. +8), byte-permuted into the A fragments of 4 mma tiles, times kMSub B fragments x (n8 batch tiles).
template <typename T, int kMSub>
__device__ __forceinline__ void mma_packed(uint4 const (&w)[4], uint32_t const (&x)[kMSub][2], float (&acc)[4][kMSub][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t const lo0 = (&w[0].x)[j], lo1 = (&w[1].x)[j];  // rows 2t, 2t+1: columns 2j, 2j+1
    uint32_t const hi0 = (&w[2].x)[j], hi1 = (&w[3].x)[j];  // rows 2t+8, 2t+9
    uint32_t const af[4] = {__byte_perm(lo0, lo1, 0x5410), __byte_perm(lo0, lo1, 0x7632),
                            __byte_perm(hi0, hi1, 0x5410), __byte_perm(hi0, hi1, 0x7632)};
#pragma unroll
    for (int mb = 0; mb < kMSub; ++mb) cusync::stream::detail::Mma<T>::run(acc[j][mb], af, x[mb][0], x[mb][1]);
  }
}

// A warp's accumulators as its (M_pad, 64) fp32 partial: batch row m, weight column c at dst[m * ld + c].
template <int kMSub>
__device__ __forceinline__ void store_partial(float const (&acc)[4][kMSub][4], float* dst, int ld, int lane) {
  int const g = lane >> 2, t = lane & 3;
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int mb = 0; mb < kMSub; ++mb) {
      int const c = 8 * g + 2 * j, m = mb * 8 + 2 * t;
      dst[m * ld + c] = acc[j][mb][0];
      dst[(m + 1) * ld + c] = acc[j][mb][1];
      dst[m * ld + c + 1] = acc[j][mb][2];
      dst[(m + 1) * ld + c + 1] = acc[j][mb][3];
    }
}

// The epilogue of the tile of tile_n weight columns at n0, by threads tid, tid + threads, ... of the caller's
// group: for each row and 8 outputs (16 columns, gate and up, for SwiGLU), sum(v, u, m, col) adds the partials
// in its fixed order, then the bias, the activation and one 16-byte store.
template <typename T, typename Sum>
__device__ __forceinline__ void tile_epilogue(StageArgs const& a, int n0, int tile_n, int tid, int threads, Sum&& sum) {
  bool const swiglu = a.act == int(Act::kSwiglu);
  int const groups = swiglu ? tile_n / 16 : tile_n / 8;  // 8 outputs per item
  T const* bias = static_cast<T const*>(a.bias);
  T* out = static_cast<T*>(a.out);
  for (int i = tid; i < a.m * groups; i += threads) {
    int const m = i / groups, gi = i - m * groups;
    int const col = swiglu ? gi * 16 : gi * 8;
    if (n0 + col >= a.n) continue;
    float v[8], u[8];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = u[j] = 0.f;
    sum(v, u, m, col);
    if (swiglu && a.out_raw != nullptr) {  // gate and up as they are: interleaved group q is halves' columns 8q..
      T* raw = static_cast<T*>(a.out_raw) + int64_t(m) * a.ldo_raw + (n0 + col) / 2;
      alignas(16) T g8[8], u8[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) g8[j] = cusync::stream::detail::from_f<T>(v[j]), u8[j] = cusync::stream::detail::from_f<T>(u[j]);
      *reinterpret_cast<uint4*>(raw) = *reinterpret_cast<uint4 const*>(g8);
      *reinterpret_cast<uint4*>(raw + a.n / 2) = *reinterpret_cast<uint4 const*>(u8);
#pragma unroll
      for (int j = 0; j < 8; ++j) {  // the SwiGLU of the stored values, as the chain's SwiGLU stage computes it
        v[j] = cusync::stream::detail::to_f(g8[j]), u[j] = cusync::stream::detail::to_f(u8[j]);
      }
    }
    int const out_col = swiglu ? n0 / 2 + gi * 8 : n0 + gi * 8;
    cusync::stream::detail::finish_8<T>(a.act, bias, n0 + col, v, u, out + int64_t(m) * a.ldo + out_col);
  }
}

template <int kMSub>
__device__ __forceinline__ void zero(float (&acc)[4][kMSub][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j)
#pragma unroll
    for (int mb = 0; mb < kMSub; ++mb)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[j][mb][e] = 0.f;
}

}  // namespace detail

template <typename T, int kMPad, int kWarpsN>
struct RegGemm {
  static constexpr int kWarpsK = kWarps / kWarpsN;
  static constexpr int kCtaN = kWarpN * kWarpsN;
  static constexpr int kMSub = kMPad / 8;                    // n8 batch tiles
  static constexpr int kDepth = kMPad <= 8 ? 4 : kMPad <= 16 ? 3 : 2;
  static constexpr int kSlot = kCtaN * kMPad;                // floats of one partial, (M_pad, kCtaN)
  // kWarpsK partials (M_pad, kCtaN), plus their sum when there is more than one
  static constexpr int kFlagOffset = (kWarpsK + (kWarpsK > 1 ? 1 : 0)) * kSlot * 4;
  static constexpr int kSmemBytes = kFlagOffset + 16;
  static_assert(kMPad == 8 || kMPad == 16 || kMPad == 32, "the register stage covers M_pad = 8, 16, 32");
  static_assert(kWarpsN == 1 || kWarpsN == 2 || kWarpsN == 4, "4 warps: 1, 2 or 4 along N");

  struct Step {
    uint4 w[4];              // rows k+2t, k+2t+1, k+2t+8, k+2t+9; columns n0+8g .. +8
    uint32_t x[kMSub][2];    // B fragments
  };

  static __device__ __forceinline__ void load_w_packed(StageArgs const& a, Step& s, int k, int tile, int wn,
                                                       int lane, uint64_t policy) {
    uint4 const* w = static_cast<uint4 const*>(a.w) +
                     ((int64_t(tile) * reg_ksteps(a.k) + k / kStepK) * kWarpsN + wn) * 128 + lane;
#pragma unroll
    for (int i = 0; i < 4; ++i) s.w[i] = detail::ld_stream_16(w + i * 32, policy);
  }
  static __device__ __forceinline__ void load_w(StageArgs const& a, Step& s, int k, int n, bool n_ok, int t,
                                                uint64_t policy) {
    T const* w = static_cast<T const*>(a.w);
    int const rows[4] = {k + 2 * t, k + 2 * t + 1, k + 2 * t + 8, k + 2 * t + 9};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      if (n_ok && rows[i] < a.k)
        s.w[i] = detail::ld_stream_16(w + int64_t(rows[i]) * a.ldw + n, policy);
      else
        s.w[i] = make_uint4(0u, 0u, 0u, 0u);
    }
  }
  static __device__ __forceinline__ void load_x(StageArgs const& a, Step& s, int k, int g, int t) {
    T const* x = static_cast<T const*>(a.x);
#pragma unroll
    for (int mb = 0; mb < kMSub; ++mb) {
      int const m = mb * 8 + g;
      T const* row = x + int64_t(m) * a.ldx + k + 2 * t;
      bool const ok_m = m < a.m;
      s.x[mb][0] = ok_m && k + 2 * t < a.k ? detail::ld_cg_32(row) : 0u;
      s.x[mb][1] = ok_m && k + 2 * t + 8 < a.k ? detail::ld_cg_32(row + 8) : 0u;
    }
  }
  static __device__ __forceinline__ void mma_step(Step const& s, float (&acc)[4][kMSub][4]) {
    detail::mma_packed<T, kMSub>(s.w, s.x, acc);
  }

  // The sum of the tile's split partials in split order (or the CTA's own sum in shared memory), then
  // bias, activation, store; returns after a barrier.
  static __device__ __forceinline__ void epilogue(StageArgs const& a, int tile, int splits, float const* own) {
    bool const swiglu = a.act == int(Act::kSwiglu);
    detail::tile_epilogue<T>(a, tile * kCtaN, kCtaN, int(threadIdx.x), kThreads, [&](float (&v)[8], float (&u)[8], int m, int col) {
      for (int sp = 0; sp < splits; ++sp)  // split order, whoever arrived last
        cusync::stream::detail::add_8(
            v, u, splits == 1 ? own + m * kCtaN + col : a.ws + (int64_t(tile) * splits + sp) * kSlot + m * kCtaN + col,
            swiglu, splits > 1);
    });
    __syncthreads();  // every thread's stores of the tile, before a release by thread 0
  }

  static __device__ void run(RegStage const& st, RunCtx const& ctx, int cta, char* smem) {
    StageArgs const& a = st.a;
    int const tile = st.split_major ? cta % st.tiles : cta / st.splits;
    int const split = st.split_major ? cta / st.tiles : cta % st.splits;
    int const lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    int const g = lane >> 2, t = lane & 3;
    int const wn = warp % kWarpsN, wk = warp / kWarpsN;
    int const n = tile * kCtaN + wn * kWarpN + 8 * g;
    bool const n_ok = n < a.n;  // n and N are multiples of 8
    int const kw = st.kc / kWarpsK;
    int const k_begin = split * st.kc + wk * kw;
    int const k_end = min(k_begin + kw, a.k);
    int const steps = k_end > k_begin ? (k_end - k_begin + kStepK - 1) / kStepK : 0;
    uint64_t const policy = cusync::stream::detail::policy_evict_first();
    bool const waits = a.wait_sems != nullptr;
    int waited_p = -1;

    auto load = [&](Step& s, int i) {
      int const k = k_begin + i * kStepK;
      if (st.packed)
        load_w_packed(a, s, k, tile, wn, lane, policy);
      else
        load_w(a, s, k, n, n_ok, t, policy);
      if (waits) {
        int const p = k / a.wait_tile_cols;
        if (p != waited_p) {
          StreamGemm<T, 8>::warp_wait(a, ctx, p, tile);
          waited_p = p;
        }
      }
      load_x(a, s, k, g, t);
    };

    float acc[4][kMSub][4];
    detail::zero(acc);

    Step buf[kDepth];
#pragma unroll
    for (int d = 0; d < kDepth; ++d)
      if (d < steps) load(buf[d], d);
    for (int i0 = 0; i0 < steps; i0 += kDepth) {
#pragma unroll
      for (int d = 0; d < kDepth; ++d) {
        int const i = i0 + d;
        if (i < steps) {
          mma_step(buf[d], acc);
          if (i + kDepth < steps) load(buf[d], i + kDepth);
        }
      }
    }

    // Warp partials into shared memory: K part wk of the tile is slot wk, (M_pad, kCtaN); with several K
    // parts their sum in wk order goes to slot kWarpsK.
    float* red = reinterpret_cast<float*>(smem);
    constexpr int kSlots = kWarpsK + (kWarpsK > 1 ? 1 : 0);
    int* last_flag = reinterpret_cast<int*>(smem + kFlagOffset);
    detail::store_partial(acc, red + wk * kSlot + wn * kWarpN, kCtaN, lane);
    __syncthreads();
    float* own = red + (kSlots - 1) * kSlot;
    float* slot = a.ws + (int64_t(tile) * st.splits + split) * kSlot;
    for (int i = int(threadIdx.x) * 4; i < a.m * kCtaN; i += kThreads * 4) {
      float4 s = *reinterpret_cast<float4 const*>(red + i);
#pragma unroll
      for (int w = 1; w < kWarpsK; ++w) {
        float4 const p = *reinterpret_cast<float4 const*>(red + w * kSlot + i);
        s.x += p.x; s.y += p.y; s.z += p.z; s.w += p.w;
      }
      if (st.splits == 1) {
        if (kWarpsK > 1) *reinterpret_cast<float4*>(own + i) = s;
      } else
        __stcg(reinterpret_cast<float4*>(slot + i), s);
    }
    __syncthreads();  // the slot's stores (or own), before thread 0's release
    if (st.splits > 1) {
      if (threadIdx.x == 0) {
        uint32_t const before = cusync::stream::detail::arrive(a.arrivals + tile, ctx.epoch);
        bool const last = before == uint32_t(st.splits - 1);
        if (last) ptx::fence_acq_rel_gpu();  // acquire: the other splits' slots
        *last_flag = last ? 1 : 0;
      }
      __syncthreads();
      if (!*last_flag) return;
    }
    epilogue(a, tile, st.splits, own);
    if (a.post_sems != nullptr && threadIdx.x == 0 && tile != a.skip_post_tile) post_store(a.post_sems + tile, ctx.epoch);
  }
};

template <typename T, int kMPad, int kWarpsN>
__global__ void __launch_bounds__(kThreads, 4)
    reg_gemm_kernel(RegStage const __grid_constant__ st, StreamState* state, SyncErrorInfo* error,
                    uint64_t timeout_ns, int flags) {
  extern __shared__ __align__(16) char smem[];
  RunCtx const ctx{ptx::ld_relaxed_gpu(&state->epoch), error, timeout_ns};
  if (flags & kTriggerDependents) cusync::stream::detail::griddep_launch_dependents();
  RegGemm<T, kMPad, kWarpsN>::run(st, ctx, int(blockIdx.x), smem);
  if (flags & kClosesRun) close_run(state, ctx.epoch);
}

// The whole chain in one persistent kernel (probe): CTA c runs gemm1's units c, c + G, ... and then gemm2's
// (each unit is one CTA of reg_gemm_kernel's grid), so a CTA done with gemm1 starts gemm2's weight stream at
// once, with no second launch or ramp. Static assignment: the grid must be co-resident (G <= SMs x
// occupancy), or a waiting gemm2 unit could hold the SM that the gemm1 unit it waits for needs.
template <typename T, int kMPad, int kWarpsN>
__global__ void __launch_bounds__(kThreads, 4)
    reg_chain_kernel(RegStage const __grid_constant__ s1, RegStage const __grid_constant__ s2, StreamState* state,
                     SyncErrorInfo* error, uint64_t timeout_ns) {
  extern __shared__ __align__(16) char smem[];
  RunCtx const ctx{ptx::ld_relaxed_gpu(&state->epoch), error, timeout_ns};
  for (int u = int(blockIdx.x); u < s1.tiles * s1.splits; u += int(gridDim.x)) {
    RegGemm<T, kMPad, kWarpsN>::run(s1, ctx, u, smem);
    __syncthreads();  // the unit's shared memory (partials, the last-arriver flag) before the next one's
  }
  for (int u = int(blockIdx.x); u < s2.tiles * s2.splits; u += int(gridDim.x)) {
    RegGemm<T, kMPad, kWarpsN>::run(s2, ctx, u, smem);
    __syncthreads();
  }
  close_run(state, ctx.epoch);
}

// Packs row-major W (k, n; ldw) for warps_n warps along N (see PACKED WEIGHTS): one thread per 16-byte chunk.
// halves: W is [gate | up] in halves of n / 2 columns, packed as the SwiGLU epilogue reads it (gate and up
// interleaved in groups of 8: packed columns 16q .. 16q + 7 are gate columns 8q .., the next 8 up's).
template <typename T>
__global__ void reg_pack_kernel(T const* w, int k, int n, int64_t ldw, int warps_n, uint4* out, int64_t chunks,
                                bool halves = false) {
  for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
    int const lane = int(c % 32), i = int((c / 32) % 4);
    int64_t const rest = c / 128;
    int const wn = int(rest % warps_n);
    int64_t const ts = rest / warps_n;
    int64_t const ks = reg_ksteps(k);
    int const step = int(ts % ks), tile = int(ts / ks);
    int const g = lane >> 2, t = lane & 3;
    int const row = step * kStepK + 2 * t + (i & 1) + (i >= 2 ? 8 : 0);
    int const col = tile * cta_n_of(warps_n) + wn * kWarpN + 8 * g;
    int const src = halves ? (col / 16) * 8 + (col % 16 >= 8 ? n / 2 : 0) : col;  // col is a multiple of 8
    out[c] = row < k && col < n ? *reinterpret_cast<uint4 const*>(w + int64_t(row) * ldw + src) : make_uint4(0u, 0u, 0u, 0u);
  }
}

// ---- host side ----

// Splits so that the stage has about `target_ctas` CTAs; nullptr, or what is wrong with the stage.
inline char const* reg_make(StageArgs const& a, int m_pad, int warps_n, int target_ctas, bool split_major,
                            RegStage* out) {
  auto misaligned = [](void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) != 0; };
  if (m_pad != 8 && m_pad != 16 && m_pad != 32) return "M_pad must be 8, 16 or 32";
  if (warps_n != 1 && warps_n != 2 && warps_n != 4) return "warps along N must be 1, 2 or 4";
  if (a.m < 1 || a.m > m_pad) return "m must be in 1..M_pad";
  if (a.n % 8 || a.k % 8 || a.ldx % 8 || a.ldw % 8 || a.ldo % 8) return "n, k and leading dimensions must be multiples of 8";
  if (a.ldx < a.k || a.ldw < a.n) return "ldx >= k and ldw >= n are required";
  if (a.act == int(Act::kSwiglu) ? (a.n % 16 != 0 || a.ldo < a.n / 2) : a.ldo < a.n)
    return "SwiGLU needs n % 16 == 0 and ldo >= n/2; other acts need ldo >= n";
  if (a.act < 0 || a.act > 3) return "act must be identity, relu, gelu or swiglu";
  if (misaligned(a.x) || misaligned(a.w) || misaligned(a.out) || misaligned(a.bias) || misaligned(a.ws))
    return "x, w, bias, out and ws must be 16-byte aligned";
  if (a.wait_sems != nullptr) {
    if (a.wait_tile_cols % kStepK != 0) return "producer tile width must be a multiple of 16";
    if (int64_t(a.wait_tiles) * a.wait_tile_cols < a.k) return "producer tiles do not cover k";
  }
  RegStage s{};
  s.a = a;
  s.cta_n = cta_n_of(warps_n);
  s.tiles = tiles_of(a.n, s.cta_n);
  int const chunk_k = chunk_k_of(warps_n);
  int const chunks = (a.k + chunk_k - 1) / chunk_k;
  int want = target_ctas / s.tiles;  // at most target_ctas CTAs: f x occupancy x SMs is f whole waves
  want = want < 1 ? 1 : want > chunks ? chunks : want;
  int const per = (chunks + want - 1) / want;  // chunks per CTA
  s.kc = per * chunk_k;
  s.splits = (chunks + per - 1) / per;
  s.split_major = split_major ? 1 : 0;
  if (s.splits > 1 && (a.ws == nullptr || a.arrivals == nullptr)) return "workspace and arrival counters are required";
  if (s.splits > 1 && a.ws_slots < int64_t(s.tiles) * s.splits) return "workspace needs tiles x splits slots";
  *out = s;
  return nullptr;
}

// Workspace floats that reg_make may ask for at most with this target (any warps_n, M_pad <= 32): at most
// max(target, tiles) slots of at most 256 x 32 floats.
inline int64_t reg_ws_floats(int n, int target_ctas) {
  int64_t const tiles = tiles_of(n, kWarpN);
  return (target_ctas > tiles ? target_ctas : tiles) * int64_t(cta_n_of(4)) * 32;
}

template <typename T, int kMPad, int kWarpsN>
inline cudaError_t reg_prepare() {
  return cudaFuncSetAttribute(reg_gemm_kernel<T, kMPad, kWarpsN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              RegGemm<T, kMPad, kWarpsN>::kSmemBytes);
}

template <typename T, int kMPad, int kWarpsN>
inline cudaError_t reg_launch(RegStage const& s, StreamState* state, SyncErrorInfo* error, uint64_t timeout_ns,
                              int flags, bool pdl, cudaStream_t stream) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t const cfg =
      launch_config(s.tiles * s.splits, kThreads, RegGemm<T, kMPad, kWarpsN>::kSmemBytes, stream, pdl, &attr);
  if (s.cta_n != cta_n_of(kWarpsN)) return cudaErrorInvalidValue;
  return cudaLaunchKernelEx(&cfg, reg_gemm_kernel<T, kMPad, kWarpsN>, s, state, error, timeout_ns, flags);
}

template <typename T, int kMPad, int kWarpsN>
inline cudaError_t reg_chain_launch(RegStage const& s1, RegStage const& s2, int grid, StreamState* state,
                                    SyncErrorInfo* error, uint64_t timeout_ns, cudaStream_t stream) {
  if (s1.cta_n != cta_n_of(kWarpsN) || s2.cta_n != cta_n_of(kWarpsN)) return cudaErrorInvalidValue;
  cudaError_t e = cudaFuncSetAttribute(reg_chain_kernel<T, kMPad, kWarpsN>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       RegGemm<T, kMPad, kWarpsN>::kSmemBytes);
  if (e != cudaSuccess) return e;
  int occupancy = 0, device = 0, sms = 0;  // co-resident: at most SMs x this kernel's own occupancy
  if ((e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occupancy, reg_chain_kernel<T, kMPad, kWarpsN>, kThreads,
                                                         RegGemm<T, kMPad, kWarpsN>::kSmemBytes)) != cudaSuccess ||
      (e = cudaGetDevice(&device)) != cudaSuccess ||
      (e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess)
    return e;
  if (occupancy < 1) return cudaErrorInvalidConfiguration;
  grid = grid < occupancy * sms ? grid : occupancy * sms;
  reg_chain_kernel<T, kMPad, kWarpsN><<<grid, kThreads, RegGemm<T, kMPad, kWarpsN>::kSmemBytes, stream>>>(
      s1, s2, state, error, timeout_ns);
  return cudaGetLastError();
}

template <typename T, int kMPad, int kWarpsN>
inline int reg_occupancy() {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, reg_gemm_kernel<T, kMPad, kWarpsN>, kThreads,
                                                    RegGemm<T, kMPad, kWarpsN>::kSmemBytes) != cudaSuccess)
    return 0;
  return blocks;
}

}  // namespace cusync::stream::reg
