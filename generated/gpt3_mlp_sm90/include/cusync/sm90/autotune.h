// cusync sm90 backend: choosing run()'s mode by timing the modes on the GPU the chain runs on.
//
// Why: the modes of one chain often lie within a few percent of each other, and their ranking does not
// carry from one H200 to the next (measured: a table taken on one machine picked a mode 6-7% slower
// than the best on another). A table built at initialization on the caller's
// own GPU, under the caller's own conditions, does carry. This is the library's equivalent of cuDNN's
// benchmark mode: opt-in, outside stream capture, and it overwrites the output buffers it runs on.
//
// time_modes() times candidate modes round robin (every round runs each mode once, so that clock and
// power drift fall on all of them alike), one CUDA event pair per run, and returns each mode's median.
// tuned_table() turns the winners at a few M into dispatch entries with the cut between two measured M
// at their geometric mean (as `cusync-gen tune` writes a spec's `dispatch:`).
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>

#include <cuda_runtime.h>

#include "cusync/sm90/dispatch.h"
#include "cusync/status.h"

namespace cusync::sm90 {

// At most this many modes per M and rounds (bounds for fixed-size arrays; kMaxTunedMs: dispatch.h).
constexpr int kMaxTunedModes = 8;
constexpr int kMaxTuneRounds = 200;

// Modes whose medians are within this fraction of the fastest count as a tie: the earliest in the
// candidate list wins (the list puts the simpler modes first), so noise does not flip the choice.
constexpr double kTuneTieFraction = 0.005;

// Before its first M is timed, autotune keeps the GPU busy with the candidates for this long (and for a
// tenth of it before every later M): an H200 fresh from idle runs short bursts of GEMMs at up to 1980
// MHz, sustained work at 1320-1440 MHz under its 700 W cap, and the modes do
// not lose the same under the cap; the caller's chain runs sustained.
constexpr int kTunePreheatMs = 1000;

namespace detail {

// What time_modes() creates, destroyed when it leaves scope, whatever path returns.
struct TuneResources {
  cudaStream_t stream = nullptr;
  cudaGraphExec_t graph[kMaxTunedModes] = {};
  cudaEvent_t start[kMaxTunedModes] = {};
  cudaEvent_t stop[kMaxTunedModes] = {};
  ~TuneResources() {
    for (int i = 0; i < kMaxTunedModes; ++i) {
      if (graph[i] != nullptr) cudaGraphExecDestroy(graph[i]);
      if (start[i] != nullptr) cudaEventDestroy(start[i]);
      if (stop[i] != nullptr) cudaEventDestroy(stop[i]);
    }
    if (stream != nullptr) cudaStreamDestroy(stream);
  }
};

inline Status from_cuda_error(cudaError_t err) { return err == cudaSuccess ? Status::kSuccess : Status::kCudaError; }

// One run of a mode (or of another candidate: a cuBLASLt algorithm), captured on `stream` into an executable graph.
template <class RunMode, class Candidate>
Status capture_mode(RunMode& run_mode, Candidate mode, cudaStream_t stream, cudaGraphExec_t* exec) {
  cudaGraph_t graph = nullptr;
  Status status = from_cuda_error(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  if (status != Status::kSuccess) return status;
  Status const ran = run_mode(mode, stream);
  Status const ended = from_cuda_error(cudaStreamEndCapture(stream, &graph));  // ends the capture on any path
  status = ran != Status::kSuccess ? ran : ended;
  if (status == Status::kSuccess) status = from_cuda_error(cudaGraphInstantiate(exec, graph, 0));
  if (graph != nullptr) cudaGraphDestroy(graph);
  return status;
}

}  // namespace detail

// Times modes[0..count) as the GPU runs them: each mode runs once plainly, is captured once into a CUDA
// graph (on a stream of its own, after `stream`'s work) and replayed once to warm up, then `rounds` rounds each replay every graph once between two events, in an order rotated by
// one mode per round and behind an untimed replay, so that no mode is always the one timed first after
// the GPU idled. Graphs, not launches: timing launches measured the host's launch cost at small M
// (cuBLASLt's three launches read 15% slower than one stream-K kernel that the GPU runs 7% slower).
// median_us[i]: the median of modes[i]; *best: the index of the fastest (ties: kTuneTieFraction).
// run_mode: Status(Mode, cudaStream_t). Synchronizes `stream` first; refused while `stream` is captured.
// preheat_ms: before the timed rounds, the graphs are replayed round robin for at least this long.
// Candidate: Mode, or any value run_mode takes (the algorithm search times cuBLASLt's algorithms so).
template <class RunMode, class Candidate>
Status time_modes(RunMode&& run_mode, Candidate const* modes, int count, int rounds, cudaStream_t stream,
                  float* median_us, int* best, int preheat_ms = 0) {
  if (modes == nullptr || median_us == nullptr || best == nullptr || count <= 0 || count > kMaxTunedModes ||
      rounds <= 0 || rounds > kMaxTuneRounds) {
    return Status::kInvalidArgument;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  Status status = detail::from_cuda_error(cudaStreamIsCapturing(stream, &capture));
  if (status != Status::kSuccess) return status;
  if (capture != cudaStreamCaptureStatusNone) return Status::kInvalidArgument;  // timing needs real runs
  if ((status = detail::from_cuda_error(cudaStreamSynchronize(stream))) != Status::kSuccess) return status;
  detail::TuneResources own;
  if ((status = detail::from_cuda_error(cudaStreamCreateWithFlags(&own.stream, cudaStreamNonBlocking))) != Status::kSuccess) {
    return status;
  }
  // One plain run of each first: whatever a mode prepares on first use (cuBLASLt's plan, CUTLASS's
  // parameters) is made outside the capture, and an error shows as the mode's own status.
  for (int i = 0; i < count; ++i) {
    if ((status = run_mode(modes[i], own.stream)) != Status::kSuccess) return status;
  }
  if ((status = detail::from_cuda_error(cudaStreamSynchronize(own.stream))) != Status::kSuccess) return status;
  for (int i = 0; i < count; ++i) {
    if ((status = detail::from_cuda_error(cudaEventCreate(&own.start[i]))) != Status::kSuccess) return status;
    if ((status = detail::from_cuda_error(cudaEventCreate(&own.stop[i]))) != Status::kSuccess) return status;
    if ((status = detail::capture_mode(run_mode, modes[i], own.stream, &own.graph[i])) != Status::kSuccess) return status;
    if ((status = detail::from_cuda_error(cudaGraphLaunch(own.graph[i], own.stream))) != Status::kSuccess) return status;
  }
  if ((status = detail::from_cuda_error(cudaStreamSynchronize(own.stream))) != Status::kSuccess) return status;
  auto const preheat_end = std::chrono::steady_clock::now() + std::chrono::milliseconds(preheat_ms);
  while (std::chrono::steady_clock::now() < preheat_end) {
    for (int j = 0; j < 4 * count; ++j) {  // a few replays of each, then see the clock again
      if ((status = detail::from_cuda_error(cudaGraphLaunch(own.graph[j % count], own.stream))) != Status::kSuccess) return status;
    }
    if ((status = detail::from_cuda_error(cudaStreamSynchronize(own.stream))) != Status::kSuccess) return status;
  }
  static thread_local float samples[kMaxTunedModes][kMaxTuneRounds];
  for (int r = 0; r < rounds; ++r) {
    // The GPU is busy with an untimed replay while the timed ones are queued behind it.
    if ((status = detail::from_cuda_error(cudaGraphLaunch(own.graph[(r + count - 1) % count], own.stream))) != Status::kSuccess) {
      return status;
    }
    for (int j = 0; j < count; ++j) {
      int const i = (r + j) % count;
      if ((status = detail::from_cuda_error(cudaEventRecord(own.start[i], own.stream))) != Status::kSuccess) return status;
      if ((status = detail::from_cuda_error(cudaGraphLaunch(own.graph[i], own.stream))) != Status::kSuccess) return status;
      if ((status = detail::from_cuda_error(cudaEventRecord(own.stop[i], own.stream))) != Status::kSuccess) return status;
    }
    if ((status = detail::from_cuda_error(cudaStreamSynchronize(own.stream))) != Status::kSuccess) return status;
    for (int i = 0; i < count; ++i) {
      float ms = 0.0f;
      if ((status = detail::from_cuda_error(cudaEventElapsedTime(&ms, own.start[i], own.stop[i]))) != Status::kSuccess) {
        return status;
      }
      samples[i][r] = ms * 1000.0f;
    }
  }
  int winner = 0;
  for (int i = 0; i < count; ++i) {
    std::nth_element(samples[i], samples[i] + rounds / 2, samples[i] + rounds);
    median_us[i] = samples[i][rounds / 2];
  }
  for (int i = 1; i < count; ++i) {
    if (double(median_us[i]) < double(median_us[winner]) * (1.0 - kTuneTieFraction)) winner = i;
  }
  *best = winner;
  return Status::kSuccess;
}

// Dispatch entries from the winners at the measured M (ascending, distinct): M up to the geometric mean
// of two neighbours takes the smaller one's mode; the last entry ends at the largest M measured; equal
// neighbours merge; a kStream winner's entry ends at stream_max_m at most (the mode runs no larger M).
// Returns the number of entries written into `table` (at most `count`).
inline int tuned_table(int const* ms, Mode const* winners, int count, DispatchEntry* table, int stream_max_m = 0) {
  int entries = 0;
  for (int i = 0; i < count; ++i) {
    int cut = i + 1 == count ? ms[i] : int(std::sqrt(double(ms[i]) * double(ms[i + 1])));
    if (winners[i] == Mode::kStream) cut = std::min(cut, stream_max_m);
    if (entries > 0 && table[entries - 1].mode == winners[i]) {
      table[entries - 1].m_max = cut;
    } else {
      table[entries++] = DispatchEntry{cut, winners[i]};
    }
  }
  return entries;
}

// A chain's autotune(): for each distinct M of ms[0..count) (1 <= M <= max_m, at most kMaxTunedMs),
// set_m(M) makes M current, search_lt(rounds, preheat_ms) picks cuBLASLt's algorithms for the mode
// kCublasLt (only if have_cublaslt; it preheats the GPU at the first M), the candidates are current_mode() (what run() would take without a tuned
// table; it wins ties) and then every other mode (kCublasLt only if have_cublaslt, kStream only at
// M <= stream_max_m, 0 where the chain has no such mode), time_modes() times
// them through run_mode(mode, stream), and the winners become `table` (*entries rows, tuned_table()).
// set_m(0) restores the chain's own M at the end, whatever happened. Nothing is written to `table` or
// *entries unless every M was timed.
template <class SetM, class CurrentMode, class RunMode, class SearchLt>
Status autotune_chain(int const* ms, int count, int max_m, int rounds, bool have_cublaslt, int stream_max_m,
                      cudaStream_t stream,
                      SetM&& set_m, CurrentMode&& current_mode, RunMode&& run_mode, SearchLt&& search_lt,
                      DispatchEntry* table, int* entries) {
  if (ms == nullptr || count <= 0 || count > kMaxTunedMs) return Status::kInvalidArgument;
  int sorted[kMaxTunedMs];
  int distinct = 0;
  std::copy(ms, ms + count, sorted);
  std::sort(sorted, sorted + count);
  for (int i = 0; i < count; ++i) {
    if (sorted[i] < 1 || sorted[i] > max_m) return Status::kInvalidArgument;
    if (distinct == 0 || sorted[distinct - 1] != sorted[i]) sorted[distinct++] = sorted[i];
  }
  Mode winners[kMaxTunedMs];
  Status status = Status::kSuccess;
  for (int i = 0; i < distinct && status == Status::kSuccess; ++i) {
    if ((status = set_m(sorted[i])) != Status::kSuccess) break;
    Mode candidates[kMaxTunedModes];
    int n = 0;
    candidates[n++] = current_mode();
    for (Mode c : {Mode::kPingpong, Mode::kStock, Mode::kCluster, Mode::kStreamK, Mode::kCublasLt, Mode::kOverlap,
                   Mode::kStream}) {
      bool const available = c == Mode::kCublasLt ? have_cublaslt : c == Mode::kStream ? sorted[i] <= stream_max_m : true;
      if (c != candidates[0] && available) candidates[n++] = c;
    }
    float median_us[kMaxTunedModes];
    int best = 0;
    int preheat_ms = i == 0 ? kTunePreheatMs : kTunePreheatMs / 10;
    if (have_cublaslt) {
      if ((status = search_lt(rounds, preheat_ms)) != Status::kSuccess) break;
      preheat_ms = kTunePreheatMs / 10;  // the search kept the GPU busy
    }
    status = time_modes(run_mode, candidates, n, rounds, stream, median_us, &best, preheat_ms);
    winners[i] = candidates[best];
  }
  Status const restored = set_m(0);
  if (status != Status::kSuccess) return status;
  if (restored != Status::kSuccess) return restored;
  *entries = tuned_table(sorted, winners, distinct, table, stream_max_m);
  return Status::kSuccess;
}

}  // namespace cusync::sm90
