// cusync sm90 backend: how run() computes a chain at a given M, and why.
//
// A chain can be computed seven ways, all on the caller's stream and all capturable in a CUDA graph:
//   kOverlap  our tile-synced kernels, each consumer a programmatic dependent launch of its producer, so
//             that consumer tiles fill the SMs the producer's last wave leaves idle (cuSync);
//   kStock    CUTLASS's persistent kernels for the same tiles and epilogues, back to back, chained with
//             programmatic dependent launch (PDL hides each launch behind the kernel before it);
//   kStreamK  CUTLASS's stream-K kernels, chained with PDL: a GEMM whose last wave would leave SMs idle
//             spreads K-slices of its tiles over every SM instead (another summation order);
//   kCluster  CUTLASS's persistent kernels in 2x1 thread block clusters (the two CTAs of a cluster share
//             each B tile through TMA multicast, halving its L2 reads), chained with PDL;
//   kPingpong CUTLASS's ping-pong kernels in 128x128 tiles (two math warp groups on alternate tiles, each
//             one's epilogue under the other's MMAs), tiles down M in bands of 4, chained with PDL;
//   kCublasLt cuBLASLt's GEMMs (the first algorithm of its heuristic; after autotune(), the fastest of
//             its first eight on this GPU), each activation a kernel of its own (cusync/sm90/cublaslt.cuh):
//             where cuBLAS splits K or picks narrow tiles at small M;
//   kStream   one persistent kernel for the whole two-GEMM chain at decode sizes. Up to M = 4 (every
//             chain whose shapes it takes) the slab kernel: each CTA computes a slab of gemm1's
//             columns and that slab's partial of gemm2 over the weights as the caller laid them out,
//             posts it, and sums its share of the output over every slab in a fixed order
//             (cusync/sm90/slab_chain.cuh). Up to M = 64 with `optimizations: {stream_weights: true}`
//             the bulk kernel: weights packed once at initialize() streamed through a ring of bulk
//             copies, gemm1 and gemm2 back to back on every SM, split K (stream-K) with a
//             deterministic reduction, each K range of gemm2 waiting only for the gemm1 tiles it
//             reads (cusync/sm90/stream_mode.h).
// Which is fastest depends on M, the shapes and the GPU. In order, run() takes: set_mode()'s mode; the
// table autotune() measured on this GPU (cusync/sm90/autotune.h), up to the largest M it timed; the
// table measured by `cusync-gen tune` (the spec's `dispatch:`) on a GPU with this SM count, up to its
// last M; otherwise a rule from the tile counts (default_mode below).
#pragma once

#include <cstdint>
#include <cstdio>

namespace cusync {

enum class Mode : int32_t {
  kAuto = -1, kOverlap = 0, kStock = 1, kStreamK = 2, kCluster = 3, kPingpong = 4, kCublasLt = 5, kStream = 6
};

inline bool valid_mode(Mode mode) { return int32_t(mode) >= int32_t(Mode::kAuto) && int32_t(mode) <= int32_t(Mode::kStream); }

inline char const* to_string(Mode mode) {
  switch (mode) {
    case Mode::kAuto: return "auto";
    case Mode::kOverlap: return "overlap";
    case Mode::kStock: return "stock";
    case Mode::kStreamK: return "streamk";
    case Mode::kCluster: return "cluster";
    case Mode::kPingpong: return "pingpong";
    case Mode::kCublasLt: return "cublaslt";
    case Mode::kStream: return "stream";
  }
  return "unknown";
}

// One row of a measured dispatch table: up to m_max rows, run() computes the chain this way.
struct DispatchEntry {
  int32_t m_max;
  Mode mode;
};

constexpr int kRunModes = int(Mode::kStream) + 1;  // every mode but kAuto

// What autotune() timed at one M: each candidate mode and its median (mode_reason() says them, so that a
// caller sees how close the modes were, not only which won).
struct TunedTimes {
  int m = 0;
  int count = 0;
  Mode mode[kRunModes] = {};
  float us[kRunModes] = {};
};

// The row of `table` (`entries` rows, growing m_max) that covers M rows: the first with M <= m_max;
// -1 past the last row (the table does not apply). The one lookup of both tables run() reads (the
// spec's, and autotune()'s).
inline int dispatch_entry(DispatchEntry const* table, int entries, int m) {
  for (int e = 0; e < entries; ++e) {
    if (m <= table[e].m_max) return e;
  }
  return -1;
}

// At most this many M per autotune() (the table it builds has at most as many entries).
constexpr int kMaxTunedMs = 32;

// The ping-pong kernel keeps its two math warp groups busy once a GEMM has a tile for each of them on
// every SM: at least this many 128x128 tiles per SM. Measured on the H200: with
// at least 2 per SM it was within 13% of cuBLASLt's best algorithm at every point and within 2% at most;
// with fewer, down to 0.70x of it, and cuBLAS's chain beat every CUTLASS mode (stream-K included) by
// 4-13% at M = 256 and 512 on both MLP examples.
constexpr int kPingpongTilesPerSm = 2;
// The ping-pong kernel's tile side (M and N; cusync::sm90::PingpongConfig in gemm.cuh).
constexpr int kPingpongTile = 128;

// Mode kStream's slab kernel streams both GEMMs' weights near the read's pace when the first GEMM's weights are
// column-major (each weight column contiguous, as torch.nn.Linear keeps them): measured on the H100 in the
// project bench (GPT-3's shard fp16, a LLaMA gated MLP bf16), 1.05-1.06x faster than the cuBLASLt chain at one
// row, 0.99-1.01x at two (its partials' traffic doubles) and 0.89x at 3 and 4.
constexpr int kSlabDefaultMaxM = 1;
// With both GEMMs' weights column-major (torch.nn.Linear's layout) it has no partials: each SM computes whole
// output columns after every slab's post. Measured on the H100 in the project bench: 1.10x and 1.08x faster
// than the cuBLASLt chain at one row (GPT-3's shard, the LLaMA gated MLP), 1.05x and 1.01x at two, 0.97-0.98x and
// 0.88x at 3-4 (not profiled; the CUDA-core dot products and their unpacking grow with the rows).
constexpr int kSlabGatherDefaultMaxM = 2;

// The default when no measured table applies, first: where the chain's slab kernel runs at M rows over
// column-major first weights (w1_col) and M <= kSlabDefaultMaxM (kSlabGatherDefaultMaxM where the second
// GEMM's weights are column-major too, w2_col) -> kStream, with the reason in `reason`; else kAuto
// (default_mode decides).
inline Mode slab_default(int m, bool w1_col, bool w2_col, char* reason, int reason_size) {
  int const max_m = w2_col ? kSlabGatherDefaultMaxM : kSlabDefaultMaxM;
  if (!w1_col || m > max_m) return Mode::kAuto;
  if (w2_col) {
    std::snprintf(reason, size_t(reason_size),
                  "default rule: M = %d <= %d and both GEMMs' weights are column-major, so mode stream's slab kernel "
                  "(every SM streams its own slab of the first GEMM's weights, posts it, then whole output columns "
                  "of the second's once every slab is posted)",
                  m, max_m);
  } else {
    std::snprintf(reason, size_t(reason_size),
                  "default rule: M = %d <= %d and the first GEMM's weights are column-major, so mode stream's slab "
                  "kernel (every SM streams its own slab of both GEMMs' weights, no hand-over between them)",
                  m, max_m);
  }
  return Mode::kStream;
}

// Otherwise: every GEMM has at least kPingpongTilesPerSm 128x128 tiles
// per SM -> kPingpong; otherwise kCublasLt (kStreamK where the library was built without cuBLASLt),
// naming the GEMM with the fewest. pingpong_tiles: each GEMM's 128x128 tiles at this M. Writes the reason
// (one line) into `reason`.
inline Mode default_mode(int64_t const* pingpong_tiles, char const* const* gemm_names, int gemms, int sms,
                         bool cublaslt, char* reason, int reason_size) {
  int fewest = -1;
  for (int g = 0; g < gemms; ++g) {
    if (fewest < 0 || pingpong_tiles[g] < pingpong_tiles[fewest]) fewest = g;
  }
  if (fewest < 0) {
    std::snprintf(reason, size_t(reason_size), "default rule: no GEMM, so CUTLASS's kernels back to back");
    return Mode::kStock;
  }
  if (pingpong_tiles[fewest] >= int64_t(kPingpongTilesPerSm) * sms) {
    std::snprintf(reason, size_t(reason_size),
                  "default rule: every GEMM has at least %d 128x128 tiles per SM (%s: %lld on %d SMs), so CUTLASS's "
                  "ping-pong kernels back to back with PDL", kPingpongTilesPerSm, gemm_names[fewest],
                  (long long)pingpong_tiles[fewest], sms);
    return Mode::kPingpong;
  }
  std::snprintf(reason, size_t(reason_size), "default rule: %s has fewer than %d 128x128 tiles per SM (%lld on %d SMs), so %s",
                gemm_names[fewest], kPingpongTilesPerSm, (long long)pingpong_tiles[fewest], sms,
                cublaslt ? "cuBLASLt's kernels (split K, narrow tiles)"
                         : "stream-K (the library was built without cuBLASLt)");
  return cublaslt ? Mode::kCublasLt : Mode::kStreamK;
}

}  // namespace cusync
