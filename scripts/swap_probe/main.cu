// Swap-AB split-K probe driver (see kernels.cuh). For each MLP chain and M: every GEMM of the chain through
// cublasGemmEx, cuBLASLt's heuristic algorithms (up to 8) and every swap-AB CUTLASS configuration
// (token tile 16/32/64/128 x data-parallel / split-K S / stream-K heuristic), each output checked against
// cuBLASLt's and for run-to-run bitwise equality, timed round robin as CUDA graphs of 10 runs (CUDA events, median of --repeats) after
// a 2 s preheat; then the two-GEMM chain (gemm2 reads gemm1's output; no activation between them) with
// each side's best: cuBLASLt, and CUTLASS back to back and chained by programmatic dependent launch; and the
// same two configurations on the weights-ahead kernel (weights_ahead.cuh: gemm2's weights stream before gemm1
// ends), back to back and chained, with and without --ahead-l2 boxes prefetched into L2, each checked bitwise
// against the CUTLASS chain back to back (the same reduction order).
// One JSON line per variant on stdout.
// Usage: swap_probe --chains N1:K1:N2:K2[:c][,...] --m 1,16,128 [--repeats 31] [--ahead-l2 16] [--only TEXT]
// (--only: only the CUTLASS configurations whose name contains TEXT, e.g. swap128x16_dp under a sanitizer.)
// A configuration with a split-reduction workspace is also timed clearing it alone (`<name>_clearonly`).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_fp16.h>

#include "kernels.cuh"

namespace {

#define CHECK_CUDA(x)                                                                               \
  do {                                                                                              \
    cudaError_t e_ = (x);                                                                           \
    if (e_ != cudaSuccess) {                                                                        \
      std::fprintf(stderr, "error: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__);      \
      std::exit(1);                                                                                 \
    }                                                                                               \
  } while (0)

std::vector<int> parse_ints(char const* s) {
  std::vector<int> v;
  for (char const* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',' && *p != ':') ++p;
    if (*p == ',' || *p == ':') ++p;
    if (*p == 'c' || *p == 'r') break;
  }
  return v;
}

__global__ void fill(__half* x, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 13;
    h *= 0x5bd1e995u;
    h ^= h >> 15;
    x[i] = __float2half((float(h & 0xFFFF) / 65535.0f - 0.5f) * 0.25f);
  }
}

// max |x - ref| and max |ref| over n elements into out[0..1] (float bits as unsigned max); out[2] counts
// elements whose bits differ.
__global__ void compare(__half const* x, __half const* ref, int64_t n, unsigned* out) {
  float diff = 0, mag = 0;
  unsigned differ = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float const r = __half2float(ref[i]);
    float const v = __half2float(x[i]);
    float const d = isfinite(v) ? fabsf(v - r) : 1e30f;
    diff = fmaxf(diff, d);
    mag = fmaxf(mag, fabsf(r));
    differ += __half_as_ushort(x[i]) != __half_as_ushort(ref[i]);
  }
  atomicMax(&out[0], __float_as_uint(diff));
  atomicMax(&out[1], __float_as_uint(mag));
  atomicAdd(&out[2], differ);
}

// W^T packed per 128-row tile: element (n, k) at ((n / 128) * K + k) * 128 + n % 128 (N a multiple of 128).
__global__ void pack_weights(__half const* w, __half* out, int n, int k, bool b_col) {
  int64_t const total = int64_t(n) * k;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t const tile = i / (int64_t(k) * 128);
    int64_t const kk = (i / 128) % k;
    int64_t const nn = tile * 128 + i % 128;
    out[i] = b_col ? w[nn * k + kk] : w[kk * n + nn];
  }
}

struct Variant {
  std::string name;
  std::function<bool(cudaStream_t)> launch;
};

struct Gemm {  // one GEMM of a chain
  int n, k;
  __half const* a;
  __half const* b;
  __half* d;
};

// cuBLASLt for D[m, n] = A[m, k] x B ([k, n] or [n, k] row-major), in its column-major view.
struct Lt {
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t la{}, lb{}, ld{};
  std::vector<cublasLtMatmulAlgo_t> algos;
  void create(cublasLtHandle_t lt, int m, int n, int k, bool b_col, size_t workspace_bytes) {
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasOperation_t const ta = b_col ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
    cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
    cublasLtMatrixLayoutCreate(&la, CUDA_R_16F, b_col ? k : n, b_col ? n : k, b_col ? k : n);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_16F, k, m, k);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_16F, n, m, n);
    cublasLtMatmulPreference_t pref;
    cublasLtMatmulPreferenceCreate(&pref);
    cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes,
                                         sizeof(workspace_bytes));
    cublasLtMatmulHeuristicResult_t heur[8];
    int found = 0;
    cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 8, heur, &found);
    for (int h = 0; h < found; ++h) algos.push_back(heur[h].algo);
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void destroy() {
    cublasLtMatrixLayoutDestroy(la);
    cublasLtMatrixLayoutDestroy(lb);
    cublasLtMatrixLayoutDestroy(ld);
    cublasLtMatmulDescDestroy(op);
  }
};

// Times variants round robin, each as a CUDA graph of kPerGraph back-to-back runs: median microseconds per
// run over `repeats` graph launches (after 2 warm-up rounds); -1 where a launch or the capture failed.
constexpr int kPerGraph = 10;
std::vector<double> time_round_robin(std::vector<Variant> const& variants, std::vector<bool>& ok, int repeats,
                                     cudaStream_t stream) {
  std::vector<cudaGraphExec_t> graphs(variants.size(), nullptr);
  for (size_t v = 0; v < variants.size(); ++v) {
    if (!ok[v]) continue;
    cudaGraph_t graph;
    CHECK_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    bool launched = true;
    for (int i = 0; i < kPerGraph; ++i) launched = launched && variants[v].launch(stream);
    CHECK_CUDA(cudaStreamEndCapture(stream, &graph));
    ok[v] = launched && cudaGraphInstantiate(&graphs[v], graph, 0) == cudaSuccess;
    cudaGraphDestroy(graph);
    cudaGetLastError();
  }
  std::vector<std::vector<cudaEvent_t>> events(variants.size(), std::vector<cudaEvent_t>(2 * (repeats + 2)));
  for (auto& ev : events)
    for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
  for (int r = 0; r < repeats + 2; ++r) {
    for (size_t v = 0; v < variants.size(); ++v) {
      if (!ok[v]) continue;
      CHECK_CUDA(cudaEventRecord(events[v][2 * r], stream));
      CHECK_CUDA(cudaGraphLaunch(graphs[v], stream));
      CHECK_CUDA(cudaEventRecord(events[v][2 * r + 1], stream));
    }
  }
  CHECK_CUDA(cudaStreamSynchronize(stream));
  std::vector<double> out(variants.size(), -1);
  for (size_t v = 0; v < variants.size(); ++v) {
    std::vector<float> t;
    for (int r = 2; r < repeats + 2 && ok[v]; ++r) {
      float ms = 0;
      CHECK_CUDA(cudaEventElapsedTime(&ms, events[v][2 * r], events[v][2 * r + 1]));
      t.push_back(ms * 1000.0f / kPerGraph);
    }
    std::sort(t.begin(), t.end());
    if (!t.empty()) out[v] = t[t.size() / 2];
    for (auto& e : events[v]) cudaEventDestroy(e);
    if (graphs[v]) cudaGraphExecDestroy(graphs[v]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> chains = {"6144:12288:12288:6144", "5632:8192:8192:2816", "28672:4096:4096:14336"};
  std::vector<int> ms = {1, 2, 4, 8, 16, 32, 64, 128};
  int repeats = 31;
  int ahead_l2 = 16;
  std::string only;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--chains")) {
      chains.clear();
      for (char const* p = argv[i + 1]; *p;) {
        char const* e = std::strchr(p, ',');
        chains.emplace_back(p, e ? e - p : std::strlen(p));
        p = e ? e + 1 : p + std::strlen(p);
      }
    } else if (!std::strcmp(argv[i], "--m")) {
      ms = parse_ints(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--repeats")) {
      repeats = std::atoi(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--ahead-l2")) {
      ahead_l2 = std::max(0, std::atoi(argv[i + 1]));
    } else if (!std::strcmp(argv[i], "--only")) {
      only = argv[i + 1];
    }
  }
  int device = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<swap_probe::Kernel> kernels;
  swap_probe::add_swap_16(kernels);
  swap_probe::add_swap_32(kernels);
  swap_probe::add_swap_64(kernels);
  swap_probe::add_swap_128(kernels);

  int const max_m = *std::max_element(ms.begin(), ms.end());
  int64_t max_w = 0, max_act = 0;
  for (auto const& c : chains) {
    std::vector<int> v = parse_ints(c.c_str());
    max_w = std::max<int64_t>(max_w, std::max<int64_t>(int64_t(v[0]) * v[1], int64_t(v[2]) * v[3]));
    max_act = std::max<int64_t>(max_act, std::max({v[0], v[1], v[2], v[3]}));
  }
  __half *x, *w1, *w2, *wp1, *wp2, *h, *y, *ref, *tmp;
  CHECK_CUDA(cudaMalloc(&wp1, sizeof(__half) * max_w));
  CHECK_CUDA(cudaMalloc(&wp2, sizeof(__half) * max_w));
  CHECK_CUDA(cudaMalloc(&x, sizeof(__half) * max_m * max_act));
  CHECK_CUDA(cudaMalloc(&w1, sizeof(__half) * max_w));
  CHECK_CUDA(cudaMalloc(&w2, sizeof(__half) * max_w));
  CHECK_CUDA(cudaMalloc(&h, sizeof(__half) * max_m * max_act));
  CHECK_CUDA(cudaMalloc(&y, sizeof(__half) * max_m * max_act));
  CHECK_CUDA(cudaMalloc(&ref, sizeof(__half) * max_m * max_act));
  CHECK_CUDA(cudaMalloc(&tmp, sizeof(__half) * max_m * max_act));
  fill<<<1024, 256>>>(x, int64_t(max_m) * max_act, 1);
  fill<<<1024, 256>>>(w1, max_w, 2);
  fill<<<1024, 256>>>(w2, max_w, 3);
  fill<<<1024, 256>>>(h, int64_t(max_m) * max_act, 4);
  unsigned* diff;
  CHECK_CUDA(cudaMalloc(&diff, 16));
  size_t const lt_bytes = size_t(32) << 20;
  size_t const ws_bytes = size_t(256) << 20;
  void *lt_ws, *ws1, *ws2;
  CHECK_CUDA(cudaMalloc(&lt_ws, lt_bytes));
  CHECK_CUDA(cudaMalloc(&ws1, ws_bytes));
  CHECK_CUDA(cudaMalloc(&ws2, ws_bytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  cublasCreate(&blas);
  cublasSetWorkspace(blas, lt_ws, lt_bytes);
  cublasSetStream(blas, stream);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);
  float const alpha = 1.0f, beta = 0.0f;

  auto check = [&](__half const* out, __half const* want, int64_t n) {
    CHECK_CUDA(cudaMemsetAsync(diff, 0, 16, stream));
    compare<<<264, 256, 0, stream>>>(out, want, n, diff);
    unsigned r[3];
    CHECK_CUDA(cudaMemcpyAsync(r, diff, 12, cudaMemcpyDeviceToHost, stream));
    CHECK_CUDA(cudaStreamSynchronize(stream));
    float fd, fm;
    std::memcpy(&fd, &r[0], 4);
    std::memcpy(&fm, &r[1], 4);
    return std::make_pair(fm > 0 ? double(fd) / fm : double(fd), r[2]);
  };

  bool preheated = false;
  for (auto const& c : chains) {
    std::vector<int> dims = parse_ints(c.c_str());
    bool const b_col = c.find(":c") != std::string::npos;
    bool const packable = dims[0] % 128 == 0 && dims[2] % 128 == 0;
    if (packable) {
      pack_weights<<<1024, 256, 0, stream>>>(w1, wp1, dims[0], dims[1], b_col);
      pack_weights<<<1024, 256, 0, stream>>>(w2, wp2, dims[2], dims[3], b_col);
      CHECK_CUDA(cudaStreamSynchronize(stream));
    }
    for (int m : ms) {
      Gemm const g[2] = {{dims[0], dims[1], x, w1, h}, {dims[2], dims[3], h, w2, y}};
      if (dims[3] > dims[0]) {
        std::fprintf(stderr, "chain %s: gemm2's K exceeds gemm1's N\n", c.c_str());
        return 2;
      }
      Lt lts[2];
      for (int s = 0; s < 2; ++s) lts[s].create(lt, m, g[s].n, g[s].k, b_col, lt_bytes);
      if (!preheated) {  // ~2 s of the first GEMM: sustained clocks from here on
        auto const t0 = std::chrono::steady_clock::now();
        while (std::chrono::steady_clock::now() - t0 < std::chrono::seconds(2)) {
          for (int r = 0; r < 50; ++r)
            cublasLtMatmul(lt, lts[0].op, &alpha, g[0].b, lts[0].la, g[0].a, lts[0].lb, &beta, g[0].d, lts[0].ld, g[0].d,
                           lts[0].ld, &lts[0].algos[0], lt_ws, lt_bytes, stream);
          CHECK_CUDA(cudaStreamSynchronize(stream));
        }
        preheated = true;
      }
      std::string best_lt[2], best_swap[2];
      Variant best_lt_v[2], best_swap_v[2];
      std::function<bool(bool, bool, cudaStream_t)> best_swap_raw[2];
      std::function<bool(int, bool, bool, cudaStream_t)> best_ahead_raw[2];  // (l2 boxes, clear, programmatic)
      for (int s = 0; s < 2; ++s) {
        Gemm const& G = g[s];
        Lt const& L = lts[s];
        std::vector<Variant> variants;
        variants.push_back({"cublas_gemmex", [=, &blas](cudaStream_t) {
                              return cublasGemmEx(blas, b_col ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, G.n, m, G.k,
                                                  &alpha, G.b, CUDA_R_16F, b_col ? G.k : G.n, G.a, CUDA_R_16F, G.k,
                                                  &beta, G.d, CUDA_R_16F, G.n, CUBLAS_COMPUTE_32F,
                                                  CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
                            }});
        for (size_t hh = 0; hh < L.algos.size(); ++hh) {
          cublasLtMatmulAlgo_t const algo = L.algos[hh];
          variants.push_back({"cublaslt_h" + std::to_string(hh), [=, &lt](cudaStream_t st) {
                                return cublasLtMatmul(lt, L.op, &alpha, G.b, L.la, G.a, L.lb, &beta, G.d, L.ld, G.d,
                                                      L.ld, &algo, lt_ws, lt_bytes, st) == CUBLAS_STATUS_SUCCESS;
                              }});
        }
        swap_probe::Problem const p_stored{m, G.n, G.k, b_col, G.a, G.b, G.d};
        swap_probe::Problem const p_packed{m, G.n, G.k, b_col, G.a, s == 0 ? wp1 : wp2, G.d};
        void* const ws = s == 0 ? ws1 : ws2;
        std::vector<std::function<bool(bool, bool, cudaStream_t)>> raw(variants.size());
        std::vector<std::function<bool(int, bool, bool, cudaStream_t)>> raw_ahead(variants.size());
        for (auto const& kern : kernels) {
          if (kern.packed && !packable) continue;
          swap_probe::Problem const p = kern.packed ? p_packed : p_stored;
          int const tiles = (G.n + 127) / 128 * ((m + kern.tile_n - 1) / kern.tile_n);
          int const k_blocks = (G.k + 63) / 64;
          std::vector<std::pair<int, int>> modes = {{0, 1}, {2, 1}};
          for (int splits : {2, 3, 4, 5, 6, 8, 12, 16}) {
            if (tiles * splits <= 4 * sms && k_blocks / splits >= 4) modes.push_back({1, splits});
          }
          for (auto const& mode_splits : modes) {
            int const mode = mode_splits.first, splits = mode_splits.second;
            if (kern.workspace(p, mode, splits, sms) > ws_bytes) continue;
            auto fn = kern.launch;
            std::string const name = kern.name + (mode == 0 ? "_dp" : mode == 2 ? "_sk" : "_split" + std::to_string(splits));
            if (!only.empty() && name.find(only) == std::string::npos) continue;
            raw.push_back([=](bool clear, bool programmatic, cudaStream_t st) {
              return fn(p, mode, splits, sms, ws, clear, programmatic, st);
            });
            auto fn_ahead = kern.launch_ahead;
            raw_ahead.push_back([=](int l2, bool clear, bool programmatic, cudaStream_t st) {
              swap_probe::Problem q = p;
              q.ahead_l2 = l2;
              return fn_ahead(q, mode, splits, sms, ws, clear, programmatic, st);
            });
            variants.push_back({name, [=](cudaStream_t st) { return fn(p, mode, splits, sms, ws, true, false, st); }});
            if (kern.workspace(p, mode, splits, sms) > 0) {
              // What the split reduction's workspace clear alone costs (it precedes every launch above): timed,
              // never picked (it computes nothing, so its check fails).
              raw.push_back(nullptr);
              raw_ahead.push_back(nullptr);
              variants.push_back({name + "_clearonly", [=](cudaStream_t st) { return fn(p, mode, splits, sms, ws, true, true, st); }});
            }
          }
        }
        // Reference: cuBLASLt's first algorithm.
        variants[L.algos.empty() ? 0 : 1].launch(stream);
        int64_t const out_n = int64_t(m) * G.n;
        CHECK_CUDA(cudaMemcpyAsync(ref, G.d, sizeof(__half) * out_n, cudaMemcpyDeviceToDevice, stream));
        std::vector<double> err(variants.size(), -1);
        std::vector<unsigned> rerun(variants.size(), 0);
        std::vector<bool> ok(variants.size(), true);
        for (size_t v = 0; v < variants.size(); ++v) {
          CHECK_CUDA(cudaMemsetAsync(G.d, 0xFF, sizeof(__half) * out_n, stream));
          ok[v] = variants[v].launch(stream);
          CHECK_CUDA(cudaGetLastError());
          err[v] = check(G.d, ref, out_n).first;
          CHECK_CUDA(cudaMemcpyAsync(tmp, G.d, sizeof(__half) * out_n, cudaMemcpyDeviceToDevice, stream));
          CHECK_CUDA(cudaMemsetAsync(G.d, 0xFF, sizeof(__half) * out_n, stream));
          ok[v] = ok[v] && variants[v].launch(stream);
          rerun[v] = check(G.d, tmp, out_n).second;
        }
        std::vector<double> const us = time_round_robin(variants, ok, repeats, stream);
        double lt_us = 1e30, swap_us = 1e30;
        for (size_t v = 0; v < variants.size(); ++v) {
          std::printf("{\"chain\": \"%s\", \"gemm\": %d, \"n\": %d, \"k\": %d, \"m\": %d, \"variant\": \"%s\", \"ok\": %s, "
                      "\"us\": %.2f, \"rel_err\": %.2e, \"rerun_differs\": %u}\n",
                      c.c_str(), s + 1, G.n, G.k, m, variants[v].name.c_str(), ok[v] ? "true" : "false", us[v], err[v],
                      rerun[v]);
          if (!ok[v] || us[v] <= 0 || err[v] > 1e-2) continue;
          bool const is_swap = variants[v].name.find("swap") != std::string::npos;  // swap* and pswap*
          if (is_swap && rerun[v] == 0 && us[v] < swap_us) {
            swap_us = us[v];
            best_swap[s] = variants[v].name;
            best_swap_raw[s] = raw[v];
            best_ahead_raw[s] = raw_ahead[v];
          } else if (!is_swap && us[v] < lt_us) {
            lt_us = us[v];
            best_lt[s] = variants[v].name;
            best_lt_v[s] = variants[v];
          }
        }
        std::fflush(stdout);
      }
      // The chain: gemm2 reads gemm1's output.
      if (best_lt[0].empty() || best_lt[1].empty() || best_swap[0].empty() || best_swap[1].empty()) continue;
      auto s1 = best_swap_raw[0], s2 = best_swap_raw[1];
      auto a1 = best_ahead_raw[0], a2 = best_ahead_raw[1];
      Variant l1 = best_lt_v[0], l2 = best_lt_v[1];
      std::vector<Variant> chain = {
          {"chain_lt", [=](cudaStream_t st) { return l1.launch(st) && l2.launch(st); }},
          {"chain_swap_b2b", [=](cudaStream_t st) {
             return s1(true, true, st) && s2(true, true, st) && s1(false, false, st) && s2(false, false, st);
           }},
          {"chain_swap_pdl", [=](cudaStream_t st) {
             return s1(true, true, st) && s2(true, true, st) && s1(false, false, st) && s2(false, true, st);
           }},
          // The weights-ahead kernels in the same configurations: back to back (what the two-warp loads cost
          // alone), chained (gemm2's weights before gemm1 ends), chained with L2 prefetch in gemm2.
          {"chain_ahead_b2b", [=](cudaStream_t st) {
             return a1(0, true, true, st) && a2(0, true, true, st) && a1(0, false, false, st) && a2(0, false, false, st);
           }},
          {"chain_ahead_pdl", [=](cudaStream_t st) {
             return a1(0, true, true, st) && a2(0, true, true, st) && a1(0, false, false, st) && a2(0, false, true, st);
           }},
          {"chain_ahead_pdl_l2", [=](cudaStream_t st) {
             return a1(0, true, true, st) && a2(ahead_l2, true, true, st) && a1(0, false, false, st) &&
                    a2(ahead_l2, false, true, st);
           }},
      };
      int64_t const out_n = int64_t(m) * g[1].n;
      std::vector<bool> ok(chain.size(), true);
      std::vector<double> err(chain.size(), 0);
      std::vector<unsigned> differs(chain.size(), 0);  // elements whose bits differ from chain_swap_b2b's (all runs)
      chain[0].launch(stream);
      CHECK_CUDA(cudaMemcpyAsync(ref, y, sizeof(__half) * out_n, cudaMemcpyDeviceToDevice, stream));
      for (size_t v = 0; v < chain.size(); ++v) {
        // Ours five times, each from poisoned intermediates and output (0xFF: NaN), so that a gemm2 that read
        // gemm1's output too early, or a tile never written, shows in every run: the worst error, and every
        // run's elements that differ from chain_swap_b2b's first run.
        int const runs = v == 0 ? 1 : 5;
        for (int r = 0; r < runs; ++r) {
          CHECK_CUDA(cudaMemsetAsync(y, 0xFF, sizeof(__half) * out_n, stream));
          CHECK_CUDA(cudaMemsetAsync(h, 0xFF, sizeof(__half) * int64_t(m) * g[0].n, stream));
          ok[v] = chain[v].launch(stream) && ok[v];
          CHECK_CUDA(cudaGetLastError());
          err[v] = std::max(err[v], check(y, ref, out_n).first);
          if (v == 1 && r == 0) CHECK_CUDA(cudaMemcpyAsync(tmp, y, sizeof(__half) * out_n, cudaMemcpyDeviceToDevice, stream));
          if (v >= 1) differs[v] += check(y, tmp, out_n).second;
        }
      }
      std::vector<double> const us = time_round_robin(chain, ok, repeats, stream);
      for (size_t v = 0; v < chain.size(); ++v) {
        std::printf("{\"chain\": \"%s\", \"gemm\": 0, \"m\": %d, \"variant\": \"%s\", \"parts\": \"%s | %s\", \"ok\": %s, "
                    "\"us\": %.2f, \"rel_err\": %.2e, \"differs_from_b2b\": %u}\n",
                    c.c_str(), m, chain[v].name.c_str(), (v == 0 ? best_lt[0] : best_swap[0]).c_str(),
                    (v == 0 ? best_lt[1] : best_swap[1]).c_str(), ok[v] ? "true" : "false", us[v], err[v], differs[v]);
      }
      std::fflush(stdout);
      for (auto& L : lts) L.destroy();
    }
  }
  return 0;
}
