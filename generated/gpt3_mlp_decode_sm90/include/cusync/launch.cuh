// cusync runtime: one launch of one stage, what the chain hands to a stage unit's launch_<stage>().
#pragma once

#include "cusync/chain.h"
#include "cusync/stage.cuh"

namespace cusync {

static_assert(kMaxChainStages == kMaxStages, "ChainPointers and ChainState hold the same number of stages");

struct StageLaunch {
  int m;
  void const* a;   // input: the chain input or the producer's output
  void const* b;   // weights (GEMM stages), the second producer's output (two-producer swiglu), or null
  void* d;         // output
  int64_t lda;     // elements between rows of a, b (as stored: [K, N] or [N, K]) and d; never 0 (dense
  int64_t ldb;     // resolved by the chain), at least the row width, a multiple of 8 (16 bytes): checked
  int64_t ldd;     // at initialize() and update()
  void const* bias = nullptr;  // a GEMM's [n] bias vector, added before the activation (spec `bias: true`)
  StageSync sync;
  bool programmatic = false;  // sm90: a programmatic dependent launch of the previous kernel on the stream
  int sms = 0;                // multiprocessors of the device (sm90 persistent grids)
  int config = 0;             // the tile configuration (index into kStages)
  void* workspace = nullptr;  // sm90 stream-K kernels: this stage's workspace
  void const* lt = nullptr;   // sm90 mode kCublasLt: the chain's cusync::sm90::LtContext
};

// The emitted wait values agree with the emitted tiles and policies (policy.h's factories); a
// static_assert over a project's kStages calls this, so a stale or wrong table does not compile.
template <int kConfigs, int kStages>
constexpr bool wait_values_consistent(StageInfo const (&table)[kConfigs][kStages]) {
  for (int c = 0; c < kConfigs; ++c) {
    for (int s = 0; s < kStages; ++s) {
      StageInfo const& info = table[c][s];
      for (int edge = 0; edge < 2; ++edge) {
        int const p = edge == 0 ? info.producer : info.producer_b;
        PolicyKind const kind = edge == 0 ? info.policy : info.policy_b;
        int const value = edge == 0 ? info.wait_value : info.wait_value_b;
        if (p < 0) {
          if (value != 0) return false;
          continue;
        }
        int const producer_tiles_n = (table[c][p].n + table[c][p].tile_n - 1) / table[c][p].tile_n;
        if (value != policy_posts(kind, producer_tiles_n, 2)) return false;
        if (edge == 0 && info.row_wait_value != producer_tiles_n) return false;
      }
    }
  }
  return true;
}

}  // namespace cusync
