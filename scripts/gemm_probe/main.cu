// GEMM kernel probe driver (see kernels.cuh). For each GEMM shape and M: cublasGemmEx (as the bench's
// cuBLAS chain calls it), cuBLASLt's heuristic algorithms (the first and the fastest of up to 8), and
// every CUTLASS configuration of kernels.cuh in every raster order and swizzle, timed round robin (CUDA
// events, median), each output checked against cuBLASLt's. One JSON line per variant on stdout.
// Usage: gemm_probe --shapes N:K:b[,N:K:b...] --m 256,512 [--repeats 15]   (b: r = B [K, N], c = B [N, K])
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include <cublasLt.h>
#include <cublas_v2.h>

#include "kernels.cuh"

namespace {

#define CHECK_CUDA(x)                                                                   \
  do {                                                                                  \
    cudaError_t e_ = (x);                                                               \
    if (e_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "error: %s: %s (line %d)\n", #x, cudaGetErrorString(e_), __LINE__); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

std::vector<int> parse_ints(char const* s) {
  std::vector<int> v;
  for (char const* p = s; *p;) {
    v.push_back(std::atoi(p));
    while (*p && *p != ',') ++p;
    if (*p == ',') ++p;
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

// max |x - ref| / max |ref| over n elements, into out[0] (float bits as unsigned max).
__global__ void rel_diff(__half const* x, __half const* ref, int64_t n, unsigned* out) {
  float diff = 0, mag = 0;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    float const r = __half2float(ref[i]);
    float const v = __half2float(x[i]);
    float const d = std::isfinite(v) ? fabsf(v - r) : 1e30f;
    diff = fmaxf(diff, d);
    mag = fmaxf(mag, fabsf(r));
  }
  atomicMax(&out[0], __float_as_uint(diff));
  atomicMax(&out[1], __float_as_uint(mag));
}

struct Variant {
  std::string name;
  std::function<bool(cudaStream_t)> launch;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> shapes;
  std::vector<int> ms = {256, 512, 1024, 2048, 4096, 8192};
  int repeats = 15;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--shapes")) {
      for (char const* p = argv[i + 1]; *p;) {
        char const* e = std::strchr(p, ',');
        shapes.emplace_back(p, e ? e - p : std::strlen(p));
        p = e ? e + 1 : p + std::strlen(p);
      }
    } else if (!std::strcmp(argv[i], "--m")) {
      ms = parse_ints(argv[i + 1]);
    } else if (!std::strcmp(argv[i], "--repeats")) {
      repeats = std::atoi(argv[i + 1]);
    }
  }
  int device = 0, sms = 0;
  CHECK_CUDA(cudaGetDevice(&device));
  CHECK_CUDA(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  std::vector<probe::Kernel> kernels;
  probe::add_kernels_coop_128x256(kernels);
  probe::add_kernels_coop_128x256_c2(kernels);
  probe::add_kernels_coop_256x128(kernels);
  probe::add_kernels_coop_256x128_c2(kernels);
  probe::add_kernels_pingpong_128x128(kernels);
  probe::add_kernels_pingpong_64x256(kernels);

  int const max_m = *std::max_element(ms.begin(), ms.end());
  int max_n = 0, max_k = 0;
  for (auto const& s : shapes) {
    max_n = std::max(max_n, std::atoi(s.c_str()));
    max_k = std::max(max_k, std::atoi(std::strchr(s.c_str(), ':') + 1));
  }
  __half *a, *b, *d, *ref;
  CHECK_CUDA(cudaMalloc(&a, sizeof(__half) * int64_t(max_m) * max_k));
  CHECK_CUDA(cudaMalloc(&b, sizeof(__half) * int64_t(max_n) * max_k));
  CHECK_CUDA(cudaMalloc(&d, sizeof(__half) * int64_t(max_m) * max_n));
  CHECK_CUDA(cudaMalloc(&ref, sizeof(__half) * int64_t(max_m) * max_n));
  fill<<<1024, 256>>>(a, int64_t(max_m) * max_k, 1);
  fill<<<1024, 256>>>(b, int64_t(max_n) * max_k, 2);
  unsigned* diff;
  CHECK_CUDA(cudaMalloc(&diff, 8));
  size_t const workspace_bytes = size_t(32) << 20;
  void* workspace;
  CHECK_CUDA(cudaMalloc(&workspace, workspace_bytes));
  cudaStream_t stream;
  CHECK_CUDA(cudaStreamCreate(&stream));
  cublasHandle_t blas;
  cublasCreate(&blas);
  cublasSetWorkspace(blas, workspace, workspace_bytes);
  cublasSetStream(blas, stream);
  cublasLtHandle_t lt;
  cublasLtCreate(&lt);

  for (auto const& s : shapes) {
    int const n = std::atoi(s.c_str());
    char const* colon = std::strchr(s.c_str(), ':');
    int const k = std::atoi(colon + 1);
    bool const b_col = std::strchr(colon + 1, ':') && std::strchr(colon + 1, ':')[1] == 'c';
    for (int m : ms) {
      std::vector<Variant> variants;
      float const alpha = 1.0f, beta = 0.0f;
      // Column-major view: D^T [n, m] = op(B^T) [n, k] x A^T [k, m].
      variants.push_back({"cublas_gemmex", [=, &blas](cudaStream_t) {
                            return cublasGemmEx(blas, b_col ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &alpha, b,
                                                CUDA_R_16F, b_col ? k : n, a, CUDA_R_16F, k, &beta, d, CUDA_R_16F, n,
                                                CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT) == CUBLAS_STATUS_SUCCESS;
                          }});
      cublasLtMatmulDesc_t op;
      cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
      cublasOperation_t const ta = b_col ? CUBLAS_OP_T : CUBLAS_OP_N, tb = CUBLAS_OP_N;
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta));
      cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb));
      cublasLtMatrixLayout_t la, lb, ld;
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
      for (int h = 0; h < found; ++h) {
        cublasLtMatmulAlgo_t const algo = heur[h].algo;
        variants.push_back({"cublaslt_h" + std::to_string(h), [=, &lt](cudaStream_t st) {
                              return cublasLtMatmul(lt, op, &alpha, b, la, a, lb, &beta, d, ld, d, ld, &algo, workspace,
                                                    workspace_bytes, st) == CUBLAS_STATUS_SUCCESS;
                            }});
      }
      probe::Problem const p{m, n, k, b_col, a, b, d};
      for (auto const& kern : kernels) {
        for (int raster : {0, 1, 2}) {
          for (int swizzle : {1, 2, 4, 8}) {
            if (raster == 0 && swizzle > 1) continue;  // CUTLASS's defaults: heuristic order, no swizzle
            auto fn = kern.launch;
            variants.push_back({kern.name + (raster == 0 ? "_H" : raster == 1 ? "_M" : "_N") + "_s" + std::to_string(swizzle),
                                [=](cudaStream_t st) { return fn(p, raster, swizzle, sms, st); }});
          }
        }
      }
      // Reference: cuBLASLt's first algorithm (or cublasGemmEx).
      variants[found > 0 ? 1 : 0].launch(stream);
      CHECK_CUDA(cudaMemcpyAsync(ref, d, sizeof(__half) * int64_t(m) * n, cudaMemcpyDeviceToDevice, stream));
      std::vector<double> err(variants.size(), -1);
      std::vector<bool> ok(variants.size(), true);
      for (size_t v = 0; v < variants.size(); ++v) {
        CHECK_CUDA(cudaMemsetAsync(d, 0xFF, sizeof(__half) * int64_t(m) * n, stream));
        ok[v] = variants[v].launch(stream);
        CHECK_CUDA(cudaGetLastError());
        CHECK_CUDA(cudaMemsetAsync(diff, 0, 8, stream));
        rel_diff<<<264, 256, 0, stream>>>(d, ref, int64_t(m) * n, diff);
        unsigned h[2];
        CHECK_CUDA(cudaMemcpyAsync(h, diff, 8, cudaMemcpyDeviceToHost, stream));
        CHECK_CUDA(cudaStreamSynchronize(stream));
        float fd, fm;
        std::memcpy(&fd, &h[0], 4);
        std::memcpy(&fm, &h[1], 4);
        err[v] = fm > 0 ? fd / fm : fd;
      }
      std::vector<std::vector<cudaEvent_t>> events(variants.size(), std::vector<cudaEvent_t>(2 * (repeats + 2)));
      for (auto& ev : events)
        for (auto& e : ev) CHECK_CUDA(cudaEventCreate(&e));
      for (int r = 0; r < repeats + 2; ++r) {
        for (size_t v = 0; v < variants.size(); ++v) {
          if (!ok[v]) continue;
          CHECK_CUDA(cudaEventRecord(events[v][2 * r], stream));
          variants[v].launch(stream);
          CHECK_CUDA(cudaEventRecord(events[v][2 * r + 1], stream));
        }
      }
      CHECK_CUDA(cudaStreamSynchronize(stream));
      for (size_t v = 0; v < variants.size(); ++v) {
        std::vector<float> t;
        for (int r = 2; r < repeats + 2 && ok[v]; ++r) {
          float ms_ = 0;
          CHECK_CUDA(cudaEventElapsedTime(&ms_, events[v][2 * r], events[v][2 * r + 1]));
          t.push_back(ms_ * 1000.0f);
        }
        std::sort(t.begin(), t.end());
        double const us = t.empty() ? -1 : t[t.size() / 2];
        double const tflops = us > 0 ? 2.0 * m * n * k / us * 1e-6 : 0;
        std::printf("{\"n\": %d, \"k\": %d, \"b\": \"%s\", \"m\": %d, \"variant\": \"%s\", \"ok\": %s, \"us\": %.2f, "
                    "\"tflops\": %.1f, \"rel_err\": %.2e}\n",
                    n, k, b_col ? "col" : "row", m, variants[v].name.c_str(), ok[v] ? "true" : "false", us, tflops,
                    err[v]);
        for (auto& e : events[v]) cudaEventDestroy(e);
      }
      std::fflush(stdout);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(ld);
      // op is captured by the lambdas of this M only; they are gone with `variants`.
      variants.clear();
      cublasLtMatmulDescDestroy(op);
    }
  }
  return 0;
}
