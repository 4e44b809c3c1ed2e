// cusync runtime, bench drivers only (not part of the library): what every project's bench shares:
// CUDA error checks, argument parsing, graph timing interleaved round robin, and the tile trace's lines.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#define BENCH_CUDA(call)                                                                  \
  do {                                                                                    \
    cudaError_t const err_ = (call);                                                      \
    if (err_ != cudaSuccess) {                                                            \
      std::fprintf(stderr, "error: %s failed: %s\n", #call, cudaGetErrorString(err_));    \
      std::exit(1);                                                                       \
    }                                                                                     \
  } while (0)

namespace cusync::bench {

// The usage text of a bench ("usage: NAME_bench [--m ...]\n..."); a bad argument prints the error and
// the text, and exits 2.
struct Usage {
  std::string text;
  [[noreturn]] void fail(char const* why) const {
    std::fprintf(stderr, "error: %s\n%s", why, text.c_str());
    std::exit(2);
  }
};

inline std::vector<std::string> split(std::string const& text) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (start <= text.size()) {
    size_t const comma = text.find(',', start);
    std::string const part = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (!part.empty()) parts.push_back(part);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return parts;
}

inline int parse_int(std::string const& text, long lowest, char const* what, Usage const& usage) {
  char* end = nullptr;
  long const value = std::strtol(text.c_str(), &end, 10);
  if (end == text.c_str() || *end != '\0' || value < lowest || value > (1 << 24)) usage.fail(what);
  return int(value);
}

// JSON has no NaN or infinity: a NaN or huge error is written as 1e30 (a check that can only fail).
inline double json_number(double x) { return std::isnan(x) ? 1e30 : std::min(x, 1e30); }

// Times captured graphs round robin (A B C A B C ...) so that clock and temperature drift during a run
// (seen: +-5% between two measurements of one point) hits every variant alike. Owns the graphs.
class Interleaved {
 public:
  int add(cudaGraphExec_t graph) {
    graphs_.push_back(graph);
    return int(graphs_.size()) - 1;
  }

  // Median microseconds of each graph, in the order they were added (`o`: warmup and repeats). preheat_ms: the
  // graphs are first replayed round robin for at least this long, so that every variant is timed at the clocks
  // the GPU sustains (from idle it boosts for a while).
  template <typename Options>
  std::vector<double> run(cudaStream_t stream, Options const& o, int preheat_ms = 0) {
    size_t const n = graphs_.size();
    std::vector<cudaEvent_t> events(2 * n);
    for (cudaEvent_t& e : events) BENCH_CUDA(cudaEventCreate(&e));
    auto const preheat_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(preheat_ms);
    while (preheat_ms > 0 && !graphs_.empty() && std::chrono::steady_clock::now() < preheat_end) {
      for (cudaGraphExec_t g : graphs_) BENCH_CUDA(cudaGraphLaunch(g, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
    }
    for (int i = 0; i < o.warmup; ++i)
      for (cudaGraphExec_t g : graphs_) BENCH_CUDA(cudaGraphLaunch(g, stream));
    std::vector<std::vector<float>> times(n);
    for (int r = 0; r < o.repeats; ++r) {
      for (size_t i = 0; i < n; ++i) {
        BENCH_CUDA(cudaEventRecord(events[2 * i], stream));
        BENCH_CUDA(cudaGraphLaunch(graphs_[i], stream));
        BENCH_CUDA(cudaEventRecord(events[2 * i + 1], stream));
      }
      BENCH_CUDA(cudaEventSynchronize(events.back()));
      for (size_t i = 0; i < n; ++i) {
        float ms = 0.0f;
        BENCH_CUDA(cudaEventElapsedTime(&ms, events[2 * i], events[2 * i + 1]));
        times[i].push_back(ms * 1000.0f);
      }
    }
    std::vector<double> medians;
    for (auto& t : times) {
      std::sort(t.begin(), t.end());
      size_t const k = t.size();
      medians.push_back(k % 2 ? t[k / 2] : 0.5 * (t[k / 2 - 1] + t[k / 2]));
    }
    for (cudaEvent_t e : events) BENCH_CUDA(cudaEventDestroy(e));
    for (cudaGraphExec_t g : graphs_) BENCH_CUDA(cudaGraphExecDestroy(g));
    graphs_.clear();
    return medians;
  }

 private:
  std::vector<cudaGraphExec_t> graphs_;
};

// A recorded tile trace (TileTrace, cusync/stage.cuh: kWords words a tile: taken, stored, SM, m << 32 | n, ready;
// %globaltimer ns, 0 where not recorded) as JSON lines for cusync_gen/trace.py, one per tile. trace_origin: the
// first tile's taken time, which the lines count from. write_tile_lines: tiles [begin, end) of `words`, each line
// `head` (its leading fields, e.g. "\"m\": 8, \"mode\": \"overlapped\", \"stage\": \"gemm1\"") and the tile's;
// a time not recorded is -1, and "ready_us" is written only where the kernel records it (the conv kernels).
template <int kWords>
uint64_t trace_origin(std::vector<uint64_t> const& words) {
  uint64_t t0 = ~uint64_t(0);
  for (size_t i = 0; i < words.size(); i += kWords) t0 = words[i] != 0 && words[i] < t0 ? words[i] : t0;
  return t0;
}

template <int kWords>
void write_tile_lines(FILE* f, std::string const& head, std::vector<uint64_t> const& words, int64_t begin, int64_t end,
                      uint64_t t0) {
  static_assert(kWords >= 5, "taken, stored, SM, tile, ready");
  auto us = [t0](uint64_t ns) { return ns != 0 && ns >= t0 ? double(ns - t0) * 1e-3 : -1.0; };
  for (int64_t t = begin; t < end; ++t) {
    uint64_t const* e = &words[size_t(t) * kWords];
    char ready[48] = "";
    if (e[4] != 0) std::snprintf(ready, sizeof(ready), ", \"ready_us\": %.3f", us(e[4]));
    std::fprintf(f, "{%s, \"tile_m\": %d, \"tile_n\": %d, \"sm\": %llu, \"taken_us\": %.3f%s, \"stored_us\": %.3f}\n",
                 head.c_str(), int(e[3] >> 32), int(e[3] & 0xffffffffu), (unsigned long long)e[2], us(e[0]), ready,
                 us(e[1]));
  }
}

}  // namespace cusync::bench
