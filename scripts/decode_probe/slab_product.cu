// NOTES d34's check of the product's slab kernel (cusync/sm90/slab_chain.cuh, run() mode kStream at M <= 4) beside
// the cuBLASLt chain and a streaming read of the same bytes, in one CUDA-graph round robin, with the weights in
// the chain's row-major layout (W1 [K1, N1], W2 [N1, N2]). Checks against an fp32 reference, bitwise over two
// runs, and a missing post that must time out and name its slab. Compiled here, linked there (slab_call.sh):
//   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -Itemplates/runtime/include \
//        -Itemplates/sm90/include -I<cublas include> -c scripts/decode_probe/slab_product.cu -o build/slab/slab_product.o
#include <cublasLt.h>
#include "cusync/sm90/slab_chain.cuh"
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "probe_common.cuh"

#define LT(x)                                                                           \
  do {                                                                                  \
    cublasStatus_t s_ = (x);                                                            \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                  \
      std::fprintf(stderr, "%s:%d: %s: cublas status %d\n", __FILE__, __LINE__, #x, int(s_)); \
      std::exit(3);                                                                     \
    }                                                                                   \
  } while (0)

__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }

__global__ void gelu_in_place(__half* p, size_t n) {
  size_t const i = size_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) p[i] = __float2half(gelu(__half2float(p[i])));
}

// fp32 reference: H = GeLU(X W1 + b1) without rounding, then Y = H W2 + b2.
__global__ void ref_h(__half const* x, __half const* w1, __half const* b1, float* h, int m, int k1, int n1, bool col) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * n1) return;
  int const r = i / n1, c = i % n1;
  float s = 0;
  for (int k = 0; k < k1; ++k) s += __half2float(x[size_t(r) * k1 + k]) * __half2float(w1[col ? size_t(c) * k1 + k : size_t(k) * n1 + c]);
  h[i] = gelu(s + __half2float(b1[c]));
}
__global__ void ref_y(float const* h, __half const* w2, __half const* b2, float* y, int m, int n1, int n2, bool col) {
  int const i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= m * n2) return;
  int const r = i / n2, c = i % n2;
  float s = 0;
  for (int k = 0; k < n1; ++k) s += h[size_t(r) * n1 + k] * __half2float(w2[col ? size_t(c) * n1 + k : size_t(k) * n2 + c]);
  y[i] = s + __half2float(b2[c]);
}

struct LtGemm {  // D^T [n, m] = op(A) [n, k] x B [k, m] (column-major), BIAS epilogue, the heuristic's first algorithm
  cublasLtMatmulDesc_t op{};
  cublasLtMatrixLayout_t a{}, b{}, d{};
  cublasLtMatmulAlgo_t algo{};
  void init(cublasLtHandle_t lt, int n, int m, int k, bool a_transposed, size_t ws) {
    LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasOperation_t const ta = a_transposed ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
    cublasLtEpilogue_t const epi = CUBLASLT_EPILOGUE_BIAS;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epi, sizeof(epi)));
    LT(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, a_transposed ? k : n, a_transposed ? n : k, a_transposed ? k : n));
    LT(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, k, m, k));
    LT(cublasLtMatrixLayoutCreate(&d, CUDA_R_16F, n, m, n));
    cublasLtMatmulPreference_t pref{};
    LT(cublasLtMatmulPreferenceCreate(&pref));
    LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtMatmulHeuristicResult_t r{};
    int found = 0;
    LT(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, d, d, pref, 1, &r, &found));
    if (found < 1) std::exit(4);
    algo = r.algo;
    cublasLtMatmulPreferenceDestroy(pref);
  }
  void run(cublasLtHandle_t lt, void const* A, void const* B, void* D, void const* bias, void* ws, size_t wsb,
           cudaStream_t s) {
    float const one = 1.f, zero = 0.f;
    LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
    LT(cublasLtMatmul(lt, op, &one, A, a, B, b, &zero, D, d, D, d, &algo, ws, wsb, s));
  }
};

template <int M>
static void run_shape(char const* name, bool col, int k1, int n1, int n2, int reps, cudaStream_t s, cublasLtHandle_t lt, int sms) {
  char label[64];
  bool const w2col = std::getenv("SLAB_W2COL") && std::atoi(std::getenv("SLAB_W2COL")) == 1;
  std::snprintf(label, sizeof(label), "%s W1 %s%s", name, col ? "col" : "row", w2col ? " W2 col" : "");
  name = label;
  size_t const nx = size_t(M) * k1, nw1 = size_t(n1) * k1, nw2 = size_t(n1) * n2;
  __half *x, *w1, *b1, *w2, *b2, *y, *y_lt, *h_lt;
  float *work, *h_ref, *y_ref;
  unsigned* sink;
  void* ws;
  size_t const wsb = 32u << 20;
  CK(cudaMalloc(&x, nx * 2));
  CK(cudaMalloc(&w1, nw1 * 2));
  CK(cudaMalloc(&b1, size_t(n1) * 2));
  CK(cudaMalloc(&w2, nw2 * 2));
  CK(cudaMalloc(&b2, size_t(n2) * 2));
  CK(cudaMalloc(&y, size_t(M) * n2 * 2));
  CK(cudaMalloc(&y_lt, size_t(M) * n2 * 2));
  CK(cudaMalloc(&h_lt, size_t(M) * n1 * 2));
  CK(cudaMalloc(&work, size_t(sms) * cusync::sm90::kSlabMaxM * n2 * 4));
  CK(cudaMalloc(&h_ref, size_t(M) * n1 * 4));
  CK(cudaMalloc(&y_ref, size_t(M) * n2 * 4));
  CK(cudaMalloc(&sink, 4));
  CK(cudaMalloc(&ws, wsb));
  fill<<<1024, 256, 0, s>>>(x, nx, 1u, 1.0f);
  fill<<<4096, 256, 0, s>>>(w1, nw1, 2u, 1.0f / std::sqrt(float(k1)));
  fill<<<64, 256, 0, s>>>(b1, n1, 3u, 0.1f);
  fill<<<4096, 256, 0, s>>>(w2, nw2, 4u, 1.0f / std::sqrt(float(n1)));
  fill<<<64, 256, 0, s>>>(b2, n2, 5u, 0.1f);
  ref_h<<<(M * n1 + 255) / 256, 256, 0, s>>>(x, w1, b1, h_ref, M, k1, n1, col);
  ref_y<<<(M * n2 + 255) / 256, 256, 0, s>>>(h_ref, w2, b2, y_ref, M, n1, n2, w2col);

  // The product's slab kernel, as run() mode kStream runs it (cusync::sm90::slab_kernels).
  void* state;
  uint64_t* posts;
  cusync::SyncErrorInfo* error;
  CK(cudaMalloc(&state, cusync::sm90::kStreamStateBytes));
  CK(cudaMalloc(&posts, size_t(sms) * 8));
  CK(cudaMalloc(&error, sizeof(cusync::SyncErrorInfo)));
  CK(cudaMemset(state, 0, cusync::sm90::kStreamStateBytes));
  CK(cudaMemset(posts, 0, size_t(sms) * 8));
  CK(cudaMemset(error, 0, sizeof(cusync::SyncErrorInfo)));
  __half* h;
  CK(cudaMalloc(&h, size_t(M) * n1 * 2));
  auto const& kernels = cusync::sm90::slab_kernels<__half>();
  if (kernels.prepare() != cusync::Status::kSuccess) std::exit(5);
  cusync::sm90::SlabRun run;
  cusync::sm90::SlabArgs& sa = run.args;
  sa.x = x, sa.ldx = k1, sa.w1 = w1, sa.ldw1 = col ? k1 : n1, sa.w1_col = col, sa.b1 = b1, sa.h = h, sa.ldh = n1;
  sa.w2 = w2, sa.ldw2 = w2col ? n1 : n2, sa.w2_col = w2col, sa.b2 = b2, sa.y = y, sa.ldy = n2;
  sa.m = M, sa.k1 = k1, sa.hidden = n1, sa.n2 = n2, sa.act1 = int(cusync::sm90::StreamAct::kGelu), sa.act2 = 0;
  sa.ws = work, sa.posts = posts;
  run.grid = sms, run.state = state, run.error = error, run.timeout_ns = 200000000ull;
  auto ours = [&] {
    char const* why = nullptr;
    if (kernels.run(run, s, &why) != cusync::Status::kSuccess) {
      std::fprintf(stderr, "slab run refused: %s\n", why ? why : "cuda error");
      std::exit(6);
    }
  };
  LtGemm g1, g2;
  g1.init(lt, n1, M, k1, col, wsb);  // H^T [n1, M] = W1 col-major [n1, k1] (row-major [k1, n1]) x X^T
  g2.init(lt, n2, M, n1, w2col, wsb);  // Y^T [n2, M] = W2 col-major [n2, n1] (row-major [n1, n2]) x H^T
  auto cublas = [&] {
    g1.run(lt, w1, x, h_lt, b1, ws, wsb, s);
    gelu_in_place<<<unsigned((size_t(M) * n1 + 255) / 256), 256, 0, s>>>(h_lt, size_t(M) * n1);
    g2.run(lt, w2, h_lt, y_lt, b2, ws, wsb, s);
  };
  size_t const nstream = (nw1 + nw2) * 2 / 16;
  // The weights are two allocations: the streaming read runs over one buffer of their combined size.
  uint4* big;
  CK(cudaMalloc(&big, nstream * 16));
  CK(cudaMemset(big, 1, nstream * 16));
  auto read_big = [&] { stream_read<<<sms * 4, 512, 0, s>>>(big, nstream, sink); };

  // Correctness first (outside graphs): ours twice (bitwise), cuBLASLt once, both against the fp32 reference.
  ours();
  CK(cudaStreamSynchronize(s));
  std::vector<__half> a(size_t(M) * n2), b(size_t(M) * n2), c(size_t(M) * n2);
  CK(cudaMemcpy(a.data(), y, a.size() * 2, cudaMemcpyDeviceToHost));
  ours();
  cublas();
  CK(cudaStreamSynchronize(s));
  CK(cudaMemcpy(b.data(), y, b.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(c.data(), y_lt, c.size() * 2, cudaMemcpyDeviceToHost));
  std::vector<float> r(size_t(M) * n2);
  CK(cudaMemcpy(r.data(), y_ref, r.size() * 4, cudaMemcpyDeviceToHost));
  unsigned err = 0;
  { cusync::SyncErrorInfo info{}; CK(cudaMemcpy(&info, error, sizeof(info), cudaMemcpyDeviceToHost)); err = info.flag; }
  double e_ours = 0, e_lt = 0, mag = 0;
  bool same = true;
  for (size_t i = 0; i < r.size(); ++i) {
    e_ours = std::max(e_ours, double(std::fabs(__half2float(a[i]) - r[i])));
    e_lt = std::max(e_lt, double(std::fabs(__half2float(c[i]) - r[i])));
    mag = std::max(mag, double(std::fabs(r[i])));
    same = same && __half_as_ushort(a[i]) == __half_as_ushort(b[i]);
  }
  bool const ok = err == 0 && same && e_ours <= 0.02 * mag + 0.01;
  std::printf("%s M=%d: check %s (max |ours - ref| %.4g, |cuBLASLt - ref| %.4g, max |ref| %.3g, run to run %s, barrier %s)\n",
              name, M, ok ? "PASS" : "FAIL", e_ours, e_lt, mag, same ? "bitwise" : "DIFFERENT", err ? "TIMED OUT" : "ok");

  // Timing: each variant one CUDA graph; ~1 s of preheat each; then round robin, events around each replay.
  std::vector<cudaGraphExec_t> const ex = {graph_of(s, ours), graph_of(s, cublas), graph_of(s, read_big)};
  std::vector<std::vector<float>> const t = round_robin_us(s, ex, reps, 50);
  { cusync::SyncErrorInfo info{}; CK(cudaMemcpy(&info, error, sizeof(info), cudaMemcpyDeviceToHost)); err = info.flag; }
  double const bytes = double(nw1 + nw2) * 2;
  std::printf("%s M=%d: slab %.1f us, cuBLASLt chain %.1f us, streaming read of the weights' bytes %.1f us (%.2f TB/s); "
              "slab over cuBLASLt %.3fx, slab x read %.3f%s\n",
              name, M, median(t[0]), median(t[1]), median(t[2]), bytes / median(t[2]) * 1e-6, median(t[1]) / median(t[0]),
              median(t[0]) / median(t[2]), err ? " (a barrier timed out)" : "");
  std::printf("RESULT {\"shape\": \"%s\", \"m\": %d, \"slab_us\": %.2f, \"cublaslt_us\": %.2f, \"read_us\": %.2f, \"check\": %s}\n", name,
              M, median(t[0]), median(t[1]), median(t[2]), ok ? "true" : "false");
#if defined(CUSYNC_SLAB_TRACE)
  {  // the kernel's per-CTA stamps over 31 replays of its graph (us after the earliest entry; medians over replays)
    std::vector<double> st[7];
    unsigned long long tr[4][1024];
    for (int rep = 0; rep < 31; ++rep) {
      CK(cudaGraphLaunch(ex[0], s));
      CK(cudaStreamSynchronize(s));
      CK(cudaMemcpyFromSymbol(tr, cusync::sm90::slab::g_slab_trace, sizeof(tr)));
      int const n = sms < 1024 ? sms : 1024;
      unsigned long long t0 = tr[0][0];
      for (int b = 0; b < n; ++b) t0 = std::min(t0, tr[0][b]);
      std::vector<double> e(n), p(n), w(n), f(n);
      for (int b = 0; b < n; ++b) {
        e[b] = (tr[0][b] - t0) * 1e-3, p[b] = (tr[1][b] - t0) * 1e-3, w[b] = (tr[2][b] - t0) * 1e-3, f[b] = (tr[3][b] - t0) * 1e-3;
      }
      std::sort(e.begin(), e.end()), std::sort(p.begin(), p.end()), std::sort(w.begin(), w.end()), std::sort(f.begin(), f.end());
      st[0].push_back(e.back());                      // the last CTA's entry
      st[1].push_back(p.front()), st[2].push_back(p[n / 2]), st[3].push_back(p[n * 9 / 10]), st[4].push_back(p.back());
      st[5].push_back(w.back());                      // the last CTA to see every post
      st[6].push_back(f.back());                      // the last CTA's end
    }
    auto med = [](std::vector<double> v) { std::sort(v.begin(), v.end()); return v[v.size() / 2]; };
    std::printf("TRACE {\"shape\": \"%s\", \"m\": %d, \"last_entry\": %.2f, \"post_first\": %.2f, \"post_median\": %.2f, "
                "\"post_p90\": %.2f, \"post_last\": %.2f, \"seen_last\": %.2f, \"end_last\": %.2f}\n", name, M, med(st[0]),
                med(st[1]), med(st[2]), med(st[3]), med(st[4]), med(st[5]), med(st[6]));
  }
#endif
  if (M == 1) {  // a missing post: every reducer times out on slab 5, which the record names; then the next run is clean
    run.args.skip_post = 5, run.timeout_ns = 20000000ull;
    ours();
    CK(cudaStreamSynchronize(s));
    cusync::SyncErrorInfo info{};
    CK(cudaMemcpy(&info, error, sizeof(info), cudaMemcpyDeviceToHost));
    std::printf("%s M=%d: missing post of slab 5: %s (flag %u, stage %d waited on stage %d, slab %d, semaphore %d)\n", name, M,
                info.flag && info.producer_tile_n == 5 && info.semaphore == 5 ? "PASS" : "FAIL", info.flag, info.stage,
                info.producer, info.producer_tile_n, info.semaphore);
    CK(cudaMemset(error, 0, sizeof(info)));
    run.args.skip_post = -1, run.timeout_ns = 200000000ull;
    ours();
    CK(cudaStreamSynchronize(s));
    std::vector<__half> d(size_t(M) * n2);
    CK(cudaMemcpy(d.data(), y, d.size() * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(&info, error, sizeof(info), cudaMemcpyDeviceToHost));
    bool same_after = info.flag == 0;
    for (size_t i = 0; i < d.size(); ++i) same_after = same_after && __half_as_ushort(d[i]) == __half_as_ushort(a[i]);
    std::printf("%s M=%d: the run after it: %s\n", name, M, same_after ? "PASS (bitwise as before, no timeout)" : "FAIL");
  }
  for (auto& e : ex) cudaGraphExecDestroy(e);
  cudaFree(x), cudaFree(w1), cudaFree(b1), cudaFree(w2), cudaFree(b2), cudaFree(y), cudaFree(y_lt), cudaFree(h_lt);
  cudaFree(work), cudaFree(h), cudaFree(state), cudaFree(posts), cudaFree(error), cudaFree(h_ref), cudaFree(y_ref), cudaFree(sink), cudaFree(ws), cudaFree(big);
}

int main(int argc, char** argv) {
  int const reps = argc > 1 ? std::atoi(argv[1]) : 200;
  cudaStream_t s;
  int const sms = probe_device(&s);
  cublasLtHandle_t lt;
  LT(cublasLtCreate(&lt));
  // gpt3's shard (W1 12288 x 6144, W2 6144 x 12288) and a LLaMA-7B-sized MLP with GeLU (4096 x 11008, 11008 x 4096).
  for (bool col : {true, false}) {
    run_shape<1>("gpt3", col, 12288, 6144, 12288, reps, s, lt, sms);
    run_shape<1>("l7b", col, 4096, 11008, 4096, reps, s, lt, sms);
    if (!col) break;
    run_shape<2>("gpt3", col, 12288, 6144, 12288, reps, s, lt, sms);
    run_shape<3>("gpt3", col, 12288, 6144, 12288, reps, s, lt, sms);
    run_shape<4>("gpt3", col, 12288, 6144, 12288, reps, s, lt, sms);
    run_shape<2>("l7b", col, 4096, 11008, 4096, reps, s, lt, sms);
    run_shape<4>("l7b", col, 4096, 11008, 4096, reps, s, lt, sms);
  }
  cublasLtDestroy(lt);
  return 0;
}
