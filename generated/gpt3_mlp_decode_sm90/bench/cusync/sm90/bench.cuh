// cusync sm90 backend, bench drivers only: the hooks of cusync/bench/chain_bench.cuh for an sm90 chain:
// orders are tile-queue orders, the overlapped run is run_mode(kOverlap), and at each M the baselines
// (CUTLASS's stock kernels back to back and with PDL, every other run() mode, cuBLAS) and run() as the
// library picks it are checked against the sequential run and timed with the variants.
#pragma once

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "baselines.cuh"
#include "cusync/bench/chain_bench.cuh"
#include "cusync/sm90/dispatch.h"
#include "cusync/tile_order.h"

namespace cusync::sm90 {

struct BenchHooks {
  static constexpr bool kBaselines = true;
  static constexpr char const* kOrders = "spec,row_major,column_major,banded,column_banded";
  static constexpr char const* kOrdersError = "--orders takes spec, row_major, column_major, banded and column_banded";
  static constexpr bool kOrderedSequential = true;  // run_sequential()'s stages take their tiles in that order too
  static constexpr char const* kUsageMore = " [--autotune ROUNDS]";
  template <typename Value>
  static bool parse_more(std::string const& arg, Value& value, bench::ChainOptions& o, bench::Usage const& usage) {
    if (arg != "--autotune") return false;
    o.autotune_rounds = bench::parse_int(value(), 0, "--autotune takes a number of rounds (0: off)", usage);
    if (o.autotune_rounds > 200) usage.fail("--autotune takes 0 (off) to 200 rounds");
    return true;
  }
  static bool order_ok(std::string const& p) {
    return p == "spec" || p == "row_major" || p == "column_major" || p == "banded" || p == "column_banded";
  }

  template <typename Chain>
  static Status overlapped(Chain& chain, cudaStream_t stream) { return chain.run_mode(stream, Mode::kOverlap); }
  // The spec's order and policies (a variant of the previous M may have changed them).
  template <typename Chain>
  void reset(Chain& chain) {
    BENCH_STATUS(chain.set_tile_order(-1));
    BENCH_STATUS(chain.set_policy(PolicyKind::kNone));
  }
  template <typename Chain>
  static void set_order(Chain& chain, std::string const& order, bool) {
    BENCH_STATUS(chain.set_tile_order(order == "spec"            ? -1
                                      : order == "row_major"     ? int(TileOrder::kRowMajor)
                                      : order == "banded"        ? int(TileOrder::kBanded)
                                      : order == "column_banded" ? int(TileOrder::kColumnBanded)
                                                                 : int(TileOrder::kColumnMajor)));
  }

  // What one M measured beyond the variants, and its JSON fields.
  struct Measured {
    int stock_id[2] = {-1, -1};
    int cublas_id = -1, streamk_id = -1, cluster_id = -1, pingpong_id = -1, cublaslt_id = -1, stream_id = -1, run_id = -1;
    bool stock_bitwise = true, cluster_bitwise = true, pingpong_bitwise = true, stream_repeatable = true;
    bool stream_sync_ok = true, run_ok = false;
    double streamk_diff = 0.0, pingpong_diff = 0.0, cublaslt_diff = 0.0, stream_diff = 0.0, gemm_flops = 0.0;
    Mode picked = Mode::kAuto;
    std::string reason;
    std::string lt_algorithms;  // per GEMM, cuBLASLt's candidate the mode ran (Chain::lt_algorithm)

    bool ok() const {
      return stock_bitwise && cluster_bitwise && streamk_diff < bench::kTolerance && pingpong_diff < bench::kTolerance &&
             cublaslt_diff < bench::kTolerance && stream_diff < bench::kTolerance && stream_repeatable &&
             stream_sync_ok && run_ok;
    }
    template <typename TimeOf>
    void print(int, TimeOf const& time_of) const {
      std::printf(", \"stock_us\": %.2f, \"stock_pdl_us\": %.2f, \"stock_bitwise\": %s, \"streamk_us\": %.2f, \"streamk_rel_diff\": %.3e, \"cluster_us\": %.2f, \"cluster_bitwise\": %s, "
                  "\"pingpong_us\": %.2f, \"pingpong_rel_diff\": %.3e, \"pingpong_bitwise\": %s, "
                  "\"cublaslt_us\": %.2f, \"cublaslt_rel_diff\": %.3e, \"cublaslt_algorithms\": \"%s\", "
                  "\"stream_us\": %.2f, \"stream_rel_diff\": %.3e, \"stream_repeatable\": %s, \"stream_sync_ok\": %s, "
                  "\"cublas_us\": %.2f, \"gemm_flops\": %.0f, \"run_us\": %.2f, \"run_ok\": %s, \"mode\": \"%s\", \"mode_reason\": \"%s\"",
                  time_of(stock_id[0]), time_of(stock_id[1]), stock_bitwise ? "true" : "false", time_of(streamk_id),
                  bench::json_number(streamk_diff), time_of(cluster_id), cluster_bitwise ? "true" : "false",
                  time_of(pingpong_id), bench::json_number(pingpong_diff), pingpong_bitwise ? "true" : "false",
                  time_of(cublaslt_id), bench::json_number(cublaslt_diff), lt_algorithms.c_str(), time_of(stream_id),
                  bench::json_number(stream_diff), stream_repeatable ? "true" : "false", stream_sync_ok ? "true" : "false",
                  time_of(cublas_id), gemm_flops,
                  time_of(run_id), run_ok ? "true" : "false", to_string(picked), reason.c_str());
    }
  };

#if defined(CUSYNC_BENCH_CUBLAS)
  std::unique_ptr<::bench::Cublas> blas;  // created by before(), once the device is known

  // The chain as PyTorch runs it: cuBLAS GEMMs, each activation a separate kernel (a timing baseline: a
  // stage's bias, `bias: true`, is left out of it).
  template <typename Bench>
  Status cublas_chain(Bench const& bn, int m) {
    if (!blas->set_stream(bn.stream)) return Status::kCudaError;
    for (int s = 0; s < Bench::kNumStages; ++s) {
      bench::StageDesc const& d = Bench::kStages[s];
      auto const* in = bn.input_of(s);
      int64_t const count = int64_t(m) * d.n;
      if (d.gemm && d.act == ::bench::Activation::kSwiglu) {  // gate | up, then the SwiGLU kernel
        auto* gate_up = bn.b.gated_scratch;
        if (::bench::gemm(blas->handle, in, bn.b.weight[s], d.b_col, gate_up, m, 2 * d.n, d.k) != CUBLAS_STATUS_SUCCESS)
          return Status::kCudaError;
        ::bench::swiglu_kernel<<<unsigned((count + 255) / 256), 256, 0, bn.stream>>>(gate_up, gate_up + d.n, 2 * d.n, bn.b.out[s], m, d.n);
      } else if (d.gemm) {
        if (::bench::gemm(blas->handle, in, bn.b.weight[s], d.b_col, bn.b.out[s], m, d.n, d.k) != CUBLAS_STATUS_SUCCESS)
          return Status::kCudaError;
        if (d.act != ::bench::Activation::kIdentity)
          ::bench::activation_inplace_kernel<<<unsigned((count / 8 + 255) / 256), 256, 0, bn.stream>>>(bn.b.out[s], count, d.act);
      } else {
        bool const two = d.producer_b >= 0;
        auto const* up = two ? bn.b.out[d.producer_b] : in + d.n;
        ::bench::swiglu_kernel<<<unsigned((count + 255) / 256), 256, 0, bn.stream>>>(in, up, two ? d.n : 2 * d.n, bn.b.out[s], m, d.n);
      }
      if (cudaGetLastError() != cudaSuccess) return Status::kCudaError;
    }
    return Status::kSuccess;
  }

  // The floor's rate: an 8192^3 cuBLAS GEMM of the chain's element type, median TFLOP/s.
  template <typename Bench>
  double floor_tflops(Bench const& bn) {
    using Element = typename Bench::Element;
    int const n = 8192;
    Element *a = nullptr, *w = nullptr, *d = nullptr;
    size_t const bytes = size_t(n) * n * sizeof(Element);
    BENCH_CUDA(cudaMalloc(&a, bytes));
    BENCH_CUDA(cudaMalloc(&w, bytes));
    BENCH_CUDA(cudaMalloc(&d, bytes));
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(a, int64_t(n) * n, 7u, 1.0f);
    ::bench::fill_uniform_kernel<Element><<<1024, 256>>>(w, int64_t(n) * n, 8u, 0.02f);
    BENCH_CUDA(cudaGetLastError());
    BENCH_CUDA(cudaDeviceSynchronize());  // filled on the default stream, timed on `stream`
    bench::Interleaved timer;
    timer.add(bench::capture(bn.stream, [&] {
      if (!blas->set_stream(bn.stream)) return Status::kCudaError;
      return ::bench::gemm(blas->handle, a, w, false, d, n, n, n) == CUBLAS_STATUS_SUCCESS ? Status::kSuccess
                                                                                        : Status::kCudaError;
    }));
    double const us = timer.run(bn.stream, bn.o).front();
    BENCH_CUDA(cudaFree(a));
    BENCH_CUDA(cudaFree(w));
    BENCH_CUDA(cudaFree(d));
    return 2.0 * n * double(n) * n / (us * 1e-6) / 1e12;
  }
#endif

  template <typename Bench>
  void before(Bench& bn) {
    if (bn.o.autotune_rounds > 0) {
      // The library's own measurement on this GPU, before anything is timed: run() then picks from it.
      std::vector<int> ms(bn.o.ms);
      std::sort(ms.begin(), ms.end());
      ms.erase(std::unique(ms.begin(), ms.end()), ms.end());
      if (int(ms.size()) > kMaxTunedMs) bn.usage().fail("--autotune times at most 32 distinct --m values");
      auto& chain = bn.chain;  // BENCH_STATUS names the call
      BENCH_STATUS(chain.autotune(ms.data(), int(ms.size()), bn.stream, bn.o.autotune_rounds));
    }
#if defined(CUSYNC_BENCH_CUBLAS)
    blas = std::make_unique<::bench::Cublas>();
    if (bn.o.baselines && blas->ok) {
      std::printf("{\"chain\": \"%s\", \"gpu\": \"%s\", \"floor_tflops\": %.1f, \"floor_gemm\": \"cublas 8192^3\"}\n",
                  Bench::kName, bn.prop.name, floor_tflops(bn));
      std::fflush(stdout);
    }
#endif
  }

  // Baselines on the same buffers: CUTLASS's stock kernels back to back and with PDL (the same tiles and
  // epilogues, so bitwise equal to ours), every other run() mode, and cuBLAS (its own accumulation
  // order: timed only); then run() as the library runs it at this M.
  template <typename Bench>
  Measured measure(Bench& bn, int m, std::vector<std::vector<unsigned char>> const& expected, bench::Interleaved& timer) {
    auto& chain = bn.chain;
    cudaStream_t const stream = bn.stream;
    Measured r;
    for (int s = 0; s < Bench::kNumStages; ++s) {  // floating-point operations of the GEMMs (the floor's divisor)
      bench::StageDesc const& d = Bench::kStages[s];
      r.gemm_flops += d.gemm ? 2.0 * m * double(Bench::weight_cols(d)) * d.k : 0.0;
    }
    if (bn.o.baselines) {
      for (bool const pdl : {false, true}) {
        bn.poison(m);
        BENCH_STATUS(chain.run_stock(stream, pdl));
        BENCH_CUDA(cudaStreamSynchronize(stream));
        r.stock_bitwise = r.stock_bitwise && bn.outputs_equal(expected);
        r.stock_id[pdl] = timer.add(bench::capture(stream, [&] { return chain.run_stock(stream, pdl); }));
      }
      // One run() mode on the same buffers, checked against the sequential run (poisoned first; bitwise
      // equality and/or the relative difference, as asked), then its graph joins the timing.
      auto check_mode = [&](Mode mode, bool* bitwise, double* diff) {
        bn.poison(m);
        BENCH_STATUS(chain.run_mode(stream, mode));
        BENCH_CUDA(cudaStreamSynchronize(stream));
        if (bitwise != nullptr) *bitwise = bn.outputs_equal(expected);
        if (diff != nullptr) *diff = bn.outputs_difference(expected);
        return timer.add(bench::capture(stream, [&] { return chain.run_mode(stream, mode); }));
      };
      // Stream-K sums K-slices in another order: by relative error.
      r.streamk_id = check_mode(Mode::kStreamK, nullptr, &r.streamk_diff);
      // 2x1 clusters load each B tile once per cluster (multicast) and compute every tile the same way.
      r.cluster_id = check_mode(Mode::kCluster, &r.cluster_bitwise, nullptr);
      // Ping-pong kernels in 128x128 tiles: by relative error (another tile shape; equality reported).
      r.pingpong_id = check_mode(Mode::kPingpong, &r.pingpong_bitwise, &r.pingpong_diff);
      // cuBLASLt's GEMMs (another summation order): by relative error; -1 where not built in.
      if (chain.cublaslt_available()) {
        r.cublaslt_id = check_mode(Mode::kCublasLt, nullptr, &r.cublaslt_diff);
        for (int s = 0; s < Bench::kNumStages; ++s) {
          int const algorithm = chain.lt_algorithm(s);
          if (algorithm >= 0) r.lt_algorithms += (r.lt_algorithms.empty() ? "" : ",") + std::to_string(algorithm);
        }
      }
      // Mode kStream (optimizations.stream_weights, M <= 64): split K in its own order, by relative error.
      // Its split reduction has a fixed order: a second run must be bitwise equal to the first; and no wait
      // of either may have timed out (a late post can leave right numbers behind).
      if (chain.stream_available()) {
        BENCH_STATUS(chain.clear_sync_error(stream));
        r.stream_id = check_mode(Mode::kStream, nullptr, &r.stream_diff);
        std::vector<std::vector<unsigned char>> first;
        for (int s = 0; s < Bench::kNumStages; ++s) first.push_back(::bench::to_host(bn.b.out[s], expected[s].size()));
        bn.poison(m);
        BENCH_STATUS(chain.run_mode(stream, Mode::kStream));
        BENCH_CUDA(cudaStreamSynchronize(stream));
        r.stream_repeatable = bn.outputs_equal(first);
        r.stream_sync_ok = chain.check_sync_error(nullptr, stream) == Status::kSuccess;
      }
#if defined(CUSYNC_BENCH_CUBLAS)
      if (blas->ok) r.cublas_id = timer.add(bench::capture(stream, [&] { return cublas_chain(bn, m); }));
#endif
    }
    // run() as the library runs it at this M: the mode its dispatch table or rule picks (or set_mode's).
    r.picked = chain.mode();
    r.reason = chain.mode_reason();
    std::replace(r.reason.begin(), r.reason.end(), '"', '\'');
    BENCH_STATUS(chain.clear_sync_error());
    bn.poison(m);
    BENCH_STATUS(chain.run(stream));
    BENCH_CUDA(cudaStreamSynchronize(stream));
    // Stream-K and stream sum in another order and ping-pong has other tiles: by relative error; every other mode
    // computes each tile exactly as run_sequential().
    bool const by_difference = r.picked == Mode::kStreamK || r.picked == Mode::kPingpong || r.picked == Mode::kCublasLt ||
                               r.picked == Mode::kStream;
    r.run_ok = chain.check_sync_error() == Status::kSuccess &&
               (by_difference ? bn.outputs_difference(expected) < bench::kTolerance : bn.outputs_equal(expected));
    r.run_id = timer.add(bench::capture(stream, [&] { return chain.run(stream); }));
    return r;
  }
};

}  // namespace cusync::sm90
