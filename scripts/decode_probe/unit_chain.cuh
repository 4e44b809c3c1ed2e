// decode_probe v6 ("unit"): the two-GEMM decode chain Y = act2(act1(X W1 + b1) W2) as one persistent kernel whose
// work is taken dynamically, in units of (64-column tile, K slab), from a ticket counter per GEMM.
//
// WHY (NOTES d26-d28): the landed kernel (bulk_chain.cuh) splits each GEMM statically into equal contiguous chunk
// ranges. Its consumers load X's slice per chunk from L2 (a global load under a saturated memory system), its
// gemm2 CTAs each read nearly all of H, so gemm2 starts at the slowest CTA's gemm1 end, and which SMs stream slowly
// changes from run to run, so a static split cannot balance. Here:
// - units are taken from a counter (a fast SM takes more); gemm1's units in tile-major order, so H's tiles complete
//   one after another from the first microseconds; gemm2's in slab-major order, so its first units need only H's
//   first tiles;
// - a unit's X slice (M_pad x at most kSlabK) is staged once in shared memory by an X warp, double-buffered, so the
//   consumer warpgroups only wait for a ring slot and issue wgmma;
// - a unit's partial goes to its own workspace slot (tile, slab), whoever took it, and the last unit of a tile
//   sums the tile's slots in slab order: the result does not depend on which CTA took which unit (bitwise the
//   same as the two-launch form, and from run to run). That finish runs in a poster warp, off the consumers' path.
//
// MEASURED (benchmarks/NOTES.md d29, d30, H100): gemm1 streams at the ring's pace and gemm2 no longer waits for the
// slowest gemm1 CTA, but gemm2's units run 1.3-2.3x slower than gemm1's (more so with M), so the chain is slower
// than the landed kernel at every measured point. d30's trace: under a full ring every global round trip (the
// poster's fence and atomic, a finish's reads, the X warp's polls and copies) costs 4-6 us, about a unit's ring
// time; finishes on finisher warps (poster 2) remove gemm1's tail, X by 16-byte-row TMA boxes is slower than
// cp.async. Three launch failures in timing graphs, not found. A probe, not a mode of the library.
//
// WARPS: 4 consumer warpgroups (warps 0-15; chunk j of a unit goes to warpgroup j % 4), the producer (warp 16:
// tickets, the unit ring, the weight ring of 16 KB bulk copies), the X warp (17) and the poster (18-22, by mode).
// Weights are packed by bulk_pack (bulk_chain.cuh's wgmma layout: 64-column tiles, 2 KB k-steps, a tile's k-steps
// consecutive), so a unit is one contiguous range of k-steps.
#pragma once

#include "cusync/sm90/bulk_chain.cuh"

namespace cusync::stream::unit {

constexpr int kWG = 4;
constexpr int kConsumerThreads = kWG * 128;
constexpr int kProducerWarp = kWG * 4, kXWarp = kProducerWarp + 1, kPosterWarp = kProducerWarp + 2;
// The poster (UnitParams::poster): 0, warp 18 alone; 1, warps 18-21 (a unit's partial summed and a tile's finish read
// by 128 threads); 2, warp 18 posts the units and warps 19-22 finish the tiles it hands them (a queue in shared
// memory). The same sums in the same order in every mode.
constexpr int kPosterWarps = 5, kPosterBar = 1 + kWG, kFinBar = 2 + kWG, kFinQueue = 8;
constexpr int kThreads = (kPosterWarp + kPosterWarps) * 32;
constexpr int kStepBytes = 2048, kChunkSteps = 8, kChunkBytes = kStepBytes * kChunkSteps, kTileN = 64;
constexpr int kUnitRing = 4;

template <int kMPad>
struct UnitCfg {
  static constexpr int kSlabChunks = 8;  // X: M_pad x kSlabK, 16 or 32 KB
  static constexpr int kSlabK = kSlabChunks * 128;
  static constexpr int kXBytes = kMPad * kSlabK * 2;
  static constexpr int kScratchBytes = kWG * kTileN * kMPad * 4;  // one buffer: every warpgroup's partial
  static constexpr int kStages = kMPad == 8 ? 10 : 8;
  // the consumers' wait on a slot's previous consumption (empty, one phase back) cannot itself alias while a unit's
  // chunks fit the ring
  static_assert(kStages >= kSlabChunks, "a unit's chunks within the ring");
  static constexpr int kXOff = kStages * kChunkBytes;
  static constexpr int kScratchOff = kXOff + 2 * kXBytes;
  static constexpr int kBarOff = kScratchOff + 2 * kScratchBytes;
  // barriers: full[S], empty[S], xfull[2], xempty[2], sfull[2], sempty[2], ufull[4], uempty[4]
  static constexpr int kBars = 2 * kStages + 8 + 2 * kUnitRing;
  static constexpr int kUnitsOff = kBarOff + kBars * 8;
  static constexpr int kSmemBytes = kUnitsOff + kUnitRing * 4;
  static_assert(kSmemBytes <= 227 * 1024, "shared memory");
};

struct UnitGemm {
  void const* w;        // packed (bulk_pack)
  void const* x;        // (M, K) row-major, ld = ldx
  int64_t ldx;
  void const* bias;     // per packed column, or nullptr
  void* out;            // (M, n_out) row-major, ld = ldo
  CUtensorMap tmx;      // X's map for x_tma (see UnitParams::x_tma): one box a unit
  int64_t ldo;
  int k, n;             // K, packed columns (2 N1 for SwiGLU, interleaved in groups of 8)
  int act;              // Act
  int tiles, ksteps, chunks, slabs, units;
  float* ws;            // units x 64 x M_pad partials
  unsigned long long* count;  // per tile: units arrived (epoch x slabs at the end of a run)
  unsigned long long* ticket; // the unit counter
};

// Across runs (zeroed once): the run count, each GEMM's epoch (runs of it), the CTAs done, and the sums over past
// runs of each GEMM's slabs (a tile's arrivals) and units + grid (tickets taken), which differ by M_pad.
struct UnitState {
  unsigned long long run, epoch[2], done, cbase[2], tbase[2];
};

struct UnitParams {
  UnitGemm gm[2];
  int m, grid, which;   // which: 1 gemm1, 2 gemm2, 3 both (chained: gemm2 waits for H's tiles)
  uint32_t* hready;     // per gemm1 tile: the epoch that completed it
  UnitState* state;
  unsigned long long* error;  // first timeout: (1 << 63) | gemm1 tile
  uint64_t timeout_ns;
  int skip_post;        // a gemm1 tile whose H is never flagged (the negative test), or -1
  uint64_t* trace;      // kTraceWords a CTA (globaltimer ns, counts), or nullptr
  int g2_tile_major;    // gemm2's units in tile-major order too (a probe of the order; slab-major by default)
  uint64_t* utrace;     // per CTA kUnitTraceMax units x 4 words (consumer thread 0), or nullptr
  int poster;           // 0, 1, 2: see kPosterWarps
  int x_tma;            // X staged by one TMA box a unit (lane 0 of the X warp), else (0) by the warp's cp.async:
                        // 1, map (8 k, M, K / 8), box (8, M_pad, 128), 16-byte rows in B's no-swizzle layout;
                        // 2, map (64 k, M, K / 64), box (64, M_pad, 16), 128-byte rows in the 128-byte swizzle
  int no_x;             // a probe of the X stage's cost: GEMM g's X not copied where bit g is set (wrong results)
};
// The per-unit trace (consumer thread 0, globaltimer ns): before the X wait, after it, after the unit's chunks, after
// the scratch wait; unit k of the CTA (both GEMMs in order, end marks not counted) at [k * 4].
constexpr int kUnitTraceMax = 256;
// The per-CTA trace: entry, the consumers' gemm1 end, gemm2's first X staged, the CTA's end, its SM, gemm1 and
// gemm2 units taken, the producer's last gemm1 copy, the poster's time in tile finishes and waiting for partials (ns,
// per GEMM), its finishes per GEMM.
// Then the poster's time in its arrivals (fence + atomic) per GEMM and in gemm1's flags (fence + release store).
enum : int { kAtEntry = 0, kAtDone1, kAtX2, kAtEnd, kSm, kUnits1, kUnits2, kAtIssued1, kFinNs1, kFinNs2, kPostWaitNs1,
             kPostWaitNs2, kFins1, kFins2, kArrNs1, kArrNs2, kFlagNs1, kTraceWords };

namespace d {
using namespace cusync::stream::detail;
__device__ __forceinline__ uint32_t smem_addr(void const* p) { return uint32_t(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ unsigned long long atom_add_acq_rel(unsigned long long* p, unsigned long long v) {
  unsigned long long old;
  asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(p), "l"(v) : "memory");
  return old;
}
__device__ __forceinline__ uint32_t ld_acquire_u32(uint32_t const* p) {
  uint32_t v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ void st_release_u32(uint32_t* p, uint32_t v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t now_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ void sts16(uint32_t a, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(a), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// unit u of GEMM g -> (tile, slab): gemm1 tile-major, gemm2 slab-major
__device__ __forceinline__ void unit_pos(UnitGemm const& b, int g, int u, int& tile, int& slab, bool tile_major2) {
  if (g == 0 || tile_major2) { tile = u / b.slabs; slab = u % b.slabs; }
  else { slab = u / b.tiles; tile = u % b.tiles; }
}
__device__ __forceinline__ void stamp(UnitParams const& p, int at, uint64_t v) {
  if (p.trace != nullptr) p.trace[int64_t(blockIdx.x) * kTraceWords + at] = v;
}
__device__ __forceinline__ int slab_c0(UnitGemm const& b, int s) { return int(int64_t(s) * b.chunks / b.slabs); }
}  // namespace d

template <typename T, int kMPad>
__global__ void __launch_bounds__(kThreads, 1) unit_chain_kernel(UnitParams const __grid_constant__ p) {
  using C = UnitCfg<kMPad>;
  constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
  extern __shared__ __align__(1024) char smem[];
  __shared__ uint64_t fq_bar[2 * kFinQueue];  // the finish queue's full and empty barriers (poster 2)
  __shared__ int fq[kFinQueue];
  uint32_t const base = d::smem_addr(smem);
  uint32_t const ring = base, xbuf = base + C::kXOff, bars = base + C::kBarOff;
  float* const scratch = reinterpret_cast<float*>(smem + C::kScratchOff);
  int* const units = reinterpret_cast<int*>(smem + C::kUnitsOff);
  auto full = [&](int s) { return bars + 8 * s; };
  auto empty = [&](int s) { return bars + 8 * (C::kStages + s); };
  auto xfull = [&](int b) { return bars + 8 * (2 * C::kStages + b); };
  auto xempty = [&](int b) { return bars + 8 * (2 * C::kStages + 2 + b); };
  auto sfull = [&](int b) { return bars + 8 * (2 * C::kStages + 4 + b); };
  auto sempty = [&](int b) { return bars + 8 * (2 * C::kStages + 6 + b); };
  auto ufull = [&](int i) { return bars + 8 * (2 * C::kStages + 8 + i); };
  auto uempty = [&](int i) { return bars + 8 * (2 * C::kStages + 8 + kUnitRing + i); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < C::kStages; ++s) { ws::dev::mbar_init(full(s), 1); ws::dev::mbar_init(empty(s), 128); }
    for (int b = 0; b < 2; ++b) {
      ws::dev::mbar_init(xfull(b), p.x_tma ? 1 : 32); ws::dev::mbar_init(xempty(b), kConsumerThreads);
      ws::dev::mbar_init(sfull(b), kConsumerThreads); ws::dev::mbar_init(sempty(b), p.poster == 1 ? 128 : 32);
    }
    for (int i = 0; i < kUnitRing; ++i) {
      ws::dev::mbar_init(ufull(i), 1);
      ws::dev::mbar_init(uempty(i), kConsumerThreads + 32 + (p.poster == 1 ? 128 : 32));
    }
    for (int i = 0; i < kFinQueue; ++i) {
      ws::dev::mbar_init(d::smem_addr(&fq_bar[i]), 1);
      ws::dev::mbar_init(d::smem_addr(&fq_bar[kFinQueue + i]), 128);
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    d::stamp(p, kAtEntry, d::now_ns());
    uint32_t sm;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
    d::stamp(p, kSm, sm);
  }
  __syncthreads();
  // This launch's run number and the epochs of the GEMMs it runs (the previous launch's last CTA wrote them).
  unsigned long long const run = p.state->run + 1;
  unsigned long long epoch[2];
  unsigned long long cbase[2], tbase[2];
  for (int g = 0; g < 2; ++g) {
    epoch[g] = p.state->epoch[g] + ((p.which >> g) & 1);
    cbase[g] = p.state->cbase[g];
    tbase[g] = p.state->tbase[g];
  }
  bool const chained = p.which == 3;
  // A reader's next entry of the unit ring (the producer's sequence: gemm1's units, -1, gemm2's units, -1).
  auto take_unit = [&](int& n) {
    int const ui = n % kUnitRing;
    ws::dev::mbar_wait(ufull(ui), (n / kUnitRing) & 1);
    int const u = units[ui];
    ws::dev::mbar_arrive(uempty(ui));
    ++n;
    return u;
  };
  int const warp = int(threadIdx.x) >> 5, lane = int(threadIdx.x) & 31;

  // Every role walks the same unit sequence: gemm1's units, an end mark, gemm2's, an end mark (for the GEMMs run).
  if (warp == kProducerWarp) {
    if (lane == 0) {
      uint64_t const policy = cusync::stream::detail::policy_evict_first();
      int n = 0;         // unit ring index
      int64_t chunk = 0;  // the CTA's chunks so far (ring position)
      for (int g = 0; g < 2; ++g) {
        if (!((p.which >> g) & 1)) continue;
        UnitGemm const& b = p.gm[g];
        unsigned long long const first = tbase[g];
        unsigned long long next = atomicAdd(b.ticket, 1ull) - first;
        for (int taken = 0;; ++taken) {
          int const u = next < (unsigned long long)b.units ? int(next) : -1;
          int const ui = n % kUnitRing;
          ws::dev::mbar_wait(uempty(ui), ((n / kUnitRing) & 1) ^ 1);
          units[ui] = u;
          ws::dev::mbar_arrive(ufull(ui));
          ++n;
          if (u < 0) {
            d::stamp(p, g == 0 ? kUnits1 : kUnits2, uint64_t(taken));
            if (g == 0) d::stamp(p, kAtIssued1, d::now_ns());
            break;
          }
          int tile, slab;
          d::unit_pos(b, g, u, tile, slab, p.g2_tile_major != 0);
          int const c0 = d::slab_c0(b, slab), c1 = d::slab_c0(b, slab + 1);
          char const* w = static_cast<char const*>(b.w) + int64_t(tile) * b.ksteps * kStepBytes;
          for (int c = c0; c < c1; ++c, ++chunk) {
            // The next ticket two chunks before this unit's end: late enough that a CTA holds at most about one
            // unit when the counter runs out (the tail), early enough that the atomic's round trip is hidden.
            if (c == (c1 - 2 > c0 ? c1 - 2 : c0)) next = atomicAdd(b.ticket, 1ull) - first;
            int const slot = int(chunk % C::kStages);
            uint32_t const ph = uint32_t(chunk / C::kStages) & 1u;
            ws::dev::mbar_wait(empty(slot), ph ^ 1u);
            int const steps = min(kChunkSteps, b.ksteps - c * kChunkSteps);
            uint32_t const bytes = uint32_t(steps) * kStepBytes;
            ws::dev::mbar_expect_tx(full(slot), bytes);
            bulk::detail::bulk_load(ring + slot * kChunkBytes, w + int64_t(c) * kChunkBytes, bytes, full(slot), policy);
          }
        }
      }
    }
    __syncwarp();
  } else if (warp == kXWarp) {
    int n = 0, ux = 0;  // unit ring index; units staged (X buffer index)
    int known = 0;      // gemm1 tiles [0, known) seen flagged
    for (int g = 0; g < 2; ++g) {
      if (!((p.which >> g) & 1)) continue;
      UnitGemm const& b = p.gm[g];
      int const hpt = p.gm[0].act == int(Act::kSwiglu) ? kTileN / 2 : kTileN;  // H columns per gemm1 tile
      for (;;) {
        int const u = take_unit(n);
        if (u < 0) break;
        int tile, slab;
        d::unit_pos(b, g, u, tile, slab, p.g2_tile_major != 0);
        int const k0 = d::slab_c0(b, slab) * 128, k1 = min(d::slab_c0(b, slab + 1) * 128, b.k);
        int const xb = ux & 1;
        ws::dev::mbar_wait(xempty(xb), ((ux >> 1) & 1) ^ 1);
        if (g == 1 && chained && (k1 - 1) / hpt >= known) {
          // H's columns [k0, k1) are gemm1's tiles k0 / hpt .. (k1 - 1) / hpt: a lane polls each (32 at a time, one
          // round trip for all of them), then the warp knows tiles [0, known) flagged (gemm2's slabs come in order).
          int const t_lo = k0 / hpt > known ? k0 / hpt : known, t_hi = (k1 - 1) / hpt;
          uint64_t const t0 = d::now_ns();
          for (int tb = t_lo; tb <= t_hi; tb += 32) {
            int const t = tb + lane;
            bool ok = t > t_hi;
            for (int spins = 0;; ++spins) {
              if (!ok) ok = d::ld_acquire_u32(p.hready + t) >= uint32_t(epoch[0]);
              if (__all_sync(0xffffffffu, ok)) break;
              if (spins > 4) __nanosleep(100);
              if ((spins & 63) == 63 && __shfl_sync(0xffffffffu, int(d::now_ns() - t0 > p.timeout_ns), 0)) {
                if (!ok) atomicCAS(p.error, 0ull, (1ull << 63) | (unsigned long long)t);
                break;  // warp-uniform: lane 0's clock decides
              }
            }
          }
          __syncwarp();  // every lane's H loads below after every lane's acquire
          if (k0 / hpt <= known) known = t_hi + 1;
        }
        // X (M_pad x kSlabK) in the B operand's no-swizzle K-major layout: (m / 8) * kSlabK * 16 + (k / 8) * 128 +
        // (m % 8) * 16 + (k % 8) * 2; zeros past M and past K.
        uint32_t const dst = xbuf + xb * C::kXBytes;
        if (p.x_tma) {  // one box from k0's group (k0 / 8 or k0 / 64), zeros past M and K
          if (lane == 0) {
            if (g == 1 && chained) asm volatile("fence.proxy.async.global;" ::: "memory");
            ws::dev::mbar_expect_tx(xfull(xb), uint32_t(C::kXBytes));  // lane 0's arrival (the count is 1) and the bytes
            if (!((p.no_x >> g) & 1))
              asm volatile(
                  "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], [%2];"
                  ::"r"(dst), "l"(reinterpret_cast<uint64_t>(&b.tmx)), "r"(xfull(xb)), "r"(0), "r"(0), "r"(k0 / (p.x_tma == 2 ? 64 : 8))
                  : "memory");
            else
              asm volatile("mbarrier.complete_tx.shared::cta.b64 [%0], %1;" ::"r"(xfull(xb)), "r"(uint32_t(C::kXBytes)) : "memory");
          }
          if (g == 1 && lane == 0 && p.trace != nullptr && p.trace[int64_t(blockIdx.x) * kTraceWords + kAtX2] == 0)
            d::stamp(p, kAtX2, d::now_ns());
          __syncwarp();
          ++ux;
          continue;
        }
        T const* x = static_cast<T const*>(b.x);
        constexpr int kUnits16 = kMPad * C::kSlabK / 8;
        // cp.async (16 bytes, L2 only), all of the lane's copies in flight at once; zero-filled past M and K.
        for (int i = ((p.no_x >> g) & 1) ? kUnits16 + lane : lane; i < kUnits16; i += 32) {
          int const m = i / (C::kSlabK / 8), k = k0 + (i % (C::kSlabK / 8)) * 8;
          bool const in = m < p.m && k < k1;
          T const* src = in ? x + int64_t(m) * b.ldx + k : x;
          asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst + (m / 8) * C::kSlabK * 16 +
                                                                            ((k - k0) / 8) * 128 + (m % 8) * 16),
                       "l"(src), "r"(in ? 16 : 0)
                       : "memory");
        }
        asm volatile("cp.async.wait_all;" ::: "memory");
        gmma::fence_proxy_shared();
        if (g == 1 && lane == 0 && p.trace != nullptr && p.trace[int64_t(blockIdx.x) * kTraceWords + kAtX2] == 0)
          d::stamp(p, kAtX2, d::now_ns());
        ws::dev::mbar_arrive(xfull(xb));
        ++ux;
      }
    }
  } else if (warp >= kPosterWarp) {
    // The poster: nt threads (warp 18, or warps 18-21 with poster 1). Per unit: the warpgroups' partials summed in
    // warpgroup order to the unit's slot, the tile's arrival. The tile's last unit is finished in slab order by fnt
    // threads (the poster's, or warps 19-22's with poster 2): thread ft, features fa, fb of pair ft % 32, rows
    // 4 q .. 4 q + 3 for q = ft / 32, ft / 32 + fnt / 32, ...
    int const mode = p.poster;
    int const pt = int(threadIdx.x) - kPosterWarp * 32;
    int const nt = mode == 1 ? 128 : 32;
    bool const finisher = mode == 2 && pt >= 32;
    int const ft = finisher ? pt - 32 : pt, fnt = mode == 2 ? 128 : nt;
    __shared__ unsigned long long s_old;
    auto psync = [&] {
      if (nt == 32) __syncwarp();
      else asm volatile("bar.sync %0, %1;" ::"r"(kPosterBar), "r"(nt) : "memory");
    };
    auto fsync = [&] {
      if (mode != 2) psync();
      else asm volatile("bar.sync %0, %1;" ::"r"(kFinBar), "r"(fnt) : "memory");
    };
    bool const ftimed = ft == 0 && p.trace != nullptr;
    uint64_t fin_ns = 0, flag_ns = 0, fins = 0;
    auto finish = [&](int g, int tile) {
      UnitGemm const& b = p.gm[g];
      bool const swiglu = b.act == int(Act::kSwiglu);
      uint64_t const tf = ftimed ? d::now_ns() : 0;
      int const pair = ft % 32;
      int const fa = swiglu ? 16 * (pair / 8) + pair % 8 : 2 * pair, fb = swiglu ? fa + 8 : fa + 1;
      int const ca = tile * kTileN + fa, cb = tile * kTileN + fb;
      float const ba = b.bias != nullptr && ca < b.n ? detail::to_f(static_cast<T const*>(b.bias)[ca]) : 0.f;
      float const bb = b.bias != nullptr && cb < b.n ? detail::to_f(static_cast<T const*>(b.bias)[cb]) : 0.f;
      T* const out = static_cast<T*>(b.out);
      auto act = [&](float r) {
        switch (b.act) {
          case int(Act::kRelu): return fmaxf(r, 0.f);
          case int(Act::kGelu): return detail::gelu_erf(r);
          case int(Act::kGeluTanh): return detail::gelu_tanh(r);
          case int(Act::kSilu): return detail::silu(r);
          default: return r;
        }
      };
      float const* ts = b.ws + int64_t(tile) * b.slabs * (kTileN * kMPad);
      for (int q = ft / 32; 4 * q < kMPad && 4 * q < p.m; q += fnt / 32) {
        float4 va = make_float4(0.f, 0.f, 0.f, 0.f), vb = va;
#pragma unroll 8
        for (int s = 0; s < b.slabs; ++s) {
          float4 const qa = __ldcg(reinterpret_cast<float4 const*>(ts + s * kTileN * kMPad + fa * kMPad + 4 * q));
          float4 const qb = __ldcg(reinterpret_cast<float4 const*>(ts + s * kTileN * kMPad + fb * kMPad + 4 * q));
          va.x += qa.x; va.y += qa.y; va.z += qa.z; va.w += qa.w;
          vb.x += qb.x; vb.y += qb.y; vb.z += qb.z; vb.w += qb.w;
        }
        float const ra[4] = {va.x, va.y, va.z, va.w}, rb[4] = {vb.x, vb.y, vb.z, vb.w};
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          int const m = 4 * q + r;
          if (m >= p.m) break;
          if (swiglu) {
            int const hc = tile * (kTileN / 2) + pair;
            if (hc < b.n / 2) out[int64_t(m) * b.ldo + hc] = detail::from_f<T>(detail::silu(ra[r] + ba) * (rb[r] + bb));
          } else {
            if (ca < b.n) out[int64_t(m) * b.ldo + ca] = detail::from_f<T>(act(ra[r] + ba));
            if (cb < b.n) out[int64_t(m) * b.ldo + cb] = detail::from_f<T>(act(rb[r] + bb));
          }
        }
      }
      if (g == 0 && tile != p.skip_post) {
        fsync();  // every finishing thread's H stores before the flag
        if (ft == 0) {
          uint64_t const tg = ftimed ? d::now_ns() : 0;
          ptx::fence_acq_rel_gpu();
          d::st_release_u32(p.hready + tile, uint32_t(epoch[0]));
          if (ftimed) flag_ns += d::now_ns() - tg;
        }
      }
      if (ftimed) { fin_ns += d::now_ns() - tf; ++fins; }
    };
    auto fin_stamps = [&](int g) {
      if (ftimed) {
        d::stamp(p, kFinNs1 + g, fin_ns); d::stamp(p, kFins1 + g, fins);
        if (g == 0) d::stamp(p, kFlagNs1, flag_ns);
      }
      fin_ns = flag_ns = fins = 0;
    };
    if (finisher) {
      // poster 2's finishers: the tiles the poster hands over, each GEMM's list ended by -1
      if (ft < fnt) {
        int qi = 0;
        for (int g = 0; g < 2; ++g) {
          if (!((p.which >> g) & 1)) continue;
          for (;; ++qi) {
            int const e = qi % kFinQueue;
            ws::dev::mbar_wait(d::smem_addr(&fq_bar[e]), (qi / kFinQueue) & 1);
            int const tile = fq[e];
            ws::dev::mbar_arrive(d::smem_addr(&fq_bar[kFinQueue + e]));
            if (tile < 0) { ++qi; break; }
            finish(g, tile);
          }
          fin_stamps(g);
        }
      }
    } else if (pt < nt) {
      int n = 0, us = 0, qi = 0;
      auto hand = [&](int tile) {  // poster 2: the tile to the finishers (lane 0)
        if (pt == 0) {
          int const e = qi % kFinQueue;
          ws::dev::mbar_wait(d::smem_addr(&fq_bar[kFinQueue + e]), ((qi / kFinQueue) & 1) ^ 1);
          fq[e] = tile;
          ws::dev::mbar_arrive(d::smem_addr(&fq_bar[e]));
        }
        ++qi;
      };
      for (int g = 0; g < 2; ++g) {
        if (!((p.which >> g) & 1)) continue;
        UnitGemm const& b = p.gm[g];
        uint64_t wait_ns = 0, arr_ns = 0;
        bool const timed = pt == 0 && p.trace != nullptr;
        for (;;) {
          int const u = take_unit(n);
          if (u < 0) break;
          int tile, slab;
          d::unit_pos(b, g, u, tile, slab, p.g2_tile_major != 0);
          int const sb = us & 1;
          uint64_t const tw = timed ? d::now_ns() : 0;
          ws::dev::mbar_wait(sfull(sb), (us >> 1) & 1);
          if (timed) wait_ns += d::now_ns() - tw;
          float const* sc = scratch + sb * (kWG * kTileN * kMPad);
          float* const slot = b.ws + (int64_t(tile) * b.slabs + slab) * (kTileN * kMPad);
          for (int i = pt; i < kTileN * kMPad / 4; i += nt) {
            float4 a = *reinterpret_cast<float4 const*>(sc + 4 * i);
#pragma unroll
            for (int w = 1; w < kWG; ++w) {
              float4 const q = *reinterpret_cast<float4 const*>(sc + w * kTileN * kMPad + 4 * i);
              a.x += q.x; a.y += q.y; a.z += q.z; a.w += q.w;
            }
            __stcg(reinterpret_cast<float4*>(slot + 4 * i), a);
          }
          ws::dev::mbar_arrive(sempty(sb));
          ++us;
          psync();  // every poster thread's slot stores before the arrival
          if (pt == 0) {
            uint64_t const ta = timed ? d::now_ns() : 0;
            ptx::fence_acq_rel_gpu();
            s_old = d::atom_add_acq_rel(b.count + tile, 1ull);
            if (timed) arr_ns += d::now_ns() - ta;
          }
          psync();  // s_old is next written after the next unit's first psync, which every thread reaches after this read
          if (s_old + 1 != cbase[g] + (unsigned long long)b.slabs) continue;
          if (mode == 2) hand(tile);  // the finishers' acquire: the poster's atomic, then the queue's barrier
          else finish(g, tile);
        }
        if (mode == 2) hand(-1);
        else fin_stamps(g);
        if (timed) { d::stamp(p, kPostWaitNs1 + g, wait_ns); d::stamp(p, kArrNs1 + g, arr_ns); }
      }
    }
  } else {
    // Consumers: warpgroup wg takes chunks j = wg, wg + 4, ... of every unit.
    int const wg = warp / 4, wt = int(threadIdx.x) % 128;
    int n = 0, ux = 0;
    int64_t chunk = 0;
    for (int g = 0; g < 2; ++g) {
      if (!((p.which >> g) & 1)) continue;
      UnitGemm const& b = p.gm[g];
      for (;;) {
        int const u = take_unit(n);
        if (u < 0) {
          if (g == 0 && threadIdx.x == 0) d::stamp(p, kAtDone1, d::now_ns());
          break;
        }
        int tile, slab;
        d::unit_pos(b, g, u, tile, slab, p.g2_tile_major != 0);
        int const c0 = d::slab_c0(b, slab), nch = d::slab_c0(b, slab + 1) - c0;
        int const xb = ux & 1;
        float acc[kMPad / 2];
#pragma unroll
        for (int i = 0; i < kMPad / 2; ++i) acc[i] = 0.f;
        uint64_t* const ut = p.utrace != nullptr && threadIdx.x == 0 && ux < kUnitTraceMax
                                 ? p.utrace + (int64_t(blockIdx.x) * kUnitTraceMax + ux) * 4 : nullptr;
        if (ut) ut[0] = d::now_ns() | (uint64_t(g) << 63);
        ws::dev::mbar_wait(xfull(xb), (ux >> 1) & 1);
        if (ut) ut[1] = d::now_ns();
        uint32_t const xa = xbuf + xb * C::kXBytes;
        for (int j = wg; j < nch; j += kWG) {
          int64_t const ci = chunk + j;
          int const slot = int(ci % C::kStages);
          uint32_t const ph = uint32_t(ci / C::kStages) & 1u;
          // A warpgroup takes every kWG-th chunk of a unit, so the slot's previous chunk (ci - kStages) may be another
          // warpgroup's and still in flight: full's phase of the same parity two uses back has completed, and a wait
          // on `full` alone would pass at once (stale data; its 128 arrivals would then complete the other chunk's
          // empty phase, and the producer's expect_tx would arrive on a spent phase: the timing graphs' launch
          // failures and stall). Waiting first for that chunk's consumption (empty, one phase back) orders it.
          ws::dev::mbar_wait(empty(slot), ph ^ 1u);
          ws::dev::mbar_wait(full(slot), ph);
          uint32_t const wa = ring + slot * kChunkBytes;
          int const steps = min(kChunkSteps, b.ksteps - (c0 + j) * kChunkSteps);
          if (steps < kChunkSteps) {  // a tile's short last chunk: zeros past its k-steps (the slot's old bytes)
            for (int o = steps * kStepBytes + wt * 16; o < kChunkBytes; o += 128 * 16) d::sts16(wa + o, make_uint4(0, 0, 0, 0));
            gmma::fence_proxy_shared();
            asm volatile("bar.sync %0, 128;" ::"r"(1 + wg) : "memory");
          }
          gmma::fence_regs(acc);
          gmma::fence();
#pragma unroll
          for (int s = 0; s < kChunkSteps; ++s)
            gmma::mma_64xN<kMPad, kBf16>(gmma::desc_k_major(wa + s * kStepBytes, 128, 256),
                                         p.x_tma == 2 ? gmma::desc_k_major_sw128(xa + ((j * kChunkSteps + s) >> 2) * (kMPad * 128) +
                                                                                     ((j * kChunkSteps + s) & 3) * 32, 1024)
                                         : p.x_tma ? gmma::desc_k_major(xa + (j * kChunkSteps + s) * (2 * kMPad * 16), kMPad * 16, 128)
                                                   : gmma::desc_k_major(xa + (j * kChunkSteps + s) * 256, 128, C::kSlabK * 16),
                                         acc);
          gmma::commit();
          gmma::wait<0>();
          gmma::fence_regs(acc);
          ws::dev::mbar_arrive(empty(slot));
        }
        chunk += nch;
        if (ut) ut[2] = d::now_ns();
        ws::dev::mbar_arrive(xempty(xb));
        ++ux;
        // The warpgroup's partial to its scratch: thread (warp w, lane l) holds features 16 w + l / 4 (+ 8) and
        // rows 8 i + 2 (l % 4) (+ 1) of M_pad.
        int const sb = (ux - 1) & 1;
        ws::dev::mbar_wait(sempty(sb), (((ux - 1) >> 1) & 1) ^ 1);
        if (ut) ut[3] = d::now_ns();
        float* const sc = scratch + sb * (kWG * kTileN * kMPad) + wg * (kTileN * kMPad);
        int const w4 = warp % 4, f0 = 16 * w4 + lane / 4;
#pragma unroll
        for (int i = 0; i < kMPad / 8; ++i) {
          int const m = 8 * i + 2 * (lane % 4);
          *reinterpret_cast<float2*>(sc + f0 * kMPad + m) = make_float2(acc[4 * i], acc[4 * i + 1]);
          *reinterpret_cast<float2*>(sc + (f0 + 8) * kMPad + m) = make_float2(acc[4 * i + 2], acc[4 * i + 3]);
        }
        ws::dev::mbar_arrive(sfull(sb));
      }
    }
  }
  // The run's end: the last CTA records the run and the epochs for the next launch.
  __syncthreads();
  if (threadIdx.x == 0) {
    d::stamp(p, kAtEnd, d::now_ns());
    __threadfence();
    unsigned long long const done = atomicAdd(&p.state->done, 1ull) + 1;
    if (done == run * (unsigned long long)p.grid) {
      for (int g = 0; g < 2; ++g) {
        p.state->epoch[g] = epoch[g];
        if ((p.which >> g) & 1) {
          p.state->cbase[g] = cbase[g] + (unsigned long long)p.gm[g].slabs;
          p.state->tbase[g] = tbase[g] + (unsigned long long)(p.gm[g].units + p.grid);
        }
      }
      p.state->run = run;
      __threadfence();
    }
  }
}

// Host: the unit split of one GEMM (packed bytes by bulk_pack), its workspace size in floats.
inline void unit_make(UnitGemm& b, int k, int n, int mpad) {
  b.k = k; b.n = n;
  b.tiles = (n + kTileN - 1) / kTileN;
  b.ksteps = (k + 15) / 16;
  b.chunks = (b.ksteps + kChunkSteps - 1) / kChunkSteps;
  int const per = mpad == 8 ? UnitCfg<8>::kSlabChunks : UnitCfg<16>::kSlabChunks;
  b.slabs = (b.chunks + per - 1) / per;
  b.units = b.tiles * b.slabs;
}
inline int64_t unit_ws_floats(UnitGemm const& b, int mpad) { return int64_t(b.units) * kTileN * mpad; }

template <typename T, int kMPad>
cudaError_t unit_prepare() {
  return cudaFuncSetAttribute(unit_chain_kernel<T, kMPad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              UnitCfg<kMPad>::kSmemBytes);
}
template <typename T, int kMPad>
cudaError_t unit_launch(UnitParams const& p, cudaStream_t st) {
  unit_chain_kernel<T, kMPad><<<p.grid, kThreads, UnitCfg<kMPad>::kSmemBytes, st>>>(p);
  return cudaGetLastError();
}

}  // namespace cusync::stream::unit
