// decode_probe: decode-size MLP chains Y = act(X @ W1 [+ b1]) @ W2 on one GPU, cuBLAS / cuBLASLt chains against
// the weight-streaming kernels of cusync/sm90/stream_gemm.cuh (v1: back to back, PDL + K-range tile sync,
// persistent), the warp-specialized persistent chain of cusync/sm90/stream_chain_ws.cuh (v2, "ws", f = rounds),
// the register-streaming stages of reg_stream.cuh (v3, "reg"/"regs") and v2's TMA ring with v3-style consumers
// of stream_ring.cuh (v4, "ring", f = rounds).
// Checks, then times (CUDA graphs of kRunsPerGraph chain runs, round robin, median).
// Usage: decode_probe OUT_DIR   (env DECODE_PROBE_QUICK=1: fewer M and repetitions;
//   DECODE_PROBE_VARIANTS=ws,b2b: time only these of our variants (checks still run all))
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include "cusync/sm90/stream_chain_ws.cuh"
#include "cusync/sm90/stream_gemm.cuh"
#include "cusync/sm90/reg_stream.cuh"
#include "cusync/sm90/stream_ring.cuh"
#include "cusync/sm90/bulk_chain.cuh"
#include "unit_chain.cuh"

using namespace cusync::stream;
using cusync::SyncErrorInfo;

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      fprintf(stderr, "CUDA error %s at %s:%d: %s\n", cudaGetErrorString(e_), __FILE__, __LINE__, #x); \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)
#define CB(x)                                                                                   \
  do {                                                                                          \
    cublasStatus_t s_ = (x);                                                                    \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                          \
      fprintf(stderr, "cuBLAS error %d at %s:%d: %s\n", int(s_), __FILE__, __LINE__, #x);       \
      exit(1);                                                                                  \
    }                                                                                           \
  } while (0)

static constexpr int kRunsPerGraph = 20;

// ---------------- helper kernels ----------------
__device__ __forceinline__ uint32_t hash32(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return uint32_t(x);
}
template <typename T>
__global__ void init_rand(T* p, size_t n, uint64_t seed, float scale) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    float u = (hash32(seed * 0x9E3779B97F4A7C15ull + i) >> 8) * (1.0f / 16777216.0f) * 2.f - 1.f;
    p[i] = detail::from_f<T>(u * scale);
  }
}
__global__ void poison_u16(uint16_t* p, size_t n) {  // 0xFFFF: NaN in fp16 and bf16
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) p[i] = 0xFFFFu;
}
template <typename T>
__global__ void gelu_inplace(T* h, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
    h[i] = detail::from_f<T>(detail::gelu_erf(detail::to_f(h[i])));
}
template <typename T>  // g: (M, 2*N1) gate|up interleaved in groups of 8 -> h: (M, N1)
__global__ void swiglu_kernel(T const* g, T* h, int m, int n1) {
  size_t const total = size_t(m) * n1;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < total; i += size_t(gridDim.x) * blockDim.x) {
    size_t const r = i / n1; int const j = int(i % n1);
    size_t const gc = size_t(16) * (j / 8) + (j % 8);
    float const gate = detail::to_f(g[r * 2 * n1 + gc]), up = detail::to_f(g[r * 2 * n1 + gc + 8]);
    h[i] = detail::from_f<T>(detail::silu(gate) * up);
  }
}
__global__ void stream_read(uint4 const* p, size_t n, uint32_t* sink) {
  uint32_t acc = 0;
  size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x, stride = size_t(gridDim.x) * blockDim.x;
  for (; i + 3 * stride < n; i += 4 * stride) {
    uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride), d = __ldcs(p + i + 3 * stride);
    acc ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
  }
  for (; i < n; i += stride) { uint4 a = __ldcs(p + i); acc ^= a.x ^ a.y ^ a.z ^ a.w; }
  if (acc == 0x12345678u) sink[0] = acc;
}

// ---------------- host helpers ----------------
static float h2f_tab[65536];
static void build_tables(bool bf16) {
  for (uint32_t i = 0; i < 65536; ++i) {
    if (bf16) { uint32_t b = i << 16; float f; memcpy(&f, &b, 4); h2f_tab[i] = f; }
    else { __half_raw r; r.x = uint16_t(i); h2f_tab[i] = __half2float(__half(r)); }
  }
}
static uint16_t f2h_host(float f, bool bf16) {
  if (bf16) { __nv_bfloat16 b = __float2bfloat16_rn(f); uint16_t u; memcpy(&u, &b, 2); return u; }
  __half h = __float2half_rn(f); uint16_t u; memcpy(&u, &h, 2); return u;
}
static double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v.empty() ? 0 : v[v.size() / 2];
}

struct ErrStat { double rel_l2 = 0, max_rel = 0; size_t nans = 0; };
static ErrStat compare(std::vector<uint16_t> const& a, std::vector<uint16_t> const& ref, size_t n) {
  double num = 0, den = 0, maxd = 0, maxr = 0; ErrStat s;
  for (size_t i = 0; i < n; ++i) {
    float x = h2f_tab[a[i]], r = h2f_tab[ref[i]];
    if (!std::isfinite(x)) { ++s.nans; continue; }
    double d = double(x) - r; num += d * d; den += double(r) * r;
    maxd = std::max(maxd, std::fabs(d)); maxr = std::max(maxr, double(std::fabs(r)));
  }
  s.rel_l2 = std::sqrt(num / std::max(den, 1e-30)); s.max_rel = maxd / std::max(maxr, 1e-30);
  return s;
}

struct ShapeDef { char const* name; int k1, n1, n2; Act act; bool bf16; };

enum Variant { kB2B = 0, kSync = 1, kPers = 2, kWS = 3, kReg = 4, kRegSync = 5, kRing = 6, kBulk = 7, kUnit = 8 };
static char const* kVarName[] = {"b2b", "sync", "pers", "ws", "reg", "regs", "ring", "bulk", "unit"};
// v6 (unit_chain.cuh, M <= 16): f = 1 the chain in one kernel, 3 two launches (one GEMM each, no waits).
// v5 (bulk_chain.cuh, M <= 64): f = 1 the chain in one kernel, 2 the same launched as a programmatic dependent of
// the previous run, 3 two launches of the same kernel (one GEMM each, no waits; the same reduction order).
static std::string g_out = ".";           // the output folder (argv[1])
static bool g_bulk_trace = false;         // DECODE_PROBE_BULK_TRACE=1: v5's per-CTA timeline at every point
static constexpr int64_t kWsScale = 4;       // the workspaces' size over what the landed kernels need
static int g_bulk_mode = 0;               // DECODE_PROBE_BULK_MODE=1: consumers only release slots (wrong results)
static bool g_bulk_coop = false;          // DECODE_PROBE_BULK_COOP=1: cooperative launches (as the library's mode stream)
#ifdef CUSYNC_BULK_BALANCE
// balance.patch: DECODE_PROBE_BALANCE=1 calibrates per point a table of chunk ranges by SM.
static bool g_balance = false;
static std::vector<double> g_sm_weight;   // per SM, empty: the uniform split
static int64_t g_bulk_q[2] = {0, 0};      // the last launch's chunks per GEMM (host-side record)
static int* g_rs_dev = nullptr;           // 2 x (kMaxRanks + 1) starts on the device
static int64_t g_rs_q[2] = {-1, -1};      // the chunks per GEMM the table was built for (another shape: uniform)
#endif
static std::vector<std::string> g_variant_filter;
static int g_reg_cfg = 0;                  // DECODE_PROBE_REG_CFG: v3 shape, see with_wn (0: 1 warp along N)
static int g_reg_wn = 1;                   // warps side by side along N (1, 2, 4) of that shape
static bool g_reg_g1_split_major = false;  // DECODE_PROBE_REG_G1_SPLIT_MAJOR=1: gemm1 CTAs split by split
static int g_reg_f[2] = {1, 2};
static bool g_reg_packed = false;          // DECODE_PROBE_REG_PACKED=1: v3 reads W1/W2 packed by reg_pack_kernel
static bool g_reg_persist = false;         // DECODE_PROBE_REG_PERSIST=1: "regs" is one persistent kernel (reg_chain_kernel)
static int g_ring_mode = 0;                // DECODE_PROBE_RING_MODE: v4 consumer mode (ring::kConsumer*; 1 = no compute, wrong results)            // DECODE_PROBE_REG_F=a,b: v3 CTAs = f x occupancy x SMs
// DECODE_PROBE_ONLY=unit,bulk: run (check and time) only these of our variants (the others' checks are skipped).
static std::vector<std::string> g_only;
static bool variant_run(Variant v) {
  if (g_only.empty()) return true;
  for (auto const& n : g_only) if (n == kVarName[v]) return true;
  return false;
}
static int g_unit_x_tma = 0;  // DECODE_PROBE_UNIT_X_TMA=1/2: v6's X by one TMA box a unit, 16- or 128-byte rows
static int g_unit_no_x = 0;  // DECODE_PROBE_UNIT_NO_X=bits: v6's X not staged for gemm1 (1), gemm2 (2) (timing only)
static int g_unit_poster = 0;  // DECODE_PROBE_UNIT_WIDE=0/1/2: v6's poster on one warp, four, one + four finishers
static bool g_unit_g2_tile_major = false;  // DECODE_PROBE_UNIT_G2_TILE_MAJOR=1: v6's gemm2 units in tile-major order
static bool variant_timed(Variant v) {
  if (g_variant_filter.empty()) return true;
  for (auto const& n : g_variant_filter) if (n == kVarName[v]) return true;
  return false;
}

struct Row {
  std::string shape; int m; double floor_us, cublas_us, lt_us, b2b_us, sync_us, pers_us, ws_us, reg_us, regs_us, ring_us;
  double bulk_us, bulkp_us, bulkb_us, unit_us = 0, unitb_us = 0;
  std::string best_cfg; double best_us; std::string checks; double rel_l2;
};
// v6's X by TMA (DECODE_PROBE_UNIT_X_TMA): X (M rows of K, ld) as a 3D tensor of groups of g k (the groups 2 g
// bytes apart), box (g, M_pad, kSlabK / g), zeros past M and past K. mode 1: g = 8, no swizzle, a box lands as the B
// operand's K-major no-swizzle core matrices in (group, row, 8 k) order; mode 2: g = 64, the 128-byte swizzle, a box
// lands as kSlabK / 64 blocks of M_pad 128-byte rows (1024-byte atoms of 8 rows), B's swizzled K-major layout.
static bool unit_x_map(CUtensorMap& tm, void const* x, int m, int k, int64_t ld, int mpad, int mode) {
  auto enc = ws::tensor_map_encoder();
  if (enc == nullptr) return false;
  cuuint32_t const gk = mode == 2 ? 64u : 8u;
  cuuint64_t dims[3] = {gk, cuuint64_t(m), cuuint64_t(k / int(gk))};
  cuuint64_t strides[2] = {cuuint64_t(ld) * 2u, gk * 2u};
  cuuint32_t box[3] = {gk, cuuint32_t(mpad), cuuint32_t(unit::UnitCfg<8>::kSlabK) / gk};
  cuuint32_t estr[3] = {1u, 1u, 1u};
  return enc(&tm, CU_TENSOR_MAP_DATA_TYPE_UINT16, 3, const_cast<void*>(x), dims, strides, box, estr,
             CU_TENSOR_MAP_INTERLEAVE_NONE, mode == 2 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
             CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}

template <typename T>
struct Probe {
  ShapeDef sd; int sms; int nsets; int n1w; cudaStream_t st; cublasHandle_t cb; cublasLtHandle_t lt;
  cudaDataType_t dt = std::is_same<T, __half>::value ? CUDA_R_16F : CUDA_R_16BF;
  std::vector<T*> w1, w2; T *x, *bias1, *h, *y, *hc, *h2, *yc; void* lt_ws; size_t lt_ws_bytes = 32 << 20;
  StreamState* state; SyncErrorInfo* err; uint64_t *arr1, *arr2, *sem1; float *ws1, *ws2; int64_t slots1, slots2;
  int grid_max;
  bool quick;
  // v3 (reg_stream.cuh): its own workspaces, counters and semaphores (64-column tiles)
  float *wsr1, *wsr2; int64_t wsr1_floats, wsr2_floats; uint64_t *arrr1, *arrr2, *semr1; int reg_occ = 4;
  std::vector<void*> w1p, w2p;  // packed copies (DECODE_PROBE_REG_PACKED), one per weight set
  std::vector<void*> w1b, w2b;  // packed with one warp along N, for v5 (bulk)
  uint64_t* bulk_trace = nullptr;  // v5's timeline buffer while a traced run is launched (else nullptr)
  // v6 (unit_chain.cuh): workspaces, per-tile counts, tickets, H's tile flags, run state, timeout record
  float *uws1 = nullptr, *uws2 = nullptr; unsigned long long *ucnt1 = nullptr, *ucnt2 = nullptr, *utick = nullptr;
  uint32_t* uready = nullptr; unit::UnitState* ustate = nullptr; unsigned long long* uerr = nullptr;
  uint64_t* unit_trace = nullptr;  // set while a traced v6 run is launched
  uint64_t* unit_utrace = nullptr;
  // DECODE_PROBE_UNIT_TRACE=1: one traced v6 chain run per point, summarized (us from the first CTA's entry).
  void unit_trace_summary(int m, FILE* log) {
    std::vector<uint64_t> h(size_t(sms) * unit::kTraceWords);
    uint64_t* buf; CK(cudaMalloc(&buf, h.size() * 8)); CK(cudaMemset(buf, 0, h.size() * 8));
    std::vector<uint64_t> hu(size_t(sms) * unit::kUnitTraceMax * 4);
    uint64_t* ubuf; CK(cudaMalloc(&ubuf, hu.size() * 8)); CK(cudaMemset(ubuf, 0, hu.size() * 8));
    unit_trace = buf; unit_utrace = ubuf; ours(kUnit, 1, m, 0); unit_trace = nullptr; unit_utrace = nullptr;
    CK(cudaDeviceSynchronize()); CK(cudaMemcpy(h.data(), buf, h.size() * 8, cudaMemcpyDeviceToHost)); cudaFree(buf);
    CK(cudaMemcpy(hu.data(), ubuf, hu.size() * 8, cudaMemcpyDeviceToHost)); cudaFree(ubuf);
    {  // per GEMM, over every traced unit: the X wait, the chunks, the scratch wait, the period (unit to next unit)
      std::vector<double> v[2][4];
      uint64_t const mask = ~(1ull << 63);
      for (int c = 0; c < sms; ++c)
        for (int k = 0; k < unit::kUnitTraceMax; ++k) {
          uint64_t const* w = &hu[(size_t(c) * unit::kUnitTraceMax + k) * 4];
          if (!w[0] || !w[3]) break;
          int const g = int(w[0] >> 63);
          double const a = double(w[0] & mask), b = double(w[1]), cc = double(w[2]), d = double(w[3]);
          v[g][0].push_back((b - a) * 1e-3); v[g][1].push_back((cc - b) * 1e-3); v[g][2].push_back((d - cc) * 1e-3);
          uint64_t const* nx = k + 1 < unit::kUnitTraceMax ? w + 4 : nullptr;
          if (nx && nx[0] && int(nx[0] >> 63) == g) v[g][3].push_back((double(nx[0] & mask) - a) * 1e-3);
        }
      for (int g = 0; g < 2; ++g) {
        char b2[400]; int o = snprintf(b2, sizeof b2, "unit units %s M=%d gemm%d (%zu units):", sd.name, m, g + 1, v[g][0].size());
        static char const* nm[] = {"xwait", "chunks", "swait", "period"};
        for (int q = 0; q < 4; ++q) {
          auto& x = v[g][q]; std::sort(x.begin(), x.end());
          if (!x.empty()) o += snprintf(b2 + o, sizeof b2 - o, " %s %.2f/%.2f/%.2f", nm[q], x[x.size() / 10], x[x.size() / 2], x[x.size() * 9 / 10]);
        }
        printf("%s\n", b2); fprintf(log, "%s\n", b2);
      }
    }
    uint64_t t0 = ~0ull;
    for (int c = 0; c < sms; ++c) t0 = std::min(t0, h[size_t(c) * unit::kTraceWords + unit::kAtEntry]);
    std::string line = std::string("unit trace ") + sd.name + " M=" + std::to_string(m);
    for (int at : {int(unit::kAtEntry), int(unit::kAtIssued1), int(unit::kAtDone1), int(unit::kAtX2), int(unit::kAtEnd),
                   int(unit::kUnits1), int(unit::kUnits2)}) {
      std::vector<double> v;
      for (int c = 0; c < sms; ++c) {
        uint64_t const x = h[size_t(c) * unit::kTraceWords + at];
        bool const count = at == unit::kUnits1 || at == unit::kUnits2;
        if (count) v.push_back(double(x)); else if (x) v.push_back((double(x) - double(t0)) * 1e-3);
      }
      std::sort(v.begin(), v.end());
      static char const* names[] = {"entry", "done1", "x2", "end", "sm", "units1", "units2", "issued1"};
      char b[128];
      if (!v.empty()) snprintf(b, sizeof b, " %s %.1f/%.1f/%.1f", names[at], v.front(), v[v.size() / 2], v.back());
      else snprintf(b, sizeof b, " %s -", names[at]);
      line += b;
    }
    printf("%s\n", line.c_str()); fprintf(log, "%s\n", line.c_str());
    line = std::string("unit poster ") + sd.name + " M=" + std::to_string(m) + (g_unit_poster == 2 ? " split" : g_unit_poster == 1 ? " wide" : " narrow") +
           (g_unit_x_tma == 2 ? " x_tma128" : g_unit_x_tma ? " x_tma" : " x_cp.async");
    for (int at : {int(unit::kFinNs1), int(unit::kFinNs2), int(unit::kPostWaitNs1), int(unit::kPostWaitNs2), int(unit::kFins1),
                   int(unit::kFins2), int(unit::kArrNs1), int(unit::kArrNs2), int(unit::kFlagNs1)}) {  // per CTA: us in finishes / waiting for partials, finishes (min/median/max)
      std::vector<double> v;
      for (int c = 0; c < sms; ++c) {
        double const x = double(h[size_t(c) * unit::kTraceWords + at]);
        v.push_back(at == unit::kFins1 || at == unit::kFins2 ? x : x * 1e-3);
      }
      std::sort(v.begin(), v.end());
      static char const* names[] = {"fin1_us", "fin2_us", "pwait1_us", "pwait2_us", "fins1", "fins2", "arr1_us", "arr2_us", "flag1_us"};
      char b[128];
      snprintf(b, sizeof b, " %s %.1f/%.1f/%.1f", names[at - unit::kFinNs1], v.front(), v[v.size() / 2], v.back());
      line += b;
    }
    printf("%s\n", line.c_str()); fprintf(log, "%s\n", line.c_str());
  }
  void unit_setup() {
    int64_t f1 = 0, f2 = 0;
    for (int mp : {8, 16}) {
      unit::UnitGemm a{}, b{};
      unit::unit_make(a, sd.k1, n1w, mp); unit::unit_make(b, sd.n1, sd.n2, mp);
      f1 = std::max(f1, unit::unit_ws_floats(a, mp)); f2 = std::max(f2, unit::unit_ws_floats(b, mp));
    }
    CK(cudaMalloc(&uws1, f1 * 4)); CK(cudaMalloc(&uws2, f2 * 4));
    int const t1 = (n1w + 63) / 64, t2 = (sd.n2 + 63) / 64;
    CK(cudaMalloc(&ucnt1, t1 * 8)); CK(cudaMalloc(&ucnt2, t2 * 8)); CK(cudaMalloc(&utick, 16));
    CK(cudaMalloc(&uready, t1 * 4)); CK(cudaMalloc(&ustate, sizeof(unit::UnitState))); CK(cudaMalloc(&uerr, 8));
    CK(cudaMemset(ucnt1, 0, t1 * 8)); CK(cudaMemset(ucnt2, 0, t2 * 8)); CK(cudaMemset(utick, 0, 16));
    CK(cudaMemset(uready, 0, t1 * 4)); CK(cudaMemset(ustate, 0, sizeof(unit::UnitState))); CK(cudaMemset(uerr, 0, 8));
    CK((unit::unit_prepare<T, 8>())); CK((unit::unit_prepare<T, 16>()));
  }
  bool unit_error_clear() {
    unsigned long long e = 0; CK(cudaStreamSynchronize(st)); CK(cudaMemcpy(&e, uerr, 8, cudaMemcpyDeviceToHost));
    if (e) { printf("unit timeout: gemm1 tile %llu\n", e & 0xffffffffull); CK(cudaMemset(uerr, 0, 8)); }
    return e == 0;
  }

  template <typename F>
  static void with_mpad_reg(int mpad, F&& f) {
    switch (mpad) {
      case 8: f(std::integral_constant<int, 8>{}); break;
      case 16: f(std::integral_constant<int, 16>{}); break;
      default: f(std::integral_constant<int, 32>{}); break;
    }
  }
  // v3 shapes (DECODE_PROBE_REG_CFG): 0, 1, 2 = 1, 2, 4 warps side by side along N
  template <typename F>
  static void with_wn(int cfg, F&& f) {
    switch (cfg) {
      case 1: f(std::integral_constant<int, 2>{}); break;
      case 2: f(std::integral_constant<int, 4>{}); break;
      default: f(std::integral_constant<int, 1>{}); break;
    }
  }

  template <typename F>
  static void with_mpad_bulk(int mpad, F&& f) {
    switch (mpad) {
      case 8: f(std::integral_constant<int, 8>{}); break;
      case 16: f(std::integral_constant<int, 16>{}); break;
      case 32: f(std::integral_constant<int, 32>{}); break;
      default: f(std::integral_constant<int, 64>{}); break;
    }
  }
  template <typename F>
  static void with_mpad(int mpad, F&& f) {
    switch (mpad) {
      case 8: f(std::integral_constant<int, 8>{}); break;
      case 16: f(std::integral_constant<int, 16>{}); break;
      case 32: f(std::integral_constant<int, 32>{}); break;
      case 64: f(std::integral_constant<int, 64>{}); break;
      default: f(std::integral_constant<int, 128>{}); break;
    }
  }

  void setup() {
    n1w = sd.act == Act::kSwiglu ? 2 * sd.n1 : sd.n1;
    double wbytes = 2.0 * (double(sd.k1) * n1w + double(sd.n1) * sd.n2);
    nsets = wbytes < 3 * 50e6 ? 3 : 1;
    CK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
    CB(cublasCreate(&cb)); CB(cublasSetStream(cb, st)); CB(cublasLtCreate(&lt));
    for (int s = 0; s < nsets; ++s) {
      T *a, *b;
      CK(cudaMalloc(&a, size_t(sd.k1) * n1w * sizeof(T))); CK(cudaMalloc(&b, size_t(sd.n1) * sd.n2 * sizeof(T)));
      init_rand<<<1024, 256, 0, st>>>(a, size_t(sd.k1) * n1w, 11 + s, 1.7f / std::sqrt(float(sd.k1)));
      init_rand<<<1024, 256, 0, st>>>(b, size_t(sd.n1) * sd.n2, 23 + s, 1.7f / std::sqrt(float(sd.n1)));
      w1.push_back(a); w2.push_back(b);
      if (g_reg_packed) {
        int64_t const c1 = reg::reg_packed_chunks(n1w, sd.k1, g_reg_wn), c2 = reg::reg_packed_chunks(sd.n2, sd.n1, g_reg_wn);
        void *pa, *pb;
        CK(cudaMalloc(&pa, size_t(c1) * 16)); CK(cudaMalloc(&pb, size_t(c2) * 16));
        reg::reg_pack_kernel<T><<<2048, 256, 0, st>>>(a, sd.k1, n1w, n1w, g_reg_wn, static_cast<uint4*>(pa), c1);
        reg::reg_pack_kernel<T><<<2048, 256, 0, st>>>(b, sd.n1, sd.n2, sd.n2, g_reg_wn, static_cast<uint4*>(pb), c2);
        CK(cudaGetLastError());
        w1p.push_back(pa); w2p.push_back(pb);
      }
      {
        void *pa, *pb;
        CK(cudaMalloc(&pa, size_t(bulk::bulk_packed_bytes(sd.k1, n1w)))); CK(cudaMalloc(&pb, size_t(bulk::bulk_packed_bytes(sd.n1, sd.n2))));
        CK(bulk::bulk_pack<T>(a, sd.k1, n1w, n1w, false, pa, st));
        CK(bulk::bulk_pack<T>(b, sd.n1, sd.n2, sd.n2, false, pb, st));
        w1b.push_back(pa); w2b.push_back(pb);
      }
    }
    CK(cudaMalloc(&x, size_t(128) * sd.k1 * sizeof(T))); init_rand<<<256, 256, 0, st>>>(x, size_t(128) * sd.k1, 7, 1.f);
    CK(cudaMalloc(&bias1, size_t(n1w) * sizeof(T))); init_rand<<<64, 256, 0, st>>>(bias1, size_t(n1w), 5, 0.5f);
    CK(cudaMalloc(&h, size_t(128) * sd.n1 * sizeof(T))); CK(cudaMalloc(&y, size_t(128) * sd.n2 * sizeof(T)));
    CK(cudaMalloc(&hc, size_t(128) * n1w * sizeof(T))); CK(cudaMalloc(&h2, size_t(128) * sd.n1 * sizeof(T)));
    CK(cudaMalloc(&yc, size_t(128) * sd.n2 * sizeof(T)));
    CK(cudaMalloc(&lt_ws, lt_ws_bytes));
    grid_max = 4 * sms;
    slots1 = ws_slots_for(grid_max, n1w); slots2 = ws_slots_for(grid_max, sd.n2);
    // kWsScale: room for a kernel that keeps one partial per (tile, K slab) (a patch's unit schedule).
    CK(cudaMalloc(&ws1, kWsScale * slots1 * kBlkN * 128 * sizeof(float)));
    CK(cudaMalloc(&ws2, kWsScale * slots2 * kBlkN * 128 * sizeof(float)));
    CK(cudaMalloc(&arr1, tiles_of(n1w) * 8)); CK(cudaMalloc(&arr2, tiles_of(sd.n2) * 8)); CK(cudaMalloc(&sem1, tiles_of(n1w) * 8));
    CK(cudaMemsetAsync(arr1, 0, tiles_of(n1w) * 8, st)); CK(cudaMemsetAsync(arr2, 0, tiles_of(sd.n2) * 8, st));
    CK(cudaMemsetAsync(sem1, 0, tiles_of(n1w) * 8, st));
    {
      int occ = 99;
      for (int mp : {8, 16, 32})
        with_mpad_reg(mp, [&](auto mc) {
          with_wn(g_reg_cfg, [&](auto wc) {
            constexpr int MP = decltype(mc)::value, WN = decltype(wc)::value;
            CK((reg::reg_prepare<T, MP, WN>()));
            occ = std::min(occ, reg::reg_occupancy<T, MP, WN>());
          });
        });
      reg_occ = std::max(1, occ);
      printf("reg_stream occupancy: %d CTAs per SM\n", reg_occ);
      int const target = std::max(g_reg_f[0], g_reg_f[1]) * reg_occ * sms;
      wsr1_floats = reg::reg_ws_floats(n1w, target);
      wsr2_floats = reg::reg_ws_floats(sd.n2, target);
      CK(cudaMalloc(&wsr1, wsr1_floats * 4)); CK(cudaMalloc(&wsr2, wsr2_floats * 4));
      size_t const t1 = reg::tiles_of(n1w, reg::kWarpN) * 8, t2 = reg::tiles_of(sd.n2, reg::kWarpN) * 8;
      CK(cudaMalloc(&arrr1, t1)); CK(cudaMalloc(&semr1, t1)); CK(cudaMalloc(&arrr2, t2));
      CK(cudaMemsetAsync(arrr1, 0, t1, st)); CK(cudaMemsetAsync(semr1, 0, t1, st)); CK(cudaMemsetAsync(arrr2, 0, t2, st));
    }
    CK(cudaMalloc(&state, sizeof(StreamState))); CK(cudaMemsetAsync(state, 0, sizeof(StreamState), st));
    CK(cudaMalloc(&err, sizeof(SyncErrorInfo))); CK(cudaMemsetAsync(err, 0, sizeof(SyncErrorInfo), st));
    for (int mp : {8, 16, 32, 64, 128})
      with_mpad(mp, [&](auto mc) {
        CK((prepare_kernels<T, decltype(mc)::value>()));
        CK((ws::prepare_chain_ws<T, decltype(mc)::value>()));
        CK((ring::prepare_chain_ring<T, decltype(mc)::value>()));
      });
    for (int mp : {8, 16, 32, 64})
      with_mpad_bulk(mp, [&](auto mc) {
        constexpr int MP = decltype(mc)::value;
        CK((bulk::bulk_prepare<T, MP, false>())); CK((bulk::bulk_prepare<T, MP, true>()));
        printf("bulk M_pad %d: %d stages of %d KB, %d B shared memory\n", MP, bulk::BulkCfg<MP>::kStages,
               bulk::kChunkBytes / 1024, bulk::BulkCfg<MP>::kSmemBytes);
      });
    unit_setup();
    CK(cudaStreamSynchronize(st));
  }
  void teardown() {
    for (auto p : w1) cudaFree(p);
    for (auto p : w2) cudaFree(p);
    for (auto p : w1p) cudaFree(p);
    for (auto p : w2p) cudaFree(p);
    for (auto p : w1b) cudaFree(p);
    for (auto p : w2b) cudaFree(p);
    for (void* p : {(void*)x, (void*)bias1, (void*)h, (void*)y, (void*)hc, (void*)h2, (void*)yc, lt_ws, (void*)ws1,
                    (void*)ws2, (void*)arr1, (void*)arr2, (void*)sem1, (void*)state, (void*)err, (void*)wsr1, (void*)wsr2,
                    (void*)arrr1, (void*)arrr2, (void*)semr1})
      cudaFree(p);
    cublasDestroy(cb); cublasLtDestroy(lt); cudaStreamDestroy(st);
  }

  // ---- cuBLAS chain ----
  void cublas_chain(int m, int set) {
    float one = 1.f, zero = 0.f;
    CB(cublasGemmEx(cb, CUBLAS_OP_N, CUBLAS_OP_N, n1w, m, sd.k1, &one, w1[set], dt, n1w, x, dt, sd.k1, &zero, hc, dt,
                    n1w, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
    T const* hin = hc;
    if (sd.act == Act::kGelu) gelu_inplace<<<512, 256, 0, st>>>(hc, size_t(m) * sd.n1);
    if (sd.act == Act::kSwiglu) { swiglu_kernel<<<512, 256, 0, st>>>(hc, h2, m, sd.n1); hin = h2; }
    CB(cublasGemmEx(cb, CUBLAS_OP_N, CUBLAS_OP_N, sd.n2, m, sd.n1, &one, w2[set], dt, sd.n2, hin, dt, sd.n1, &zero, yc,
                    dt, sd.n2, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

  // ---- cuBLASLt chain (best of the top heuristic algorithms per GEMM) ----
  struct LtGemm { cublasLtMatmulDesc_t op; cublasLtMatrixLayout_t a, b, c; cublasLtMatmulAlgo_t algo; bool ok = false; };
  LtGemm lt1, lt2;
  void lt_make(LtGemm& g, int n, int k, int m, bool gelu) {
    CB(cublasLtMatmulDescCreate(&g.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t opn = CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSA, &opn, sizeof(opn)));
    CB(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_TRANSB, &opn, sizeof(opn)));
    if (gelu) {
      cublasLtEpilogue_t ep = CUBLASLT_EPILOGUE_GELU;
      CB(cublasLtMatmulDescSetAttribute(g.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &ep, sizeof(ep)));
    }
    CB(cublasLtMatrixLayoutCreate(&g.a, dt, n, k, n)); CB(cublasLtMatrixLayoutCreate(&g.b, dt, k, m, k));
    CB(cublasLtMatrixLayoutCreate(&g.c, dt, n, m, n));
  }
  void lt_free(LtGemm& g) {
    cublasLtMatmulDescDestroy(g.op); cublasLtMatrixLayoutDestroy(g.a); cublasLtMatrixLayoutDestroy(g.b); cublasLtMatrixLayoutDestroy(g.c);
  }
  void lt_run(LtGemm& g, void const* A, void const* B, void* C) {
    float one = 1.f, zero = 0.f;
    CB(cublasLtMatmul(lt, g.op, &one, A, g.a, B, g.b, &zero, C, g.c, C, g.c, &g.algo, lt_ws, lt_ws_bytes, st));
  }
  bool lt_search(LtGemm& g, void const* A, void const* B, void* C) {
    cublasLtMatmulPreference_t pref; CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &lt_ws_bytes, sizeof(lt_ws_bytes)));
    cublasLtMatmulHeuristicResult_t res[8]; int nres = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, g.op, g.a, g.b, g.c, g.c, pref, 8, res, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    float best = 1e30f; cublasLtMatmulAlgo_t best_algo{}; cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int i = 0; i < nres; ++i) {
      if (res[i].state != CUBLAS_STATUS_SUCCESS) continue;
      g.algo = res[i].algo; float one = 1.f, zero = 0.f; bool fail = false;
      for (int r = 0; r < 3 && !fail; ++r)
        fail = cublasLtMatmul(lt, g.op, &one, A, g.a, B, g.b, &zero, C, g.c, C, g.c, &g.algo, lt_ws, lt_ws_bytes, st) != CUBLAS_STATUS_SUCCESS;
      if (fail) continue;
      CK(cudaEventRecord(e0, st));
      for (int r = 0; r < 10; ++r) lt_run(g, A, B, C);
      CK(cudaEventRecord(e1, st)); CK(cudaEventSynchronize(e1));
      float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
      if (ms < best) { best = ms; g.ok = true; best_algo = res[i].algo; }
    }
    if (g.ok) g.algo = best_algo;
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    return g.ok;
  }
  bool lt_setup(int m) {
    lt_make(lt1, n1w, sd.k1, m, sd.act == Act::kGelu); lt_make(lt2, sd.n2, sd.n1, m, false);
    bool ok1 = lt_search(lt1, w1[0], x, hc), ok2 = lt_search(lt2, w2[0], h2, yc);
    return ok1 && ok2;
  }
  void lt_chain(int m, int set) {
    lt_run(lt1, w1[set], x, hc);
    T const* hin = hc;
    if (sd.act == Act::kSwiglu) { swiglu_kernel<<<512, 256, 0, st>>>(hc, h2, m, sd.n1); hin = h2; }
    lt_run(lt2, w2[set], hin, yc);
  }

  // ---- ours ----
  StageArgs args1(int m, int set, bool bias, int skip) {
    StageArgs a{};
    a.x = x; a.ldx = sd.k1; a.w = w1[set]; a.ldw = n1w; a.bias = bias ? bias1 : nullptr; a.out = h; a.ldo = sd.n1;
    a.m = m; a.n = n1w; a.k = sd.k1; a.act = int(sd.act); a.ws = ws1; a.ws_slots = slots1; a.arrivals = arr1;
    a.post_sems = sem1; a.wait_sems = nullptr; a.skip_post_tile = skip; a.stage_id = 0;
    return a;
  }
  StageArgs args2(int m, int set, bool waits) {
    StageArgs a{};
    a.x = h; a.ldx = sd.n1; a.w = w2[set]; a.ldw = sd.n2; a.bias = nullptr; a.out = y; a.ldo = sd.n2;
    a.m = m; a.n = sd.n2; a.k = sd.n1; a.act = int(Act::kIdentity); a.ws = ws2; a.ws_slots = slots2; a.arrivals = arr2;
    a.post_sems = nullptr; a.wait_sems = waits ? sem1 : nullptr; a.wait_tile_cols = out_tile_cols(int(sd.act));
    a.wait_tiles = tiles_of(n1w); a.skip_post_tile = -1; a.stage_id = 1;
    return a;
  }
  int grid_of(Variant v, int f, int mpad) {
    if (v == kBulk) return sms;
    if (v == kReg || v == kRegSync) {
      StageArgs a1 = args1(1, 0, false, -1);
      reg::RegStage s; a1.ws = wsr1; a1.ws_slots = wsr1_floats / (reg::cta_n_of(g_reg_wn) * mpad);
      reg::reg_make(a1, mpad, g_reg_wn, f * reg_occ * sms, false, &s);
      return s.tiles * s.splits;
    }
    if (v == kWS || v == kRing) {  // one co-resident wave; f is the number of rounds
      int occ = 0;
      with_mpad(mpad, [&](auto mc) {
        occ = v == kWS ? ws::chain_ws_occupancy<T, decltype(mc)::value>() : ring::chain_ring_occupancy<T, decltype(mc)::value>();
      });
      return std::max(1, occ) * sms;
    }
    if (v == kPers) {
      int occ = 0;
      with_mpad(mpad, [&](auto mc) { occ = chain_occupancy<T, decltype(mc)::value>(); });
      return std::max(1, std::min(f, occ)) * sms;
    }
    return f * sms;
  }
  void ours(Variant v, int f, int m, int set, bool bias = false, int skip = -1, uint64_t timeout_ns = 2000000000ull) {
    int const mpad = m_pad_for(m);
    if (v == kUnit) {
      unit::UnitParams p{};
      unit::UnitGemm& a = p.gm[0]; unit::UnitGemm& b = p.gm[1];
      unit::unit_make(a, sd.k1, n1w, mpad); unit::unit_make(b, sd.n1, sd.n2, mpad);
      a.w = w1b[set]; a.x = x; a.ldx = sd.k1; a.bias = bias ? bias1 : nullptr; a.out = h; a.ldo = sd.n1; a.act = int(sd.act);
      a.ws = uws1; a.count = ucnt1; a.ticket = utick;
      b.w = w2b[set]; b.x = h; b.ldx = sd.n1; b.bias = nullptr; b.out = y; b.ldo = sd.n2; b.act = int(Act::kIdentity);
      b.ws = uws2; b.count = ucnt2; b.ticket = utick + 1;
      p.m = m; p.grid = sms; p.hready = uready; p.state = ustate; p.error = uerr; p.timeout_ns = timeout_ns; p.skip_post = skip; p.trace = unit_trace; p.utrace = unit_utrace;
      p.g2_tile_major = g_unit_g2_tile_major ? 1 : 0; p.poster = g_unit_poster; p.no_x = g_unit_no_x; p.x_tma = 0;
      // 128-byte rows need K % 64 == 0 (a last group past K would read the next row), 16-byte rows K % 8 == 0.
      int const xt = g_unit_x_tma == 2 && sd.k1 % 64 == 0 && sd.n1 % 64 == 0 ? 2 : g_unit_x_tma && sd.k1 % 8 == 0 && sd.n1 % 8 == 0 ? 1 : 0;
      if (xt) {
        p.x_tma = xt;
        CK(unit_x_map(a.tmx, x, m, sd.k1, sd.k1, mpad, xt) ? cudaSuccess : cudaErrorInvalidValue);
        CK(unit_x_map(b.tmx, h, m, sd.n1, sd.n1, mpad, xt) ? cudaSuccess : cudaErrorInvalidValue);
      }
      auto go = [&](int which) {
        p.which = which;
        if (mpad == 8) CK((unit::unit_launch<T, 8>(p, st))); else CK((unit::unit_launch<T, 16>(p, st)));
      };
      if (f == 3) { go(1); go(2); } else go(3);
      return;
    }
    if (v == kBulk) {
      bool const b2b = f == 3;
      StageArgs a1 = args1(m, set, bias, skip), a2 = args2(m, set, !b2b);
      a1.w = w1b[set]; a2.w = w2b[set];
      a1.ws = ws1; a1.ws_slots = kWsScale * slots1 * kBlkN * 128 / (bulk::kTileN * mpad); a1.arrivals = arrr1; a1.post_sems = semr1;
      a2.ws = ws2; a2.ws_slots = kWsScale * slots2 * kBlkN * 128 / (bulk::kTileN * mpad); a2.arrivals = arrr2;
      a2.wait_sems = b2b ? nullptr : semr1; a2.wait_tile_cols = reg::out_tile_cols(int(sd.act), bulk::kTileN);
      a2.wait_tiles = reg::tiles_of(n1w, bulk::kTileN);
      bulk::BulkParams p{};
      char const* why = bulk::bulk_make(a1, mpad, sms, &p.gm[0]);
      if (!why) why = bulk::bulk_make(a2, mpad, sms, &p.gm[1]);
      if (why) { fprintf(stderr, "bulk_make: %s\n", why); exit(1); }
      p.mode = g_bulk_mode;
      p.grid = sms;
#ifdef CUSYNC_BULK_BALANCE
      g_bulk_q[0] = p.gm[0].q; g_bulk_q[1] = p.gm[1].q;
      if (!g_sm_weight.empty() && p.gm[0].q == g_rs_q[0] && p.gm[1].q == g_rs_q[1])
        for (int g = 0; g < 2; ++g) { p.gm[g].rs = g_rs_dev + g * (bulk::kMaxRanks + 1); p.gm[g].table = g + 1; p.gm[g].g = sms; }
#endif
      p.trace = bulk_trace;
      with_mpad_bulk(mpad, [&](auto mc) {
        constexpr int MP = decltype(mc)::value;
        if (b2b) {
          p.which = bulk::kOnlyGemm1;
          CK((bulk::bulk_launch<T, MP>(p, false, state, err, timeout_ns, st, g_bulk_coop)));
          p.which = bulk::kOnlyGemm2;
          CK((bulk::bulk_launch<T, MP>(p, false, state, err, timeout_ns, st, g_bulk_coop)));
        } else {
          p.which = bulk::kChain;
          CK((bulk::bulk_launch<T, MP>(p, f == 2, state, err, timeout_ns, st, g_bulk_coop && f != 2)));  // PDL: plain
        }
      });
      return;
    }
    if (v == kReg || v == kRegSync) {
      StageArgs a1 = args1(m, set, bias, skip), a2 = args2(m, set, v == kRegSync);
      int const cta_n = reg::cta_n_of(g_reg_wn);
      a1.ws = wsr1; a1.ws_slots = wsr1_floats / (cta_n * mpad); a1.arrivals = arrr1; a1.post_sems = semr1;
      a2.ws = wsr2; a2.ws_slots = wsr2_floats / (cta_n * mpad); a2.arrivals = arrr2;
      a2.wait_sems = v == kRegSync ? semr1 : nullptr; a2.wait_tile_cols = reg::out_tile_cols(int(sd.act), cta_n);
      a2.wait_tiles = reg::tiles_of(n1w, cta_n);
      reg::RegStage s1, s2;
      int const target = f * reg_occ * sms;
      char const* why = reg::reg_make(a1, mpad, g_reg_wn, target, g_reg_g1_split_major, &s1);
      if (!why) why = reg::reg_make(a2, mpad, g_reg_wn, target, true, &s2);
      if (why) { fprintf(stderr, "reg_make: %s\n", why); exit(1); }
      if (g_reg_packed) { s1.a.w = w1p[set]; s2.a.w = w2p[set]; s1.packed = s2.packed = 1; }
      with_mpad_reg(mpad, [&](auto mc) {
        with_wn(g_reg_cfg, [&](auto wc) {
          constexpr int MP = decltype(mc)::value, WN = decltype(wc)::value;
          bool const sync = v == kRegSync;
          if (sync && g_reg_persist) {  // the tile-synced chain as one persistent kernel: one co-resident wave
            CK((reg::reg_chain_launch<T, MP, WN>(s1, s2, reg_occ * sms, state, err, timeout_ns, st)));
            return;
          }
          CK((reg::reg_launch<T, MP, WN>(s1, state, err, timeout_ns, sync ? kTriggerDependents : 0, false, st)));
          CK((reg::reg_launch<T, MP, WN>(s2, state, err, timeout_ns, kClosesRun, sync, st)));
        });
      });
      return;
    }
    int const grid = grid_of(v, f, mpad);
    StageArgs a1 = args1(m, set, bias, skip), a2 = args2(m, set, v != kB2B);
    char const* why = check_stage(a1, grid, mpad);
    if (!why) why = check_stage(a2, grid, mpad);
    if (why) { fprintf(stderr, "check_stage: %s\n", why); exit(1); }
    with_mpad(mpad, [&](auto mc) {
      constexpr int MP = decltype(mc)::value;
      if (v == kB2B) {
        CK((launch_stage<T, MP>(a1, grid, state, err, timeout_ns, 0, false, st)));
        CK((launch_stage<T, MP>(a2, grid, state, err, timeout_ns, kClosesRun, false, st)));
      } else if (v == kWS) {
        ws::ChainParams p;
        char const* bad = ws::make_chain_ws<T, MP>(a1, a2, f, grid, &p);
        if (bad) { fprintf(stderr, "make_chain_ws: %s\n", bad); exit(1); }
        CK((ws::launch_chain_ws<T, MP>(p, grid, state, err, timeout_ns, st)));
      } else if (v == kRing) {
        ws::ChainParams p;
        char const* bad = ring::make_chain_ring<T, MP>(a1, a2, f, grid, &p);
        if (bad) { fprintf(stderr, "make_chain_ring: %s\n", bad); exit(1); }
        p.consumer_mode = g_ring_mode;
        CK((ring::launch_chain_ring<T, MP>(p, grid, state, err, timeout_ns, st)));
      } else if (v == kSync) {
        CK((launch_stage<T, MP>(a1, grid, state, err, timeout_ns, kTriggerDependents, false, st)));
        CK((launch_stage<T, MP>(a2, grid, state, err, timeout_ns, kClosesRun, true, st)));
      } else {
        CK((launch_chain<T, MP>(a1, a2, grid, state, err, timeout_ns, st)));
      }
    });
  }

  std::vector<uint16_t> fetch(T const* p, size_t n) {
    std::vector<uint16_t> v(n);
    CK(cudaStreamSynchronize(st));
    CK(cudaMemcpy(v.data(), p, n * 2, cudaMemcpyDeviceToHost));
    return v;
  }
  void poison(T* p, size_t n) { poison_u16<<<256, 256, 0, st>>>(reinterpret_cast<uint16_t*>(p), n); }
  bool sync_error_clear(SyncErrorInfo* out = nullptr) {
    SyncErrorInfo e; CK(cudaStreamSynchronize(st)); CK(cudaMemcpy(&e, err, sizeof(e), cudaMemcpyDeviceToHost));
    if (out) *out = e;
    return e.flag == 0;
  }
  double tol() const { return 1e-2; }

  // ---- host fp32 reference of rows `rows`, columns `cols` of Y (with bias1 if `bias`) ----
  double host_check(int m, bool bias, std::vector<int> const& rows, int ncols, std::vector<uint16_t> const& got) {
    std::vector<uint16_t> hw1(size_t(sd.k1) * n1w), hw2(size_t(sd.n1) * sd.n2), hx(size_t(m) * sd.k1), hb(n1w);
    CK(cudaMemcpy(hw1.data(), w1[0], hw1.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hw2.data(), w2[0], hw2.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hx.data(), x, hx.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), bias1, hb.size() * 2, cudaMemcpyDeviceToHost));
    double maxd = 0, maxr = 0;
    for (int r : rows) {
      std::vector<float> acc(n1w, 0.f), hrow(sd.n1);
      for (int k = 0; k < sd.k1; ++k) {
        float xv = h2f_tab[hx[size_t(r) * sd.k1 + k]];
        uint16_t const* wr = &hw1[size_t(k) * n1w];
        for (int n = 0; n < n1w; ++n) acc[n] += xv * h2f_tab[wr[n]];
      }
      if (bias) for (int n = 0; n < n1w; ++n) acc[n] += h2f_tab[hb[n]];
      for (int j = 0; j < sd.n1; ++j) {
        float v;
        if (sd.act == Act::kSwiglu) {
          int gc = 16 * (j / 8) + j % 8; float g = acc[gc], u = acc[gc + 8]; v = g / (1.f + std::exp(-g)) * u;
        } else if (sd.act == Act::kGelu) { float a = acc[j]; v = 0.5f * a * (1.f + std::erf(a * 0.70710678f)); }
        else if (sd.act == Act::kRelu) v = std::max(acc[j], 0.f);
        else v = acc[j];
        hrow[j] = h2f_tab[f2h_host(v, sd.bf16)];  // H is stored in T
      }
      for (int ci = 0; ci < ncols; ++ci) {
        int c = int((size_t(ci) * 7919u) % size_t(sd.n2));
        double s = 0;
        for (int k = 0; k < sd.n1; ++k) s += double(hrow[k]) * h2f_tab[hw2[size_t(k) * sd.n2 + c]];
        double g = h2f_tab[got[size_t(r) * sd.n2 + c]];
        maxd = std::max(maxd, std::isfinite(g) ? std::fabs(g - s) : 1e30); maxr = std::max(maxr, std::fabs(s));
      }
    }
    return maxd / std::max(maxr, 1e-30);
  }

  // ---------------- one (shape, M) point ----------------
  void point(int m, std::vector<Row>& rows, FILE* log) {
    size_t const ny = size_t(m) * sd.n2;
    Row row{}; row.shape = sd.name; row.m = m;
    double const bytes = 2.0 * (double(sd.k1) * n1w + double(sd.n1) * sd.n2) + 2.0 * m * (sd.k1 + 2.0 * sd.n1 + sd.n2);
    row.floor_us = bytes / 4.8e12 * 1e6;
    std::string checks;
    bool all_ok = true;

    // cuBLAS reference
    poison(yc, ny); cublas_chain(m, 0);
    CK(cudaGetLastError());
    auto ref = fetch(yc, ny);
    bool const lt_ok = lt_setup(m);
    if (lt_ok) {
      poison(yc, ny); lt_chain(m, 0); auto ltv = fetch(yc, ny);
      ErrStat e = compare(ltv, ref, ny);
      fprintf(log, "%s M=%d lt vs cublas rel_l2=%.3e max_rel=%.3e nans=%zu\n", sd.name, m, e.rel_l2, e.max_rel, e.nans);
    }

#ifdef CUSYNC_BULK_BALANCE
    if (g_balance && m <= 64) calibrate_balance(m, log);
#endif
    // our variants and configs
    struct Cfg { Variant v; int f; };
    std::vector<Cfg> cfgs = {{kB2B, 1}, {kB2B, 2}, {kSync, 1}, {kSync, 2}, {kPers, 1}, {kPers, 2}, {kWS, 1}, {kWS, 2}};
    bool const reg_ok = m <= 32;  // v3 covers M_pad 8..32
    if (reg_ok)
      for (Cfg c : {Cfg{kReg, g_reg_f[0]}, Cfg{kReg, g_reg_f[1]}, Cfg{kRegSync, g_reg_f[0]}, Cfg{kRegSync, g_reg_f[1]}})
        cfgs.push_back(c);
    size_t const ring_i = cfgs.size();  // v4: rounds 1, 2
    cfgs.push_back({kRing, 1});
    cfgs.push_back({kRing, 2});
    bool const bulk_ok = m <= 64;  // v5 covers M_pad 8..64
    size_t const bulk_i = cfgs.size();
    if (bulk_ok) { cfgs.push_back({kBulk, 1}); cfgs.push_back({kBulk, 2}); cfgs.push_back({kBulk, 3}); }
    bool const unit_ok = m <= 16;  // v6 covers M_pad 8 and 16
    size_t const unit_i = cfgs.size();
    if (unit_ok) { cfgs.push_back({kUnit, 1}); cfgs.push_back({kUnit, 3}); }
    double worst = 0;
    std::vector<std::vector<uint16_t>> outs(cfgs.size());
    for (size_t i = 0; i < cfgs.size(); ++i) {
      if (!variant_run(cfgs[i].v)) continue;
      poison(y, ny); ours(cfgs[i].v, cfgs[i].f, m, 0); CK(cudaGetLastError());
      outs[i] = fetch(y, ny);
      ErrStat e = compare(outs[i], ref, ny);
      bool ok = e.nans == 0 && e.rel_l2 < tol() && sync_error_clear() && unit_error_clear();
      worst = std::max(worst, e.nans ? 1.0 : e.rel_l2);
      fprintf(log, "%s M=%d %s f=%d vs cublas rel_l2=%.3e max_rel=%.3e nans=%zu %s\n", sd.name, m, kVarName[cfgs[i].v],
              cfgs[i].f, e.rel_l2, e.max_rel, e.nans, ok ? "ok" : "FAIL");
      all_ok &= ok;
    }
    row.rel_l2 = worst;
    checks += all_ok ? "ref" : "REF!";
    // bitwise: b2b == sync at the same grid; pers == b2b when their grids match
    bool bit = outs[0] == outs[2] && outs[1] == outs[3];
    if (reg_ok) bit &= outs[8] == outs[10] && outs[9] == outs[11];
    if (bulk_ok) {
      bool const bb = outs[bulk_i] == outs[bulk_i + 1] && outs[bulk_i] == outs[bulk_i + 2];
      fprintf(log, "%s M=%d bulk chain == chain pdl == two launches: %s\n", sd.name, m, bb ? "yes" : "NO");
      bit &= bb;
    }
    if (unit_ok) {
      bool const ub = outs[unit_i] == outs[unit_i + 1];
      fprintf(log, "%s M=%d unit chain == two launches: %s\n", sd.name, m, ub ? "yes" : "NO");
      printf("%s M=%d unit chain == two launches: %s\n", sd.name, m, ub ? "yes" : "NO");
      bit &= ub;
    }
    if (grid_of(kPers, 1, m_pad_for(m)) == sms) bit &= outs[4] == outs[0];
    if (grid_of(kPers, 2, m_pad_for(m)) == 2 * sms) bit &= outs[5] == outs[1];
    checks += bit ? " bit" : " BIT!";
    // determinism: 10 runs of the synced chain (and the persistent one)
    bool det = true;
    for (int r = 0; r < 10; ++r) {
      if (variant_run(kSync)) { poison(y, ny); ours(kSync, 2, m, 0); det &= fetch(y, ny) == outs[3]; }
      if (variant_run(kPers)) { poison(y, ny); ours(kPers, 2, m, 0); det &= fetch(y, ny) == outs[5]; }
      if (variant_run(kWS)) { poison(y, ny); ours(kWS, 1, m, 0); det &= fetch(y, ny) == outs[6]; }  // v2 against itself
      if (variant_run(kWS)) { poison(y, ny); ours(kWS, 2, m, 0); det &= fetch(y, ny) == outs[7]; }
      if (reg_ok && variant_run(kRegSync)) { poison(y, ny); ours(kRegSync, g_reg_f[1], m, 0); det &= fetch(y, ny) == outs[11]; }
      if (variant_run(kRing)) { poison(y, ny); ours(kRing, 1, m, 0); det &= fetch(y, ny) == outs[ring_i]; }  // v4 against itself
      if (variant_run(kRing)) { poison(y, ny); ours(kRing, 2, m, 0); det &= fetch(y, ny) == outs[ring_i + 1]; }
      if (bulk_ok && variant_run(kBulk)) { poison(y, ny); ours(kBulk, 2, m, 0); det &= fetch(y, ny) == outs[bulk_i]; }
      if (unit_ok && variant_run(kUnit)) { poison(y, ny); ours(kUnit, 1, m, 0); det &= fetch(y, ny) == outs[unit_i]; }
    }
    checks += det ? " det" : " DET!";
    if (unit_ok) {  // negative: gemm1's last tile never flagged -> gemm2's X warp times out naming it; the next run is right
      int const skip = (n1w + 63) / 64 - 1;
      ours(kUnit, 1, m, 0, false, skip, 50000000ull);
      unsigned long long e = 0; CK(cudaStreamSynchronize(st)); CK(cudaMemcpy(&e, uerr, 8, cudaMemcpyDeviceToHost)); CK(cudaMemset(uerr, 0, 8));
      poison(y, ny); ours(kUnit, 1, m, 0); bool const rec = fetch(y, ny) == outs[unit_i] && unit_error_clear();
      bool const neg = e == ((1ull << 63) | (unsigned long long)skip) && rec;
      printf("%s M=%d unit negative: error %llx (tile %d skipped), next run %s: %s\n", sd.name, m, e, skip, rec ? "right" : "WRONG", neg ? "ok" : "FAIL");
      checks += neg ? " neg" : " NEG!";
      all_ok &= neg;
    }
    all_ok &= bit && det;

    // timing: graphs of kRunsPerGraph chain runs, rotating weight sets
    int const nv = 2 + int(cfgs.size());
    std::vector<cudaGraphExec_t> ge(nv, nullptr);
    for (int v = 0; v < nv; ++v) {
      if (v == 1 && !lt_ok) continue;
      if (v >= 2 && (!variant_timed(cfgs[v - 2].v) || !variant_run(cfgs[v - 2].v))) continue;
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
      for (int r = 0; r < kRunsPerGraph; ++r) {
        int set = r % nsets;
        if (v == 0) cublas_chain(m, set);
        else if (v == 1) lt_chain(m, set);
        else ours(cfgs[v - 2].v, cfgs[v - 2].f, m, set);
      }
      CK(cudaStreamEndCapture(st, &g));
      CK(cudaGraphInstantiate(&ge[v], g, 0)); CK(cudaGraphDestroy(g));
      CK(cudaGraphLaunch(ge[v], st));
    }
    CK(cudaStreamSynchronize(st));
    int const reps = quick ? 10 : 31;
    std::vector<std::vector<double>> t(nv);
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    for (int r = 0; r < reps; ++r)
      for (int v = 0; v < nv; ++v) {
        if (!ge[v]) continue;
        CK(cudaEventRecord(e0, st)); CK(cudaGraphLaunch(ge[v], st)); CK(cudaEventRecord(e1, st));
        if (cudaError_t const err = cudaEventSynchronize(e1); err != cudaSuccess) {  // which graph faulted (d29, d30)
          printf("%s M=%d timing: %s in the graph of v=%d (%s) at rep %d\n", sd.name, m, cudaGetErrorString(err), v,
                 v == 0 ? "cublas" : v == 1 ? "lt" : (std::string(kVarName[cfgs[v - 2].v]) + " f=" + std::to_string(cfgs[v - 2].f)).c_str(), r);
          fflush(stdout);
          std::exit(1);
        }
        float ms; CK(cudaEventElapsedTime(&ms, e0, e1));
        t[v].push_back(ms * 1e3 / kRunsPerGraph);
      }
    cudaEventDestroy(e0); cudaEventDestroy(e1);
    for (auto g : ge) if (g) cudaGraphExecDestroy(g);
    all_ok &= sync_error_clear();
    std::vector<double> med(nv);
    for (int v = 0; v < nv; ++v) med[v] = t[v].empty() ? 0 : median(t[v]);
    row.cublas_us = med[0]; row.lt_us = med[1];
    auto pair_min = [&](int a, int b) {  // 0 where not timed
      double x = med[a] > 0 ? med[a] : 1e30, y2 = med[b] > 0 ? med[b] : 1e30, r = std::min(x, y2);
      return r >= 1e30 ? 0.0 : r;
    };
    row.b2b_us = pair_min(2, 3); row.sync_us = pair_min(4, 5); row.pers_us = pair_min(6, 7); row.ws_us = pair_min(8, 9);
    row.reg_us = reg_ok ? pair_min(10, 11) : 0; row.regs_us = reg_ok ? pair_min(12, 13) : 0;
    row.ring_us = pair_min(2 + int(ring_i), 3 + int(ring_i));
    if (bulk_ok) { row.bulk_us = med[2 + bulk_i]; row.bulkp_us = med[3 + bulk_i]; row.bulkb_us = med[4 + bulk_i]; }
    if (unit_ok) { row.unit_us = med[2 + unit_i]; row.unitb_us = med[3 + unit_i]; all_ok &= unit_error_clear(); }
    if (unit_ok && getenv("DECODE_PROBE_UNIT_TRACE")) unit_trace_summary(m, log);
    int best = -1;
    for (int v = 2; v < nv; ++v) if (med[v] > 0 && (best < 0 || med[v] < med[best])) best = v;
    if (best < 0) best = 2;
    row.best_us = med[best];
    row.best_cfg = std::string(kVarName[cfgs[best - 2].v]) + "/G=" + std::to_string(grid_of(cfgs[best - 2].v, cfgs[best - 2].f, m_pad_for(m)));
    if (cfgs[best - 2].v == kWS || cfgs[best - 2].v == kRing || cfgs[best - 2].v == kBulk) row.best_cfg += "/f=" + std::to_string(cfgs[best - 2].f);
    for (int v = 0; v < nv; ++v)
      fprintf(log, "%s M=%d timing v=%d (%s) median=%.2f us\n", sd.name, m, v,
              v == 0 ? "cublas" : v == 1 ? "lt" : (std::string(kVarName[cfgs[v - 2].v]) + " f=" + std::to_string(cfgs[v - 2].f)).c_str(), med[v]);
    lt_free(lt1); lt_free(lt2);
    if (bulk_ok && g_bulk_trace) trace_bulk(m, log);
    row.checks = (all_ok ? "PASS " : "FAIL ") + checks;
    rows.push_back(row);
    fflush(log);
  }

  // One run of the chain (set 0) with the per-CTA trace in buf (h.size() words, cleared first), copied into h.
  void traced_run(int m, uint64_t* buf, std::vector<uint64_t>& h) {
    CK(cudaMemsetAsync(buf, 0, h.size() * 8, st));
    bulk_trace = buf; ours(kBulk, 1, m, 0); bulk_trace = nullptr;
    CK(cudaStreamSynchronize(st)); CK(cudaMemcpy(h.data(), buf, h.size() * 8, cudaMemcpyDeviceToHost));
  }

#ifdef CUSYNC_BULK_BALANCE
  // balance.patch: the uniform split traced, each SM weighted by its gemm1 chunks over the time it took to issue
  // them, the table built and uploaded; twice more with the table (each SM's new weight from its own range), the
  // slowest and median SM's gemm1 issue end printed each round.
  void calibrate_balance(int m, FILE* log) {
    size_t const words = size_t(sms) * bulk::kTraceWords;
    uint64_t* buf;
    CK(cudaMalloc(&buf, words * 8));
    if (!g_rs_dev) CK(cudaMalloc(&g_rs_dev, 2 * (bulk::kMaxRanks + 1) * sizeof(int)));
    g_sm_weight.clear();
    g_rs_q[0] = g_rs_q[1] = -1;
    std::vector<int> rs(2 * (bulk::kMaxRanks + 1), 0);
    std::vector<uint64_t> h(words);
    std::string line = std::string("balance ") + sd.name + " M=" + std::to_string(m) + " gemm1 issued (us, median/max):";
    for (int round = 0; round < 4; ++round) {
      for (int r = 0; r < 2; ++r) ours(kBulk, 1, m, r % nsets);
      traced_run(m, buf, h);
      std::vector<double> t(sms, 0), w(sms, 0);
      bool ok = true;
      for (int c = 0; c < sms; ++c) {
        uint64_t const* x = &h[size_t(c) * bulk::kTraceWords];
        int const sm = int(x[bulk::kSmId]);
        if (sm < 0 || sm >= sms || t[sm] != 0) { ok = false; break; }
        t[sm] = (double(x[bulk::kAtIssuedGemm1]) - double(x[bulk::kAtEntry])) * 1e-3;
        double const chunks = g_sm_weight.empty() ? double(g_bulk_q[0]) / sms : double(rs[sm + 1] - rs[sm]);
        w[sm] = chunks / std::max(t[sm], 1e-3);
      }
      if (!ok) { fprintf(stderr, "balance: SM ids not one per CTA in 0..%d\n", sms - 1); exit(1); }
      std::vector<double> ts = t;
      std::sort(ts.begin(), ts.end());
      char b[64];
      snprintf(b, sizeof(b), " %.1f/%.1f", ts[sms / 2], ts.back());
      line += b;
      if (round == 3) break;
      if (!g_sm_weight.empty())  // damped: half the old weight, half the new
        for (int i = 0; i < sms; ++i) w[i] = 0.5 * w[i] + 0.5 * g_sm_weight[i];
      g_sm_weight = w;
      double tot = 0;
      for (double x : w) tot += x;
      for (int g = 0; g < 2; ++g) {
        double acc = 0;
        for (int i = 0; i <= sms; ++i) {
          rs[g * (bulk::kMaxRanks + 1) + i] = i == sms ? int(g_bulk_q[g]) : int(std::llround(double(g_bulk_q[g]) * acc / tot));
          if (i < sms) acc += w[i];
        }
      }
      CK(cudaMemcpy(g_rs_dev, rs.data(), rs.size() * sizeof(int), cudaMemcpyHostToDevice));
      g_rs_q[0] = g_bulk_q[0]; g_rs_q[1] = g_bulk_q[1];
    }
    printf("%s\n", line.c_str());
    fprintf(log, "%s\n", line.c_str());
    CK(cudaFree(buf));
  }
#endif

  // v5's timeline at this point: the chain run 5 times, the last one traced; per phase the min / median / max over
  // CTAs, in us from the first CTA's entry.
  void trace_bulk(int m, FILE* log) {
    size_t const words = size_t(sms) * bulk::kTraceWords;
    uint64_t* buf;
    CK(cudaMalloc(&buf, words * 8)); CK(cudaMemsetAsync(buf, 0, words * 8, st));
    for (int r = 0; r < 4; ++r) ours(kBulk, 1, m, r % nsets);
    // DECODE_PROBE_TRACE_DUMP=n: n traced runs, each CTA's line in the log (CTA, SM, every stamp), so that a slow
    // CTA can be told apart from a slow SM (scripts/decode_probe/cta_trace.py; on an H100 the CTA -> SM mapping
    // was the same in every run of a shape and differed between shapes); the summary below is of the last run.
    int const dumps = getenv("DECODE_PROBE_TRACE_DUMP") ? std::max(1, std::atoi(getenv("DECODE_PROBE_TRACE_DUMP"))) : 1;
    std::vector<uint64_t> h(words);
    for (int d = 0; d < dumps; ++d) {
      traced_run(m, buf, h);
      if (getenv("DECODE_PROBE_TRACE_DUMP") == nullptr) break;
      uint64_t e0 = ~0ull;
      for (int c = 0; c < sms; ++c) if (h[size_t(c) * bulk::kTraceWords]) e0 = std::min(e0, h[size_t(c) * bulk::kTraceWords]);
      for (int c = 0; c < sms; ++c) {
        uint64_t const* w = &h[size_t(c) * bulk::kTraceWords];
        if (!w[0]) continue;
        fprintf(log, "cta %s M=%d run %d cta %d sm %llu:", sd.name, m, d, c, (unsigned long long)w[bulk::kSmId]);
        for (int at = 0; at < 7; ++at) fprintf(log, " %.2f", w[at] ? (double(w[at]) - double(e0)) * 1e-3 : -1.0);
        fprintf(log, "\n");
      }
    }
    CK(cudaFree(buf));
    uint64_t t0 = ~0ull;
    for (int c = 0; c < sms; ++c) if (h[size_t(c) * bulk::kTraceWords]) t0 = std::min(t0, h[size_t(c) * bulk::kTraceWords]);
    // " name min/med/max" of one word over the CTAs: stamps (us after t0; unset ones skipped) or, for waits.patch's
    // clock64 sums (words 8..12 where the kernel has them: thread 0 of warpgroup 0), kcycles.
    auto spread = [&](int at, char const* name, bool stamp) {
      std::vector<double> v;
      for (int c = 0; c < sms; ++c) {
        uint64_t const x = h[size_t(c) * bulk::kTraceWords + at];
        if (!stamp) v.push_back(double(x) * 1e-3);
        else if (x) v.push_back((double(x) - double(t0)) * 1e-3);
      }
      if (v.empty()) return std::string();
      std::sort(v.begin(), v.end());
      char b[96];
      snprintf(b, sizeof(b), " %s %.1f/%.1f/%.1f", name, v.front(), v[v.size() / 2], v.back());
      return std::string(b);
    };
    static char const* names[] = {"entry", "issued1", "issued", "data", "done1", "ready2", "done"};
    std::string line = std::string("bulk trace ") + sd.name + " M=" + std::to_string(m) + " (us, min/med/max):";
    for (int at = 0; at < 7; ++at) line += spread(at, names[at], true);
    printf("%s\n", line.c_str());
    fprintf(log, "%s\n", line.c_str());
#ifdef CUSYNC_BULK_CHUNK_TRACE
    // ctrace.patch: the whole buffer of the last traced run (per CTA kTraceWords words) for chunk_trace.py.
    if (FILE* bf = fopen((g_out + "/chunks-" + sd.name + "-M" + std::to_string(m) + ".bin").c_str(), "wb")) {
      fwrite(h.data(), 8, words, bf);
      fclose(bf);
    }
#else
    if (bulk::kTraceWords > 8) {  // waits.patch: clock64 sums in words 8..12
      static char const* cy[] = {"x-store", "full-wait", "mma", "loop", "x-issue"};
      std::string l2 = std::string("bulk cycles ") + sd.name + " M=" + std::to_string(m) + " (kcycles, min/med/max):";
      for (int at = 8; at < int(bulk::kTraceWords) && at < 13; ++at) l2 += spread(at, cy[at - 8], false);
      printf("%s\n", l2.c_str());
      fprintf(log, "%s\n", l2.c_str());
    }
#endif
  }

  // v5 alone on a shape the other variants do not take (DECODE_PROBE_SHAPES=odd): partial tiles, a K tail of 8,
  // copies under 16 KB, fewer chunks than CTAs. Every M: chain, chain under PDL and two launches bitwise equal,
  // 5 reruns equal, within tolerance of cuBLAS, a host fp32 check with bias; then a missing post.
  std::string bulk_only_checks(FILE* log) {
    bool ok = true;
    for (int m : {1, 3, 8, 17, 33, 64}) {
      size_t const ny = size_t(m) * sd.n2;
      poison(yc, ny); cublas_chain(m, 0); auto ref = fetch(yc, ny);
      std::vector<uint16_t> first;
      bool same = true, good = true;
      for (int f : {1, 2, 3, 2, 2, 2, 2, 2}) {
        poison(y, ny); ours(kBulk, f, m, 0); auto got = fetch(y, ny);
        ErrStat e = compare(got, ref, ny);
        good &= e.nans == 0 && e.rel_l2 < tol() && sync_error_clear();
        if (first.empty()) first = got; else same &= got == first;
        fprintf(log, "%s bulk M=%d f=%d rel_l2=%.3e nans=%zu\n", sd.name, m, f, e.rel_l2, e.nans);
      }
      poison(y, ny); ours(kBulk, 1, m, 0, true); auto got = fetch(y, ny);
      double const r = host_check(m, true, {0, m - 1}, 48, got);
      good &= r < 2e-2 && sync_error_clear();
      fprintf(log, "%s bulk M=%d bitwise %s, host fp32 with bias max_rel=%.3e %s\n", sd.name, m, same ? "yes" : "NO", r,
              good && same ? "ok" : "FAIL");
      ok &= good && same;
    }
    std::string s = ok ? "bulk odd shape ok" : "bulk odd shape FAIL";
    int const skip = reg::tiles_of(n1w, bulk::kTileN) - 1;
    ours(kBulk, 1, 4, 0, false, skip, 50000000ull);
    SyncErrorInfo e; sync_error_clear(&e);
    bool const neg = e.flag == 1 && e.producer_tile_n == skip && e.stage == 1;
    fprintf(log, "%s bulk negative: flag=%u producer_tile=%d (skipped %d) %s\n", sd.name, e.flag, e.producer_tile_n, skip,
            neg ? "ok" : "FAIL");
    CK(cudaMemset(err, 0, sizeof(SyncErrorInfo)));
    return std::string(ok && neg ? "PASS " : "FAIL ") + s + (neg ? ", neg ok" : ", neg FAIL");
  }

  // odd M for every variant and config, bias path vs the host reference, negative test
  std::string extra_checks(FILE* log) {
    bool ok = true;
    for (int m : {1, 3, 17, 100, 127}) {
      size_t const ny = size_t(m) * sd.n2;
      poison(yc, ny); cublas_chain(m, 0); auto ref = fetch(yc, ny);
      for (Variant v : {kB2B, kSync, kPers, kWS, kReg, kRegSync, kRing, kBulk})
        for (int f : {1, 2, 3}) {
          if ((v == kReg || v == kRegSync) && m > 32) continue;
          if (v == kBulk ? m > 64 : f == 3) continue;
          poison(y, ny); ours(v, f, m, 0); auto got = fetch(y, ny);
          ErrStat e = compare(got, ref, ny);
          bool good = e.nans == 0 && e.rel_l2 < tol() && sync_error_clear();
          fprintf(log, "%s odd M=%d %s f=%d rel_l2=%.3e nans=%zu %s\n", sd.name, m, kVarName[v], f, e.rel_l2, e.nans, good ? "ok" : "FAIL");
          ok &= good;
        }
    }
    std::string s = ok ? "oddM ok" : "oddM FAIL";
    // bias + host fp32 reference (M = 5, rows 0 and 4, 48 sampled columns)
    {
      int m = 5; poison(y, size_t(m) * sd.n2); ours(kSync, 1, m, 0, true); auto got = fetch(y, size_t(m) * sd.n2);
      double r1 = host_check(m, true, {0, 4}, 48, got);
      poison(y, size_t(m) * sd.n2); ours(kPers, 2, m, 0, false); got = fetch(y, size_t(m) * sd.n2);
      double r2 = host_check(m, false, {1, 3}, 48, got);
      poison(y, size_t(m) * sd.n2); ours(kWS, 2, m, 0, true); got = fetch(y, size_t(m) * sd.n2);
      double r3 = host_check(m, true, {2, 4}, 48, got);
      poison(y, size_t(m) * sd.n2); ours(kRegSync, 1, m, 0, true); got = fetch(y, size_t(m) * sd.n2);
      double r4 = host_check(m, true, {0, 3}, 48, got);
      fprintf(log, "%s host fp32 ref: regs+bias max_rel=%.3e\n", sd.name, r4);
      poison(y, size_t(m) * sd.n2); ours(kRing, 2, m, 0, true); got = fetch(y, size_t(m) * sd.n2);
      double r5 = host_check(m, true, {1, 4}, 48, got);
      fprintf(log, "%s host fp32 ref: ring+bias max_rel=%.3e\n", sd.name, r5);
      poison(y, size_t(m) * sd.n2); ours(kBulk, 2, m, 0, true); got = fetch(y, size_t(m) * sd.n2);
      double r6 = host_check(m, true, {0, 2}, 48, got);
      fprintf(log, "%s host fp32 ref: bulk+bias max_rel=%.3e\n", sd.name, r6);
      bool good = r1 < 2e-2 && r2 < 2e-2 && r3 < 2e-2 && r4 < 2e-2 && r5 < 2e-2 && r6 < 2e-2 && sync_error_clear();
      fprintf(log, "%s host fp32 ref: sync+bias max_rel=%.3e pers max_rel=%.3e ws+bias max_rel=%.3e %s\n", sd.name, r1, r2,
              r3, good ? "ok" : "FAIL");
      s += good ? ", host ok" : ", host FAIL"; ok &= good;
    }
    // negative: gemm1's last tile never posts -> gemm2 must time out, record it and return
    for (Variant v : {kSync, kPers, kWS, kRegSync, kRing, kBulk}) {
      int const skip = v == kRegSync ? reg::tiles_of(n1w, reg::cta_n_of(g_reg_wn)) - 1
                       : v == kBulk  ? reg::tiles_of(n1w, bulk::kTileN) - 1
                                     : tiles_of(n1w) - 1;
      auto t0 = std::chrono::steady_clock::now();
      ours(v, 1, 4, 0, false, skip, 50000000ull);  // 50 ms
      SyncErrorInfo e; sync_error_clear(&e);
      double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      bool good = e.flag == 1 && e.producer_tile_n == skip && e.stage == 1;
      fprintf(log, "%s negative %s: flag=%u stage=%d tile_n=%d producer_tile=%d expected=%llx observed=%llx (%.3f s) %s\n",
              sd.name, kVarName[v], e.flag, e.stage, e.tile_n, e.producer_tile_n, (unsigned long long)e.expected,
              (unsigned long long)e.observed, secs, good ? "ok" : "FAIL");
      CK(cudaMemset(err, 0, sizeof(SyncErrorInfo)));
      // the chain recovers on the next run
      poison(yc, size_t(4) * sd.n2); cublas_chain(4, 0); auto ref = fetch(yc, size_t(4) * sd.n2);
      poison(y, size_t(4) * sd.n2); ours(v, 1, 4, 0); auto got = fetch(y, size_t(4) * sd.n2);
      ErrStat es = compare(got, ref, size_t(4) * sd.n2);
      bool rec = es.nans == 0 && es.rel_l2 < tol() && sync_error_clear();
      s += std::string(", neg-") + kVarName[v] + (good && rec ? " ok" : " FAIL"); ok &= good && rec;
    }
    return (ok ? "PASS " : "FAIL ") + s;
  }
};

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);  // line by line: a run cut off by a timeout keeps what it printed
  std::string out = argc > 1 ? argv[1] : ".";
  g_out = out;
  bool quick = getenv("DECODE_PROBE_QUICK") != nullptr;
  cudaDeviceProp prop; CK(cudaGetDeviceProperties(&prop, 0));
  int sms = prop.multiProcessorCount;
  printf("device %s, %d SMs, L2 %d MB\n", prop.name, sms, prop.l2CacheSize >> 20);
  FILE* log = fopen((out + "/decode_probe.log").c_str(), "w");
  if (!log) log = stderr;

  // streaming-read bandwidth on 1 GB, also the ~2 s preheat
  double bw = 0;
  {
    size_t n = (size_t(1) << 30) / 16; uint4* buf; uint32_t* sink;
    CK(cudaMalloc(&buf, n * 16)); CK(cudaMalloc(&sink, 4)); CK(cudaMemset(buf, 1, n * 16));
    cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
    std::vector<double> v; auto t0 = std::chrono::steady_clock::now();
    while (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() < (quick ? 0.5 : 2.0)) {
      CK(cudaEventRecord(e0)); stream_read<<<sms * 8, 512>>>(buf, n, sink); CK(cudaEventRecord(e1));
      CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); v.push_back(n * 16 / (ms * 1e-3));
    }
    bw = median(v);
    printf("stream-read bandwidth (1 GB, median of %zu): %.2f TB/s\n", v.size(), bw / 1e12);
    fprintf(log, "stream-read bandwidth: %.3f TB/s\n", bw / 1e12);
    cudaFree(buf); cudaFree(sink); cudaEventDestroy(e0); cudaEventDestroy(e1);
  }

  std::vector<ShapeDef> shapes = {{"gpt3", 12288, 6144, 12288, Act::kGelu, false},
                                  {"llama65", 8192, 2816, 8192, Act::kSwiglu, true},
                                  {"llama3-8b", 4096, 14336, 4096, Act::kSwiglu, true},
                                  {"odd", 1352, 200, 72, Act::kSwiglu, true}};  // v5 only (bulk_only_checks)
  std::vector<int> ms = quick ? std::vector<int>{1, 16, 128} : std::vector<int>{1, 2, 4, 8, 16, 32, 64, 128};
  // DECODE_PROBE_SHAPES=gpt3,llama65 and DECODE_PROBE_MS=1,64 pick points (e.g. for ncu);
  // DECODE_PROBE_NO_EXTRA=1 skips the odd-M, host-reference and negative checks.
  auto csv_list = [](char const* text) {
    std::vector<std::string> out; std::string cur;
    for (char const* c = text; ; ++c) {
      if (*c == ',' || *c == 0) { if (!cur.empty()) out.push_back(cur); cur.clear(); if (!*c) break; }
      else cur += *c;
    }
    return out;
  };
  if (char const* env = getenv("DECODE_PROBE_MS")) {
    ms.clear();
    for (auto const& v : csv_list(env)) ms.push_back(std::atoi(v.c_str()));
  }
  bool const no_extra = getenv("DECODE_PROBE_NO_EXTRA") != nullptr;
  if (char const* env = getenv("DECODE_PROBE_VARIANTS")) g_variant_filter = csv_list(env);
  if (char const* env = getenv("DECODE_PROBE_ONLY")) g_only = csv_list(env);
  g_unit_g2_tile_major = getenv("DECODE_PROBE_UNIT_G2_TILE_MAJOR") != nullptr;
  if (char const* env = getenv("DECODE_PROBE_UNIT_X_TMA")) g_unit_x_tma = std::atoi(env);
  if (char const* env = getenv("DECODE_PROBE_UNIT_NO_X")) g_unit_no_x = std::atoi(env);
  if (char const* env = getenv("DECODE_PROBE_UNIT_WIDE")) g_unit_poster = std::atoi(env);
  if (char const* env = getenv("DECODE_PROBE_REG_CFG")) g_reg_cfg = std::atoi(env);
  g_reg_wn = g_reg_cfg == 1 ? 2 : g_reg_cfg == 2 ? 4 : 1;
  g_reg_g1_split_major = getenv("DECODE_PROBE_REG_G1_SPLIT_MAJOR") != nullptr;
  g_reg_packed = getenv("DECODE_PROBE_REG_PACKED") != nullptr;
  g_reg_persist = getenv("DECODE_PROBE_REG_PERSIST") != nullptr;
  if (char const* env = getenv("DECODE_PROBE_RING_MODE")) g_ring_mode = std::atoi(env);
  if (char const* env = getenv("DECODE_PROBE_BULK_MODE")) g_bulk_mode = std::atoi(env);
  g_bulk_coop = getenv("DECODE_PROBE_BULK_COOP") != nullptr;
#ifdef CUSYNC_BULK_BALANCE
  g_balance = getenv("DECODE_PROBE_BALANCE") != nullptr;
#endif
  g_bulk_trace = getenv("DECODE_PROBE_BULK_TRACE") != nullptr;
  if (char const* env = getenv("DECODE_PROBE_REG_F")) {
    auto v = csv_list(env);
    if (v.size() == 2) { g_reg_f[0] = std::max(1, std::atoi(v[0].c_str())); g_reg_f[1] = std::max(1, std::atoi(v[1].c_str())); }
  }
  printf("v3: shape %d (warps along N %d), gemm1 CTA order %s, f %d,%d, weights %s\n", g_reg_cfg, g_reg_wn,
         g_reg_g1_split_major ? "split-major" : "tile-major", g_reg_f[0], g_reg_f[1], g_reg_packed ? "packed" : "row-major");
  if (g_reg_persist) printf("v3: regs = one persistent kernel (reg_chain_kernel), %s\n", "static units");
  std::vector<Row> rows; std::vector<std::string> extras;
  {
    auto want = csv_list(getenv("DECODE_PROBE_SHAPES") ? getenv("DECODE_PROBE_SHAPES") : "gpt3,llama65,llama3-8b");
    std::vector<ShapeDef> kept;
    for (auto const& sd : shapes)
      for (auto const& w : want) if (w == sd.name) kept.push_back(sd);
    shapes = kept;
  }
  // DECODE_PROBE_CUSTOM=name:k1:n1:n2:act:dtype[,...] adds shapes (act: identity, gelu or swiglu; dtype: fp16 or
  // bf16; n1 is H's width, so a SwiGLU W1 has 2 n1 columns), timed and checked like the named ones.
  if (char const* env = getenv("DECODE_PROBE_CUSTOM")) {
    for (auto const& item : csv_list(env)) {
      std::vector<std::string> f; std::string cur;
      for (char c : item + ":") { if (c == ':') { f.push_back(cur); cur.clear(); } else cur += c; }
      int const k1 = f.size() == 6 ? std::atoi(f[1].c_str()) : 0, n1 = f.size() == 6 ? std::atoi(f[2].c_str()) : 0;
      int const n2 = f.size() == 6 ? std::atoi(f[3].c_str()) : 0;
      bool const act_ok = f.size() == 6 && (f[4] == "identity" || f[4] == "gelu" || f[4] == "swiglu");
      if (!act_ok || k1 < 16 || n1 < 16 || n2 < 16 || k1 % 16 || n1 % 16 || n2 % 16 || (f[5] != "fp16" && f[5] != "bf16")) {
        fprintf(stderr, "DECODE_PROBE_CUSTOM: '%s' is not name:k1:n1:n2:identity|gelu|swiglu:fp16|bf16 with sizes "
                        "multiples of 16\n", item.c_str());
        return 2;
      }
      Act const act = f[4] == "gelu" ? Act::kGelu : f[4] == "swiglu" ? Act::kSwiglu : Act::kIdentity;
      shapes.push_back({strdup(f[0].c_str()), k1, n1, n2, act, f[5] == "bf16"});  // ShapeDef keeps the pointer
    }
  }
  for (auto const& sd : shapes) {
    build_tables(sd.bf16);
    auto run = [&](auto probe) {
      probe.sd = sd; probe.sms = sms; probe.quick = quick; probe.setup();
      if (std::string(sd.name) == "odd") {
        extras.push_back(std::string(sd.name) + ": " + probe.bulk_only_checks(log));
        probe.teardown();
        return;
      }
      if (!no_extra) extras.push_back(std::string(sd.name) + ": " + probe.extra_checks(log));
      for (int m : ms) probe.point(m, rows, log);
      probe.teardown();
    };
    if (sd.bf16) run(Probe<__nv_bfloat16>{}); else run(Probe<__half>{});
    CK(cudaDeviceSynchronize());
  }

  FILE* csv = fopen((out + "/decode_probe.csv").c_str(), "w");
  FILE* js = fopen((out + "/decode_probe.json").c_str(), "w");
  if (csv) fprintf(csv, "shape,M,floor_us,cublas_us,lt_us,ours_b2b_us,ours_sync_us,ours_pers_us,ours_ws_us,ours_reg_us,ours_regs_us,ours_ring_us,ours_bulk_us,ours_bulkp_us,ours_bulkb_us,best_cfg,best_us,x_floor,speedup_vs_cublas,rel_l2,checks\n");
  if (js) fprintf(js, "{\"stream_read_tbps\": %.4f, \"extra_checks\": [", bw / 1e12);
  for (size_t i = 0; js && i < extras.size(); ++i) fprintf(js, "%s\"%s\"", i ? ", " : "", extras[i].c_str());
  if (js) fprintf(js, "], \"rows\": [\n");
  printf("\nstream-read %.2f TB/s; floor = bytes / 4.8 TB/s; speedup = min(cublas, lt) / best ours\n", bw / 1e12);
  for (auto& e : extras) printf("%s\n", e.c_str());
  printf("%-10s %4s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %8s %-14s %6s %6s  %s\n", "shape", "M", "floor", "cublas", "lt", "b2b", "sync",
         "pers", "ws", "reg", "regs", "ring", "bulk", "bulkp", "bulkb", "best", "xfloor", "speedup", "checks");
  for (size_t i = 0; i < rows.size(); ++i) {
    Row& r = rows[i];
    double peer = r.lt_us > 0 ? std::min(r.cublas_us, r.lt_us) : r.cublas_us;
    double xf = r.best_us / r.floor_us, sp = peer / r.best_us;
    printf("%-10s %4d %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %8.1f %-14s %6.2f %6.2f  %s\n", r.shape.c_str(), r.m, r.floor_us,
           r.cublas_us, r.lt_us, r.b2b_us, r.sync_us, r.pers_us, r.ws_us, r.reg_us, r.regs_us, r.ring_us, r.bulk_us, r.bulkp_us, r.bulkb_us,
           r.best_cfg.c_str(), xf, sp, r.checks.c_str());
    if (r.unit_us > 0) printf("unit %-10s %4d lt %8.1f bulk %8.1f unit %8.1f unit-b2b %8.1f  unit/lt %.3fx unit/bulk %.3fx\n", r.shape.c_str(), r.m,
                              r.lt_us, r.bulk_us, r.unit_us, r.unitb_us, r.lt_us / r.unit_us, r.bulk_us / r.unit_us);
    if (csv) fprintf(csv, "%s,%d,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%.3f,%s,%.3f,%.4f,%.4f,%.3e,%s\n", r.shape.c_str(), r.m, r.floor_us, r.cublas_us,
                     r.lt_us, r.b2b_us, r.sync_us, r.pers_us, r.ws_us, r.reg_us, r.regs_us, r.ring_us, r.bulk_us, r.bulkp_us, r.bulkb_us,
                     r.best_cfg.c_str(), r.best_us, xf, sp, r.rel_l2, r.checks.c_str());
    if (js) fprintf(js, "%s{\"shape\":\"%s\",\"M\":%d,\"floor_us\":%.3f,\"cublas_us\":%.3f,\"lt_us\":%.3f,\"b2b_us\":%.3f,"
                    "\"sync_us\":%.3f,\"pers_us\":%.3f,\"ws_us\":%.3f,\"reg_us\":%.3f,\"regs_us\":%.3f,\"ring_us\":%.3f,\"bulk_us\":%.3f,\"bulkp_us\":%.3f,\"bulkb_us\":%.3f,\"best\":\"%s\",\"best_us\":%.3f,\"x_floor\":%.4f,\"speedup\":%.4f,"
                    "\"rel_l2\":%.3e,\"checks\":\"%s\"}",
                    i ? ",\n" : "", r.shape.c_str(), r.m, r.floor_us, r.cublas_us, r.lt_us, r.b2b_us, r.sync_us, r.pers_us,
                    r.ws_us, r.reg_us, r.regs_us, r.ring_us, r.bulk_us, r.bulkp_us, r.bulkb_us, r.best_cfg.c_str(), r.best_us, xf, sp, r.rel_l2, r.checks.c_str());
  }
  if (js) { fprintf(js, "\n]}\n"); fclose(js); }
  if (csv) fclose(csv);
  if (log != stderr) fclose(log);
  return 0;
}
