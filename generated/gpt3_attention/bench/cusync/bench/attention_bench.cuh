// cusync runtime, bench drivers only: the check-and-time driver of an attention project's bench. The
// project's bench/<name>_bench.cu names its chain, constants and test hooks (`P`); the rest is here.
//
// For each (batch, cache, new tokens) point: random inputs and cached KV rows (never zeros); the new
// KV rows and Y are poisoned with NaN before every run; run_sequential() is the baseline; run() must
// match it bitwise (same kernels, same accumulation order), also when replayed from a CUDA graph; every
// stage is compared with an fp32 reference computed from the inputs that stage read (relative L2 error).
// Times are medians of CUDA-event-timed graph replays, sequential and overlapped interleaved; "overlapped"
// is run() as the library runs it (back to back below kMinOverlapRows rows unless --no-fallback).
// Prints one JSON object per point. Exit codes: 0 ok, 2 bad arguments, 3 no CUDA device, 4 a spin-wait
// timed out, 5 a check failed, 1 any other error.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "attention_reference.cuh"
#include "cusync/bench/common.cuh"
#include "cusync/status.h"
#include "cusync/sync_error.h"
#include "reference.cuh"

// The chain's status, with the reason last_error() gives (`chain` is the bench's chain).
#define BENCH_STATUS(call)                                                                \
  do {                                                                                    \
    cusync::Status const st_ = (call);                                                    \
    if (st_ != cusync::Status::kSuccess) {                                                \
      std::fprintf(stderr, "error: %s returned %s (%s)\n", #call, cusync::to_string(st_), \
                   chain.last_error());                                                   \
      std::exit(st_ == cusync::Status::kSyncTimeout ? 4 : st_ == cusync::Status::kInvalidArgument ? 2 : 1); \
    }                                                                                     \
  } while (0)

namespace cusync::bench {

// `P`: the project's bench description (Chain, Arguments, Element, kName, kHidden, kHeads, kHeadDim,
// kWidth, kCausal, and the test hooks scores, probs, heads_out, inject_missing_posts).
template <typename P>
struct AttentionBench {
  using Chain = typename P::Chain;
  using Arguments = typename P::Arguments;
  using Element = typename P::Element;
  static constexpr int kHidden = P::kHidden;
  static constexpr int kHeads = P::kHeads;
  static constexpr int kHeadDim = P::kHeadDim;
  static constexpr int kWidth = P::kWidth;
  static constexpr double kTolerance = 1e-2;
  static constexpr int64_t kRow = 3 * int64_t(kWidth);  // one token's Q | K | V



  struct Options {
    std::vector<int> ms{512, 1024, 2048};  // new tokens per sequence
    std::vector<int> batches{1};
    std::vector<int> caches{0};
    int repeats = 50;
    int warmup = 10;
    uint32_t seed = 1;
    double timeout_ms = 2000.0;
    bool reference = true;
    bool fallback = true;
    int inject_missing_posts = -1;
  };

  Usage const kUsage{std::string("usage: ") + P::kName + "_bench [--m 512,1024,2048 (new tokens per sequence)] [--batch 1] [--cache 0]\n"
                 "       [--policies spec|row] [--repeats 50] [--warmup 10] [--seed 1] [--timeout-ms 2000] [--no-reference]\n"
                 "       [--no-fallback] [--inject-missing-posts STAGE]\n"
                 "  prompt: --m 512,1024,2048; generation: --m 1 --batch 1,2,4 --cache 511,1023,2047\n"
                 "  (cache + m must be a multiple of 8; batch > 1 needs m = 1)\n"};

  [[noreturn]] void usage(char const* why) const { kUsage.fail(why); }
  int parse_int(std::string const& text, long lowest, char const* what) const { return cusync::bench::parse_int(text, lowest, what, kUsage); }

  std::vector<int> parse_list(std::string const& text, long lowest, char const* what) const {
    std::vector<int> values;
    for (auto const& item : split(text)) values.push_back(parse_int(item, lowest, what));
    if (values.empty()) usage(what);
    return values;
  }

  Options parse(int argc, char** argv) const {
    Options o;
    for (int i = 1; i < argc; ++i) {
      std::string const arg = argv[i];
      auto value = [&]() -> std::string {
        if (i + 1 >= argc) usage((arg + " needs a value").c_str());
        return argv[++i];
      };
      if (arg == "--m") {
        o.ms = parse_list(value(), 1, "--m takes positive integers (new tokens per sequence), e.g. --m 512,1024");
      } else if (arg == "--batch") {
        o.batches = parse_list(value(), 1, "--batch takes positive integers, e.g. --batch 1,2,4");
      } else if (arg == "--cache") {
        o.caches = parse_list(value(), 0, "--cache takes non-negative integers, e.g. --cache 511,1023");
      } else if (arg == "--policies") {
        for (auto const& p : split(value()))
          if (p != "spec" && p != "row") usage("--policies: the attention chain's edges are fixed (spec, i.e. row)");
      } else if (arg == "--repeats") {
        o.repeats = parse_int(value(), 1, "--repeats takes a positive integer");
      } else if (arg == "--warmup") {
        o.warmup = parse_int(value(), 1, "--warmup takes a positive integer");
      } else if (arg == "--seed") {
        o.seed = uint32_t(parse_int(value(), 1, "--seed takes a positive integer"));
      } else if (arg == "--timeout-ms") {
        o.timeout_ms = parse_int(value(), 1, "--timeout-ms takes a positive integer");
      } else if (arg == "--no-reference") {
        o.reference = false;
      } else if (arg == "--no-fallback") {
        o.fallback = false;
      } else if (arg == "--inject-missing-posts") {
        o.inject_missing_posts = parse_int(value(), 0, "--inject-missing-posts takes a stage index (0-3)");
      } else {
        usage(("unknown option " + arg).c_str());
      }
    }
    return o;
  }



  struct Point {
    int batch, s, cache;
    int rows() const { return batch * s; }
    int keys() const { return cache + s; }
  };

  struct Buffers {
    Element* x = nullptr;
    Element* w_qkv = nullptr;
    Element* w_o = nullptr;
    Element* kv = nullptr;
    Element* y = nullptr;
    float* reference = nullptr;
    double* sums = nullptr;
  };

  static Arguments arguments(Buffers const& b, Point p) {
    Arguments a;
    a.batch = p.batch;
    a.new_tokens = p.s;
    a.cache_tokens = p.cache;
    a.kv_capacity = p.keys();
    a.x = b.x;
    a.w_qkv = b.w_qkv;
    a.w_o = b.w_o;
    a.kv = b.kv;
    a.y = b.y;
    return a;
  }

  static size_t kv_bytes(Point p) { return size_t(p.batch) * p.keys() * kRow * sizeof(Element); }
  static size_t y_bytes(Point p) { return size_t(p.rows()) * kHidden * sizeof(Element); }

  // NaN into what a run writes (the new tokens' KV rows and Y), on the bench's stream.
  static void poison(Buffers const& b, Point p, cudaStream_t stream) {
    size_t const row_bytes = size_t(kRow) * sizeof(Element);
    BENCH_CUDA(cudaMemset2DAsync(b.kv + int64_t(p.cache) * kRow, p.keys() * row_bytes, 0xFF, p.s * row_bytes, p.batch, stream));
    BENCH_CUDA(cudaMemsetAsync(b.y, 0xFF, y_bytes(p), stream));
  }

  static double error_of(Element const* out, int64_t ld_out, float const* ref, int64_t ld_ref, int rows, int cols, double* sums,
                  int last_col_offset = -1) {
    BENCH_CUDA(cudaMemset(sums, 0, 3 * sizeof(double)));
    ::bench::strided_error_kernel<Element><<<264, 256>>>(out, ld_out, ref, ld_ref, rows, cols, last_col_offset, sums);
    double host[3] = {0, 0, 0};
    BENCH_CUDA(cudaMemcpy(host, sums, sizeof(host), cudaMemcpyDeviceToHost));
    if (host[2] > 0) return INFINITY;
    return host[1] > 0 ? std::sqrt(host[0] / host[1]) : std::sqrt(host[0]);
  }

  // Worst relative error over the five stages, each recomputed from the inputs it read.
  static double reference_error(Chain const& chain, Buffers const& b, Point p, std::vector<double>& per_stage) {
    int const keys = p.keys();
    float* ref = b.reference;
    per_stage.assign(5, 0.0);
    // qkv: Y rows of sequence i are KV rows [cache, cache + s) of that sequence.
    ::bench::strided_gemm<Element>(b.x, kHidden, b.w_qkv, kRow, false, ref, kRow, p.rows(), int(kRow), kHidden, 1.0f);
    for (int seq = 0; seq < p.batch; ++seq) {
      per_stage[0] = std::max(per_stage[0], error_of(b.kv + (int64_t(seq) * keys + p.cache) * kRow, kRow,
                                                     ref + int64_t(seq) * p.s * kRow, kRow, p.s, int(kRow), b.sums));
    }
    float const scale = 1.0f / std::sqrt(float(kHeadDim));
    for (int z = 0; z < p.batch * kHeads; ++z) {
      int64_t const seq = z / kHeads, h = z % kHeads;
      Element const* kv = b.kv + seq * keys * kRow;
      int64_t const zs = int64_t(z) * p.s * keys;
      ::bench::strided_gemm<Element>(kv + p.cache * kRow + h * kHeadDim, kRow, kv + kWidth + h * kHeadDim, kRow, true,
                                   ref, keys, p.s, keys, kHeadDim, scale);
      // Causal: scores tiles that softmax never reads are skipped, so only the visible keys are compared.
      per_stage[1] = std::max(per_stage[1], error_of(P::scores(chain) + zs, keys, ref, keys, p.s, keys, b.sums,
                                                     P::kCausal ? p.cache : -1));
      ::bench::softmax_kernel<Element><<<unsigned((p.s + 127) / 128), 128>>>(P::scores(chain) + zs, ref, p.s, keys, p.cache,
                                                                         P::kCausal);
      per_stage[2] = std::max(per_stage[2], error_of(P::probs(chain) + zs, keys, ref, keys, p.s, keys, b.sums));
      ::bench::strided_gemm<Element>(P::probs(chain) + zs, keys, kv + 2 * kWidth + h * kHeadDim, kRow, false, ref, kHeadDim,
                                   p.s, kHeadDim, keys, 1.0f);
      per_stage[3] = std::max(per_stage[3], error_of(P::heads_out(chain) + seq * p.s * kWidth + h * kHeadDim, kWidth, ref,
                                                     kHeadDim, p.s, kHeadDim, b.sums));
    }
    ::bench::strided_gemm<Element>(P::heads_out(chain), kWidth, b.w_o, kHidden, false, ref, kHidden, p.rows(), kHidden, kWidth, 1.0f);
    per_stage[4] = error_of(b.y, kHidden, ref, kHidden, p.rows(), kHidden, b.sums);
    BENCH_CUDA(cudaGetLastError());
    return *std::max_element(per_stage.begin(), per_stage.end());
  }

  template <typename Launch>
  static cudaGraphExec_t capture(cudaStream_t stream, Launch&& launch) {
    cudaGraph_t graph;
    BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    if (launch() != cusync::Status::kSuccess) {
      std::fprintf(stderr, "error: launch failed during capture\n");
      std::exit(1);
    }
    BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    BENCH_CUDA(cudaGraphDestroy(graph));
    return exec;
  }


  static bool outputs_equal(Buffers const& b, Point p, std::vector<unsigned char> const& kv, std::vector<unsigned char> const& y) {
    return ::bench::bitwise_equal(b.kv, kv) && ::bench::bitwise_equal(b.y, y);
  }

  int main(int argc, char** argv) {
    Options const o = parse(argc, argv);
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
      std::fprintf(stderr, "error: no CUDA device found\n");
      return 3;
    }
    cudaDeviceProp prop;
    BENCH_CUDA(cudaGetDeviceProperties(&prop, 0));
    std::vector<Point> points;
    for (int batch : o.batches)
      for (int cache : o.caches)
        for (int s : o.ms) points.push_back(Point{batch, s, cache});
    int max_rows = 0, max_keys = 0;
    size_t max_kv = 0;
    for (Point p : points) {
      max_rows = std::max(max_rows, p.rows());
      max_keys = std::max(max_keys, p.keys());
      max_kv = std::max(max_kv, kv_bytes(p));
    }

    Buffers b;
    BENCH_CUDA(cudaMalloc(&b.x, size_t(max_rows) * kHidden * sizeof(Element)));
    BENCH_CUDA(cudaMalloc(&b.w_qkv, size_t(kHidden) * kRow * sizeof(Element)));
    BENCH_CUDA(cudaMalloc(&b.w_o, size_t(kWidth) * kHidden * sizeof(Element)));
    BENCH_CUDA(cudaMalloc(&b.kv, max_kv));
    BENCH_CUDA(cudaMalloc(&b.y, size_t(max_rows) * kHidden * sizeof(Element)));
    size_t const ref_floats = std::max({size_t(max_rows) * kRow, size_t(max_rows) * kHidden, size_t(max_rows) * max_keys});
    BENCH_CUDA(cudaMalloc(&b.reference, ref_floats * sizeof(float)));
    BENCH_CUDA(cudaMalloc(&b.sums, 3 * sizeof(double)));
    // Uniform(-a, a) with variance 1/k keeps every stage's outputs O(1); cached KV rows like new ones.
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(b.x, int64_t(max_rows) * kHidden, o.seed, 1.0f);
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(b.w_qkv, int64_t(kHidden) * kRow, o.seed * 131u + 1u, float(std::sqrt(3.0 / kHidden)));
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(b.w_o, int64_t(kWidth) * kHidden, o.seed * 131u + 2u, float(std::sqrt(3.0 / kWidth)));
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(b.kv, int64_t(max_kv / sizeof(Element)), o.seed * 131u + 3u, 1.0f);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaDeviceSynchronize());

    Chain chain;
    BENCH_STATUS(chain.initialize(arguments(b, points.front()), max_rows, max_keys));
    chain.set_sync_timeout_ns(uint64_t(o.timeout_ms * 1e6));
    chain.set_sequential_fallback(o.fallback);
    if (o.inject_missing_posts >= 0) BENCH_STATUS(P::inject_missing_posts(chain, o.inject_missing_posts));
    cudaStream_t stream;
    BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

    int exit_code = 0;
    for (Point p : points) {
      BENCH_STATUS(chain.update(arguments(b, p)));
      poison(b, p, stream);
      BENCH_STATUS(chain.run_sequential(stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      std::vector<unsigned char> const kv = ::bench::to_host(b.kv, kv_bytes(p));
      std::vector<unsigned char> const y = ::bench::to_host(b.y, y_bytes(p));
      std::vector<double> stage_err;
      double const ref_err = o.reference ? reference_error(chain, b, p, stage_err) : 0.0;

      poison(b, p, stream);
      BENCH_STATUS(chain.run(stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      cusync::SyncErrorInfo info{};
      cusync::Status const sync = chain.check_sync_error(&info);
      bool const bitwise = sync == cusync::Status::kSuccess && outputs_equal(b, p, kv, y);
      std::string sync_error;
      if (sync == cusync::Status::kSyncTimeout) {
        char text[256];
        std::snprintf(text, sizeof(text), "stage %s waited on %s tile (%d, %d) (semaphore %d) for more than %.0f ms",
                      Chain::stage_name(info.stage), Chain::stage_name(info.producer),
                      info.producer_tile_m, info.producer_tile_n, info.semaphore, o.timeout_ms);
        sync_error = text;
      }
      cudaGraphExec_t const sequential = capture(stream, [&] { return chain.run_sequential(stream); });
      cudaGraphExec_t const overlapped = capture(stream, [&] { return chain.run(stream); });
      bool graph_ok = sync_error.empty();
      if (graph_ok) {  // a replayed graph (epochs move on, the semaphores are never reset) gives the same bits
        poison(b, p, stream);
        BENCH_CUDA(cudaGraphLaunch(overlapped, stream));
        BENCH_CUDA(cudaStreamSynchronize(stream));
        graph_ok = chain.check_sync_error() == cusync::Status::kSuccess && outputs_equal(b, p, kv, y);
      }
      // Each stage alone too (synchronization off), to see where the time goes.
      Interleaved timer;
      timer.add(sequential);
      timer.add(overlapped);
      for (int s = 0; s < Chain::kNumStages; ++s)
        timer.add(capture(stream, [&] { return chain.run_stage(s, stream); }));
      std::vector<double> us(2 + Chain::kNumStages, 0.0);
      if (sync_error.empty()) us = timer.run(stream, o);
      bool const ref_ok = ref_err <= kTolerance;
      std::printf("{\"chain\": \"%s\", \"gpu\": \"%s\", \"m\": %d, \"batch\": %d, \"new_tokens\": %d, "
                  "\"cache_tokens\": %d, \"keys\": %d, \"policy\": \"row\", \"overlaps\": %s, \"sequential_us\": %.2f, \"overlapped_us\": %.2f, "
                  "\"speedup\": %.4f, \"bitwise_equal\": %s, \"graph_ok\": %s, \"ref_rel_err\": %.3e, \"ref_ok\": %s",
                  P::kName, prop.name, p.rows(), p.batch, p.s, p.cache, p.keys(), chain.overlaps() ? "true" : "false", us[0], us[1], us[1] > 0 ? us[0] / us[1] : 0.0,
                  bitwise ? "true" : "false", graph_ok ? "true" : "false", ref_err, ref_ok ? "true" : "false");
      if (o.reference) {
        std::printf(", \"stage_errors\": [%.2e, %.2e, %.2e, %.2e, %.2e]", stage_err[0], stage_err[1], stage_err[2],
                    stage_err[3], stage_err[4]);
      }
      std::printf(", \"stage_us\": [%.2f, %.2f, %.2f, %.2f, %.2f]", us[2], us[3], us[4], us[5], us[6]);
      if (!sync_error.empty()) std::printf(", \"sync_error\": \"%s\"", sync_error.c_str());
      std::printf("}\n");
      std::fflush(stdout);
      if (!sync_error.empty()) {
        std::fprintf(stderr, "error: sync timeout: %s\n", sync_error.c_str());
        return 4;
      }
      if (!bitwise || !graph_ok || !ref_ok) exit_code = 5;
    }
    return exit_code;
  }
};

}  // namespace cusync::bench
