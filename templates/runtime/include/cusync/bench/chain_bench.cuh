// cusync runtime, bench drivers only: the check-and-time driver of a GEMM chain's bench, for every
// backend. A project's bench/<name>_bench.cu holds only its stage table (StageDesc) and its Arguments;
// the backend's hooks (cusync/sm80/bench.cuh, cusync/sm90/bench.cuh) add its orders, baselines and JSON.
//
// For each M: random inputs (never zeros), outputs poisoned with NaN before every run; run_sequential()
// is the baseline; run() with each policy must match it bitwise (same kernels, same accumulation
// order), also when replayed from a CUDA graph; every stage is compared with an fp32 reference by
// relative L2 error. Times are medians of CUDA-event-timed graph replays after warm-up.
// Prints one JSON object per (M, policy). Exit codes: 0 ok, 2 bad arguments, 3 no CUDA device,
// 4 a spin-wait timed out, 5 a check failed, 1 any other error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "cusync/bench/common.cuh"
#include "cusync/policy.h"
#include "cusync/stage.cuh"  // cusync::TileTrace
#include "cusync/status.h"
#include "cusync/sync_error.h"
#include "reference.cuh"

#define BENCH_STATUS(call)                                                                \
  do {                                                                                    \
    cusync::Status const st_ = (call);                                                    \
    if (st_ != cusync::Status::kSuccess) {                                                \
      std::fprintf(stderr, "error: %s returned %s (%s)\n", #call, cusync::to_string(st_), \
                   cudaGetErrorString(cudaGetLastError()));                               \
      std::exit(st_ == cusync::Status::kSyncTimeout ? 4 : 1);                             \
    }                                                                                     \
  } while (0)

namespace cusync::bench {

constexpr double kTolerance = 1e-2;

// One stage as the bench sees it (emitted into bench/<name>_bench.cu).
struct StageDesc {
  char const* name;
  bool gemm;
  int n;            // output columns
  int k;            // input columns
  bool b_col;
  ::bench::Activation act;  // kSwiglu: a gated GEMM, whose weights have 2n columns (gate | up)
  int producer;     // -1: chain input
  int producer_b;   // two-producer swiglu: where up comes from, else -1
  bool bias = false;  // a GEMM with a bias vector [n] (spec `bias: true`)
};

struct ChainOptions {
  std::vector<int> ms{1, 256, 1024, 2048};
  std::vector<std::string> policies{"spec"};
  std::vector<std::string> orders{"spec"};
  int repeats = 50;
  int warmup = 10;
  int preheat_ms = 0;  // --preheat-ms: each M's graphs replayed round robin this long before they are timed
  uint32_t seed = 1;
  double timeout_ms = 2000.0;
  bool reference = true;
  bool fallback = true;
  int autotune_rounds = 0;  // sm90 (--autotune): > 0: chain.autotune() at every --m before the first M
  bool measure_hooks = false;
  int inject_missing_posts = -1;
  bool baselines = false;  // sm90: stock CUTLASS, stock + PDL, cuBLAS
  std::string trace;  // write a tile trace of run() and run_sequential() at each M to this file
};

template <typename Launch>
cudaGraphExec_t capture(cudaStream_t stream, Launch&& launch) {
  cudaGraph_t graph;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  BENCH_STATUS(launch());
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphDestroy(graph));
  return exec;
}

inline PolicyKind policy_kind(std::string const& name) {
  if (name == "row") return PolicyKind::kRow;
  if (name == "tile") return PolicyKind::kTile;
  return PolicyKind::kNone;  // the spec's policies
}

// Every (policy, order) pair asked for, as "policy/order".
inline std::vector<std::string> variants(ChainOptions const& o) {
  std::vector<std::string> out;
  for (auto const& p : o.policies)
    for (auto const& r : o.orders) out.push_back(p + "/" + r);
  return out;
}

// `Project`: the generated bench's description of its chain (Chain, Arguments, Element, kName,
// kNumStages, kInputWidth, kStages, kSpecTicketOrder, arguments(), inject_missing_posts()).
// `Backend`: the backend's hooks (cusync/<backend>/bench.cuh).
template <typename Project, typename Backend>
class ChainBench {
 public:
  using Chain = typename Project::Chain;
  using Element = typename Project::Element;
  static constexpr char const* kName = Project::kName;
  static constexpr int kNumStages = Project::kNumStages;
  static constexpr StageDesc const* kStages = Project::kStages;

  struct Buffers {
    Element* input = nullptr;
    Element* weight[kNumStages] = {};
    Element* bias[kNumStages] = {};
    Element* out[kNumStages] = {};
    Element* gated_scratch = nullptr;  // the cuBLAS chain's [m, 2n] gate | up of a gated GEMM
    float* reference = nullptr;
    double* sums = nullptr;
  };

  // What the variant loop measured of one (policy, order) pair.
  struct Result {
    std::string policy, order;
    bool timed_out = false, bitwise = false, graph_ok = false;
    char sync_error[256] = "null";
    int overlapped_id = -1, hooks_id = -1, sequential_id = -1;
  };

  ChainOptions o;
  Buffers b;
  Chain chain;
  Backend hooks;  // the backend's state (sm90: the cuBLAS handle of its baselines)
  cudaStream_t stream = nullptr;
  cudaDeviceProp prop{};

  ChainOptions parse(int argc, char** argv) const {
    ChainOptions o;
    o.baselines = Backend::kBaselines;
    Usage const usage = this->usage();
    auto positive = [&](std::string const& text, char const* what) { return parse_int(text, 1, what, usage); };
    for (int i = 1; i < argc; ++i) {
      std::string const arg = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage.fail(("missing value after " + arg).c_str());
        return argv[++i];
      };
      if (arg == "--m") {
        o.ms.clear();
        for (auto const& m : split(value())) o.ms.push_back(positive(m, "--m takes positive integers, e.g. --m 1,256"));
        if (o.ms.empty()) usage.fail("--m needs at least one value");
      } else if (arg == "--policies") {
        o.policies = split(value());
        for (auto const& p : o.policies)
          if (p != "spec" && p != "row" && p != "tile") usage.fail("--policies takes spec, row and tile");
      } else if (arg == "--orders") {
        o.orders = split(value());
        for (auto const& p : o.orders)
          if (!Backend::order_ok(p)) usage.fail(Backend::kOrdersError);
      } else if (arg == "--repeats") {
        o.repeats = positive(value(), "--repeats takes a positive integer");
      } else if (arg == "--warmup") {
        o.warmup = positive(value(), "--warmup takes a positive integer");
      } else if (arg == "--preheat-ms") {
        o.preheat_ms = parse_int(value(), 0, "--preheat-ms takes milliseconds, 0 to 60000", usage);
        if (o.preheat_ms > 60000) usage.fail("--preheat-ms takes milliseconds, 0 to 60000");
      } else if (arg == "--seed") {
        o.seed = uint32_t(positive(value(), "--seed takes a positive integer"));
      } else if (arg == "--timeout-ms") {
        o.timeout_ms = positive(value(), "--timeout-ms takes a positive integer");
      } else if (arg == "--no-fallback") {
        o.fallback = false;
      } else if (Backend::parse_more(arg, value, o, usage)) {
        // an option of the backend's
      } else if (arg == "--measure-hooks") {
        o.measure_hooks = true;
      } else if (arg == "--trace") {
        o.trace = value();
      } else if (arg == "--no-baselines") {
        o.baselines = false;
      } else if (arg == "--no-reference") {
        o.reference = false;
      } else if (arg == "--inject-missing-posts") {
        o.inject_missing_posts = parse_int(value(), 0, "--inject-missing-posts takes a stage index", usage);
      } else {
        usage.fail(("unknown argument " + arg).c_str());
      }
    }
    return o;
  }

  static Usage usage() {
    return Usage{std::string("usage: ") + Project::kName + "_bench [--m 1,256,1024] [--policies spec,row,tile] [--orders " +
                 Backend::kOrders + "]\n       [--repeats 50]\n"
                 "       [--warmup 10] [--preheat-ms 0] [--seed 1] [--timeout-ms 2000] [--no-reference] [--no-fallback]\n"
                 "       [--measure-hooks] [--inject-missing-posts STAGE] [--trace FILE.jsonl]" + Backend::kUsageMore + "\n"};
  }

  static size_t out_bytes(int s, int m) { return size_t(m) * kStages[s].n * sizeof(Element); }
  // Columns of a GEMM's weights: 2n (gate | up) for a gated GEMM.
  static int weight_cols(StageDesc const& d) { return d.act == ::bench::Activation::kSwiglu ? 2 * d.n : d.n; }

  // On the bench's stream: that stream does not synchronize with the legacy default stream, and a memset
  // there could run after (or, blocked by persistent CTAs that fill every SM, in the middle of) the run
  // it is meant to precede (seen on the H200 at M=8192 before this was fixed).
  void poison(int m) const {
    for (int s = 0; s < kNumStages; ++s) BENCH_CUDA(cudaMemsetAsync(b.out[s], 0xFF, out_bytes(s, m), stream));  // NaN
  }

  Element const* input_of(int s) const { return kStages[s].producer < 0 ? b.input : b.out[kStages[s].producer]; }

  // Worst relative error over the stages; each stage's reference reads exactly the inputs the stage read.
  double reference_error(int m) const {
    double worst = 0.0;
    for (int s = 0; s < kNumStages; ++s) {
      StageDesc const& d = kStages[s];
      Element const* in = input_of(s);
      if (d.gemm) {
        dim3 const grid((d.n + 15) / 16, (m + 15) / 16);
        ::bench::reference_gemm_kernel<Element><<<grid, dim3(16, 16)>>>(in, b.weight[s], d.b_col, b.reference, m, d.n, d.k, d.act,
                                                                        b.bias[s]);
      } else {
        int64_t const count = int64_t(m) * d.n;
        bool const two = d.producer_b >= 0;
        Element const* up = two ? b.out[d.producer_b] : in + d.n;
        ::bench::reference_swiglu_kernel<Element><<<unsigned((count + 255) / 256), 256>>>(in, up, two ? d.n : 2 * d.n,
                                                                                         b.reference, m, d.n);
      }
      BENCH_CUDA(cudaGetLastError());
      worst = std::max(worst, ::bench::relative_error<Element>(b.out[s], b.reference, int64_t(m) * d.n, b.sums));
    }
    return worst;
  }

  bool outputs_equal(std::vector<std::vector<unsigned char>> const& expected) const {
    bool equal = true;
    for (int s = 0; s < kNumStages; ++s) equal = equal && ::bench::bitwise_equal(b.out[s], expected[s]);
    return equal;
  }

  // Worst relative L2 difference over the stages between the outputs and `expected` (the sequential run's):
  // for kernels that sum in another order (stream-K), where bitwise equality cannot hold. NaN stays NaN.
  double outputs_difference(std::vector<std::vector<unsigned char>> const& expected) const {
    double worst = 0.0;
    for (int s = 0; s < kNumStages; ++s) {
      std::vector<unsigned char> const got = ::bench::to_host(b.out[s], expected[s].size());
      Element const* x = reinterpret_cast<Element const*>(got.data());
      Element const* y = reinterpret_cast<Element const*>(expected[s].data());
      double diff = 0.0, norm = 0.0;
      for (size_t i = 0; i < expected[s].size() / sizeof(Element); ++i) {
        double const a = double(float(x[i])), e = double(float(y[i]));
        diff += (a - e) * (a - e);
        norm += e * e;
      }
      worst = std::max(worst, std::sqrt(diff / std::max(norm, 1e-30)));
      if (std::isnan(diff)) return std::nan("");
    }
    return worst;
  }

  // Appends one JSON line per tile of one run of `mode` ("overlapped" or "sequential") to `path`.
  void write_trace(std::string const& path, int m, char const* mode) {
    int64_t const words = chain.trace_words();
    uint64_t* trace = nullptr;
    BENCH_CUDA(cudaMalloc(&trace, size_t(words) * sizeof(uint64_t)));
    BENCH_CUDA(cudaMemsetAsync(trace, 0, size_t(words) * sizeof(uint64_t), stream));
    BENCH_STATUS(chain.set_trace(trace, words));
    BENCH_STATUS(std::string(mode) == "overlapped" ? Backend::overlapped(chain, stream) : chain.run_sequential(stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    BENCH_STATUS(chain.set_trace(nullptr));
    std::vector<uint64_t> host(static_cast<size_t>(words));
    BENCH_CUDA(cudaMemcpy(host.data(), trace, size_t(words) * sizeof(uint64_t), cudaMemcpyDeviceToHost));
    BENCH_CUDA(cudaFree(trace));
    uint64_t const t0 = trace_origin<TileTrace::kWords>(host);
    FILE* f = std::fopen(path.c_str(), "a");
    if (f == nullptr) usage().fail(("cannot write " + path).c_str());
    for (int s = 0; s < kNumStages; ++s) {
      std::string const head = "\"m\": " + std::to_string(m) + ", \"mode\": \"" + mode + "\", \"stage\": \"" +
                               kStages[s].name + "\"";
      write_tile_lines<TileTrace::kWords>(f, head, host, chain.trace_offset(s) / TileTrace::kWords,
                                          chain.trace_offset(s + 1) / TileTrace::kWords, t0);
    }
    std::fclose(f);
  }

  // Allocates and fills the inputs and weights for up to `max_m` rows.
  void allocate(int max_m) {
    BENCH_CUDA(cudaMalloc(&b.input, size_t(max_m) * Project::kInputWidth * sizeof(Element)));
    size_t widest = 0, gated_cols = 0;
    for (int s = 0; s < kNumStages; ++s) {
      StageDesc const& d = kStages[s];
      BENCH_CUDA(cudaMalloc(&b.out[s], out_bytes(s, max_m)));
      widest = std::max(widest, size_t(d.n));
      if (d.gemm) {
        int64_t const elements = int64_t(d.k) * weight_cols(d);
        BENCH_CUDA(cudaMalloc(&b.weight[s], size_t(elements) * sizeof(Element)));
        // Uniform(-a, a) with variance 1/k keeps every stage's outputs O(1).
        ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(b.weight[s], elements, o.seed * 131u + s + 1u,
                                                             float(std::sqrt(3.0 / d.k)));
        BENCH_CUDA(cudaGetLastError());
        if (weight_cols(d) != d.n) gated_cols = std::max(gated_cols, size_t(weight_cols(d)));
      }
      if (d.bias) {
        BENCH_CUDA(cudaMalloc(&b.bias[s], size_t(d.n) * sizeof(Element)));
        ::bench::fill_uniform_kernel<Element><<<64, 256>>>(b.bias[s], int64_t(d.n), o.seed * 137u + s + 1u, 0.5f);
        BENCH_CUDA(cudaGetLastError());
      }
    }
    if (gated_cols > 0) BENCH_CUDA(cudaMalloc(&b.gated_scratch, size_t(max_m) * gated_cols * sizeof(Element)));
    BENCH_CUDA(cudaMalloc(&b.reference, size_t(max_m) * widest * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&b.sums, 3 * sizeof(double)));
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(b.input, int64_t(max_m) * Project::kInputWidth, o.seed, 1.0f);
    BENCH_CUDA(cudaGetLastError());
  }

  typename Project::Arguments arguments(int m) const { return Project::arguments(b.input, b.weight, b.bias, b.out, m); }

  // Checks and times every (policy, order) variant at one M; returns the exit code so far (4: a wait timed out).
  int run_m(int m, int exit_code) {
    BENCH_STATUS(chain.update(arguments(m)));
    poison(m);
    BENCH_STATUS(chain.run_sequential(stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    std::vector<std::vector<unsigned char>> expected;
    for (int s = 0; s < kNumStages; ++s) expected.push_back(::bench::to_host(b.out[s], out_bytes(s, m)));
    double const ref_err = o.reference ? reference_error(m) : 0.0;
    if (!o.trace.empty()) {
      write_trace(o.trace, m, "sequential");
      write_trace(o.trace, m, "overlapped");
    }
    // Every variant is checked first, then all are timed together, interleaved.
    Interleaved timer;
    hooks.reset(chain);
    int const sequential_id = timer.add(capture(stream, [&] { return chain.run_sequential(stream); }));
    typename Backend::Measured const measured = hooks.measure(*this, m, expected, timer);
    std::vector<Result> results;
    for (std::string const& variant : variants(o)) {
      Result r;
      r.policy = variant.substr(0, variant.find('/'));
      r.order = variant.substr(variant.find('/') + 1);
      BENCH_STATUS(chain.set_policy(policy_kind(r.policy)));
      Backend::set_order(chain, r.order, Project::kSpecTicketOrder);
      // The back-to-back baseline in the same order (where the order changes the sequential run too).
      if (Backend::kOrderedSequential) {
        r.sequential_id = r.order == "spec" ? sequential_id : timer.add(capture(stream, [&] { return chain.run_sequential(stream); }));
      }
      BENCH_STATUS(chain.clear_sync_error());
      poison(m);
      BENCH_STATUS(Backend::overlapped(chain, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      SyncErrorInfo info{};
      r.timed_out = chain.check_sync_error(&info) == Status::kSyncTimeout;
      r.bitwise = !r.timed_out && outputs_equal(expected);
      if (r.timed_out) {
        std::snprintf(r.sync_error, sizeof(r.sync_error),
                      "\"stage %s tile (%d, %d) waited for producer %s tile (%d, %d), semaphore %d: "
                      "expected 0x%llx, saw 0x%llx\"",
                      Chain::stage_name(info.stage), info.tile_m, info.tile_n, Chain::stage_name(info.producer),
                      info.producer_tile_m, info.producer_tile_n, info.semaphore, (unsigned long long)info.expected,
                      (unsigned long long)info.observed);
        results.push_back(r);
        break;
      }
      cudaGraphExec_t const overlapped = capture(stream, [&] { return Backend::overlapped(chain, stream); });
      poison(m);
      BENCH_CUDA(cudaGraphLaunch(overlapped, stream));
      BENCH_CUDA(cudaGraphLaunch(overlapped, stream));  // a replay must start a fresh epoch
      BENCH_CUDA(cudaStreamSynchronize(stream));
      r.graph_ok = chain.check_sync_error() == Status::kSuccess && outputs_equal(expected);
      r.overlapped_id = timer.add(overlapped);
      if (o.measure_hooks) {
        chain.set_single_stream(true);
        r.hooks_id = timer.add(capture(stream, [&] { return Backend::overlapped(chain, stream); }));
        chain.set_single_stream(false);
      }
      results.push_back(r);
    }
    std::vector<double> const us = timer.run(stream, o, o.preheat_ms);
    auto time_of = [&](int id) { return id >= 0 ? us[size_t(id)] : (id == -1 ? -1.0 : 0.0); };
    bool const timing_timeout = chain.check_sync_error() == Status::kSyncTimeout;
    for (Result& r : results) {
      double const sequential_us = time_of(r.sequential_id >= 0 ? r.sequential_id : sequential_id);
      if (timing_timeout && !r.timed_out) std::snprintf(r.sync_error, sizeof(r.sync_error), "\"timeout during timing\"");
      double const overlapped_us = r.overlapped_id >= 0 ? time_of(r.overlapped_id) : 0.0;
      double const hooks_serial_us = r.hooks_id >= 0 ? time_of(r.hooks_id) : 0.0;
      bool const ok = !r.timed_out && r.bitwise && r.graph_ok && ref_err < kTolerance && measured.ok();
      if (r.timed_out || std::strcmp(r.sync_error, "null") != 0) exit_code = 4;
      else if (!ok && exit_code == 0) exit_code = 5;
      std::printf(
          "{\"chain\": \"%s\", \"gpu\": \"%s\", \"sms\": %d, \"m\": %d, \"policy\": \"%s\", \"order\": \"%s\", \"sequential_us\": %.2f, "
          "\"overlapped_us\": %.2f, \"speedup\": %.4f, \"overlaps\": %s, \"hooks_serial_us\": %.2f, \"bitwise_equal\": %s, \"graph_ok\": %s, "
          "\"ref_rel_err\": %.3e, \"sync_error\": %s, \"repeats\": %d",
          Project::kName, prop.name, prop.multiProcessorCount, m, r.policy.c_str(), r.order.c_str(), sequential_us, overlapped_us,
          overlapped_us > 0 ? sequential_us / overlapped_us : 0.0, chain.overlaps() ? "true" : "false", hooks_serial_us, r.bitwise ? "true" : "false",
          r.graph_ok ? "true" : "false", json_number(ref_err), r.sync_error, o.repeats);
      measured.print(m, time_of);
      std::printf("}\n");
      std::fflush(stdout);
    }
    return exit_code;
  }

  int main(int argc, char** argv) {
    o = parse(argc, argv);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "error: no CUDA device found\n");
      return 3;
    }
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    int const max_m = *std::max_element(o.ms.begin(), o.ms.end());
    allocate(max_m);
    BENCH_STATUS(chain.initialize(arguments(o.ms.front()), max_m));
    chain.set_sync_timeout_ns(uint64_t(o.timeout_ms * 1e6));
    chain.set_sequential_fallback(o.fallback);
    if (o.inject_missing_posts >= 0) BENCH_STATUS(Project::inject_missing_posts(chain, o.inject_missing_posts));
    BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    hooks.before(*this);
    int exit_code = 0;
    for (int m : o.ms) {
      exit_code = run_m(m, exit_code);
      if (exit_code == 4) break;
    }
    BENCH_CUDA(cudaStreamDestroy(stream));
    return exit_code;
  }
};

// The bench's main().
template <typename Project, typename Backend>
int run_chain_bench(int argc, char** argv) {
  ChainBench<Project, Backend> bench;
  return bench.main(argc, argv);
}

}  // namespace cusync::bench
