// cusync sm90 backend: how run() computes a chain at a given M, and why.
//
// A chain can be computed five ways, all on the caller's stream and all capturable in a CUDA graph:
//   kOverlap  our tile-synced kernels, each consumer a programmatic dependent launch of its producer, so
//             that consumer tiles fill the SMs the producer's last wave leaves idle (cuSync);
//   kStock    CUTLASS's persistent kernels for the same tiles and epilogues, back to back, chained with
//             programmatic dependent launch (PDL hides each launch behind the kernel before it);
//   kStreamK  CUTLASS's stream-K kernels, chained with PDL: a GEMM whose last wave would leave SMs idle
//             spreads K-slices of its tiles over every SM instead (another summation order);
//   kCluster  CUTLASS's persistent kernels in 2x1 thread block clusters (the two CTAs of a cluster share
//             each B tile through TMA multicast, halving its L2 reads), chained with PDL;
//   kPingpong CUTLASS's ping-pong kernels in 128x128 tiles (two math warp groups on alternate tiles, each
//             one's epilogue under the other's MMAs), tiles down M in bands of 4, chained with PDL.
// Which is fastest depends on M, the shapes and the GPU. A table measured by `cusync-gen tune` (the spec's
// `dispatch:`) picks by M on the GPU it was measured on; elsewhere, and above its last M, a rule from the
// tile counts decides (default_mode below). set_mode() overrides both.
#pragma once

#include <cstdint>
#include <cstdio>

namespace cusync {

enum class Mode : int32_t { kAuto = -1, kOverlap = 0, kStock = 1, kStreamK = 2, kCluster = 3, kPingpong = 4 };

inline char const* to_string(Mode mode) {
  switch (mode) {
    case Mode::kAuto: return "auto";
    case Mode::kOverlap: return "overlap";
    case Mode::kStock: return "stock";
    case Mode::kStreamK: return "streamk";
    case Mode::kCluster: return "cluster";
    case Mode::kPingpong: return "pingpong";
  }
  return "unknown";
}

// One row of a measured dispatch table: up to m_max rows, run() computes the chain this way.
struct DispatchEntry {
  int32_t m_max;
  Mode mode;
};

// A GEMM whose last wave fills less than this fraction of the SMs loses more to the idle SMs than
// stream-K's partial-sum fix-up costs (measured on the H200: benchmarks/NOTES.md, h2).
constexpr double kStreamKBelowFill = 0.9;

// The ping-pong kernel keeps its two math warp groups busy once a GEMM has a tile for each of them on
// every SM: at least this many 128x128 tiles per SM. Measured on the H200 (benchmarks/NOTES.md h5): with
// at least 2 per SM it was within 13% of cuBLASLt's best algorithm at every point and within 2% at most,
// below that down to 0.70x of it (where stream-K does better).
constexpr int kPingpongTilesPerSm = 2;

// The default when no measured table applies.
//   1. every GEMM has at least kPingpongTilesPerSm ping-pong (128x128) tiles per SM -> kPingpong;
//   2. else, with fill = tiles / (waves * SMs) of each GEMM in the spec's tiles: every GEMM's last wave at
//      least kStreamKBelowFill full -> kStock; otherwise kStreamK, naming the GEMM whose last wave is
//      emptiest.
// gemm_tiles: each GEMM's tiles in the spec's tile shape at this M; pingpong_tiles: in 128x128 tiles.
// Writes the reason (one line) into `reason`.
inline Mode default_mode(int64_t const* gemm_tiles, int64_t const* pingpong_tiles, char const* const* gemm_names,
                         int gemms, int sms, char* reason, int reason_size) {
  int fewest = -1;
  for (int g = 0; g < gemms; ++g) {
    if (fewest < 0 || pingpong_tiles[g] < pingpong_tiles[fewest]) fewest = g;
  }
  if (fewest >= 0 && pingpong_tiles[fewest] >= int64_t(kPingpongTilesPerSm) * sms) {
    std::snprintf(reason, size_t(reason_size),
                  "default rule: every GEMM has at least %d 128x128 tiles per SM (%s: %lld on %d SMs), so CUTLASS's "
                  "ping-pong kernels back to back with PDL", kPingpongTilesPerSm, gemm_names[fewest],
                  (long long)pingpong_tiles[fewest], sms);
    return Mode::kPingpong;
  }
  int worst = -1;
  double worst_fill = 1.0;
  for (int g = 0; g < gemms; ++g) {
    int64_t const waves = (gemm_tiles[g] + sms - 1) / sms;
    double const fill = waves > 0 ? double(gemm_tiles[g]) / double(waves * sms) : 1.0;
    if (fill < worst_fill) {
      worst_fill = fill;
      worst = g;
    }
  }
  if (worst < 0 || worst_fill >= kStreamKBelowFill) {
    std::snprintf(reason, size_t(reason_size),
                  "default rule: every GEMM's last wave fills at least %.0f%% of the %d SMs, so CUTLASS's "
                  "kernels back to back with PDL", kStreamKBelowFill * 100, sms);
    return Mode::kStock;
  }
  std::snprintf(reason, size_t(reason_size),
                "default rule: %s's last wave fills %.0f%% of the %d SMs (%lld tiles), so stream-K spreads its "
                "tiles' K over every SM", gemm_names[worst], worst_fill * 100, sms, (long long)gemm_tiles[worst]);
  return Mode::kStreamK;
}

}  // namespace cusync
