// cusync sm90: a weight-streaming, deterministic split-K GEMM stage for decode-size M (1..128), and the
// tile-synchronized two-GEMM chain built from it (Y = act(X @ W1 [+ b1]) @ W2 [+ b2]).
//
// WHY SWAP-AB. At M <= 128 the weights are the big operand: a GEMM reads K*N weight elements and only
// M*K activations. mma.sync.m16n8k16 computes a 16x8 tile per warp; we put 16 weight columns (n) on its
// 16-row side and the batch on its 8-column side, i.e. the warp computes Y^T (N,M) = W^T (N,K) X^T (K,M).
// A batch of 1..8 rows then wastes nothing on the weight side (padding is on the n8 side, and the padded
// batch rows are simply never loaded nor stored). W is row-major (K,N) (N contiguous) in global memory,
// copied as is into shared memory, and ldmatrix.trans turns it into W^T fragments; X is row-major (M,K)
// and ldmatrix (no .trans) gives the col-major B fragments directly. Both shared tiles are XOR-swizzled
// in 16-byte chunks (chunk ^= row % 8), so every ldmatrix phase hits 32 distinct banks.
//
// PIPELINE. 256 threads (8 warps). One k-block is BLK_K=64 rows of W times BLK_N=128 columns (16 KB) plus
// the matching (M_pad, 64) activation box. Every thread issues 16-byte cp.async.cg (L1 bypassed) for its
// share; the weight copies carry an L2::evict_first policy so X, H, the fp32 partials and the counters
// stay in L2. kStages k-blocks are in flight (6 at M_pad <= 16, 3 at M_pad = 128: 96..108 KB of shared
// memory per CTA), and the CTA is sized so that two CTAs (a gemm1 and a gemm2 one, or two of one GEMM) fit
// on one SM: 2 x 96..108 KB of weights in flight per SM, far above the ~35 KB that Little's law asks for
// (4.3 TB/s x ~1 us / 132 SMs).
//
// SPLIT CHOICE (stream-K over a static partition). The work of a GEMM is the flat list of k-blocks
// b = tile * KB + kb (output column tiles of BLK_N in order, each with its KB = ceil(K/64) k-blocks). CTA c
// of G streams the contiguous range [c*T/G, (c+1)*T/G) of the T = tiles*KB k-blocks: every CTA reads the
// same number of weight bytes (+-1 k-block), whatever N, K and the SM count are, and its cp.async stream
// runs on across tile boundaries. A CTA's range cut at tile boundaries gives "pieces"; piece (c, t) writes
// its fp32 partial (BLK_N x M) to workspace slot c + t (injective: ranges and tiles are both ordered).
//
// DETERMINISTIC REDUCTION. After writing its slot, a piece's CTA arrives on the tile's counter (fence +
// relaxed atomics). The pieces of tile t are the CTAs owner(first block of t) .. owner(last block of t),
// known from arithmetic, so the arriver that counts the last piece sums slots in increasing c (a fixed
// order, independent of who arrived last), applies bias, the activation (identity/relu/gelu-erf, or the
// fused SwiGLU of gate|up columns interleaved in groups of 8), writes fp16/bf16 and posts the tile's
// semaphore (release). Same G and shape => bitwise-identical results, run after run.
//
// EPOCHS. Counters and semaphores are 64-bit words (epoch << 32 | count), never reset by the host: each run
// reads its epoch from device memory (StreamState), the arrival does red.max(epoch << 32) then atom.add(1)
// (so a word left over from an earlier run restarts at (epoch, 0)), and the last CTA of the run's last
// kernel bumps the epoch. A CUDA graph replays correctly, and G or M may change from run to run.
//
// SYNC (K-range tile sync). gemm2's k-block [k0, k0+64) of H needs exactly gemm1's H tile k0 / H_TILE.
// A CTA issues the W2 copies of a k-block (independent of gemm1) BEFORE it waits; then every warp that
// copies a part of the H box acquires that tile's semaphore (all lanes ld.acquire.gpu the same word; if it
// is not posted yet lane 0 spins with __nanosleep backoff, bounded by %globaltimer, and on timeout records
// (stage, tile, producer tile, expected, seen) in a SyncErrorInfo and goes on, so nothing hangs); then it
// issues its H copies (cp.async is the generic proxy, so no proxy fence is needed). The wait sits in the
// prefetch of k-block i + kStages - 1: the warp still has kStages - 2 k-blocks of loaded work.
// gemm1 tiles and gemm2 K ranges go in the same order, so gemm2 CTAs that start early wait only for the
// last gemm1 tiles.
//   Two-kernel chain: gemm1 executes griddepcontrol.launch_dependents at CTA entry, gemm2 is launched with
// programmatic stream serialization and never calls griddepcontrol.wait (its waits are per tile). PDL
// launches gemm2 only once every gemm1 CTA has started, so a spinning gemm2 CTA never holds the slot of an
// unscheduled gemm1 CTA. The next run's gemm1 is launched normally, so it starts after this gemm2 ended
// (it overwrites H, which gemm2 reads).
//   Persistent chain: one kernel whose CTAs (all co-resident: the grid is the occupancy) stream their gemm1
// range, then their gemm2 range; a CTA only waits for pieces of CTAs that are resident and that never wait
// themselves during gemm1, so it cannot deadlock.
//
// PRECONDITIONS (checked by check_stage() on the host, and by device traps in -DCUSYNC_STREAM_DEBUG builds):
// M in 1..M_pad (M_pad in {8,16,32,64,128}); N, K, ldx, ldw, ldo multiples of 8 (16-byte vectors);
// pointers 16-byte aligned; SwiGLU: N a multiple of 16; a consumer's producer tile width a multiple of 64;
// the workspace holds G + tiles slots of BLK_N * M_pad floats; G <= SMs * CTAs-per-SM for the persistent
// kernel. Not supported: W stored (N,K) ("column" b_layout).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

#include "cusync/ptx.cuh"
#include "cusync/semaphore.cuh"
#include "cusync/sync_error.h"

namespace cusync::stream {

enum class Act : int { kIdentity = 0, kRelu = 1, kGelu = 2, kSwiglu = 3, kGeluTanh = 4, kSilu = 5 };

// Lives across runs; zeroed once at setup (cudaMemset), never by a run.
struct StreamState {
  uint32_t epoch;  // this run's epoch; bumped by the last CTA of the run's last kernel
  uint32_t pad;
  uint64_t done;   // (epoch << 32) | CTAs of the closing kernel that finished
};

// One GEMM of the chain: out = act(x @ w + bias).
struct StageArgs {
  void const* x;        // (M,K):(ldx,1)
  int64_t ldx;
  void const* w;        // (K,N):(ldw,1)
  int64_t ldw;
  void const* bias;     // (N) or nullptr, added before the activation
  void* out;            // (M,N):(ldo,1), or (M,N/2):(ldo,1) for SwiGLU
  int64_t ldo;
  int m, n, k;
  int act;              // Act
  float* ws;            // (ws_slots, M_pad, BLK_N) fp32 partials
  int64_t ws_slots;
  uint64_t* arrivals;   // (tiles) arrival counters
  uint64_t* post_sems;  // (tiles) tile-done semaphores, or nullptr
  uint64_t const* wait_sems;  // producer's tile semaphores (x is the producer's output), or nullptr
  int wait_tile_cols;   // columns of x per producer tile
  int wait_tiles;       // producer tiles
  int skip_post_tile;   // negative test: this tile never posts (-1: none)
  int stage_id;         // for error records
  // SwiGLU only, optional: the GEMM's own output before the activation, [gate | up] in halves of n / 2 columns
  // (M, n):(ldo_raw, 1), as a chain with the SwiGLU in a stage of its own keeps it (nullptr: not written).
  void* out_raw = nullptr;
  int64_t ldo_raw = 0;
};

enum : int { kTriggerDependents = 1, kClosesRun = 2 };

constexpr int kThreads = 256;
constexpr int kBlkN = 128;
constexpr int kBlkK = 64;

__host__ __device__ constexpr int stages_for(int m_pad) {
  return m_pad <= 16 ? 6 : m_pad <= 32 ? 5 : m_pad <= 64 ? 4 : 3;
}
__host__ __device__ constexpr int m_pad_for(int m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }
__host__ __device__ constexpr int tiles_of(int n) { return (n + kBlkN - 1) / kBlkN; }
__host__ __device__ constexpr int kblocks_of(int k) { return (k + kBlkK - 1) / kBlkK; }
__host__ __device__ constexpr int64_t ws_slots_for(int grid, int n) { return int64_t(grid) + tiles_of(n); }
// The producer tile width in H columns: BLK_N, or BLK_N / 2 after SwiGLU.
__host__ __device__ constexpr int out_tile_cols(int act) { return act == int(Act::kSwiglu) ? kBlkN / 2 : kBlkN; }

namespace detail {

// ---- raw instruction wrappers ----
__device__ __forceinline__ uint32_t smem_u32(void const* p) { return uint32_t(__cvta_generic_to_shared(p)); }

__device__ __forceinline__ uint64_t policy_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(p));
  return p;
}
// 16-byte copy, zero-filled when src_bytes == 0.
__device__ __forceinline__ void cp_async_16_hint(uint32_t dst, void const* src, int src_bytes, uint64_t policy) {
  asm volatile("cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, %2, %3;" ::"r"(dst), "l"(src),
               "r"(src_bytes), "l"(policy)
               : "memory");
}
__device__ __forceinline__ void cp_async_16(uint32_t dst, void const* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src), "r"(src_bytes) : "memory");
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory"); }
__device__ __forceinline__ void cp_async_wait_all() { asm volatile("cp.async.wait_all;" ::: "memory"); }

__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(uint32_t& r0, uint32_t& r1, uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];" : "=r"(r0), "=r"(r1) : "r"(addr));
}

template <typename T> struct Mma;
template <> struct Mma<__half> {
  // SM80_16x8x16_F32F16F16F32_TN
  static __device__ __forceinline__ void run(float (&d)[4], uint32_t const (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};
template <> struct Mma<__nv_bfloat16> {
  // SM80_16x8x16_F32BF16BF16F32_TN
  static __device__ __forceinline__ void run(float (&d)[4], uint32_t const (&a)[4], uint32_t b0, uint32_t b1) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
};

__device__ __forceinline__ float to_f(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_f(__nv_bfloat16 v) { return __bfloat162float(v); }
template <typename T> __device__ __forceinline__ T from_f(float v);
template <> __device__ __forceinline__ __half from_f<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v) { return __float2bfloat16_rn(v); }

__device__ __forceinline__ void griddep_launch_dependents() {
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}
__device__ __forceinline__ void st_relaxed_gpu(uint32_t* addr, uint32_t v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(addr), "r"(v) : "memory");
}
__device__ __forceinline__ uint64_t atom_add_relaxed_gpu(uint64_t* addr, uint64_t v) {
  uint64_t old;
  asm volatile("atom.relaxed.gpu.global.add.u64 %0, [%1], %2;" : "=l"(old) : "l"(addr), "l"(v) : "memory");
  return old;
}

// Epoch-tagged arrival: returns how many arrived before this one in this epoch. One thread; the caller
// has made the CTA's stores visible to it (__syncthreads) and this fence releases them.
__device__ __forceinline__ uint32_t arrive(uint64_t* counter, uint32_t epoch) {
  ptx::fence_acq_rel_gpu();
  ptx::red_max_relaxed_gpu(counter, tagged(epoch, 0));
  uint64_t const old = atom_add_relaxed_gpu(counter, 1);
  return uint32_t(old);  // the high word is `epoch`: the red.max above came first (same thread, same word)
}

__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
__device__ __forceinline__ float silu(float x) { return x / (1.0f + __expf(-x)); }
// GPT-2's tanh approximation (CUTLASS's GELU_taylor): 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
__device__ __forceinline__ float gelu_tanh(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608028654f * (x + 0.044715f * x * x * x)));
}

// v += 8 partial sums at src (and, for SwiGLU, u += the 8 up-projection sums that follow them). cg: the
// partials were written by other CTAs (L1 bypassed); otherwise they are this CTA's shared memory.
__device__ __forceinline__ void add_8(float (&v)[8], float (&u)[8], float const* src, bool swiglu, bool cg) {
  auto ld = [cg](float const* p) {
    return cg ? __ldcg(reinterpret_cast<float4 const*>(p)) : *reinterpret_cast<float4 const*>(p);
  };
  float4 const p0 = ld(src), p1 = ld(src + 4);
  v[0] += p0.x; v[1] += p0.y; v[2] += p0.z; v[3] += p0.w;
  v[4] += p1.x; v[5] += p1.y; v[6] += p1.z; v[7] += p1.w;
  if (swiglu) {
    float4 const q0 = ld(src + 8), q1 = ld(src + 12);
    u[0] += q0.x; u[1] += q0.y; u[2] += q0.z; u[3] += q0.w;
    u[4] += q1.x; u[5] += q1.y; u[6] += q1.z; u[7] += q1.w;
  }
}

// The epilogue of 8 outputs: bias (columns bias_col.., and bias_col + 8.. for SwiGLU's up half), the
// activation, one 16-byte store at dst.
template <typename T>
__device__ __forceinline__ void finish_8(int act, T const* bias, int bias_col, float (&v)[8], float (&u)[8], T* dst) {
  bool const swiglu = act == int(Act::kSwiglu);
  if (bias != nullptr) {
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] += to_f(bias[bias_col + j]);
    if (swiglu) {
#pragma unroll
      for (int j = 0; j < 8; ++j) u[j] += to_f(bias[bias_col + 8 + j]);
    }
  }
  alignas(16) T o[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    float r = v[j];
    switch (act) {
      case int(Act::kRelu): r = fmaxf(r, 0.f); break;
      case int(Act::kGelu): r = gelu_erf(r); break;
      case int(Act::kSwiglu): r = silu(r) * u[j]; break;
      case int(Act::kGeluTanh): r = gelu_tanh(r); break;
      case int(Act::kSilu): r = silu(r); break;
      default: break;
    }
    o[j] = from_f<T>(r);
  }
  *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<uint4 const*>(o);
}

#if defined(CUSYNC_STREAM_DEBUG)
#define CUSYNC_STREAM_CHECK(cond)                                                                       \
  do {                                                                                                  \
    if (!(cond)) {                                                                                      \
      printf("cusync stream check failed: %s (%s:%d) block %d thread %d\n", #cond, __FILE__, __LINE__, \
             int(blockIdx.x), int(threadIdx.x));                                                       \
      __trap();                                                                                         \
    }                                                                                                   \
  } while (0)
#else
#define CUSYNC_STREAM_CHECK(cond) \
  do {                            \
  } while (0)
#endif

}  // namespace detail

// Per-CTA context of one run.
struct RunCtx {
  uint32_t epoch;
  SyncErrorInfo* error;
  uint64_t timeout_ns;
};

template <typename T, int kMPad>
struct StreamGemm {
  static constexpr int kStages = stages_for(kMPad);
  static constexpr int kWarpsM = kMPad >= 128 ? 2 : 1;   // warps along the batch
  static constexpr int kWM = kMPad / kWarpsM;             // batch columns per warp
  static constexpr int kWarpsN = (kThreads / 32) / kWarpsM;
  static constexpr int kWN = kBlkN / kWarpsN;             // weight columns per warp
  static constexpr int kNSub = kWN / 16;                  // m16 (weight) sub-tiles per warp
  static constexpr int kMSub = kWM / 8;                   // n8 (batch) sub-tiles per warp
  static constexpr int kWStage = kBlkK * kBlkN;           // elements, (BLK_K,BLK_N) swizzled
  static constexpr int kXStage = kMPad * kBlkK;           // elements, (M_pad,BLK_K) swizzled
  static constexpr int kWChunks = kWStage / 8 / kThreads; // 16-byte copies per thread per k-block
  static constexpr int kXChunks = kMPad * kBlkK / 8;
  static constexpr int kXIters = (kXChunks + kThreads - 1) / kThreads;
  static constexpr int kSlotFloats = kBlkN * kMPad;
  static constexpr int kSmemBytes = kStages * (kWStage + kXStage) * int(sizeof(T)) + 16;

  static_assert(kMPad == 8 || kMPad == 16 || kMPad == 32 || kMPad == 64 || kMPad == 128, "M_pad must be 8..128, a power of 2");
  static_assert(kWarpsN * kWarpsM * 32 == kThreads, "warp grid must cover the CTA");
  static_assert(kWN % 16 == 0 && kWM % 8 == 0, "warp tile must be whole m16n8 mma tiles");
  static_assert(kMSub == 1 || kMSub % 2 == 0, "batch sub-tiles are loaded in pairs (ldmatrix.x4)");
  static_assert(kWStage % (8 * kThreads) == 0, "weight box must split into whole 16-byte copies");
  static_assert(kBlkN == 128 && kBlkK == 64, "swizzle assumes 256-byte weight rows and 128-byte batch rows");
  static_assert(kSmemBytes <= 113 * 1024, "two CTAs (a gemm1 and a gemm2 one) must fit on one SM");
  static_assert(kStages >= 2, "pipeline needs at least two stages");

  // ---- the flat k-block schedule ----
  struct Sched {
    int tiles, kb;
    int64_t blocks;   // tiles * kb
    int64_t grid;     // CTAs that take part: min(gridDim.x, blocks)
    __device__ __forceinline__ int64_t begin(int64_t c) const { return c * blocks / grid; }
    __device__ __forceinline__ int64_t owner(int64_t b) const { return ((b + 1) * grid - 1) / blocks; }
  };

  // Copies of one k-block into stage `s`: all W copies, or all X copies of this thread.
  static __device__ __forceinline__ void load_w(StageArgs const& a, Sched const& sc, int64_t b, T* ws_smem,
                                                uint64_t policy) {
    int const t = int(b / sc.kb);
    int const n0 = t * kBlkN;
    int const k0 = int(b - int64_t(t) * sc.kb) * kBlkK;
    T const* w = static_cast<T const*>(a.w);
#pragma unroll
    for (int i = 0; i < kWChunks; ++i) {
      int const ci = int(threadIdx.x) + i * kThreads;
      int const row = ci >> 4, ch = ci & 15;  // (k, 16-byte chunk of n)
      int const gk = k0 + row, gn = n0 + ch * 8;
      bool const ok = gk < a.k && gn < a.n;
      T const* src = ok ? w + int64_t(gk) * a.ldw + gn : w;
      detail::cp_async_16_hint(detail::smem_u32(ws_smem + row * kBlkN + ((ch ^ (row & 7)) << 3)), src, ok ? 16 : 0,
                               policy);
    }
  }

  static __device__ __forceinline__ void load_x(StageArgs const& a, int k0, T* xs_smem) {
    T const* x = static_cast<T const*>(a.x);
#pragma unroll
    for (int i = 0; i < kXIters; ++i) {
      int const ci = int(threadIdx.x) + i * kThreads;
      int const m = ci >> 3, ch = ci & 7;  // (batch row, 16-byte chunk of k)
      if ((kXChunks % kThreads == 0 || ci < kXChunks) && m < a.m) {
        int const gk = k0 + ch * 8;
        bool const ok = gk < a.k;
        T const* src = ok ? x + int64_t(m) * a.ldx + gk : x;
        detail::cp_async_16(detail::smem_u32(xs_smem + m * kBlkK + ((ch ^ (m & 7)) << 3)), src, ok ? 16 : 0);
      }
    }
  }

  // Does this warp copy any part of the activation box? (uniform per warp)
  static __device__ __forceinline__ bool warp_loads_x(int m) {
    int const warp = int(threadIdx.x) >> 5;
    bool any = false;
#pragma unroll
    for (int i = 0; i < kXIters; ++i) {
      int const ci0 = i * kThreads + warp * 32;
      any |= ci0 < kXChunks && (ci0 >> 3) < m;
    }
    return any;
  }

  // All lanes of the warp end with their own ld.acquire.gpu that saw the post (per-thread acquire before
  // each lane's cp.async of the tile). Lane 0 does the bounded spin.
  static __device__ __forceinline__ void warp_wait(StageArgs const& a, RunCtx const& ctx, int p, int consumer_tile) {
    uint64_t const* sem = a.wait_sems + p;
    uint64_t const expected = tagged(ctx.epoch, 1);
    if (__all_sync(0xffffffffu, ptx::ld_acquire_gpu(sem) >= expected)) return;
    bool ok = true;
    if ((threadIdx.x & 31) == 0) {
      WaitSite const site{a.stage_id, a.stage_id - 1, 0, consumer_tile, 0, p, p};
      ok = spin_wait_inline(sem, expected, ctx.timeout_ns, ctx.error, site);
    }
    ok = __shfl_sync(0xffffffffu, ok, 0);
    if (!ok) return;  // timed out: recorded; the run's results are undefined, the host reports it
    while (!__all_sync(0xffffffffu, ptx::ld_acquire_gpu(sem) >= expected)) {
    }
  }

  // Sum of the tile's pieces in fixed order, epilogue, store, post.
  static __device__ __forceinline__ void reduce_tile(StageArgs const& a, RunCtx const& ctx, int t, int64_t c_first,
                                                  int64_t c_last) {
    bool const swiglu = a.act == int(Act::kSwiglu);
    int const n0 = t * kBlkN;
    int const groups = swiglu ? kBlkN / 16 : kBlkN / 8;  // 8 outputs per item
    T const* bias = static_cast<T const*>(a.bias);
    T* out = static_cast<T*>(a.out);
    for (int i = int(threadIdx.x); i < a.m * groups; i += kThreads) {
      int const m = i / groups, g = i - m * groups;
      int const col = swiglu ? g * 16 : g * 8;  // column in the tile (gate columns for SwiGLU)
      if (n0 + col >= a.n) continue;
      float v[8], u[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) v[j] = u[j] = 0.f;
      for (int64_t c = c_first; c <= c_last; ++c)  // (M_pad,BLK_N) slots
        detail::add_8(v, u, a.ws + (c + t) * int64_t(kSlotFloats) + m * kBlkN + col, swiglu, true);
      int const out_col = swiglu ? n0 / 2 + g * 8 : n0 + g * 8;
      detail::finish_8<T>(a.act, bias, n0 + col, v, u, out + int64_t(m) * a.ldo + out_col);
    }
    if (a.post_sems != nullptr) {
      __syncthreads();  // every thread's stores of the tile, before thread 0's release
      if (threadIdx.x == 0 && t != a.skip_post_tile) post_store(a.post_sems + t, ctx.epoch);
    }
  }

  // Streams CTA `cta`'s range of the stage. Every thread calls it; ends with the pipeline drained and a
  // barrier, so the shared memory may be reused.
  static __device__ void run(StageArgs const& a, RunCtx const& ctx, int cta, int grid, char* smem) {
    Sched sc;
    sc.tiles = tiles_of(a.n);
    sc.kb = kblocks_of(a.k);
    sc.blocks = int64_t(sc.tiles) * sc.kb;
    sc.grid = grid < sc.blocks ? grid : sc.blocks;
    if (cta >= sc.grid) return;  // uniform per CTA
    int64_t const b_begin = sc.begin(cta);
    int64_t const b_end = sc.begin(cta + 1);
    int const n_blocks = int(b_end - b_begin);
    CUSYNC_STREAM_CHECK(n_blocks >= 1);
    CUSYNC_STREAM_CHECK(a.m >= 1 && a.m <= kMPad);

    T* w_smem = reinterpret_cast<T*>(smem);                 // (kStages, BLK_K, BLK_N)
    T* x_smem = w_smem + kStages * kWStage;                 // (kStages, M_pad, BLK_K)
    int* last_flag = reinterpret_cast<int*>(x_smem + kStages * kXStage);

    uint64_t const policy = detail::policy_evict_first();
    bool const waits = a.wait_sems != nullptr && warp_loads_x(a.m);
    int waited_p = -1;  // producer tile this warp last acquired

    auto x_k0 = [&](int64_t b) { return int(b - (b / sc.kb) * sc.kb) * kBlkK; };
    auto prefetch_x = [&](int64_t b, int s) {
      int const k0 = x_k0(b);
      if (waits) {
        int const p = k0 / a.wait_tile_cols;
        CUSYNC_STREAM_CHECK(p < a.wait_tiles);
        if (p != waited_p) {
          warp_wait(a, ctx, p, int(b / sc.kb));
          waited_p = p;
        }
      }
      load_x(a, k0, x_smem + s * kXStage);
    };

    // Prologue: the weights of the first kStages-1 k-blocks first (they never wait), then their activations.
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s)
      if (s < n_blocks) load_w(a, sc, b_begin + s, w_smem + s * kWStage, policy);
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < n_blocks) prefetch_x(b_begin + s, s);
      detail::cp_async_commit();
    }

    int const lane = int(threadIdx.x) & 31, warp = int(threadIdx.x) >> 5;
    int const wn0 = (warp % kWarpsN) * kWN;  // first weight column of this warp in the tile
    int const wm0 = (warp / kWarpsN) * kWM;  // first batch row of this warp
    int const lj = lane >> 3, lr = lane & 7;
    // ldmatrix lane addresses (element offsets in a stage; kk adds 16 rows of W or 2 chunks of X)
    uint32_t a_off[kNSub];
#pragma unroll
    for (int ns = 0; ns < kNSub; ++ns) {
      int const k = (lj >> 1) * 8 + lr;
      int const ch = (wn0 + ns * 16 + (lj & 1) * 8) >> 3;
      a_off[ns] = uint32_t(k * kBlkN + ((ch ^ lr) << 3));  // k & 7 == lr
    }

    float acc[kNSub][kMSub][4];
#pragma unroll
    for (int ns = 0; ns < kNSub; ++ns)
#pragma unroll
      for (int ms = 0; ms < kMSub; ++ms)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[ns][ms][j] = 0.f;

    uint32_t const w_base = detail::smem_u32(w_smem), x_base = detail::smem_u32(x_smem);

    for (int i = 0; i < n_blocks; ++i) {
      detail::cp_async_wait<kStages - 2>();
      __syncthreads();
      int const s = i % kStages;
      uint32_t const ws = w_base + uint32_t(s * kWStage * 2);
      uint32_t const xs = x_base + uint32_t(s * kXStage * 2);
#pragma unroll
      for (int kk = 0; kk < kBlkK / 16; ++kk) {
        uint32_t af[kNSub][4];
#pragma unroll
        for (int ns = 0; ns < kNSub; ++ns) detail::ldmatrix_x4_trans(af[ns], ws + (a_off[ns] + kk * 16 * kBlkN) * 2);
        if constexpr (kMSub == 1) {
          int const m = wm0 + lr;
          int const ch = kk * 2 + (lj & 1);
          uint32_t b0, b1;
          detail::ldmatrix_x2(b0, b1, xs + uint32_t(m * kBlkK + ((ch ^ lr) << 3)) * 2);
#pragma unroll
          for (int ns = 0; ns < kNSub; ++ns) detail::Mma<T>::run(acc[ns][0], af[ns], b0, b1);
        } else {
#pragma unroll
          for (int ms2 = 0; ms2 < kMSub / 2; ++ms2) {
            if (wm0 + ms2 * 16 < a.m) {  // skip batch rows that do not exist (warp-uniform)
              int const m = wm0 + ms2 * 16 + (lj >> 1) * 8 + lr;
              int const ch = kk * 2 + (lj & 1);
              uint32_t b[4];
              detail::ldmatrix_x4(b, xs + uint32_t(m * kBlkK + ((ch ^ lr) << 3)) * 2);
#pragma unroll
              for (int ns = 0; ns < kNSub; ++ns) {
                detail::Mma<T>::run(acc[ns][2 * ms2], af[ns], b[0], b[1]);
                detail::Mma<T>::run(acc[ns][2 * ms2 + 1], af[ns], b[2], b[3]);
              }
            }
          }
        }
      }

      // Refill the stage computed in the previous iteration (every thread passed this iteration's barrier
      // after finishing it): weights first, then (after the tile wait, if any) activations.
      {
        int const in = i + kStages - 1;
        if (in < n_blocks) {
          int const sn = in % kStages;
          load_w(a, sc, b_begin + in, w_smem + sn * kWStage, policy);
          prefetch_x(b_begin + in, sn);
        }
        detail::cp_async_commit();
      }

      // End of a piece: write the partial, arrive, and the last arriver reduces the tile.
      int64_t const b = b_begin + i;
      bool const tile_end = (b + 1) % sc.kb == 0;
      if (tile_end || i == n_blocks - 1) {
        int const t = int(b / sc.kb);
        int64_t const slot = int64_t(cta) + t;
        CUSYNC_STREAM_CHECK(slot < a.ws_slots);
        float* dst = a.ws + slot * kSlotFloats;  // (M_pad,BLK_N)
        int const g = lane >> 2, tg = lane & 3;
#pragma unroll
        for (int ns = 0; ns < kNSub; ++ns)
#pragma unroll
          for (int ms = 0; ms < kMSub; ++ms) {
            int const n = wn0 + ns * 16 + g;
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
        int64_t const c_first = sc.owner(int64_t(t) * sc.kb);
        int64_t const c_last = sc.owner(int64_t(t) * sc.kb + sc.kb - 1);
        __syncthreads();  // the slot's stores, before thread 0's release
        if (threadIdx.x == 0) {
          uint32_t const before = detail::arrive(a.arrivals + t, ctx.epoch);
          CUSYNC_STREAM_CHECK(before <= uint32_t(c_last - c_first));
          bool const last = before == uint32_t(c_last - c_first);
          if (last) ptx::fence_acq_rel_gpu();  // acquire: the other pieces' slots
          *last_flag = last ? 1 : 0;
        }
        __syncthreads();
        if (*last_flag) reduce_tile(a, ctx, t, c_first, c_last);
        __syncthreads();  // last_flag is rewritten by the next piece
      }
    }
    detail::cp_async_wait_all();
    __syncthreads();
  }
};

// The last CTA of the run's last kernel opens the next epoch (the next run's kernels start after this one).
__device__ __forceinline__ void close_run(StreamState* state, uint32_t epoch) {
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t const before = detail::arrive(&state->done, epoch);
    if (before == gridDim.x - 1) detail::st_relaxed_gpu(&state->epoch, epoch + 1u);
  }
}

// One GEMM. flags: kTriggerDependents (a producer under PDL), kClosesRun (the run's last kernel).
template <typename T, int kMPad>
__global__ void __launch_bounds__(kThreads, 2)
    stream_gemm_kernel(StageArgs const __grid_constant__ a, StreamState* state, SyncErrorInfo* error,
                       uint64_t timeout_ns, int flags) {
  extern __shared__ __align__(128) char smem[];
  RunCtx const ctx{ptx::ld_relaxed_gpu(&state->epoch), error, timeout_ns};
  if (flags & kTriggerDependents) detail::griddep_launch_dependents();
  StreamGemm<T, kMPad>::run(a, ctx, int(blockIdx.x), int(gridDim.x), smem);
  if (flags & kClosesRun) close_run(state, ctx.epoch);
}

// The whole chain in one persistent kernel: gemm1's range, then gemm2's range (which waits on gemm1's tiles).
// The grid must be co-resident (at most SMs x occupancy).
template <typename T, int kMPad>
__global__ void __launch_bounds__(kThreads, 2)
    stream_chain_kernel(StageArgs const __grid_constant__ a1, StageArgs const __grid_constant__ a2,
                        StreamState* state, SyncErrorInfo* error, uint64_t timeout_ns) {
  extern __shared__ __align__(128) char smem[];
  RunCtx const ctx{ptx::ld_relaxed_gpu(&state->epoch), error, timeout_ns};
  // Two inlined copies of the stage loop (one copy selecting the args, or a call, spilled more at M_pad >= 64;
  // this one spills ~12 bytes at M_pad = 128, outside the mma loop).
  StreamGemm<T, kMPad>::run(a1, ctx, int(blockIdx.x), int(gridDim.x), smem);
  StreamGemm<T, kMPad>::run(a2, ctx, int(blockIdx.x), int(gridDim.x), smem);
  close_run(state, ctx.epoch);
}

// ---- host side ----

// nullptr if the stage can run with `grid` CTAs and M_pad, else what is wrong.
inline char const* check_stage(StageArgs const& a, int grid, int m_pad) {
  auto misaligned = [](void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) != 0; };
  if (a.m < 1 || a.m > m_pad) return "m must be in 1..M_pad (M_pad = 8, 16, 32, 64 or 128)";
  if (a.n % 8 || a.k % 8) return "n and k must be multiples of 8 (16-byte vectors)";
  if (a.ldx % 8 || a.ldw % 8 || a.ldo % 8) return "leading dimensions must be multiples of 8 (16-byte vectors)";
  if (a.ldx < a.k || a.ldw < a.n) return "ldx >= k and ldw >= n are required";
  if (a.act == int(Act::kSwiglu) ? (a.n % 16 != 0 || a.ldo < a.n / 2) : a.ldo < a.n)
    return "SwiGLU needs n % 16 == 0 and ldo >= n/2; other acts need ldo >= n";
  if (a.act < 0 || a.act > 3) return "act must be identity, relu, gelu or swiglu";
  if (misaligned(a.x) || misaligned(a.w) || misaligned(a.out) || misaligned(a.bias) || misaligned(a.ws))
    return "x, w, bias, out and ws must be 16-byte aligned";
  if (a.ws == nullptr || a.arrivals == nullptr) return "workspace and arrival counters are required";
  if (a.ws_slots < ws_slots_for(grid, a.n)) return "workspace needs grid + tiles slots";
  if (a.wait_sems != nullptr) {
    if (a.wait_tile_cols % kBlkK != 0) return "producer tile width must be a multiple of BLK_K = 64";
    if (int64_t(a.wait_tiles) * a.wait_tile_cols < a.k) return "producer tiles do not cover k";
  }
  if (grid < 1) return "grid must be >= 1";
  return nullptr;
}

template <typename T, int kMPad>
inline cudaError_t prepare_kernels() {
  cudaError_t e = cudaFuncSetAttribute(stream_gemm_kernel<T, kMPad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                       StreamGemm<T, kMPad>::kSmemBytes);
  if (e != cudaSuccess) return e;
  return cudaFuncSetAttribute(stream_chain_kernel<T, kMPad>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              StreamGemm<T, kMPad>::kSmemBytes);
}

// A launch of `grid` x `threads`; pdl: with programmatic stream serialization (a consumer of a
// kTriggerDependents producer). attr must outlive the launch call.
inline cudaLaunchConfig_t launch_config(int grid, int threads, int smem, cudaStream_t stream, bool pdl,
                                        cudaLaunchAttribute* attr) {
  cudaLaunchConfig_t cfg = {};
  cfg.gridDim = dim3(unsigned(grid));
  cfg.blockDim = dim3(unsigned(threads));
  cfg.dynamicSmemBytes = size_t(smem);
  cfg.stream = stream;
  attr->id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr->val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl ? 1 : 0;
  return cfg;
}

template <typename T, int kMPad>
inline cudaError_t launch_stage(StageArgs const& a, int grid, StreamState* state, SyncErrorInfo* error,
                                uint64_t timeout_ns, int flags, bool pdl, cudaStream_t stream) {
  cudaLaunchAttribute attr;
  cudaLaunchConfig_t const cfg = launch_config(grid, kThreads, StreamGemm<T, kMPad>::kSmemBytes, stream, pdl, &attr);
  return cudaLaunchKernelEx(&cfg, stream_gemm_kernel<T, kMPad>, a, state, error, timeout_ns, flags);
}

template <typename T, int kMPad>
inline cudaError_t launch_chain(StageArgs const& a1, StageArgs const& a2, int grid, StreamState* state,
                                SyncErrorInfo* error, uint64_t timeout_ns, cudaStream_t stream) {
  stream_chain_kernel<T, kMPad><<<grid, kThreads, StreamGemm<T, kMPad>::kSmemBytes, stream>>>(a1, a2, state, error,
                                                                                              timeout_ns);
  return cudaGetLastError();
}

// CTAs of the persistent chain kernel that fit at once.
template <typename T, int kMPad>
inline int chain_occupancy() {
  int blocks = 0;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, stream_chain_kernel<T, kMPad>, kThreads,
                                                    StreamGemm<T, kMPad>::kSmemBytes) != cudaSuccess)
    return 0;
  return blocks;
}

}  // namespace cusync::stream
