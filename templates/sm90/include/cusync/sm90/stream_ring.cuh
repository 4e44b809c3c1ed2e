// cusync sm90, v4: v2's TMA weight ring (stream_chain_ws.cuh) feeding v3-style consumers (reg_stream.cuh).
// One persistent warp-specialized kernel for the decode-size chain Y = act(X @ W1 [+ b1]) @ W2, M = 1..128.
//
// WHY. v2 (TMA ring, ldmatrix.trans consumers) was consumer-bound: 8 warps stalled 47% on shared-memory loads
// (ldmatrix of 16 weight columns per warp, 4 k-steps per stage per warp). v3 (weights straight from global into
// mma A fragments) was bound by the bytes it can keep in flight in registers (~110 KB/SM, ~3.8 TB/s). Here the
// producer is v2's, unchanged (one lane, one TMA per 8 KB box, 144..192 KB of weights in flight per SM, W2
// boxes issued before their H tiles are ready), and the consumers take v3's fragment order from shared memory.
//
// FRAGMENTS (swap-AB, mma.sync.m16n8k16, weights on the 16-row A side, the batch on the n8 B side). A W stage is
// two TMA boxes of (64 k rows, 64 n columns), 128-byte rows, SWIZZLE_128B: the 16-byte chunk c of row r sits
// at r * 128 + ((c ^ (r % 8)) << 4). For a k-step of 16, lane (g = lane / 4, t = lane % 4) reads chunk g (its
// 8 columns) of rows 2t, 2t+1, 2t+8, 2t+9 with four ld.shared.v4, and __byte_perm pairs the rows into the A
// fragments of 4 mma tiles exactly as v3 (tile j: columns 8g + 2j and 8g + 2j + 1). Banks: one ld.shared.v4
// is served in 4 phases of 8 lanes (g in {2q, 2q+1}, t in 0..3): rows r % 8 = 2t (+1), chunks g ^ (r % 8) all
// distinct, so conflict-free; a warp reads 512 contiguous-by-swizzle bytes per instruction. The B fragments
// (activations, the X ring's (M_pad, 64) SWIZZLE_128B boxes) are v2's ldmatrix x2/x4 (conflict-free).
// Per 2 KB of weights a warp issues 4 lds, 16 prmt and 4 x n8-tiles mma: no ldmatrix.trans, no address math
// beyond a per-lane constant.
//
// WARPS. 8 consumer warps = 2 boxes x kWarpsK k-quarters x kWarpsM batch groups (kWarpsK * kWarpsM = 4):
//   M_pad <= 32: kWarpsK = 4: each warp does 1 k-step of 16 per stage, all M_pad rows (<= 64 accumulators);
//   M_pad = 64:  kWarpsK = 2 (2 k-steps per stage), 2 groups of 32 rows; M_pad = 128: 1 x 4 (4 k-steps), 4 x 32.
// So every warp holds at most 4 x 4 x 4 = 64 accumulators. PIPELINE: at M_pad <= 32 a warp issues the fragment
// loads of its next stage (after that stage's full wait) before the mma's of the current one, so the shared
// memory latency is hidden behind the mma's and the other 7 warps (except across the gemm1 -> gemm2 switch:
// the first H box may wait for a tile that this CTA's own gemm1 piece end completes); at 64 and 128 (2 and 4
// k-steps per warp and stage, 168-register cap) the loads of k-step s + 1 are issued before the mma's of s. The slots are released (one arrive per warp) once the stage's mma's are
// issued: they read the fragment registers, so every ld.shared of the stage has completed.
//
// REDUCTION (deterministic). At a piece end the kWarpsK warps of one (box, batch group) sum their
// accumulators in warp order through a shared (M_pad, BLK_N) fp32 scratch (wk = 0 stores, wk = 1.. add in
// order, separated by the consumers' named barrier), and the last one st.cg's the sum into the piece's
// workspace slot. From there on everything is v2's: piece_slot, finish_piece (tile arrival, the last arriver
// sums the slots in segment/CTA order, bias, activation, store, post), the epochs, the segment schedule with
// rounds, and the producer's batched, bounded H-tile waits (fence.acq_rel.gpu + fence.proxy.async.global
// before the TMA reads H). Same G, R, shape => bitwise identical results run after run. The sums differ from
// v2's (another k order inside a block), so v4 has no bitwise twin among the other variants.
//
// MEASURED on an H200: correct everywhere, but 0.55x of cuBLASLt (gpt3 M = 1
// 113.9 us vs 78.0) and slower than v3; ncu shows the same DRAM rate as v2 (54% vs 57%), so with these
// consumers the producer/ring/schedule side limits the stream. A probe, not used by the generated library.
//
// PRECONDITIONS: those of ws::make_chain_params (make_chain_ring calls it with this kernel's occupancy).
#pragma once

#include "cusync/sm90/stream_chain_ws.cuh"

namespace cusync::stream::ring {

using ws::ChainParams;
using ws::kConsumerThreads;
using ws::kHalfBytes;
using ws::kWBytes;

template <int kMPad>
struct Cfg {
  static constexpr int kWarpsM = kMPad <= 32 ? 1 : kMPad / 32;      // batch groups of <= 32 rows
  static constexpr int kWarpsK = 4 / kWarpsM;                        // k-quarters of a stage
  static constexpr int kWM = kMPad / kWarpsM;                        // batch rows per warp
  static constexpr int kMSub = kWM / 8;                              // n8 batch tiles per warp
  static constexpr int kSteps = (kBlkK / 16) / kWarpsK;              // k-steps of 16 per warp and stage
  static constexpr bool kAhead = kMPad <= 32;                        // next stage's loads before this mma's
  static constexpr int kWStages = kMPad <= 16 ? 12 : kMPad <= 32 ? 11 : 9;
  static constexpr int kXStages = kMPad <= 16 ? 8 : kMPad <= 32 ? 6 : 4;
  static constexpr int kXBytes = kMPad * kBlkK * 2;                  // (M_pad, 64) box
  static constexpr int kSlotFloats = kBlkN * kMPad;                  // (M_pad, BLK_N) fp32 partial
  static constexpr int kScratchBytes = kWarpsK > 1 ? kSlotFloats * 4 : 0;
  // layout: [W ring][X ring][k-quarter scratch][full/empty barriers][reduce ranges][flag][H bitmap] + 1 KB slack
  static constexpr int kScratchOff = kWStages * kWBytes + kXStages * kXBytes;
  static constexpr int kBarOff = kScratchOff + kScratchBytes;
  static constexpr int kRedOff = kBarOff + 2 * (kWStages + kXStages) * 8;
  static constexpr int kFlagOff = kRedOff + ws::kMaxSegs * 16;
  static constexpr int kBitsOff = kFlagOff + 16;
  static constexpr int kSmemBytes = kBitsOff + ws::kMaxHTiles / 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  static_assert(kWStages * kWBytes >= 128 * 1024, ">= 128 KB of weights in flight");
  static_assert(kXBytes % 1024 == 0, "X stages keep 1024-byte alignment (SWIZZLE_128B)");
  static_assert(kWarpsK * kWarpsM == 4 && kSteps >= 1 && kMSub >= 1 && kMSub <= 4, "warp tile");
  static_assert(!kAhead || kSteps == 1, "the stage-ahead path holds one k-step per warp");
};

// ChainParams::consumer_mode, for measuring where the time goes (the probe's DECODE_PROBE_RING_MODE):
constexpr int kConsumerNormal = 0;
constexpr int kConsumerNoCompute = 1;  // wait and release every stage, no fragment loads, no mma: WRONG results;
                                       // times the producer, the ring and the schedule alone
constexpr int kConsumerNoAhead = 2;    // M_pad <= 32: load a stage only after the previous one was released

namespace dev {
__device__ __forceinline__ uint4 lds_v4(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
}  // namespace dev

template <typename T, int kMPad>
struct ChainRing : ws::ChainCore<T, kMPad, Cfg<kMPad>> {
  using Base = ws::ChainCore<T, kMPad, Cfg<kMPad>>;
  using C = Cfg<kMPad>;

  // One warp's fragments of one k-step: 4 weight rows (16 bytes each) and the B fragments.
  struct Step {
    uint4 w[4];
    uint32_t x[C::kMSub][2];
  };

  // w_off: this lane's byte offsets of rows 2t, 2t+1, 2t+8, 2t+9 (chunk g, swizzled) in its box, k-step 0.
  static __device__ __forceinline__ void load(Step& f, uint32_t wsb, uint32_t xsb, uint32_t const (&w_off)[4], int kk,
                                              int wm0, int lj, int lr, int m_rows) {
#pragma unroll
    for (int i = 0; i < 4; ++i) f.w[i] = dev::lds_v4(wsb + w_off[i] + uint32_t(kk * 16 * 128));
    int const ch = kk * 2 + (lj & 1);  // 16-byte chunk of k in the (M_pad, 64) X box
    if constexpr (C::kMSub == 1) {
      detail::ldmatrix_x2(f.x[0][0], f.x[0][1], xsb + uint32_t((wm0 + lr) * 128 + ((ch ^ lr) << 4)));
    } else {
#pragma unroll
      for (int ms2 = 0; ms2 < C::kMSub / 2; ++ms2) {
        if (wm0 + ms2 * 16 < m_rows) {  // batch rows that do not exist: no load, no mma (warp-uniform)
          int const m = wm0 + ms2 * 16 + (lj >> 1) * 8 + lr;
          uint32_t b[4];
          detail::ldmatrix_x4(b, xsb + uint32_t(m * 128 + ((ch ^ lr) << 4)));
          f.x[2 * ms2][0] = b[0];
          f.x[2 * ms2][1] = b[1];
          f.x[2 * ms2 + 1][0] = b[2];
          f.x[2 * ms2 + 1][1] = b[3];
        }
      }
    }
  }

  static __device__ __forceinline__ void mma(Step const& f, float (&acc)[4][C::kMSub][4], int wm0, int m_rows) {
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      uint32_t const lo0 = (&f.w[0].x)[j], lo1 = (&f.w[1].x)[j];  // rows 2t, 2t+1: columns 8g + 2j, + 1
      uint32_t const hi0 = (&f.w[2].x)[j], hi1 = (&f.w[3].x)[j];  // rows 2t+8, 2t+9
      uint32_t const af[4] = {__byte_perm(lo0, lo1, 0x5410), __byte_perm(lo0, lo1, 0x7632),
                              __byte_perm(hi0, hi1, 0x5410), __byte_perm(hi0, hi1, 0x7632)};
#pragma unroll
      for (int ms = 0; ms < C::kMSub; ++ms)
        if (C::kMSub == 1 || wm0 + (ms / 2) * 16 < m_rows) detail::Mma<T>::run(acc[j][ms], af, f.x[ms][0], f.x[ms][1]);
    }
  }

  static __device__ __forceinline__ void zero(float (&acc)[4][C::kMSub][4]) {
#pragma unroll
    for (int j = 0; j < 4; ++j)
#pragma unroll
      for (int ms = 0; ms < C::kMSub; ++ms)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc[j][ms][e] = 0.f;
  }

  // ---- consumers: 8 warps ----
  static __device__ __forceinline__ void consume(ChainParams const& p, RunCtx const& ctx, int cta, int grid,
                                                 uint32_t w_ring, uint32_t x_ring, uint32_t bars, int64_t* ranges,
                                                 int* flag, char* smem) {
    uint32_t const w_full = bars, w_empty = bars + C::kWStages * 8;
    uint32_t const x_full = bars + 2 * C::kWStages * 8, x_empty = x_full + C::kXStages * 8;
    int const lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    int const wb = warp & 1;                     // box: weight columns [64 wb, 64 wb + 64) of the tile
    int const wk = (warp >> 1) % C::kWarpsK;     // k-quarter: k-steps [wk * kSteps, +kSteps) of each stage
    int const wm0 = ((warp >> 1) / C::kWarpsK) * C::kWM;  // first batch row
    int const g = lane >> 2, t = lane & 3, lj = lane >> 3, lr = lane & 7;
    int const m_rows = p.g[0].m;
    // warp-uniform; a warp without rows still waits and releases
    bool const rows = wm0 < m_rows && p.consumer_mode != kConsumerNoCompute;
    bool const ahead_on = C::kAhead && p.consumer_mode != kConsumerNoAhead;
    float* scratch = reinterpret_cast<float*>(smem + C::kScratchOff);  // (M_pad, BLK_N)
    uint32_t w_off[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      int const r = 2 * t + (i & 1) + (i >> 1) * 8;
      w_off[i] = uint32_t(wb * kHalfBytes + r * 128 + ((g ^ (r & 7)) << 4));
    }
    int const kk0 = wk * C::kSteps;

    float acc[4][C::kMSub][4];
    zero(acc);

    ws::dev::Cursor cur;
    cur.open(p, 0, cta, grid);
    int wsl = 0, xsl = 0;  // ring slots of the current block
    uint32_t wph = 0, xph = 0;
    // Waits for a stage; with kAhead (kSteps == 1) also loads its fragments.
    auto fetch = [&](Step& f, int w_slot, int x_slot, uint32_t w_par, uint32_t x_par) {
      ws::dev::mbar_wait(w_full + w_slot * 8, w_par);
      ws::dev::mbar_wait(x_full + x_slot * 8, x_par);
      if (C::kAhead && rows) load(f, w_ring + w_slot * kWBytes, x_ring + x_slot * C::kXBytes, w_off, kk0, wm0, lj, lr, m_rows);
    };
    Step fa;
    if (!cur.done(p)) fetch(fa, wsl, xsl, wph, xph);
    while (!cur.done(p)) {
      ws::dev::Cursor nx = cur;
      nx.advance(p, cta, grid);
      bool const more = !nx.done(p);
      int const nws = wsl + 1 == C::kWStages ? 0 : wsl + 1, nxs = xsl + 1 == C::kXStages ? 0 : xsl + 1;
      uint32_t const nwph = nws == 0 ? wph ^ 1u : wph, nxph = nxs == 0 ? xph ^ 1u : xph;
      // Not ahead across the gemm1 -> gemm2 switch: the first H box may wait for a gemm1 tile that this CTA's
      // own piece end (below) completes.
      bool const ahead = ahead_on && more && (nx.gemm == 0 || cur.gemm == 1);
      Step fb;
      if (ahead) fetch(fb, nws, nxs, nwph, nxph);
      if constexpr (C::kAhead) {
        if (rows) mma(fa, acc, wm0, m_rows);
      } else if (rows) {  // kSteps k-steps from shared memory, the loads of step s + 1 before the mma's of s
        uint32_t const wsb = w_ring + wsl * kWBytes, xsb = x_ring + xsl * C::kXBytes;
        Step sa, sb;
        load(sa, wsb, xsb, w_off, kk0, wm0, lj, lr, m_rows);
#pragma unroll
        for (int s = 0; s < C::kSteps; ++s) {
          if (s + 1 < C::kSteps) load(sb, wsb, xsb, w_off, kk0 + s + 1, wm0, lj, lr, m_rows);
          mma(sa, acc, wm0, m_rows);
          sa = sb;
        }
      }
      __syncwarp();
      if (lane == 0) {  // release (arrive has .release.cta semantics: this warp's shared reads come first)
        ws::dev::mbar_arrive(w_empty + wsl * 8);
        ws::dev::mbar_arrive(x_empty + xsl * 8);
      }
      if (cur.piece_end()) {
        int const gm = cur.gemm, tt = cur.t;
        StageArgs const& a = p.g[gm];
        float* dst = Base::piece_slot(p, cur, cta);  // (M_pad, BLK_N)
        // k-quarters in warp order: wk = 0 stores, 1 .. kWarpsK-2 add, the last adds and stores the slot
#pragma unroll
        for (int q = 0; q < C::kWarpsK; ++q) {
          if (wk == q && rows) {
#pragma unroll
            for (int j = 0; j < 4; ++j)
#pragma unroll
              for (int ms = 0; ms < C::kMSub; ++ms) {
                int const c = wb * 64 + 8 * g + 2 * j, m = wm0 + ms * 8 + 2 * t;
                int const idx[4] = {m * kBlkN + c, (m + 1) * kBlkN + c, m * kBlkN + c + 1, (m + 1) * kBlkN + c + 1};
#pragma unroll
                for (int e = 0; e < 4; ++e) {
                  float v = acc[j][ms][e];
                  if (q > 0) v += scratch[idx[e]];
                  if (q + 1 < C::kWarpsK)
                    scratch[idx[e]] = v;
                  else if (m + (e & 1) < a.m)
                    __stcg(dst + idx[e], v);
                }
              }
          }
          if (q + 1 < C::kWarpsK) ws::dev::consumer_bar();
        }
        zero(acc);
        Base::finish_piece(p, ctx, grid, gm, tt, ranges, flag);
      }
      if (more && !ahead) fetch(fb, nws, nxs, nwph, nxph);
      fa = fb;
      cur = nx;
      wsl = nws;
      xsl = nxs;
      wph = nwph;
      xph = nxph;
    }
  }
};

// ---- host side: v2's, with this kernel ----
template <typename T, int kMPad>
inline cudaError_t prepare_chain_ring() { return ws::prepare_chain_kernel<ChainRing<T, kMPad>>(); }
template <typename T, int kMPad>
inline int chain_ring_occupancy() { return ws::chain_kernel_occupancy<ChainRing<T, kMPad>>(); }
template <typename T, int kMPad>
inline char const* make_chain_ring(StageArgs const& a1, StageArgs const& a2, int rounds, int grid, ChainParams* p) {
  return ws::make_chain_params<T, kMPad>(a1, a2, rounds, grid, chain_ring_occupancy<T, kMPad>(), p);
}
template <typename T, int kMPad>
inline cudaError_t launch_chain_ring(ChainParams const& p, int grid, StreamState* state, SyncErrorInfo* error,
                                     uint64_t timeout_ns, cudaStream_t stream) {
  return ws::launch_chain_kernel<ChainRing<T, kMPad>>(p, grid, state, error, timeout_ns, stream);
}

}  // namespace cusync::stream::ring
