// A driver for compute-sanitizer racecheck of run() mode kStream in a generated library, with no cuBLAS kernel in
// the process (racecheck fails inside cuBLAS's kernels with an internal error before it reaches ours, so the bench
// cannot carry it). For each M: mode kStream twice (bitwise equal run to run, no sync timeout) and the sequential
// run (within 2e-2 relative L2). One project per build, picked by -DSTREAM_RACE_LLAMA (llama_mlp_sm90_stream: the
// SwiGLU gate|up halves) or not (decode_stream_sm90).
// Build (the project's build dir B holds lib<project>.a):
//   nvcc -std=c++17 -O2 -arch=sm_90a -cudart shared [-DSTREAM_RACE_LLAMA] -I<project>/include stream_race.cu B/lib<project>.a
//        -lcublasLt -lcuda -o stream_race
// Usage: compute-sanitizer --tool racecheck --kernel-name kns=bulk_chain ./stream_race 1,3,9,17
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <random>
#include <string>
#include <vector>
#include <cuda_bf16.h>
#ifdef STREAM_RACE_LLAMA
#include "llama_mlp_sm90_stream.h"
namespace proj = llama_mlp_sm90_stream;
using Chain = proj::LlamaMlpSm90Stream;
#else
#include "decode_stream_sm90.h"
namespace proj = decode_stream_sm90;
using Chain = proj::DecodeStreamSm90;
#endif

#define CK(x)                                                                          \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                    \
    }                                                                                  \
  } while (0)
#define ST(x)                                                                                      \
  do {                                                                                             \
    cusync::Status s_ = (x);                                                                       \
    if (s_ != cusync::Status::kSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s: status %d (%s)\n", __FILE__, __LINE__, #x, int(s_), chain.last_error()); \
      std::exit(3);                                                                                \
    }                                                                                              \
  } while (0)

using E = proj::Element;
constexpr int kMaxM = 64;

struct Buf {
  E* p = nullptr;
  size_t n = 0;
};
static Buf filled(size_t n, float scale, std::mt19937& rng) {
  std::vector<E> h(n);
  std::uniform_real_distribution<float> d(-scale, scale);
  for (auto& v : h) v = E(d(rng));
  Buf b{nullptr, n};
  CK(cudaMalloc(&b.p, n * sizeof(E)));
  CK(cudaMemcpy(b.p, h.data(), n * sizeof(E), cudaMemcpyHostToDevice));
  return b;
}
static std::vector<float> fetch(Buf const& b, size_t n) {
  std::vector<E> h(n);
  CK(cudaMemcpy(h.data(), b.p, n * sizeof(E), cudaMemcpyDeviceToHost));
  std::vector<float> f(n);
  for (size_t i = 0; i < n; ++i) f[i] = float(h[i]);
  return f;
}

int main(int argc, char** argv) {
  std::vector<int> ms;
  std::string const list = argc > 1 ? argv[1] : "1,3,9,17";
  for (size_t at = 0; at < list.size();) {
    size_t const comma = std::min(list.find(',', at), list.size());
    ms.push_back(std::atoi(list.substr(at, comma - at).c_str()));
    at = comma + 1;
  }
  std::mt19937 rng(7);
  Chain chain;
  proj::Arguments a;
  Buf out;
  size_t out_cols = 0;
#ifdef STREAM_RACE_LLAMA
  Buf x = filled(size_t(kMaxM) * 8192, 1.f, rng), w1 = filled(size_t(8192) * 5632, 0.02f, rng);
  Buf h1 = filled(size_t(kMaxM) * 5632, 0.f, rng), g = filled(size_t(kMaxM) * 2816, 0.f, rng);
  Buf w2 = filled(size_t(2816) * 8192, 0.03f, rng);
  out = filled(size_t(kMaxM) * 8192, 0.f, rng);
  out_cols = 8192;
  a.input = x.p, a.gemm1_weight = w1.p, a.gemm1_out = h1.p, a.glu_out = g.p, a.gemm2_weight = w2.p, a.gemm2_out = out.p;
#else
  Buf x = filled(size_t(kMaxM) * 1088, 1.f, rng), w1 = filled(size_t(1088) * 2816, 0.05f, rng);
  Buf h1 = filled(size_t(kMaxM) * 1408, 0.f, rng), w2 = filled(size_t(1408) * 1000, 0.05f, rng);
  Buf b2 = filled(1000, 0.1f, rng);
  out = filled(size_t(kMaxM) * 1000, 0.f, rng);
  out_cols = 1000;
  a.input = x.p, a.gate_up_weight = w1.p, a.gate_up_out = h1.p, a.down_weight = w2.p, a.down_bias = b2.p, a.down_out = out.p;
#endif
  cudaStream_t stream;
  CK(cudaStreamCreate(&stream));
  a.m = ms.empty() ? 1 : ms[0];
  ST(chain.initialize(a, kMaxM, stream));
  int bad = 0;
  for (int m : ms) {
    a.m = m;
    ST(chain.update(a));
    if (!chain.stream_available()) {
      std::printf("M=%d: mode stream not available\n", m);
      ++bad;
      continue;
    }
    size_t const n = size_t(m) * out_cols;
    ST(chain.run_sequential(stream));
    CK(cudaStreamSynchronize(stream));
    std::vector<float> const ref = fetch(out, n);
    std::vector<float> first;
    for (int rep = 0; rep < 2; ++rep) {
      CK(cudaMemset(out.p, 0xff, n * sizeof(E)));  // NaN: a tile never written shows
      ST(chain.run_mode(stream, cusync::Mode::kStream));
      CK(cudaStreamSynchronize(stream));
      cusync::SyncErrorInfo info{};
      cusync::Status const se = chain.check_sync_error(&info, stream);
      std::vector<float> const got = fetch(out, n);
      double num = 0, den = 0;
      for (size_t i = 0; i < n; ++i) num += double(got[i] - ref[i]) * (got[i] - ref[i]), den += double(ref[i]) * ref[i];
      double const rel = std::sqrt(num / (den > 0 ? den : 1));
      bool const same = rep == 0 || std::memcmp(first.data(), got.data(), n * sizeof(float)) == 0;
      bool const ok = se == cusync::Status::kSuccess && rel < 2e-2 && same;
      std::printf("M=%d run %d: rel_l2 %.2e vs sequential, %s, sync %s: %s\n", m, rep, rel,
                  rep == 0 ? "first run" : (same ? "bitwise equal to the first" : "DIFFERS from the first"),
                  se == cusync::Status::kSuccess ? "ok" : "TIMEOUT", ok ? "ok" : "FAIL");
      bad += !ok;
      if (rep == 0) first = got;
    }
    if (std::getenv("STREAM_RACE_TIME") != nullptr) {  // a rough look, not a benchmark: median of 50 back-to-back runs
      cudaEvent_t e0, e1;
      CK(cudaEventCreate(&e0));
      CK(cudaEventCreate(&e1));
      std::vector<float> us;
      for (int r = 0; r < 60; ++r) {
        CK(cudaEventRecord(e0, stream));
        ST(chain.run_mode(stream, cusync::Mode::kStream));
        CK(cudaEventRecord(e1, stream));
        CK(cudaEventSynchronize(e1));
        float ms_ = 0;
        CK(cudaEventElapsedTime(&ms_, e0, e1));
        if (r >= 10) us.push_back(ms_ * 1000.f);
      }
      std::sort(us.begin(), us.end());
      std::printf("M=%d mode stream: %.1f us (median of %zu)\n", m, us[us.size() / 2], us.size());
      CK(cudaEventDestroy(e0));
      CK(cudaEventDestroy(e1));
    }
  }
  std::printf("stream_race: %s\n", bad ? "FAIL" : "ALL OK");
  return bad ? 1 : 0;
}
