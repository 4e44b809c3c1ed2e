// cusync sm90 backend: choosing run()'s mode by timing the modes on the GPU the chain runs on.
//
// Why: the modes of one chain often lie within a few percent of each other, and their ranking does not
// carry from one H200 to the next (measured: a table taken on one machine picked a mode 6-7% slower
// than the best on another). A table built at initialization on the caller's
// own GPU, under the caller's own conditions, does carry. This is the library's equivalent of cuDNN's
// benchmark mode: opt-in, outside stream capture, and it overwrites the output buffers it runs on.
//
// The timing itself is the runtime's time_modes() (cusync/time_modes.h), shared with the other backends.
// tuned_table() turns the winners at a few M into dispatch entries with the cut between two measured M
// at their geometric mean (as `cusync-gen tune` writes a spec's `dispatch:`).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "cusync/sm90/dispatch.h"
#include "cusync/status.h"
#include "cusync/time_modes.h"

namespace cusync::sm90 {

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

static_assert(kRunModes <= kMaxTunedModes, "autotune times every mode at one M at once");

// A chain's autotune(): for each distinct M of ms[0..count) (1 <= M <= max_m, at most kMaxTunedMs),
// set_m(M) makes M current, search_lt(rounds, preheat_ms) picks cuBLASLt's algorithms for the mode
// kCublasLt (only if have_cublaslt; it preheats the GPU at the first M), the candidates are current_mode() (what run() would take without a tuned
// table; it wins ties) and then every other mode (kCublasLt only if have_cublaslt, kStream only at
// M <= stream_max_m, 0 where the chain has no such mode), time_modes() times
// them through run_mode(mode, stream), and the winners become `table` (*entries rows, tuned_table());
// times[i] (kMaxTunedMs of them, if not null) what was timed at the i-th distinct M, *timed how many.
// set_m(0) restores the chain's own M at the end, whatever happened. Nothing is written to `table`,
// *entries, `times` or *timed unless every M was timed.
template <class SetM, class CurrentMode, class RunMode, class SearchLt>
Status autotune_chain(int const* ms, int count, int max_m, int rounds, bool have_cublaslt, int stream_max_m,
                      cudaStream_t stream,
                      SetM&& set_m, CurrentMode&& current_mode, RunMode&& run_mode, SearchLt&& search_lt,
                      DispatchEntry* table, int* entries, TunedTimes* times = nullptr, int* timed = nullptr) {
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
  TunedTimes measured[kMaxTunedMs];
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
    measured[i].m = sorted[i];
    measured[i].count = status == Status::kSuccess ? std::min(n, kRunModes) : 0;
    std::copy(candidates, candidates + measured[i].count, measured[i].mode);
    std::copy(median_us, median_us + measured[i].count, measured[i].us);
  }
  Status const restored = set_m(0);
  if (status != Status::kSuccess) return status;
  if (restored != Status::kSuccess) return restored;
  *entries = tuned_table(sorted, winners, distinct, table, stream_max_m);
  if (times != nullptr && timed != nullptr) {
    std::copy(measured, measured + distinct, times);
    *timed = distinct;
  }
  return Status::kSuccess;
}

}  // namespace cusync::sm90
