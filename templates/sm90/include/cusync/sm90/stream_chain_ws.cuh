// cusync sm90, v2: ONE persistent, warp-specialized kernel for the decode-size chain
// Y = act(X @ W1 [+ b1]) @ W2, streaming W1 then W2 through one shared-memory ring with no bubble between
// the GEMMs. v1 (stream_gemm.cuh, namespace cusync::stream) is kept as is; this file reuses its types
// (StageArgs, StreamState, Act, RunCtx, close_run) and its fragment/epilogue math.
//
// WHY (measured on H200 with v1): v1 streams at ~3.9 TB/s with ~9 us fixed cost per chain and degrades with M:
// its cp.async copies are issued by the same warps that compute and reduce, so every reduction, every tile
// wait and every gemm1 -> gemm2 switch stops the stream; gemm1's stream-K tiles all complete at the very end
// (a tile's first pieces sit at the END of the first owner's range), so gemm2 cannot start early.
//
// ROLES. 288 threads = 8 consumer warps (0..7, threads 0..255) + 1 producer warp (8). One lane of the
// producer issues every copy; consumers only wait on mbarriers, compute, write partials and reduce. CTA-wide
// barriers are used only at entry and exit (all roles converged); inside, consumers sync with
// bar.sync 1, 256 (named barrier), never with the producer. One CTA per SM (~200 KB smem), grid = SMs x
// occupancy, all co-resident (checked on the host).
//
// RINGS. Two rings with their own full/empty mbarriers (full: count 1 + expect_tx; empty: count 8, one arrive
// per consumer warp, release semantics order the warp's ldmatrix reads before the slot is refilled):
//   W ring: kWStages x (BLK_K=64, BLK_N=128) weight boxes, 16 KB each, 2 TMA 64x64 boxes (SWIZZLE_128B) per
//           stage, 128..192 KB of weights in flight per SM (Little: 4.8 TB/s x ~1.5 us / 132 SMs ~ 55 KB).
//   X ring: kXStages x (M_pad, 64) activation boxes (X for gemm1, H for gemm2), SWIZZLE_128B.
//   Block j of the CTA's schedule uses W slot j % kWStages and X slot j % kXStages. Two rings instead of one
//   stage = W+X: (a) the producer keeps two cursors, so a W2 box never waits behind an H box whose gemm1 tile
//   is not posted yet (the W cursor only waits for a free W slot); (b) at M_pad = 128 the X boxes are as big as
//   the W boxes, and a shallower X ring keeps >= 128 KB of weights in flight within 227 KB.
// TMA (cp.async.bulk.tensor.2d) rather than 1D bulk copies: one instruction per 8 KB box, hardware swizzle
// (the 16-byte chunk index XOR row % 8, exactly v1's ldmatrix pattern, stage bases 1024-byte aligned), and
// zero fill outside the tensor (K and N tails, batch rows M..M_pad-1) with the full box counted by complete_tx,
// so expect_tx is a constant. Weights carry an L2::evict_first cache hint (createpolicy), so H, X, the fp32
// partials and the counters stay in L2. Tensor maps are __grid_constant__ params, encoded on the host with
// cuTensorMapEncodeTiled fetched through cudaGetDriverEntryPointByVersion (no -lcuda).
//
// PIPELINE (v2.1). Producer: each loop pass issues W boxes into EVERY free W slot (the empty test fails only
// when the ring is full), then X/H boxes into every free X slot whose H tile is ready; it sleeps only when
// neither moved. Consumers: after a stage's full waits, the fragment loads of kAhead k-steps (all 4 at
// M_pad <= 32, 2 at 64) are issued back to back, and k-step kk issues the loads of kk + kAhead before its
// mma's, so the ldmatrix latency is paid about once per stage instead of once per k-step (M_pad 128 keeps
// v2's per-k-step order: 168-register cap). The mma order per accumulator is unchanged (bitwise v2 results).
// The slots are released (one arrive per warp) right after the stage's last mma is ISSUED: the mma's read
// the fragment registers, so every ldmatrix of the stage has completed; nothing waits for an mma result.
// At a piece end, thread 0 issues the tile arrival first and computes the reduction ranges while it flies.
// DEPENDENCY (gemm2 reads H). The producer issues an H box only after the gemm1 tile semaphore covering that
// k-block was seen at (epoch, 1) by a BATCHED poll: kPoll (16) relaxed loads of the semaphores of tiles
// pt..pt+15 issued back to back (one round trip instead of one blocking ld.acquire per tile, during which no
// W box was issued), every ready tile marked, then fence.acq_rel.gpu (acquire pattern) and
// fence.proxy.async.global (H was written by generic
// stores in other CTAs; the TMA reads through the async proxy). Polls are non-blocking inside the producer's
// loop (W issue continues meanwhile); a shared-memory bitmap remembers acquired tiles so each is polled until
// ready once per CTA. A wait is bounded by %globaltimer: on timeout it records a SyncErrorInfo (stage 1, the
// consumer tile, the producer tile) and goes on without waiting (results undefined, the host reports it), so
// the kernel always exits.
//
// SCHEDULE (static, balanced by weight bytes, ordered so H completes early and progressively). The work is a
// list of SEGMENTS, each a rectangle (tiles [t_lo, t_hi)) x (k-blocks [kb_lo, kb_hi)) of one GEMM, streamed
// tile-major stream-K over the G CTAs (CTA c gets flat blocks [c*B/Gs, (c+1)*B/Gs), Gs = min(G, B)): every CTA
// reads the same weight bytes (+-1 block) in every segment. With R rounds (host parameter, 1..4):
//   gemm1 round r: tiles [T1*r/R, T1*(r+1)/R), all k   -> those H tiles are complete at ~ (r+1)/R of gemm1;
//   gemm2 round r: all tiles, the k-blocks of exactly the H columns that gemm1 round r produces.
// Every CTA runs gemm1 r=0..R-1, then gemm2 r=0..R-1. So gemm2 round 0 (needed right after gemm1) reads H
// that was finished half a gemm1 ago (R=2), and gemm2 round r>0 starts ~(gemm2 time / R) after gemm1 ended:
// the waits are short or absent. Cost: gemm2 tiles get pieces from each round (more fp32 partial slots).
//
// REDUCTION (deterministic, one hop, off the streaming path). At the end of a piece (CTA, segment, tile) the
// consumers st.cg their fp32 partial (M_pad, BLK_N) into slot seg.slot_base + c + (t - seg.t_lo) (injective),
// bar.sync, and consumer thread 0 fences and arrives on the tile's epoch-tagged counter (as v1). The last
// arriver's 256 consumer threads sum the tile's slots in fixed order (segments in order, CTAs increasing),
// 4 slots' 16-byte loads issued before their adds, apply bias and the activation (v1 semantics, SwiGLU on
// gate|up interleaved in groups of 8), store fp16/bf16, bar.sync, and thread 0 post_store()s the tile
// semaphore (release). Meanwhile the producer warp keeps filling the rings. Same G, R, shape => bitwise
// identical results run after run (they differ from v1's: different split).
//
// EPOCHS exactly as v1: counters/semaphores are (epoch << 32 | count), StreamState.epoch is read at entry,
// close_run() bumps it from the last CTA; no host reset, CUDA-graph replay safe.
//
// DEADLOCK FREEDOM. Gemm1 blocks never wait on anything but their own ring; every CTA's gemm1 blocks precede
// its gemm2 blocks in both cursors; all CTAs are co-resident. So every gemm1 tile completes, and every gemm2
// wait ends (or times out).
//
// PRECONDITIONS (check_chain_ws): M in 1..M_pad, same M for both GEMMs; n, k, ld multiple of 8; 16-byte
// aligned pointers; a2.x == a1.out, a2.ldx == a1.ldo and a2.k == gemm1's output columns; a1.post_sems set
// (gemm2 waits on them); rounds in 1..4 and <= gemm1 tiles; gemm1 tiles <= kMaxHTiles; workspace slots
// per ws_slots_needed(); grid <= SMs x occupancy.
#pragma once

#include <cuda.h>  // CUtensorMap and its enums only (no -lcuda: the encoder comes via the runtime)
#include <cudaTypedefs.h>

#include <algorithm>
#include <initializer_list>
#include <type_traits>

#include "cusync/sm90/stream_gemm.cuh"

namespace cusync::stream::ws {

constexpr int kConsumerWarps = 8;
constexpr int kConsumerThreads = kConsumerWarps * 32;  // 256
constexpr int kThreads = kConsumerThreads + 32;        // + 1 producer warp
constexpr int kMaxRounds = 4;
constexpr int kMaxSegs = 2 * kMaxRounds;
constexpr int kMaxHTiles = 4096;                        // bitmap of acquired gemm1 tiles (512 B smem)
constexpr int kWBytes = kBlkK * kBlkN * 2;              // 16 KB: (BLK_K, BLK_N) as 2 x (64 k, 64 n) boxes
constexpr int kHalfBytes = kWBytes / 2;                 // one (64 k, 64 n) SWIZZLE_128B box
constexpr int kNamedBarConsumers = 1;                   // bar.sync id for the consumer warps
constexpr int kPoll = 16;                              // gemm1 tile semaphores read per producer poll

struct Seg {
  int gemm;          // 0: gemm1, 1: gemm2
  int t_lo, t_hi;    // output tiles [t_lo, t_hi)
  int kb_lo, kb_hi;  // k-blocks [kb_lo, kb_hi)
  int64_t slot_base; // first workspace slot of this segment (slots: Gs + tiles)
};

struct ChainParams {  // 64-byte aligned through CUtensorMap
  CUtensorMap tm_w[2];  // W1 (K1, N1w), W2 (K2, N2): dims {N, K}, box {64, 64}, SWIZZLE_128B
  CUtensorMap tm_x[2];  // X (M, K1), H (M, K2): dims {K, M}, box {64, M_pad}, SWIZZLE_128B
  StageArgs g[2];       // v1's per-GEMM args (ws, arrivals, bias, out, act, m, n, k, skip_post_tile, ...)
  Seg seg[kMaxSegs];    // gemm1 segments, then gemm2 segments
  int nseg;
  int h_kb_per_tile;    // gemm2 k-blocks per gemm1 H tile (out_tile_cols(act1) / 64)
  int h_tiles;          // gemm1 tiles (= entries of h_sems)
  uint64_t const* h_sems;  // gemm1 tile semaphores (= g[0].post_sems)
  int consumer_mode;       // v4 experiments only (ring::kConsumer*); v2 ignores it. 0 = normal
};

template <int kMPad>
struct Cfg {
  static constexpr int kWStages = kMPad <= 32 ? 12 : kMPad <= 64 ? 11 : 9;
  static constexpr int kXStages = kMPad <= 16 ? 8 : kMPad <= 32 ? 6 : kMPad <= 64 ? 5 : 4;
  static constexpr int kXBytes = kMPad * kBlkK * 2;  // (M_pad, 64) box
  static constexpr int kWarpsM = kMPad >= 64 ? 2 : 1;                 // consumer warps along the batch
  static constexpr int kWarpsN = kConsumerWarps / kWarpsM;
  static constexpr int kWN = kBlkN / kWarpsN;                          // weight columns per warp (16 or 32)
  static constexpr int kWM = kMPad / kWarpsM;                          // batch rows per warp
  static constexpr int kNSub = kWN / 16;                               // m16 (weight) sub-tiles
  static constexpr int kMSub = kWM / 8;                                // n8 (batch) sub-tiles
  static constexpr int kBFrags = kMSub == 1 ? 1 : kMSub / 2;           // B fragments (x2, or x4 per n8 pair)
  // k-steps (of 4) whose fragments are loaded ahead of the mma's: all 4 for M_pad <= 32 (24..48 regs),
  // 2 at 64 (48 regs in flight). 0 at 128 (load k-step kk, then its mma's, as before): 9 warps = 3 per SMSP
  // cap ptxas at 168 registers, and 64 accumulators + a second fragment set (24 regs) spill there.
  static constexpr int kAhead = kMPad <= 32 ? 4 : kMPad <= 64 ? 2 : 0;
  static constexpr int kSlotFloats = kBlkN * kMPad;                    // (M_pad, BLK_N) fp32 partial
  // layout: [W ring][X ring][full/empty barriers][reduce ranges][flag][H bitmap], plus 1 KB alignment slack
  static constexpr int kBarOff = kWStages * kWBytes + kXStages * kXBytes;
  static constexpr int kRedOff = kBarOff + 2 * (kWStages + kXStages) * 8;
  static constexpr int kFlagOff = kRedOff + kMaxSegs * 16;
  static constexpr int kBitsOff = kFlagOff + 16;
  static constexpr int kSmemBytes = kBitsOff + kMaxHTiles / 8 + 1024;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
  static_assert(kWStages * kWBytes >= 128 * 1024, ">= 128 KB of weights in flight");
  static_assert(kXBytes % 1024 == 0, "X stages keep 1024-byte alignment (SWIZZLE_128B)");
  static_assert(kWN % 16 == 0 && kMSub >= 1 && (kMSub == 1 || kMSub % 2 == 0), "warp tile");
};

namespace dev {

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Non-blocking: has the phase of parity `parity` completed?
__device__ __forceinline__ bool mbar_test(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  asm volatile(
      "{\n .reg .pred p;\n mbarrier.test_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
      : "=r"(ok)
      : "r"(bar), "r"(parity)
      : "memory");
  return ok != 0;
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  uint32_t ok;
  do {
    asm volatile(
        "{\n .reg .pred p;\n mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}"
        : "=r"(ok)
        : "r"(bar), "r"(parity)
        : "memory");
  } while (!ok);
}
__device__ __forceinline__ void tma_load_2d_hint(uint32_t dst, CUtensorMap const* tm, uint32_t bar, int c0, int c1,
                                                 uint64_t policy) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
      " [%0], [%1, {%3, %4}], [%2], %5;" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tm)), "r"(bar), "r"(c0), "r"(c1), "l"(policy)
      : "memory");
}
__device__ __forceinline__ void tma_load_2d(uint32_t dst, CUtensorMap const* tm, uint32_t bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
      " [%0], [%1, {%3, %4}], [%2];" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(tm)), "r"(bar), "r"(c0), "r"(c1)
      : "memory");
}
__device__ __forceinline__ void prefetch_tmap(CUtensorMap const* tm) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<uint64_t>(tm)) : "memory");
}
__device__ __forceinline__ void fence_proxy_async_global() { asm volatile("fence.proxy.async.global;" ::: "memory"); }
__device__ __forceinline__ void consumer_bar() {
  asm volatile("bar.sync %0, %1;" ::"n"(kNamedBarConsumers), "n"(kConsumerThreads) : "memory");
}

// Where CTA `cta` of `grid` is in the segment list; advanced one block at a time without division.
struct Cursor {
  int seg;     // current segment (== nseg: done)
  int gemm;
  int t, kb;   // current block
  int kb_lo, kb_hi;
  int left;    // blocks of this CTA left in the segment, including the current one

  __device__ __forceinline__ bool done(ChainParams const& p) const { return seg >= p.nseg; }

  // Opens segment s (or the first later one where this CTA has blocks). 64-bit divisions only here.
  __device__ __forceinline__ void open(ChainParams const& p, int s, int cta, int grid) {
    for (; s < p.nseg; ++s) {
      Seg const& sg = p.seg[s];
      int const kbn = sg.kb_hi - sg.kb_lo;
      int64_t const blocks = int64_t(sg.t_hi - sg.t_lo) * kbn;
      int64_t const gs = blocks < grid ? blocks : int64_t(grid);
      if (cta >= gs) continue;
      int64_t const b0 = int64_t(cta) * blocks / gs, b1 = int64_t(cta + 1) * blocks / gs;
      if (b1 <= b0) continue;  // cannot happen with gs <= blocks; kept for safety
      int const tt = int(b0 / kbn);
      seg = s;
      gemm = sg.gemm;
      t = sg.t_lo + tt;
      kb = sg.kb_lo + int(b0 - int64_t(tt) * kbn);
      kb_lo = sg.kb_lo;
      kb_hi = sg.kb_hi;
      left = int(b1 - b0);
      return;
    }
    seg = p.nseg;
  }
  // Is the current block the last of its piece (tile end or range end)?
  __device__ __forceinline__ bool piece_end() const { return kb + 1 == kb_hi || left == 1; }
  __device__ __forceinline__ void advance(ChainParams const& p, int cta, int grid) {
    if (--left == 0) {
      open(p, seg + 1, cta, grid);
      return;
    }
    if (++kb == kb_hi) {
      kb = kb_lo;
      ++t;
    }
  }
};

// Pieces of tile t of gemm g in segment s: CTAs [c_first, c_last] (c_last < c_first: t not in s).
__device__ __forceinline__ void piece_ctas(Seg const& sg, int t, int grid, int64_t& c_first, int64_t& c_last) {
  int const kbn = sg.kb_hi - sg.kb_lo;
  int64_t const blocks = int64_t(sg.t_hi - sg.t_lo) * kbn;
  int64_t const gs = blocks < grid ? blocks : int64_t(grid);
  int64_t const bf = int64_t(t - sg.t_lo) * kbn, bl = bf + kbn - 1;
  c_first = ((bf + 1) * gs - 1) / blocks;  // owner(b) = max c with c*B/Gs <= b
  c_last = ((bl + 1) * gs - 1) / blocks;
}

}  // namespace dev

// The parts of the chain kernel that do not depend on how consumers read a stage: the producer, the piece tail
// and the tile reduction. C supplies the ring and shared-memory layout (kWStages, kXStages, kXBytes,
// kSlotFloats, *Off, kSmemBytes). v2 (ChainWS below) and v4 (stream_ring.cuh) add their consumers.
template <typename T, int kMPad, typename Cfg_>
struct ChainCore {
  using C = Cfg_;

  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    T const l = detail::from_f<T>(lo), h = detail::from_f<T>(hi);
    uint16_t const a = *reinterpret_cast<uint16_t const*>(&l), b = *reinterpret_cast<uint16_t const*>(&h);
    return uint32_t(a) | (uint32_t(b) << 16);
  }

  // Sum of the tile's slots in fixed order, bias, activation, store, post. Consumer threads only.
  // ranges (smem): nranges x {first slot, count}, in segment order; slots within a range in CTA order.
  static __device__ __forceinline__ void reduce_tile(ChainParams const& p, int g, int t, RunCtx const& ctx,
                                                     int64_t const* ranges, int nranges) {
    StageArgs const& a = p.g[g];
    bool const swiglu = a.act == int(Act::kSwiglu);
    int const n0 = t * kBlkN;
    int const groups = swiglu ? kBlkN / 16 : kBlkN / 8;  // 8 outputs per item
    T const* bias = static_cast<T const*>(a.bias);
    T* out = static_cast<T*>(a.out);
    for (int i = int(threadIdx.x); i < a.m * groups; i += kConsumerThreads) {
      int const m = i / groups, gi = i - m * groups;
      int const col = swiglu ? gi * 16 : gi * 8;  // column in the tile (gate columns for SwiGLU)
      if (n0 + col >= a.n) continue;
      float v[8], u[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = u[j] = 0.f;
      for (int r = 0; r < nranges; ++r) {
        int64_t const first = ranges[2 * r];
        int const count = int(ranges[2 * r + 1]);
        float const* src0 = a.ws + first * int64_t(C::kSlotFloats) + m * kBlkN + col;  // (M_pad,BLK_N) slots
        for (int c = 0; c < count; c += 4) {
          float4 pv[4][2], pu[4][2];
#pragma unroll
          for (int q = 0; q < 4; ++q) {  // all loads first (memory-level parallelism), then the ordered adds
            float const* src = src0 + int64_t(c + q) * C::kSlotFloats;
            bool const ok = c + q < count;
            pv[q][0] = ok ? __ldcg(reinterpret_cast<float4 const*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
            pv[q][1] = ok ? __ldcg(reinterpret_cast<float4 const*>(src + 4)) : make_float4(0.f, 0.f, 0.f, 0.f);
            if (swiglu) {
              pu[q][0] = ok ? __ldcg(reinterpret_cast<float4 const*>(src + 8)) : make_float4(0.f, 0.f, 0.f, 0.f);
              pu[q][1] = ok ? __ldcg(reinterpret_cast<float4 const*>(src + 12)) : make_float4(0.f, 0.f, 0.f, 0.f);
            } else {
              pu[q][0] = pu[q][1] = make_float4(0.f, 0.f, 0.f, 0.f);
            }
          }
#pragma unroll
          for (int q = 0; q < 4; ++q) {
            if (c + q < count) {
              v[0] += pv[q][0].x; v[1] += pv[q][0].y; v[2] += pv[q][0].z; v[3] += pv[q][0].w;
              v[4] += pv[q][1].x; v[5] += pv[q][1].y; v[6] += pv[q][1].z; v[7] += pv[q][1].w;
              u[0] += pu[q][0].x; u[1] += pu[q][0].y; u[2] += pu[q][0].z; u[3] += pu[q][0].w;
              u[4] += pu[q][1].x; u[5] += pu[q][1].y; u[6] += pu[q][1].z; u[7] += pu[q][1].w;
            }
          }
        }
      }
      if (bias != nullptr) {
#pragma unroll
        for (int j = 0; j < 8; ++j) v[j] += detail::to_f(bias[n0 + col + j]);
        if (swiglu) {
#pragma unroll
          for (int j = 0; j < 8; ++j) u[j] += detail::to_f(bias[n0 + col + 8 + j]);
        }
      }
      float r[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        r[j] = v[j];
        switch (a.act) {
          case int(Act::kRelu): r[j] = fmaxf(r[j], 0.f); break;
          case int(Act::kGelu): r[j] = detail::gelu_erf(r[j]); break;
          case int(Act::kSwiglu): r[j] = detail::silu(r[j]) * u[j]; break;
          default: break;
        }
      }
      // packed in registers (no stack array): each element rounded as from_f<T> does
      uint4 const o = make_uint4(pack2(r[0], r[1]), pack2(r[2], r[3]), pack2(r[4], r[5]), pack2(r[6], r[7]));
      int const out_col = swiglu ? n0 / 2 + gi * 8 : n0 + gi * 8;
      *reinterpret_cast<uint4*>(out + int64_t(m) * a.ldo + out_col) = o;
    }
    if (a.post_sems != nullptr) {
      dev::consumer_bar();  // every consumer thread's stores of the tile, before thread 0's release
      if (threadIdx.x == 0 && t != a.skip_post_tile) post_store(a.post_sems + t, ctx.epoch);
    }
  }

  // The fp32 partial slot of the current piece (CTA, segment, tile): (M_pad, BLK_N) floats.
  static __device__ __forceinline__ float* piece_slot(ChainParams const& p, dev::Cursor const& cur, int cta) {
    Seg const& sg = p.seg[cur.seg];
    StageArgs const& a = p.g[cur.gemm];
    int64_t const slot = sg.slot_base + cta + (cur.t - sg.t_lo);
    CUSYNC_STREAM_CHECK(slot < a.ws_slots);
    return a.ws + slot * C::kSlotFloats;
  }

  // After every consumer thread stored its part of the piece's partial: arrive on the tile's counter; the last
  // arriver's consumers reduce the tile (fixed order), apply the epilogue and post. Consumer threads only.
  static __device__ __forceinline__ void finish_piece(ChainParams const& p, RunCtx const& ctx, int grid, int g, int t,
                                                      int64_t* ranges, int* flag) {
    StageArgs const& a = p.g[g];
    dev::consumer_bar();  // the slot's stores, before thread 0's release
    if (threadIdx.x == 0) {
      // Arrive first: the ranges below are computed while the atomic is in flight.
      uint32_t const before = detail::arrive(a.arrivals + t, ctx.epoch);
      // The tile's pieces over this GEMM's segments, in the fixed reduction order.
      int nr = 0;
      int64_t total = 0;
      for (int s2 = 0; s2 < p.nseg; ++s2) {
        Seg const& o = p.seg[s2];
        if (o.gemm != g || t < o.t_lo || t >= o.t_hi) continue;
        int64_t cf, cl;
        dev::piece_ctas(o, t, grid, cf, cl);
        ranges[2 * nr] = o.slot_base + cf + (t - o.t_lo);
        ranges[2 * nr + 1] = cl - cf + 1;
        total += cl - cf + 1;
        ++nr;
      }
      CUSYNC_STREAM_CHECK(before < uint32_t(total));
      bool const last = before == uint32_t(total - 1);
      if (last) ptx::fence_acq_rel_gpu();  // acquire: the other pieces' slots
      flag[0] = last ? 1 : 0;
      flag[1] = nr;
    }
    dev::consumer_bar();
    // (flag/ranges are rewritten only after the next piece's first consumer_bar, which every reader of
    // this piece's values has passed after reading them)
    if (flag[0]) reduce_tile(p, g, t, ctx, ranges, flag[1]);
  }

  // ---- producer: one lane issues every W and X/H copy ----
  static __device__ __forceinline__ void produce(ChainParams const& p, RunCtx const& ctx, int cta, int grid,
                                                 uint32_t w_ring, uint32_t x_ring, uint32_t bars, uint32_t* hbits) {
    uint32_t const w_full = bars, w_empty = bars + C::kWStages * 8;
    uint32_t const x_full = bars + 2 * C::kWStages * 8, x_empty = x_full + C::kXStages * 8;
    uint64_t const policy = detail::policy_evict_first();
    dev::Cursor wc, xc;
    wc.open(p, 0, cta, grid);
    xc.open(p, 0, cta, grid);
    int ws = 0, xs = 0;
    uint32_t wph = 0, xph = 0;  // phase bits of the slot's current use
    uint64_t const expected = tagged(ctx.epoch, 1);
    uint64_t wait_start = 0;
    bool failed = false;  // a wait timed out (here or anywhere): no more waiting
    while (!wc.done(p) || !xc.done(p)) {
      bool progress = false;
      // weights first, as many as there are free slots (the empty test fails only when the ring is full)
      for (int i = 0; i < C::kWStages && !wc.done(p) && dev::mbar_test(w_empty + ws * 8, wph ^ 1u); ++i) {
        uint32_t const bar = w_full + ws * 8;
        uint32_t const dst = w_ring + ws * kWBytes;
        int const n0 = wc.t * kBlkN, k0 = wc.kb * kBlkK;
        dev::mbar_expect_tx(bar, kWBytes);
        dev::tma_load_2d_hint(dst, &p.tm_w[wc.gemm], bar, n0, k0, policy);
        dev::tma_load_2d_hint(dst + kHalfBytes, &p.tm_w[wc.gemm], bar, n0 + 64, k0, policy);
        wc.advance(p, cta, grid);
        if (++ws == C::kWStages) { ws = 0; wph ^= 1u; }
        progress = true;
      }
      // activations, as many as there are free slots and ready H tiles
      for (int i = 0; i < C::kXStages && !xc.done(p) && dev::mbar_test(x_empty + xs * 8, xph ^ 1u); ++i) {
        bool ready = true;
        if (xc.gemm == 1) {
          int const pt = xc.kb / p.h_kb_per_tile;  // gemm1 H tile holding k-block kb
          uint32_t const bit = 1u << (pt & 31);
          if (!(hbits[pt >> 5] & bit)) {
            uint64_t seen = expected;
            if (!failed) {
              // Batched poll: the semaphores of tiles pt .. pt+kPoll-1 are loaded back to back (relaxed, one
              // round trip for all), every ready one is marked, and one fence.acq_rel.gpu after the loads
              // makes them acquires (fence-based synchronization with the post_store release).
              uint64_t v[kPoll];
#pragma unroll
              for (int j = 0; j < kPoll; ++j)
                v[j] = pt + j < p.h_tiles ? ptx::ld_relaxed_gpu(p.h_sems + pt + j) : uint64_t(0);
              seen = v[0];
              bool any = false;
#pragma unroll
              for (int j = 0; j < kPoll; ++j) {
                if (pt + j < p.h_tiles && v[j] >= expected) {
                  hbits[(pt + j) >> 5] |= 1u << ((pt + j) & 31);
                  any = true;
                }
              }
              if (any) {
                ptx::fence_acq_rel_gpu();          // acquire: the H stores of every tile marked above
                dev::fence_proxy_async_global();   // generic-proxy H stores, before the TMA reads
              }
            }
            if (!(hbits[pt >> 5] & bit)) {
              ready = false;
              if (!failed) {
                uint64_t const now = ptx::globaltimer_ns();
                if (wait_start == 0) wait_start = now;
                bool const other_failed = ctx.error != nullptr && ptx::ld_relaxed_gpu(&ctx.error->flag) != 0u;
                if (other_failed || now - wait_start > ctx.timeout_ns) {
                  WaitSite const site{p.g[1].stage_id, p.g[0].stage_id, 0, xc.t, 0, pt, pt};
                  record_timeout_inline(ctx.error, site, expected, seen);
                  failed = true;
                }
              }
              if (failed) {  // go on without waiting: results undefined, the host reads the error record
                hbits[pt >> 5] |= bit;
                ready = true;
              }
            }
            if (ready) wait_start = 0;
          }
        }
        if (!ready) break;
        uint32_t const bar = x_full + xs * 8;
        dev::mbar_expect_tx(bar, C::kXBytes);
        dev::tma_load_2d(x_ring + xs * C::kXBytes, &p.tm_x[xc.gemm], bar, xc.kb * kBlkK, 0);
        xc.advance(p, cta, grid);
        if (++xs == C::kXStages) { xs = 0; xph ^= 1u; }
        progress = true;
      }
      if (!progress) __nanosleep(64);
    }
  }

};

template <typename T, int kMPad>
struct ChainWS : ChainCore<T, kMPad, Cfg<kMPad>> {
  using C = Cfg<kMPad>;
  using Core = ChainCore<T, kMPad, Cfg<kMPad>>;
  using Core::finish_piece;
  using Core::piece_slot;

  static constexpr int kKSteps = kBlkK / 16;  // m16n8k16 k-steps per k-block

  // Fragments of k-step kk of a stage: kNSub weight (A) fragments (ldmatrix.x4.trans) and the batch (B)
  // fragments (x2 for kMSub == 1, else one x4 per pair of n8 batch sub-tiles that has rows).
  static __device__ __forceinline__ void load_frags(uint32_t (&af)[C::kNSub][4], uint32_t (&bf)[C::kBFrags][4],
                                                    uint32_t wsb, uint32_t xsb, uint32_t const (&a_off)[C::kNSub],
                                                    int kk, int wm0, int lj, int lr, int m_rows) {
#pragma unroll
    for (int ns = 0; ns < C::kNSub; ++ns) detail::ldmatrix_x4_trans(af[ns], wsb + a_off[ns] + kk * 16 * 128);
    int const ch = kk * 2 + (lj & 1);  // 16-byte chunk of k in the (M_pad, 64) X box
    if constexpr (C::kMSub == 1) {
      int const m = wm0 + lr;
      detail::ldmatrix_x2(bf[0][0], bf[0][1], xsb + uint32_t(m * 128 + ((ch ^ lr) << 4)));
    } else {
#pragma unroll
      for (int ms2 = 0; ms2 < C::kMSub / 2; ++ms2) {
        if (wm0 + ms2 * 16 < m_rows) {  // batch rows that do not exist: no load, no mma (warp-uniform)
          int const m = wm0 + ms2 * 16 + (lj >> 1) * 8 + lr;
          detail::ldmatrix_x4(bf[ms2], xsb + uint32_t(m * 128 + ((ch ^ lr) << 4)));
        }
      }
    }
  }
  static __device__ __forceinline__ void mma_frags(float (&acc)[C::kNSub][C::kMSub][4],
                                                   uint32_t const (&af)[C::kNSub][4],
                                                   uint32_t const (&bf)[C::kBFrags][4], int wm0, int m_rows) {
    if constexpr (C::kMSub == 1) {
#pragma unroll
      for (int ns = 0; ns < C::kNSub; ++ns) detail::Mma<T>::run(acc[ns][0], af[ns], bf[0][0], bf[0][1]);
    } else {
#pragma unroll
      for (int ms2 = 0; ms2 < C::kMSub / 2; ++ms2) {
        if (wm0 + ms2 * 16 < m_rows) {
#pragma unroll
          for (int ns = 0; ns < C::kNSub; ++ns) {
            detail::Mma<T>::run(acc[ns][2 * ms2], af[ns], bf[ms2][0], bf[ms2][1]);
            detail::Mma<T>::run(acc[ns][2 * ms2 + 1], af[ns], bf[ms2][2], bf[ms2][3]);
          }
        }
      }
    }
  }

  // ---- consumers: 8 warps ----
  static __device__ __forceinline__ void consume(ChainParams const& p, RunCtx const& ctx, int cta, int grid,
                                                 uint32_t w_ring, uint32_t x_ring, uint32_t bars,
                                                 int64_t* ranges, int* flag, char* /*smem: v2 needs no scratch*/) {
    uint32_t const w_full = bars, w_empty = bars + C::kWStages * 8;
    uint32_t const x_full = bars + 2 * C::kWStages * 8, x_empty = x_full + C::kXStages * 8;
    int const lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    int const wn0 = (warp % C::kWarpsN) * C::kWN;  // first weight column of this warp in the tile
    int const wm0 = (warp / C::kWarpsN) * C::kWM;  // first batch row of this warp
    int const lj = lane >> 3, lr = lane & 7;
    int const m_rows = p.g[0].m;
    // ldmatrix.trans lane addresses in a W stage (bytes): matrix lj covers k rows (lj>>1)*8.., n cols (lj&1)*8..
    // W stage = 2 boxes (64 k, 64 n), 128-byte rows, chunk' = chunk ^ (k % 8) = chunk ^ lr.
    uint32_t a_off[C::kNSub];
#pragma unroll
    for (int ns = 0; ns < C::kNSub; ++ns) {
      int const n = wn0 + ns * 16 + (lj & 1) * 8;
      int const k = (lj >> 1) * 8 + lr;
      a_off[ns] = uint32_t((n >> 6) * kHalfBytes + k * 128 + ((((n & 63) >> 3) ^ lr) << 4));
    }

    float acc[C::kNSub][C::kMSub][4];
#pragma unroll
    for (int ns = 0; ns < C::kNSub; ++ns)
#pragma unroll
      for (int ms = 0; ms < C::kMSub; ++ms)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[ns][ms][j] = 0.f;

    dev::Cursor cur;
    cur.open(p, 0, cta, grid);
    int ws = 0, xs = 0;
    uint32_t wph = 0, xph = 0;
    while (!cur.done(p)) {
      dev::mbar_wait(w_full + ws * 8, wph);
      dev::mbar_wait(x_full + xs * 8, xph);
      uint32_t const wsb = w_ring + ws * kWBytes;
      uint32_t const xsb = x_ring + xs * C::kXBytes;
      // Software-pipelined fragments: the loads of k-steps [0, kAhead) are issued back to back right after the
      // full waits, then k-step kk issues the loads of kk + kAhead before its mma's (asm volatile keeps this
      // issue order). Fully unrolled: af/bf are indexed by constants only and stay in registers. The mma
      // order per accumulator (kk increasing, then ns, ms as before) is unchanged: results are bitwise v2's.
      if constexpr (C::kAhead > 0) {
        uint32_t af[kKSteps][C::kNSub][4];
        uint32_t bf[kKSteps][C::kBFrags][4];
#pragma unroll
        for (int kk = 0; kk < C::kAhead; ++kk) load_frags(af[kk], bf[kk], wsb, xsb, a_off, kk, wm0, lj, lr, m_rows);
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          if (kk + C::kAhead < kKSteps)
            load_frags(af[kk + C::kAhead], bf[kk + C::kAhead], wsb, xsb, a_off, kk + C::kAhead, wm0, lj, lr, m_rows);
          mma_frags(acc, af[kk], bf[kk], wm0, m_rows);
        }
      } else {  // M_pad = 128: v2's order (A of the k-step, then each B pair and its mma's), register-bound
#pragma unroll
        for (int kk = 0; kk < kKSteps; ++kk) {
          uint32_t af[C::kNSub][4];
#pragma unroll
          for (int ns = 0; ns < C::kNSub; ++ns) detail::ldmatrix_x4_trans(af[ns], wsb + a_off[ns] + kk * 16 * 128);
          int const ch = kk * 2 + (lj & 1);
#pragma unroll
          for (int ms2 = 0; ms2 < C::kMSub / 2; ++ms2) {
            if (wm0 + ms2 * 16 < m_rows) {
              int const m = wm0 + ms2 * 16 + (lj >> 1) * 8 + lr;
              uint32_t b[4];
              detail::ldmatrix_x4(b, xsb + uint32_t(m * 128 + ((ch ^ lr) << 4)));
#pragma unroll
              for (int ns = 0; ns < C::kNSub; ++ns) {
                detail::Mma<T>::run(acc[ns][2 * ms2], af[ns], b[0], b[1]);
                detail::Mma<T>::run(acc[ns][2 * ms2 + 1], af[ns], b[2], b[3]);
              }
            }
          }
        }
      }
      // The last mma's read the last fragments' registers, so every ldmatrix of this stage has completed here;
      // the release below frees the slots without waiting for any mma to finish.
      __syncwarp();
      if (lane == 0) {  // release the slots (arrive has .release.cta semantics: our ldmatrix reads come first)
        dev::mbar_arrive(w_empty + ws * 8);
        dev::mbar_arrive(x_empty + xs * 8);
      }
      if (++ws == C::kWStages) { ws = 0; wph ^= 1u; }
      if (++xs == C::kXStages) { xs = 0; xph ^= 1u; }

      if (cur.piece_end()) {
        int const g = cur.gemm, t = cur.t;
        StageArgs const& a = p.g[g];
        float* dst = piece_slot(p, cur, cta);  // (M_pad, BLK_N)
        int const gq = lane >> 2, tg = lane & 3;
#pragma unroll
        for (int ns = 0; ns < C::kNSub; ++ns)
#pragma unroll
          for (int ms = 0; ms < C::kMSub; ++ms) {
            int const n = wn0 + ns * 16 + gq;
            int const m = wm0 + ms * 8 + 2 * tg;
            if (m < a.m) {
              __stcg(dst + m * kBlkN + n, acc[ns][ms][0]);
              __stcg(dst + m * kBlkN + n + 8, acc[ns][ms][2]);
            }
            if (m + 1 < a.m) {
              __stcg(dst + (m + 1) * kBlkN + n, acc[ns][ms][1]);
              __stcg(dst + (m + 1) * kBlkN + n + 8, acc[ns][ms][3]);
            }
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[ns][ms][j] = 0.f;
          }
        finish_piece(p, ctx, grid, g, t, ranges, flag);
      }
      cur.advance(p, cta, grid);
    }
  }
};

// The persistent chain kernel of a ChainWS-like Impl (v2: ChainWS; v4: ring::ChainRing): barriers, roles,
// Impl::produce on one producer lane, Impl::consume on the consumer warps, then the epoch bump.
template <typename Impl>
__global__ void __launch_bounds__(kThreads, 1)
    chain_kernel(ChainParams const __grid_constant__ p, StreamState* state, SyncErrorInfo* error, uint64_t timeout_ns) {
  using C = typename Impl::C;
  extern __shared__ __align__(1024) char smem_raw[];
  uint32_t const raw = detail::smem_u32(smem_raw);
  uint32_t const base = (raw + 1023u) & ~1023u;  // SWIZZLE_128B boxes need 1024-byte aligned stages
  char* const gbase = smem_raw + (base - raw);
  uint32_t const w_ring = base, x_ring = base + C::kWStages * kWBytes, bars = base + C::kBarOff;
  int64_t* ranges = reinterpret_cast<int64_t*>(gbase + C::kRedOff);
  int* flag = reinterpret_cast<int*>(gbase + C::kFlagOff);
  uint32_t* hbits = reinterpret_cast<uint32_t*>(gbase + C::kBitsOff);

  RunCtx const ctx{ptx::ld_relaxed_gpu(&state->epoch), error, timeout_ns};
  int const warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;
  if (threadIdx.x == 0) {
    for (int i = 0; i < C::kWStages; ++i) {
      dev::mbar_init(bars + i * 8, 1);                                  // W full
      dev::mbar_init(bars + (C::kWStages + i) * 8, kConsumerWarps);     // W empty
    }
    for (int i = 0; i < C::kXStages; ++i) {
      dev::mbar_init(bars + (2 * C::kWStages + i) * 8, 1);                             // X full
      dev::mbar_init(bars + (2 * C::kWStages + C::kXStages + i) * 8, kConsumerWarps);  // X empty
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  if (warp == kConsumerWarps) {
    for (int i = lane; i < kMaxHTiles / 32; i += 32) hbits[i] = 0u;
    if (lane == 0) {
      dev::prefetch_tmap(&p.tm_w[0]);
      dev::prefetch_tmap(&p.tm_w[1]);
      dev::prefetch_tmap(&p.tm_x[0]);
      dev::prefetch_tmap(&p.tm_x[1]);
    }
  }
  __syncthreads();

  if (warp == kConsumerWarps) {
    if (lane == 0)
      Impl::produce(p, ctx, int(blockIdx.x), int(gridDim.x), w_ring, x_ring, bars, hbits);
    __syncwarp();
  } else {
    Impl::consume(p, ctx, int(blockIdx.x), int(gridDim.x), w_ring, x_ring, bars, ranges, flag, gbase);
  }
  close_run(state, ctx.epoch);  // __syncthreads (all roles converged), then the epoch bump by the last CTA
}

// ---- host side ----

// Workspace slots each GEMM needs with `grid` CTAs and `rounds` rounds (gemm1: <= rounds*grid + T1;
// gemm2: <= rounds*(grid + T2)). Fills the segment list when p != nullptr.
inline void build_segments(StageArgs const& a1, StageArgs const& a2, int rounds, int grid, ChainParams* p,
                           int64_t* slots1, int64_t* slots2) {
  int const t1 = tiles_of(a1.n), kb1 = kblocks_of(a1.k);
  int const t2 = tiles_of(a2.n), kb2 = kblocks_of(a2.k);
  int const kbpt = out_tile_cols(a1.act) / kBlkK;
  int ns = 0;
  int64_t base1 = 0, base2 = 0;
  auto gs_of = [&](int64_t blocks) { return blocks < grid ? blocks : int64_t(grid); };
  for (int r = 0; r < rounds; ++r) {
    int const lo = int(int64_t(t1) * r / rounds), hi = int(int64_t(t1) * (r + 1) / rounds);
    if (hi <= lo) continue;
    if (p) p->seg[ns++] = Seg{0, lo, hi, 0, kb1, base1};
    base1 += gs_of(int64_t(hi - lo) * kb1) + (hi - lo);
  }
  for (int r = 0; r < rounds; ++r) {
    int const lo = int(int64_t(t1) * r / rounds), hi = int(int64_t(t1) * (r + 1) / rounds);
    if (hi <= lo) continue;
    int const klo = std::min(kb2, lo * kbpt);
    int const khi = r == rounds - 1 ? kb2 : std::min(kb2, hi * kbpt);
    if (khi <= klo) continue;
    if (p) p->seg[ns++] = Seg{1, 0, t2, klo, khi, base2};
    base2 += gs_of(int64_t(t2) * (khi - klo)) + t2;
  }
  if (p) p->nseg = ns;
  if (slots1) *slots1 = base1;
  if (slots2) *slots2 = base2;
}

inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  return fn;
}

// 2D row-major (rows, cols):(ld, 1) tensor of 16-bit elements, box (box_rows, 64 cols), SWIZZLE_128B.
template <typename T>
inline bool encode_2d(CUtensorMap* tm, void const* ptr, int64_t rows, int64_t cols, int64_t ld, int box_rows,
                      bool weights) {
  auto enc = tensor_map_encoder();
  if (enc == nullptr) return false;
  CUtensorMapDataType const dt =
      std::is_same<T, __half>::value ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  cuuint64_t dims[2] = {cuuint64_t(cols), cuuint64_t(rows)};
  cuuint64_t strides[1] = {cuuint64_t(ld) * 2};
  cuuint32_t box[2] = {64u, cuuint32_t(box_rows)};
  cuuint32_t estr[2] = {1u, 1u};
  CUresult const r = enc(tm, dt, 2, const_cast<void*>(ptr), dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                         CU_TENSOR_MAP_SWIZZLE_128B,
                         weights ? CU_TENSOR_MAP_L2_PROMOTION_L2_256B : CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                         CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  return r == CUDA_SUCCESS;
}

template <typename Impl>
inline cudaError_t prepare_chain_kernel() {
  return cudaFuncSetAttribute(chain_kernel<Impl>, cudaFuncAttributeMaxDynamicSharedMemorySize, Impl::C::kSmemBytes);
}
template <typename T, int kMPad>
inline cudaError_t prepare_chain_ws() { return prepare_chain_kernel<ChainWS<T, kMPad>>(); }

// CTAs per SM of a chain kernel (1 with ~200 KB of shared memory).
template <typename Impl>
inline int chain_kernel_occupancy() {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, chain_kernel<Impl>, kThreads, Impl::C::kSmemBytes) !=
      cudaSuccess)
    return 0;
  return blocks;
}
template <typename T, int kMPad>
inline int chain_ws_occupancy() { return chain_kernel_occupancy<ChainWS<T, kMPad>>(); }

// Checks the preconditions and fills p (tensor maps, segments). nullptr on success, else what is wrong.
// occ: CTAs per SM of the kernel that will run p (chain_kernel_occupancy).
template <typename T, int kMPad>
inline char const* make_chain_params(StageArgs const& a1, StageArgs const& a2, int rounds, int grid, int occ,
                                     ChainParams* p) {
  auto misaligned = [](void const* q) { return (reinterpret_cast<uintptr_t>(q) & 15u) != 0; };
  for (StageArgs const* a : {&a1, &a2}) {
    if (a->m < 1 || a->m > kMPad) return "m must be in 1..M_pad";
    if (a->n % 8 || a->k % 8) return "n and k must be multiples of 8 (16-byte vectors)";
    if (a->ldx % 8 || a->ldw % 8 || a->ldo % 8) return "leading dimensions must be multiples of 8";
    if (a->ldx < a->k || a->ldw < a->n) return "ldx >= k and ldw >= n are required";
    if (a->act < 0 || a->act > 3) return "act must be identity, relu, gelu or swiglu";
    if (a->act == int(Act::kSwiglu) ? (a->n % 16 != 0 || a->ldo < a->n / 2) : a->ldo < a->n)
      return "SwiGLU needs n % 16 == 0 and ldo >= n/2; other acts need ldo >= n";
    if (misaligned(a->x) || misaligned(a->w) || misaligned(a->out) || misaligned(a->bias) || misaligned(a->ws))
      return "x, w, bias, out and ws must be 16-byte aligned";
    if (a->ws == nullptr || a->arrivals == nullptr) return "workspace and arrival counters are required";
  }
  if (a1.m != a2.m) return "both GEMMs must have the same m";
  int const h_cols = a1.act == int(Act::kSwiglu) ? a1.n / 2 : a1.n;
  if (a2.x != a1.out || a2.ldx != a1.ldo || a2.k != h_cols) return "gemm2's x must be gemm1's output (H), k = its columns";
  if (a1.post_sems == nullptr) return "gemm1 needs tile semaphores (post_sems): gemm2 waits on them";
  int const t1 = tiles_of(a1.n);
  if (t1 > kMaxHTiles) return "too many gemm1 tiles for the acquired-tile bitmap (kMaxHTiles)";
  if (rounds < 1 || rounds > kMaxRounds || rounds > t1) return "rounds must be in 1..4 and <= gemm1 tiles";
  if (grid < 1) return "grid must be >= 1";
  int dev = 0, sms = 0;
  if (cudaGetDevice(&dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess)
    return "cannot query the device";
  if (grid > occ * sms) return "grid must be co-resident (<= SMs x occupancy; call prepare_chain_ws first)";
  int64_t s1 = 0, s2 = 0;
  *p = ChainParams{};
  build_segments(a1, a2, rounds, grid, p, &s1, &s2);
  if (a1.ws_slots < s1 || a2.ws_slots < s2) return "workspace too small (see build_segments for the slot count)";
  p->g[0] = a1;
  p->g[1] = a2;
  p->h_kb_per_tile = out_tile_cols(a1.act) / kBlkK;
  p->h_tiles = t1;
  p->h_sems = a1.post_sems;
  if (!encode_2d<T>(&p->tm_w[0], a1.w, a1.k, a1.n, a1.ldw, kBlkK, true) ||
      !encode_2d<T>(&p->tm_w[1], a2.w, a2.k, a2.n, a2.ldw, kBlkK, true) ||
      !encode_2d<T>(&p->tm_x[0], a1.x, a1.m, a1.k, a1.ldx, kMPad, false) ||
      !encode_2d<T>(&p->tm_x[1], a2.x, a2.m, a2.k, a2.ldx, kMPad, false))
    return "cuTensorMapEncodeTiled failed (or the driver entry point is missing)";
  return nullptr;
}

template <typename T, int kMPad>
inline char const* make_chain_ws(StageArgs const& a1, StageArgs const& a2, int rounds, int grid, ChainParams* p) {
  return make_chain_params<T, kMPad>(a1, a2, rounds, grid, chain_ws_occupancy<T, kMPad>(), p);
}

template <typename Impl>
inline cudaError_t launch_chain_kernel(ChainParams const& p, int grid, StreamState* state, SyncErrorInfo* error,
                                       uint64_t timeout_ns, cudaStream_t stream) {
  chain_kernel<Impl><<<grid, kThreads, Impl::C::kSmemBytes, stream>>>(p, state, error, timeout_ns);
  return cudaGetLastError();
}
template <typename T, int kMPad>
inline cudaError_t launch_chain_ws(ChainParams const& p, int grid, StreamState* state, SyncErrorInfo* error,
                                   uint64_t timeout_ns, cudaStream_t stream) {
  return launch_chain_kernel<ChainWS<T, kMPad>>(p, grid, state, error, timeout_ns, stream);
}

}  // namespace cusync::stream::ws
