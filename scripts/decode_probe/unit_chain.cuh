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
// MEASURED (benchmarks/NOTES.md d29, H100): gemm1 streams at the ring's pace and gemm2 no longer waits for the
// slowest gemm1 CTA, but gemm2's units run 1.3-2.3x slower than gemm1's (more so with M), so the chain is slower
// than the landed kernel at every measured point. A probe, not a mode of the library.
//
// WARPS: 4 consumer warpgroups (warps 0-15; chunk j of a unit goes to warpgroup j % 4), the producer (warp 16:
// tickets, the unit ring, the weight ring of 16 KB bulk copies), the X warp (17) and the poster (18).
// Weights are packed by bulk_pack (bulk_chain.cuh's wgmma layout: 64-column tiles, 2 KB k-steps, a tile's k-steps
// consecutive), so a unit is one contiguous range of k-steps.
#pragma once

#include "cusync/sm90/bulk_chain.cuh"

namespace cusync::stream::unit {

constexpr int kWG = 4;
constexpr int kConsumerThreads = kWG * 128;
constexpr int kProducerWarp = kWG * 4, kXWarp = kProducerWarp + 1, kPosterWarp = kProducerWarp + 2;
constexpr int kThreads = (kPosterWarp + 1) * 32;
constexpr int kStepBytes = 2048, kChunkSteps = 8, kChunkBytes = kStepBytes * kChunkSteps, kTileN = 64;
constexpr int kUnitRing = 4;

template <int kMPad>
struct UnitCfg {
  static constexpr int kSlabChunks = 8;  // X: M_pad x kSlabK, 16 or 32 KB
  static constexpr int kSlabK = kSlabChunks * 128;
  static constexpr int kXBytes = kMPad * kSlabK * 2;
  static constexpr int kScratchBytes = kWG * kTileN * kMPad * 4;  // one buffer: every warpgroup's partial
  static constexpr int kStages = kMPad == 8 ? 10 : 8;
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
};
// The per-CTA trace: entry, the consumers' gemm1 end, gemm2's first X staged, the CTA's end, its SM, gemm1 and
// gemm2 units taken, the producer's last gemm1 copy.
enum : int { kAtEntry = 0, kAtDone1, kAtX2, kAtEnd, kSm, kUnits1, kUnits2, kAtIssued1, kTraceWords };

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
      ws::dev::mbar_init(xfull(b), 32); ws::dev::mbar_init(xempty(b), kConsumerThreads);
      ws::dev::mbar_init(sfull(b), kConsumerThreads); ws::dev::mbar_init(sempty(b), 32);
    }
    for (int i = 0; i < kUnitRing; ++i) { ws::dev::mbar_init(ufull(i), 1); ws::dev::mbar_init(uempty(i), kConsumerThreads + 64); }
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
      for (;; ++n) {
        int const ui = n % kUnitRing;
        ws::dev::mbar_wait(ufull(ui), (n / kUnitRing) & 1);
        int const u = units[ui];
        ws::dev::mbar_arrive(uempty(ui));
        if (u < 0) { ++n; break; }
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
        T const* x = static_cast<T const*>(b.x);
        uint32_t const dst = xbuf + xb * C::kXBytes;
        constexpr int kUnits16 = kMPad * C::kSlabK / 8;
        // cp.async (16 bytes, L2 only), all of the lane's copies in flight at once; zero-filled past M and K.
        for (int i = lane; i < kUnits16; i += 32) {
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
  } else if (warp == kPosterWarp) {
    int n = 0, us = 0;
    for (int g = 0; g < 2; ++g) {
      if (!((p.which >> g) & 1)) continue;
      UnitGemm const& b = p.gm[g];
      bool const swiglu = b.act == int(Act::kSwiglu);
      for (;; ++n) {
        int const ui = n % kUnitRing;
        ws::dev::mbar_wait(ufull(ui), (n / kUnitRing) & 1);
        int const u = units[ui];
        ws::dev::mbar_arrive(uempty(ui));
        if (u < 0) { ++n; break; }
        int tile, slab;
        d::unit_pos(b, g, u, tile, slab, p.g2_tile_major != 0);
        int const sb = us & 1;
        ws::dev::mbar_wait(sfull(sb), (us >> 1) & 1);
        // The warpgroups' partials summed in warpgroup order: features 2 lane, 2 lane + 1, every M_pad row.
        float const* sc = scratch + sb * (kWG * kTileN * kMPad);
        float* const slot = b.ws + (int64_t(tile) * b.slabs + slab) * (kTileN * kMPad);
#pragma unroll
        for (int f = 0; f < 2; ++f)
#pragma unroll
          for (int m4 = 0; m4 < kMPad; m4 += 4) {
            int const o = (2 * lane + f) * kMPad + m4;
            float4 a = *reinterpret_cast<float4 const*>(sc + o);
#pragma unroll
            for (int w = 1; w < kWG; ++w) {
              float4 const q = *reinterpret_cast<float4 const*>(sc + w * kTileN * kMPad + o);
              a.x += q.x; a.y += q.y; a.z += q.z; a.w += q.w;
            }
            __stcg(reinterpret_cast<float4*>(slot + o), a);
          }
        ws::dev::mbar_arrive(sempty(sb));
        ++us;
        __syncwarp();
        unsigned long long old = 0;
        if (lane == 0) {
          ptx::fence_acq_rel_gpu();
          old = d::atom_add_acq_rel(b.count + tile, 1ull);
        }
        old = __shfl_sync(0xffffffffu, old, 0);
        if (old + 1 != cbase[g] + (unsigned long long)b.slabs) continue;
        // The tile's last unit: its slots summed in slab order, the bias, the activation, the store.
        __syncwarp();
        int const fa = swiglu ? 16 * (lane / 8) + lane % 8 : 2 * lane, fb = swiglu ? fa + 8 : fa + 1;
        float va[kMPad], vb[kMPad];
#pragma unroll
        for (int m = 0; m < kMPad; ++m) va[m] = vb[m] = 0.f;
        float const* ts = b.ws + int64_t(tile) * b.slabs * (kTileN * kMPad);
#pragma unroll 4
        for (int s = 0; s < b.slabs; ++s) {
#pragma unroll
          for (int m4 = 0; m4 < kMPad; m4 += 4) {
            float4 const qa = __ldcg(reinterpret_cast<float4 const*>(ts + s * kTileN * kMPad + fa * kMPad + m4));
            float4 const qb = __ldcg(reinterpret_cast<float4 const*>(ts + s * kTileN * kMPad + fb * kMPad + m4));
            va[m4] += qa.x; va[m4 + 1] += qa.y; va[m4 + 2] += qa.z; va[m4 + 3] += qa.w;
            vb[m4] += qb.x; vb[m4 + 1] += qb.y; vb[m4 + 2] += qb.z; vb[m4 + 3] += qb.w;
          }
        }
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
#pragma unroll
        for (int m = 0; m < kMPad; ++m) {
          if (m >= p.m) break;
          if (swiglu) {
            int const hc = tile * (kTileN / 2) + lane;
            if (hc < b.n / 2) out[int64_t(m) * b.ldo + hc] = detail::from_f<T>(detail::silu(va[m] + ba) * (vb[m] + bb));
          } else {
            if (ca < b.n) out[int64_t(m) * b.ldo + ca] = detail::from_f<T>(act(va[m] + ba));
            if (cb < b.n) out[int64_t(m) * b.ldo + cb] = detail::from_f<T>(act(vb[m] + bb));
          }
        }
        if (g == 0 && tile != p.skip_post) {
          __syncwarp();
          if (lane == 0) {
            ptx::fence_acq_rel_gpu();
            d::st_release_u32(p.hready + tile, uint32_t(epoch[0]));
          }
        }
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
      for (;; ++n) {
        int const ui = n % kUnitRing;
        ws::dev::mbar_wait(ufull(ui), (n / kUnitRing) & 1);
        int const u = units[ui];
        ws::dev::mbar_arrive(uempty(ui));
        if (u < 0) {
          ++n;
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
        ws::dev::mbar_wait(xfull(xb), (ux >> 1) & 1);
        uint32_t const xa = xbuf + xb * C::kXBytes;
        for (int j = wg; j < nch; j += kWG) {
          int64_t const ci = chunk + j;
          int const slot = int(ci % C::kStages);
          uint32_t const ph = uint32_t(ci / C::kStages) & 1u;
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
                                         gmma::desc_k_major(xa + (j * kChunkSteps + s) * 256, 128, C::kSlabK * 16), acc);
          gmma::commit();
          gmma::wait<0>();
          gmma::fence_regs(acc);
          ws::dev::mbar_arrive(empty(slot));
        }
        chunk += nch;
        ws::dev::mbar_arrive(xempty(xb));
        ++ux;
        // The warpgroup's partial to its scratch: thread (warp w, lane l) holds features 16 w + l / 4 (+ 8) and
        // rows 8 i + 2 (l % 4) (+ 1) of M_pad.
        int const sb = (ux - 1) & 1;
        ws::dev::mbar_wait(sempty(sb), (((ux - 1) >> 1) & 1) ^ 1);
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
