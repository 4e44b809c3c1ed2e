// cusync conv bench driver (not part of the library): one project's bench is this driver over its chain
// (bench/<name>_bench.cu names the chain in a Traits struct; see run() at the end).
//
// It runs the conv chain back to back and tile-synced at each --batch, checks that both give bitwise the
// same outputs and that each stage is within tolerance of a direct reference convolution, then times back to
// back, the overlap (and, on a device with programmatic dependent launch, the two-stream overlap and back to
// back chained with PDL too), run() after autotune() and each stage alone, as CUDA graphs, round robin,
// median of --repeats.
// --missing-post STAGE: that stage does not post; the run must end in a sync timeout that names the tile.
// --profile-hooks: instead, each stage alone with the overlap's per-tile work taken out part by part (the waits
// satisfied at their first poll), to price each part; PROFILE lines. Its posts leave the semaphores counted up
// for the rest of the process, so it times nothing else.
//
// Traits: Element (__half or __nv_bfloat16), Chain (the project's class), kName, kMaxBatch, kNumStages,
// kStages (the project's stage table), kRelu[kNumStages] (each stage's epilogue), kAtol and kRtol (the
// reference check: |ours - reference| <= atol + rtol * |reference|).
#pragma once

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "cusync/bench/common.cuh"
#include "cusync/conv/chain.h"
#include "conv_reference.cuh"

namespace cusync::conv::bench {

struct Options {
  std::vector<int> batches;
  int repeats = 50;
  int warmup = 10;
  double preheat_s = 0.0;
  std::string missing_post;
  bool check_only = false;
  bool always_wait = false;
  bool two_streams = false;
  bool block_order = false;
  bool profile_hooks = false;
  bool plain_kernels = false;
  bool no_clusters = false;
  int hooks = -1;  // -1: the library's default
  std::string trace;  // append a tile trace of one run of each mode at each batch to this file (JSON lines)
};

// The batches run when --batch is not given: 1, 8 and the largest (fewer where the chain takes fewer).
inline std::string default_batches(int max_batch) {
  int const mid = max_batch < 8 ? max_batch : 8;
  return "1," + std::to_string(mid) + "," + std::to_string(max_batch);
}

template <class Traits>
Options parse(int argc, char** argv) {
  std::string const name = Traits::kName, max_batch = std::to_string(Traits::kMaxBatch);
  cusync::bench::Usage const usage{
      "usage: " + name + "_bench [--batch N,N,...] [--repeats R] [--warmup W] [--preheat S] [--check-only] [--always-wait] [--two-streams] [--block-order] [--hooks BITS] [--plain-kernels] [--no-clusters] [--profile-hooks] [--missing-post STAGE] [--trace FILE.jsonl]\n"
      "  --batch         images per run, 1 .. " + max_batch + " (default " + default_batches(Traits::kMaxBatch) + ")\n"
      "  --repeats       timed runs of each variant, round robin (median; default 50)\n"
      "  --warmup        untimed runs first (default 10)\n"
      "  --preheat       at least this many seconds of untimed runs per variant first (default 0)\n"
      "  --check-only    check, do not time\n"
      "  --always-wait   launch the wait kernels even where every stage's blocks fit on the GPU at once\n"
      "  --two-streams   overlap on two streams with the wait kernels even where programmatic launch exists\n"
      "  --block-order   the overlap's blocks take tiles in block order, not from the atomic ticket\n"
      "  --hooks         the overlap's per-tile hooks (ConvHooks bits: 0 as first built, 111 the lean default)\n"
      "  --plain-kernels never the kernels bounded for more blocks per SM\n"
      "  --no-clusters   the overlap without its cluster kernels (the kernels the other modes run)\n"
      "  --profile-hooks time each stage alone with the overlap's per-tile work taken out part by part\n"
      "  --missing-post  a stage that does not post: expect a sync timeout naming the waiting tile\n"
      "  --trace         after the checks, one traced run of each mode at each batch: a JSON line per tile appended\n"
      "                  to this file (its block's SM, when it took and stored the tile; cusync-gen trace draws it)\n"};
  Options o;
  std::string batches = default_batches(Traits::kMaxBatch);
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage.fail(("missing value of " + arg).c_str());
      return argv[++i];
    };
    if (arg == "--batch") batches = value();
    else if (arg == "--repeats") o.repeats = cusync::bench::parse_int(value(), 1, "--repeats: an integer >= 1", usage);
    else if (arg == "--warmup") o.warmup = cusync::bench::parse_int(value(), 0, "--warmup: an integer >= 0", usage);
    else if (arg == "--missing-post") o.missing_post = value();
    else if (arg == "--preheat") o.preheat_s = std::atof(value().c_str());
    else if (arg == "--check-only") o.check_only = true;
    else if (arg == "--always-wait") o.always_wait = true;
    else if (arg == "--two-streams") o.two_streams = true;
    else if (arg == "--block-order") o.block_order = true;
    else if (arg == "--hooks") o.hooks = cusync::bench::parse_int(value(), 0, "--hooks: an integer >= 0", usage);
    else if (arg == "--plain-kernels") o.plain_kernels = true;
    else if (arg == "--no-clusters") o.no_clusters = true;
    else if (arg == "--profile-hooks") o.profile_hooks = true;
    else if (arg == "--trace") o.trace = value();
    else usage.fail(("unknown option " + arg).c_str());
  }
  for (std::string const& b : cusync::bench::split(batches)) {
    int const v = cusync::bench::parse_int(b, 1, ("--batch: integers 1 .. " + max_batch).c_str(), usage);
    if (v > Traits::kMaxBatch) usage.fail(("--batch: at most " + max_batch + " (the spec's n)").c_str());
    o.batches.push_back(v);
  }
  if (o.batches.empty()) usage.fail("--batch: give at least one batch");
  return o;
}

template <class Traits>
int64_t in_elements(int batch) {
  cusync::conv::ConvStageInfo const& first = Traits::kStages[0];  // reads the chain input
  return int64_t(batch) * first.h * first.w * first.c;
}
template <class Traits>
int64_t out_elements(int s, int batch) {
  cusync::conv::ConvStageInfo const& i = Traits::kStages[s];
  return int64_t(batch) * i.p * i.q * i.k;
}

inline void check_status(cusync::Status status, char const* what, cusync::conv::ConvChain const& chain) {
  if (status != cusync::Status::kSuccess) {
    std::fprintf(stderr, "error: %s: %s (%s)\n", what, cusync::to_string(status), chain.last_error());
    std::exit(1);
  }
}

inline std::vector<uint16_t> download(void const* p, int64_t count) {
  std::vector<uint16_t> host(static_cast<size_t>(count));
  BENCH_CUDA(cudaMemcpy(host.data(), p, size_t(count) * 2, cudaMemcpyDeviceToHost));
  return host;
}

// An output element's bits as a float.
template <class Element>
float as_float(uint16_t bits) {
  if constexpr (std::is_same_v<Element, __half>) {
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
  } else {
    static_assert(std::is_same_v<Element, __nv_bfloat16>, "a conv chain is fp16 or bf16");
    uint32_t const wide = uint32_t(bits) << 16;
    float f;
    std::memcpy(&f, &wide, 4);
    return f;
  }
}

// One traced run of `mode` (launched by `body`) at `batch`: a JSON line per tile appended to `path`, in the tile
// trace format of the GEMM chains' bench (cusync_gen/trace.py reads it; "m" is the batch there, "size" says so;
// "ready_us" is when the tile's waits ended and its loads could begin),
// times in us from the run's first tile. The run is the last of kTraceReplays replays of a CUDA graph of the mode,
// as the bench times it (a run launched from the host would show the host's launch gaps instead).
template <class Body>
void write_trace(cusync::conv::ConvChain& c, std::string const& path, char const* chain_name,
                 cusync::conv::ConvStageInfo const* stages, int batch, char const* mode, cudaStream_t stream, Body&& body) {
  constexpr int kWords = cusync::conv::ConvChain::kTraceWordsPerTile;
  int64_t const words = c.trace_words(batch);
  uint64_t* trace = nullptr;
  BENCH_CUDA(cudaMalloc(&trace, size_t(words) * sizeof(uint64_t)));
  BENCH_CUDA(cudaMemsetAsync(trace, 0, size_t(words) * sizeof(uint64_t), stream));
  check_status(c.set_trace(trace, words), "set_trace", c);
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  check_status(body(), mode, c);
  BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
  BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
  BENCH_CUDA(cudaGraphDestroy(graph));
  constexpr int kTraceReplays = 5;  // every replay rewrites each tile's words: the trace holds the last
  for (int r = 0; r < kTraceReplays; ++r) BENCH_CUDA(cudaGraphLaunch(exec, stream));
  BENCH_CUDA(cudaStreamSynchronize(stream));
  BENCH_CUDA(cudaGraphExecDestroy(exec));
  check_status(c.set_trace(nullptr), "set_trace", c);
  cusync::SyncErrorInfo info{};
  if (c.sync_error(&info, stream) != cusync::Status::kSuccess) {
    std::printf("batch %d: sync timeout in the traced %s run: %s\n", batch, mode, c.describe(info).c_str());
    std::exit(1);
  }
  std::vector<uint64_t> host(static_cast<size_t>(words));
  BENCH_CUDA(cudaMemcpy(host.data(), trace, size_t(words) * sizeof(uint64_t), cudaMemcpyDeviceToHost));
  BENCH_CUDA(cudaFree(trace));
  uint64_t const t0 = cusync::bench::trace_origin<kWords>(host);
  FILE* f = std::fopen(path.c_str(), "a");
  if (f == nullptr) {
    std::fprintf(stderr, "error: --trace: cannot write %s\n", path.c_str());
    std::exit(2);
  }
  for (int s = 0; s < c.num_stages(); ++s) {
    std::string const head = std::string("\"chain\": \"") + chain_name + "\", \"m\": " + std::to_string(batch) +
                             ", \"size\": \"batch\", \"mode\": \"" + mode + "\", \"stage\": \"" + stages[s].name + "\"";
    cusync::bench::write_tile_lines<kWords>(f, head, host, c.trace_offset(s, batch) / kWords,
                                            c.trace_offset(s + 1, batch) / kWords, t0);
  }
  std::fclose(f);
}

// The bench's main(): exit status 0 when every check passed, 5 when one failed, 1 on a CUDA or sync error,
// 2 on a bad argument.
template <class Traits>
int run(int argc, char** argv) {
  using Element = typename Traits::Element;
  constexpr int kNumStages = Traits::kNumStages;
  cusync::conv::ConvStageInfo const* const kStages = Traits::kStages;
  Options const o = parse<Traits>(argc, argv);
  int max_batch = 1;
  for (int b : o.batches) max_batch = b > max_batch ? b : max_batch;
  cudaStream_t stream;
  BENCH_CUDA(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));

  // Tensors: the input, each stage's filter and bias, and two sets of outputs (back to back, tile-synced).
  std::vector<void*> buffers;
  auto alloc = [&](int64_t elements) {
    void* p = nullptr;
    BENCH_CUDA(cudaMalloc(&p, size_t(elements > 0 ? elements : 1) * sizeof(Element)));
    buffers.push_back(p);
    return p;
  };
  auto fill = [&](void* p, int64_t count, uint32_t seed, float scale) {
    cusync::bench::fill_uniform<Element><<<1024, 256, 0, stream>>>(static_cast<Element*>(p), count, seed, scale);
    BENCH_CUDA(cudaGetLastError());
  };
  void* input = alloc(in_elements<Traits>(max_batch));
  fill(input, in_elements<Traits>(max_batch), 1, 1.0f);
  void* filter[kNumStages];
  void* bias[kNumStages];
  void* out_seq[kNumStages];
  void* out_sync[kNumStages];
  for (int s = 0; s < kNumStages; ++s) {
    cusync::conv::ConvStageInfo const& i = kStages[s];
    int64_t const taps = int64_t(i.r) * i.s * i.c;
    filter[s] = alloc(int64_t(i.k) * taps);
    fill(filter[s], int64_t(i.k) * taps, 100 + s, std::sqrt(3.0f / float(taps)));  // unit variance out
    bias[s] = alloc(i.k);
    fill(bias[s], i.k, 200 + s, 0.1f);
    out_seq[s] = alloc(out_elements<Traits>(s, max_batch));
    out_sync[s] = alloc(out_elements<Traits>(s, max_batch));
  }
  auto arguments = [&](int batch, void* const* outs) {
    cusync::conv::ConvArguments a;
    a.batch = batch;
    a.input = input;
    for (int s = 0; s < kNumStages; ++s) {
      a.filter[s] = filter[s];
      a.bias[s] = kStages[s].bias ? bias[s] : nullptr;
      a.output[s] = outs[s];
    }
    return a;
  };

  typename Traits::Chain chain;
  cusync::conv::ConvChain& c = chain.chain();
  check_status(chain.initialize(max_batch, stream), "initialize", c);
  c.set_always_wait_kernel(o.always_wait);
  c.set_two_streams(o.two_streams);
  c.set_ticket_order(!o.block_order);
  if (o.hooks >= 0) c.set_overlap_hooks(unsigned(o.hooks));
  c.set_bounded_kernels(!o.plain_kernels);
  c.set_cluster_kernels(!o.no_clusters);
  unsigned const hooks = c.overlap_hooks();
  std::printf("kernels: overlap hooks %u;", hooks);
  for (int s = 0; s < kNumStages; ++s) {
    std::printf(" %s: plain kernel %d blocks/SM, bounded %d, bounded at batch", kStages[s].name, c.blocks_per_sm_plain(s),
                c.blocks_per_sm_bounded(s));
    for (int b : o.batches) std::printf(" %d %s", b, c.bounded(s, b) ? "yes" : "no");
    std::printf(", persistent at batch");
    for (int b : o.batches) std::printf(" %d %s", b, c.persistent(s, b) ? "yes" : "no");
    std::printf(", one-stream overlap cluster at batch");  // tickets (two streams) keep single CTAs
    for (int b : o.batches) std::printf(" %d 1x%d", b, c.overlap_cluster(s, b) ? c.at(b).stages[s].cluster_n : 1);
    std::printf(";");
  }
  for (int b : o.batches) {  // the tile configuration of each batch (0: the stages' own tiles; tile_configs)
    std::printf(" tiles at batch %d:", b);
    for (int s = 0; s < kNumStages; ++s) std::printf(" %dx%d", c.at(b).stages[s].tile_m, c.at(b).stages[s].tile_n);
    std::printf(" (configuration %d);", c.config(b));
  }
  std::printf("\n");
  char const* const launch_style = c.programmatic() ? "one stream, programmatic launch" : "two streams";

  if (!o.missing_post.empty()) {
    int stage = -1;
    for (int s = 0; s < kNumStages; ++s) {
      if (o.missing_post == kStages[s].name) stage = s;
    }
    if (stage < 0 || stage == kNumStages - 1) {
      std::fprintf(stderr, "error: --missing-post: %s is not a stage whose output another stage reads\n", o.missing_post.c_str());
      return 2;
    }
    c.set_sync_timeout_ns(100000000ull);  // 100 ms
    c.inject_missing_posts(stage);
    cusync::conv::ConvArguments const a = arguments(o.batches[0], out_sync);
    check_status(c.run_overlapped(a, stream), "run_overlapped", c);
    BENCH_CUDA(cudaStreamSynchronize(stream));
    cusync::SyncErrorInfo info{};
    cusync::Status const status = c.sync_error(&info, stream);
    if (status == cusync::Status::kSyncTimeout && info.tile_m >= 0) {
      std::printf("missing post of %s (%s): %s\n", o.missing_post.c_str(), launch_style, c.describe(info).c_str());
      std::printf("missing-post check: PASS (the run timed out and named the tile)\n");
      return 0;
    }
    std::printf("missing-post check: FAIL (%s)\n", status == cusync::Status::kSyncTimeout ? c.describe(info).c_str() : "no timeout");
    return 1;
  }

  if (o.profile_hooks) {
    // Each stage alone as a graph of its own, round robin: plain (no sync), and synchronized with its waits
    // satisfied at the first poll: legacy hooks; - ticket; - waits; - post; the lean hooks, then - waits; - post;
    // - a sink's finish count (what is left is the synced kernel's own cost); the plain kernel. Each graph launches
    // its variant kLaunches times back to back and counts the median over them: one launch a graph priced identical
    // launches 2-3 us apart by what ran before them (plain and plain_unbounded, the same kernel at resnet_block_sm90
    // batch 32).
    constexpr int kLaunches = 8;
    // The ticket's tiles count from the run's start (started_base, reset when a sink closes the run): only the
    // legacy variant takes tickets, right after the previous round's sink variants closed the run.
    struct Variant { char const* name; bool synced; unsigned hooks; unsigned drop; bool bounded; };
    Variant const variants[] = {
        {"plain", false, 0u, 0u, true},          {"synced_legacy", true, cusync::conv::kHooksLegacy, 0u, true},
        {"no_ticket", true, 0u, 1u, true},       {"no_ticket_no_wait", true, 0u, 3u, true},
        {"no_ticket_no_wait_no_post", true, 0u, 7u, true},
        {"synced_lean", true, cusync::conv::kHooksLean, 1u, true},
        {"lean_no_wait", true, cusync::conv::kHooksLean, 3u, true},
        {"lean_no_wait_no_post", true, cusync::conv::kHooksLean, 7u, true},
        {"lean_bare", true, cusync::conv::kHooksLean, 15u, true},
        {"lean_poll_inline", true, cusync::conv::kHooksLean & ~unsigned(cusync::conv::kHookPollAhead), 1u, true},
        {"lean_finish_in_epilogue", true, cusync::conv::kHooksLean & ~unsigned(cusync::conv::kHookEarlyFinish), 1u, true},
        {"lean_finish_per_tile", true,
         cusync::conv::kHooksLean & ~unsigned(cusync::conv::kHookFinishOnce | cusync::conv::kHookEarlyFinish), 1u, true},
        {"plain_unbounded", false, 0u, 0u, false}, {"no_ticket_unbounded", true, 0u, 1u, false}};
    for (int batch : o.batches) {
      cusync::conv::ConvArguments const seq = arguments(batch, out_seq);
      check_status(c.run_sequential(seq, stream), "run_sequential", c);  // every stage's input written once
      cusync::bench::Interleaved timer;
      for (int s = 0; s < kNumStages; ++s) {
        for (Variant const& v : variants) {
          cudaGraph_t graph;
          cudaGraphExec_t exec;
          c.set_bounded_kernels(v.bounded);
          BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
          for (int i = 0; i < kLaunches; ++i) {
            check_status(v.synced ? c.profile_stage(s, seq, v.hooks, v.drop, stream) : c.run_stage(s, seq, stream),
                         "profile_stage", c);
          }
          BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
          BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
          BENCH_CUDA(cudaGraphDestroy(graph));
          timer.add(exec);
        }
      }
      c.set_bounded_kernels(!o.plain_kernels);
      std::vector<double> const us = timer.run(stream, o);
      size_t const n = sizeof(variants) / sizeof(variants[0]);
      for (int s = 0; s < kNumStages; ++s) {
        std::printf("PROFILE {\"chain\": \"%s\", \"batch\": %d, \"stage\": \"%s\", \"tiles\": %d, \"launches\": %d",
                    Traits::kName, batch, kStages[s].name, c.tiles_m(s, batch) * c.tiles_n(s, batch), kLaunches);
        for (size_t v = 0; v < n; ++v) std::printf(", \"%s\": %.3f", variants[v].name, us[size_t(s) * n + v] / kLaunches);
        std::printf("}\n");
      }
    }
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (void* p : buffers) BENCH_CUDA(cudaFree(p));
    return 0;
  }

  bool all_ok = true;
  bool tuned = false;
  std::vector<std::string> rule;  // run()'s choice at each batch before autotune (the one-wave rule)
  for (int batch : o.batches) rule.push_back(std::string(cusync::conv::to_string(c.mode(batch))) + ": " + c.mode_reason(batch));
  for (size_t bi = 0; bi < o.batches.size(); ++bi) {
    int const batch = o.batches[bi];
    cusync::conv::ConvArguments const seq = arguments(batch, out_seq);
    cusync::conv::ConvArguments const syn = arguments(batch, out_sync);
    for (int s = 0; s < kNumStages; ++s) {  // different garbage in each, so that a tile never written cannot match
      BENCH_CUDA(cudaMemsetAsync(out_seq[s], 0x11, size_t(out_elements<Traits>(s, batch)) * 2, stream));
      BENCH_CUDA(cudaMemsetAsync(out_sync[s], 0x7f, size_t(out_elements<Traits>(s, batch)) * 2, stream));
    }
    check_status(c.run_sequential(seq, stream), "run_sequential", c);
    check_status(c.run_overlapped(syn, stream), "run_overlapped", c);
    BENCH_CUDA(cudaStreamSynchronize(stream));
    cusync::SyncErrorInfo info{};
    if (c.sync_error(&info, stream) != cusync::Status::kSuccess) {
      std::printf("batch %d: sync timeout: %s\n", batch, c.describe(info).c_str());
      return 1;
    }
    bool bitwise = true;
    double worst = 0.0;
    float* ref = nullptr;
    int64_t largest = 1;
    for (int s = 0; s < kNumStages; ++s) largest = out_elements<Traits>(s, batch) > largest ? out_elements<Traits>(s, batch) : largest;
    BENCH_CUDA(cudaMalloc(&ref, size_t(largest) * sizeof(float)));
    for (int s = 0; s < kNumStages; ++s) {
      int64_t const count = out_elements<Traits>(s, batch);
      std::vector<uint16_t> const a = download(out_seq[s], count);
      std::vector<uint16_t> const b = download(out_sync[s], count);
      if (std::memcmp(a.data(), b.data(), size_t(count) * 2) != 0) bitwise = false;
      // This stage's reference from the very inputs it read (the tile-synced run's tensors).
      cusync::conv::ConvStageInfo const& i = kStages[s];
      cusync::bench::ConvShape const shape{batch, i.h, i.w, i.c, i.k, i.r, i.s, i.p, i.q, i.pad, i.stride, i.dilation, Traits::kRelu[s]};
      Element const* x = static_cast<Element const*>(i.producer < 0 ? input : out_sync[i.producer]);
      Element const* residual = i.residual == cusync::conv::kNoResidual ? nullptr
                              : static_cast<Element const*>(i.residual < 0 ? input : out_sync[i.residual]);
      cusync::bench::reference_conv<Element><<<2048, 256, 0, stream>>>(
          shape, x, static_cast<Element const*>(filter[s]), i.bias ? static_cast<Element const*>(bias[s]) : nullptr, residual, ref);
      BENCH_CUDA(cudaGetLastError());
      std::vector<float> r(static_cast<size_t>(count));
      BENCH_CUDA(cudaMemcpyAsync(r.data(), ref, size_t(count) * sizeof(float), cudaMemcpyDeviceToHost, stream));
      BENCH_CUDA(cudaStreamSynchronize(stream));
      double err = 0.0, excess = 0.0;
      for (int64_t e = 0; e < count; ++e) {
        double const d = std::fabs(double(as_float<Element>(b[size_t(e)])) - double(r[size_t(e)]));
        err = d > err || std::isnan(d) ? d : err;
        double const over = d - (Traits::kAtol + Traits::kRtol * std::fabs(double(r[size_t(e)])));
        excess = over > excess || std::isnan(over) ? over : excess;
      }
      if (excess > 0.0 || std::isnan(err)) {
        std::printf("batch %d: %s differs from the reference conv: max |error| %.3g (tolerance %.2g + %.2g |ref|)\n",
                    batch, i.name, err, Traits::kAtol, Traits::kRtol);
        all_ok = false;
      }
      worst = err > worst ? err : worst;
    }
    BENCH_CUDA(cudaFree(ref));
    if (!bitwise) {
      std::printf("batch %d: the tile-synced outputs differ from the back-to-back ones\n", batch);
      all_ok = false;
    }
    // Back to back chained with programmatic dependent launch (where the device has it): bitwise too.
    bool chained_bitwise = true;
    for (int s = 0; s < kNumStages; ++s) BENCH_CUDA(cudaMemsetAsync(out_sync[s], 0x7f, size_t(out_elements<Traits>(s, batch)) * 2, stream));
    check_status(c.run_chained(syn, stream), "run_chained", c);
    BENCH_CUDA(cudaStreamSynchronize(stream));
    for (int s = 0; s < kNumStages; ++s) {
      int64_t const count = out_elements<Traits>(s, batch);
      if (download(out_seq[s], count) != download(out_sync[s], count)) chained_bitwise = false;
    }
    if (!chained_bitwise) {
      std::printf("batch %d: the chained (programmatic launch) outputs differ from the back-to-back ones\n", batch);
      all_ok = false;
    }
    bitwise = bitwise && chained_bitwise;
    std::printf("batch %d: bitwise %s, max |error| vs reference conv %.3g (tile-synced run: %s%s; chained too)\n", batch,
                bitwise ? "yes" : "NO", worst, launch_style,
                c.programmatic() ? "" : c.waits_for_start(batch) ? ", with wait kernels" : ", without wait kernels");
    if (!o.trace.empty()) {
      write_trace(c, o.trace, Traits::kName, kStages, batch, "sequential", stream, [&] { return c.run_sequential(seq, stream); });
      if (c.programmatic()) {
        write_trace(c, o.trace, Traits::kName, kStages, batch, "chained", stream, [&] { return c.run_chained(seq, stream); });
      }
      write_trace(c, o.trace, Traits::kName, kStages, batch, "overlapped", stream, [&] { return c.run_overlapped(syn, stream); });
    }
    if (o.check_only) continue;
    if (!tuned) {  // run()'s table: back to back, the overlap (and chained) at every --batch, on this GPU
      check_status(c.autotune(arguments(max_batch, out_sync), o.batches.data(), int(o.batches.size()), 30, stream),
                   "autotune", c);
      tuned = true;
    }

    // Timing: CUDA graphs of the back-to-back chain, the tile-synced chain and each stage alone, round robin.
    auto capture = [&](auto&& body) {
      cudaGraph_t graph;
      cudaGraphExec_t exec;
      BENCH_CUDA(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
      body();
      BENCH_CUDA(cudaStreamEndCapture(stream, &graph));
      BENCH_CUDA(cudaGraphInstantiate(&exec, graph, 0));
      BENCH_CUDA(cudaGraphDestroy(graph));
      return exec;
    };
    cusync::bench::Interleaved timer;
    bool const both_launches = c.programmatic();  // time the two-stream overlap beside the one-stream one
    timer.add(capture([&] { check_status(c.run_sequential(seq, stream), "run_sequential", c); }));
    timer.add(capture([&] { check_status(c.run_overlapped(syn, stream), "run_overlapped", c); }));
    timer.add(capture([&] { check_status(c.run(syn, stream), "run", c); }));
    if (both_launches) {
      c.set_two_streams(true);
      timer.add(capture([&] { check_status(c.run_overlapped(syn, stream), "run_overlapped", c); }));
      c.set_two_streams(false);
      timer.add(capture([&] { check_status(c.run_chained(seq, stream), "run_chained", c); }));
    }
    c.set_overlap_hooks(cusync::conv::kHooksLegacy);
    c.set_ticket_order(false);  // the overlap as first built, blocks in the hardware's order (no ticket round trip)
    size_t const no_ticket = size_t(timer.add(capture([&] { check_status(c.run_overlapped(syn, stream), "run_overlapped", c); })));
    c.set_ticket_order(!o.block_order);
    // The overlap as first built: its hooks, tiles from the ticket.
    size_t const legacy = size_t(timer.add(capture([&] { check_status(c.run_overlapped(syn, stream), "run_overlapped", c); })));
    c.set_overlap_hooks(hooks);
    c.set_bounded_kernels(false);  // the kernels without the register bound: back to back, chained, overlap, alone
    size_t const plain = size_t(timer.add(capture([&] { check_status(c.run_sequential(seq, stream), "run_sequential", c); })));
    timer.add(capture([&] { check_status(c.run_chained(seq, stream), "run_chained", c); }));
    timer.add(capture([&] { check_status(c.run_overlapped(syn, stream), "run_overlapped", c); }));
    for (int s = 0; s < kNumStages; ++s) timer.add(capture([&] { check_status(c.run_stage(s, seq, stream), "run_stage", c); }));
    c.set_bounded_kernels(!o.plain_kernels);
    size_t const alone = plain + 3 + size_t(kNumStages);
    for (int s = 0; s < kNumStages; ++s) timer.add(capture([&] { check_status(c.run_stage(s, seq, stream), "run_stage", c); }));
    Options timing = o;
    if (o.preheat_s > 0.0) {  // warmup rounds enough for ~preheat_s of each chain variant
      cudaEvent_t t0, t1;
      BENCH_CUDA(cudaEventCreate(&t0));
      BENCH_CUDA(cudaEventCreate(&t1));
      BENCH_CUDA(cudaEventRecord(t0, stream));
      check_status(c.run_sequential(seq, stream), "run_sequential", c);
      BENCH_CUDA(cudaEventRecord(t1, stream));
      BENCH_CUDA(cudaEventSynchronize(t1));
      float ms = 0.0f;
      BENCH_CUDA(cudaEventElapsedTime(&ms, t0, t1));
      int const rounds = int(o.preheat_s * 1000.0 / (ms > 0.001f ? ms : 0.001f));
      timing.warmup = rounds > o.warmup ? (rounds < 200000 ? rounds : 200000) : o.warmup;
      BENCH_CUDA(cudaEventDestroy(t0));
      BENCH_CUDA(cudaEventDestroy(t1));
    }
    std::vector<double> const us = timer.run(stream, timing);
    if (c.sync_error(&info, stream) != cusync::Status::kSuccess) {
      std::printf("batch %d: sync timeout while timing: %s\n", batch, c.describe(info).c_str());
      return 1;
    }
    double const two_stream_us = both_launches ? us[3] : -1.0;
    double const chained_us = both_launches ? us[4] : -1.0;
    std::printf("batch %d: back-to-back %.1f us, tile-synced %.1f us (%s), overlap speedup %.3fx", batch, us[0], us[1],
                launch_style, us[0] / us[1]);
    if (both_launches) std::printf(", two streams %.1f us, back to back + PDL %.1f us", two_stream_us, chained_us);
    std::printf(", overlap in block order %.1f us", us[no_ticket]);
    std::printf("; run() %.1f us (%s: %s); alone:", us[2], cusync::conv::to_string(c.mode(batch)), c.mode_reason(batch));
    for (int s = 0; s < kNumStages; ++s) std::printf(" %s %.1f us", kStages[s].name, us[alone + size_t(s)]);
    std::printf("\n");
    std::printf("RESULT {\"chain\": \"%s\", \"batch\": %d, \"sequential_us\": %.3f, \"overlap_us\": %.3f, "
                "\"run_us\": %.3f, \"run_mode\": \"%s\", \"two_stream_us\": %.3f, \"chained_us\": %.3f, \"block_order_us\": %.3f, \"programmatic\": %s, "
                "\"bitwise\": %s, \"ref_err\": %.4g, \"wait_kernels\": %s, \"hooks\": %u, \"rule\": \"%s\", \"legacy_overlap_us\": %.3f, "
                "\"plain_sequential_us\": %.3f, \"plain_chained_us\": %.3f, \"plain_overlap_us\": %.3f, \"stages_us\": [", Traits::kName, batch, us[0], us[1],
                us[2], cusync::conv::to_string(c.mode(batch)), two_stream_us, chained_us, us[no_ticket], both_launches ? "true" : "false",
                bitwise ? "true" : "false", cusync::bench::json_number(worst),
                !both_launches && c.waits_for_start(batch) ? "true" : "false", hooks, rule[bi].c_str(), us[legacy], us[plain], us[plain + 1],
                us[plain + 2]);
    for (int s = 0; s < kNumStages; ++s) std::printf("%s%.3f", s ? ", " : "", us[alone + size_t(s)]);
    std::printf("], \"plain_stages_us\": [");
    for (int s = 0; s < kNumStages; ++s) std::printf("%s%.3f", s ? ", " : "", us[plain + 3 + size_t(s)]);
    std::printf("]}\n");
  }
  for (void* p : buffers) BENCH_CUDA(cudaFree(p));
  std::printf("%s\n", all_ok ? "all checks passed" : "CHECKS FAILED");
  return all_ok ? 0 : 5;
}

}  // namespace cusync::conv::bench
