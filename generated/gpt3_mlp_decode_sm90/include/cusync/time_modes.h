// cusync runtime: timing a chain's candidate modes on the GPU it runs on, for the autotune() of every
// backend (GEMM chains, conv chains, the attention layer's cuBLASLt search).
//
// time_modes() times candidates round robin (every round runs each once, so that clock and power drift fall
// on all of them alike), each as a CUDA graph replayed between two events while the GPU is already busy, after
// a preheat, and returns each candidate's median. Timing one launch at a time with a synchronize between them
// times a GPU that idles between runs: at boost clocks and with the launch's latency inside the events, which
// ranks modes differently from the sustained, back-to-back runs a caller makes.
#pragma once

#include <algorithm>
#include <chrono>

#include <cuda_runtime.h>

#include "cusync/status.h"

namespace cusync {

// At most this many modes per M and rounds (bounds for fixed-size arrays).
constexpr int kMaxTunedModes = 8;
constexpr int kMaxTuneRounds = 200;

// Modes whose medians are within this fraction of the fastest count as a tie: the earliest in the
// candidate list wins (the list puts the simpler modes first), so noise does not flip the choice.
constexpr double kTuneTieFraction = 0.005;

// Before its first shape is timed, an autotune keeps the GPU busy with the candidates for this long (and for a
// tenth of it before every later shape): an H200 fresh from idle runs short bursts of GEMMs at up to 1980
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

}  // namespace cusync
