// embed_app: the generated `two_gemm` chain (out = relu(x W1) W2, fp16, 1024 x 1024 weights) inside an
// application, used as applications use a library: the caller's stream, device memory the caller
// allocated (the workspace query), a CUDA graph captured around run() and replayed, the sync error
// record read on the caller's stream, and every status checked, with last_error() naming the field.
// Host-only C++: it includes the public header, never a CUDA source or a CUTLASS header.
//
//   embed_app [M]    (default 4096) exits 0 when the chain matches an fp32 reference on sampled rows;
//                    1 on a wrong result or an error; 2 where there is no CUDA device (built, not run).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include <cuda_runtime.h>

#include "two_gemm.h"

namespace {

constexpr int kWidth = 1024;  // the chain's K and N (spec two_gemm.yaml)

bool cuda_ok(cudaError_t error, char const* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "embed_app: %s: %s\n", what, cudaGetErrorString(error));
  return false;
}

bool chain_ok(cusync::Status status, two_gemm::TwoGemm const& chain, char const* what) {
  if (status == cusync::Status::kSuccess) return true;
  std::fprintf(stderr, "embed_app: %s failed: %s %s\n", what, cusync::to_string(status), chain.last_error());
  return false;
}

std::vector<__half> random_matrix(size_t count, float scale, std::mt19937& rng) {
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  std::vector<__half> values(count);
  for (__half& v : values) v = __float2half(uniform(rng) * scale);
  return values;
}

// out[row] = relu(x[row] W1) W2 in fp32, with the fp16 rounding of the intermediate that the chain stores.
std::vector<float> reference_row(std::vector<__half> const& x, std::vector<__half> const& w1,
                                 std::vector<__half> const& w2, int row) {
  std::vector<float> hidden(kWidth, 0.0f), out(kWidth, 0.0f);
  for (int k = 0; k < kWidth; ++k) {
    float const a = __half2float(x[size_t(row) * kWidth + k]);
    for (int n = 0; n < kWidth; ++n) hidden[n] += a * __half2float(w1[size_t(k) * kWidth + n]);
  }
  for (int k = 0; k < kWidth; ++k) {
    float const a = __half2float(__float2half(std::fmax(hidden[k], 0.0f)));
    for (int n = 0; n < kWidth; ++n) out[n] += a * __half2float(w2[size_t(k) * kWidth + n]);
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int const m = argc > 1 ? std::atoi(argv[1]) : 4096;
  if (m < 1 || m > 65536) {
    std::fprintf(stderr, "embed_app: M must be in 1 .. 65536, got %s\n", argv[1]);
    return 1;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::printf("embed_app: no CUDA device here: built, not run\n");
    return 2;
  }

  std::mt19937 rng(2026);
  std::vector<__half> x = random_matrix(size_t(m) * kWidth, 1.0f, rng);
  std::vector<__half> w1 = random_matrix(size_t(kWidth) * kWidth, 1.0f / 32, rng);
  std::vector<__half> w2 = random_matrix(size_t(kWidth) * kWidth, 1.0f / 32, rng);

  // The application's buffers and stream; the chain only gets pointers to them.
  __half *d_x = nullptr, *d_w1 = nullptr, *d_w2 = nullptr, *d_hidden = nullptr, *d_out = nullptr;
  size_t const act_bytes = size_t(m) * kWidth * sizeof(__half), weight_bytes = size_t(kWidth) * kWidth * sizeof(__half);
  cudaStream_t stream = nullptr;
  if (!cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "stream") ||
      !cuda_ok(cudaMalloc(&d_x, act_bytes), "cudaMalloc") || !cuda_ok(cudaMalloc(&d_hidden, act_bytes), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&d_out, act_bytes), "cudaMalloc") || !cuda_ok(cudaMalloc(&d_w1, weight_bytes), "cudaMalloc") ||
      !cuda_ok(cudaMalloc(&d_w2, weight_bytes), "cudaMalloc") ||
      !cuda_ok(cudaMemcpyAsync(d_x, x.data(), act_bytes, cudaMemcpyHostToDevice, stream), "copy x") ||
      !cuda_ok(cudaMemcpyAsync(d_w1, w1.data(), weight_bytes, cudaMemcpyHostToDevice, stream), "copy W1") ||
      !cuda_ok(cudaMemcpyAsync(d_w2, w2.data(), weight_bytes, cudaMemcpyHostToDevice, stream), "copy W2"))
    return 1;

  two_gemm::Arguments args;
  args.m = m;
  args.input = d_x;
  args.gemm1_weight = d_w1;
  args.gemm1_out = d_hidden;
  args.gemm2_weight = d_w2;
  args.gemm2_out = d_out;

  // The chain's own device memory (semaphores and state) comes from the application: ask, allocate, hand over.
  size_t const bytes = two_gemm::TwoGemm::workspace_size(m);
  void* workspace = nullptr;
  if (bytes == 0 || !cuda_ok(cudaMalloc(&workspace, bytes), "cudaMalloc workspace")) return 1;
  two_gemm::TwoGemm chain;
  if (!chain_ok(chain.initialize(args, workspace, bytes, m, stream), chain, "initialize")) return 1;

  // Run once on the application's stream, then capture run() in a CUDA graph and replay it.
  cudaGraph_t graph = nullptr;
  cudaGraphExec_t exec = nullptr;
  if (!chain_ok(chain.run(stream), chain, "run") ||
      !cuda_ok(cudaMemsetAsync(d_out, 0, act_bytes, stream), "clear out") ||
      !cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal), "begin capture") ||
      !chain_ok(chain.run(stream), chain, "run (captured)") ||
      !cuda_ok(cudaStreamEndCapture(stream, &graph), "end capture") ||
      !cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "instantiate") ||
      !cuda_ok(cudaGraphLaunch(exec, stream), "replay") || !cuda_ok(cudaGraphLaunch(exec, stream), "replay"))
    return 1;
  cusync::SyncErrorInfo info{};
  if (!chain_ok(chain.check_sync_error(&info, stream), chain, "check_sync_error")) return 1;

  std::vector<__half> out(size_t(m) * kWidth);
  if (!cuda_ok(cudaMemcpyAsync(out.data(), d_out, act_bytes, cudaMemcpyDeviceToHost, stream), "copy out") ||
      !cuda_ok(cudaStreamSynchronize(stream), "synchronize"))
    return 1;

  // fp32 reference on 8 rows spread over M (first and last included).
  double err = 0.0, norm = 0.0;
  int const samples = m < 8 ? m : 8;
  for (int s = 0; s < samples; ++s) {
    int const row = samples == 1 ? 0 : int(int64_t(s) * (m - 1) / (samples - 1));
    std::vector<float> const ref = reference_row(x, w1, w2, row);
    for (int n = 0; n < kWidth; ++n) {
      double const d = double(__half2float(out[size_t(row) * kWidth + n])) - ref[n];
      err += d * d;
      norm += double(ref[n]) * ref[n];
    }
  }
  double const rel = std::sqrt(err / (norm > 0 ? norm : 1.0));
  bool const ok = rel < 1e-2;
  std::printf("embed_app: two_gemm M=%d overlapped=%s graph replayed, relative L2 error %.2e on %d rows: %s\n", m,
              chain.overlaps() ? "yes" : "no (one wave)", rel, samples, ok ? "ok" : "WRONG");

  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  chain = two_gemm::TwoGemm();  // releases the chain's streams and events before the workspace is freed
  cudaFree(workspace);
  cudaFree(d_x), cudaFree(d_w1), cudaFree(d_w2), cudaFree(d_hidden), cudaFree(d_out);
  cudaStreamDestroy(stream);
  return ok ? 0 : 1;
}
