// cusync runtime: synchronization policies, i.e. which semaphore guards which producer tile.
//
// The semaphore grid always belongs to the producer: a producer tile (pm, pn) posts to
// semaphore_of(pm, pn), and a consumer that reads producer rows of tile pm and columns of tile pn waits
// on the same index until it holds `posts` posts of this run's epoch.
#pragma once

#include <cstdint>

namespace cusync {

enum class PolicyKind : int32_t {
  kNone = 0,     // no tile sync on this edge (the consumer runs after the producer, or reads external input)
  kTile = 1,     // TileSync: one semaphore per producer tile, one post each
  kRow = 2,      // RowSync: one semaphore per producer tile row, posted by each of its tiles_n tiles
  kStrided = 3,  // StridedSync: one semaphore per row and strided group {pn, pn + stride, ...}
  kConv2DTile = 4,  // Conv2DTileSync: TileSync for implicit-GEMM convolutions, whose rows are N*P*Q
                    // output pixels: a consumer tile also needs the halo rows of its R x S window
};

struct SyncPolicy {
  PolicyKind kind = PolicyKind::kNone;
  int32_t tile_m = 0;        // producer tile rows
  int32_t tile_n = 0;        // producer tile columns
  int32_t sems_per_row = 0;  // semaphores per producer tile row
  int32_t posts = 0;         // posts one semaphore receives per run
  int32_t stride_tiles = 0;  // StridedSync: distance, in producer tiles, between members of a group
  int32_t halo_rows = 0;     // Conv2DTileSync: rows of the flattened pixel dimension a window reaches out

  __host__ __device__ bool enabled() const { return kind != PolicyKind::kNone; }

  __host__ __device__ int32_t semaphore_of(int32_t pm, int32_t pn) const {
    switch (kind) {
      case PolicyKind::kTile:
      case PolicyKind::kConv2DTile: return pm * sems_per_row + pn;
      case PolicyKind::kRow: return pm;
      case PolicyKind::kStrided: return pm * sems_per_row + pn % stride_tiles;
      default: return 0;
    }
  }

  __host__ __device__ int32_t semaphore_count(int32_t tiles_m) const { return tiles_m * sems_per_row; }

  // The producer tile rows a consumer reading rows [row_begin, row_end) must wait for: its own rows,
  // widened by the convolution halo and clamped to the producer's `tiles_m` rows of tiles.
  __host__ __device__ int32_t first_row_tile(int32_t row_begin) const {
    int32_t const row = row_begin - halo_rows;
    return row > 0 ? row / tile_m : 0;
  }
  __host__ __device__ int32_t last_row_tile(int32_t row_end, int32_t tiles_m) const {
    int32_t const last = (row_end - 1 + halo_rows) / tile_m;
    return last < tiles_m - 1 ? last : tiles_m - 1;
  }
};

// The policies of the cuSync paper, built from the producer's tile shape and grid width.
inline SyncPolicy NoSync() { return SyncPolicy{}; }

inline SyncPolicy TileSync(int32_t tile_m, int32_t tile_n, int32_t tiles_n) {
  return SyncPolicy{PolicyKind::kTile, tile_m, tile_n, tiles_n, 1, 0};
}

inline SyncPolicy RowSync(int32_t tile_m, int32_t tile_n, int32_t tiles_n) {
  return SyncPolicy{PolicyKind::kRow, tile_m, tile_n, 1, tiles_n, 0};
}

// Each consumer tile needs producer tiles pn and pn + stride_tiles (e.g. the gate and up halves of a
// GLU projection), so one semaphore per group collects `group_size` posts.
inline SyncPolicy StridedSync(int32_t tile_m, int32_t tile_n, int32_t stride_tiles, int32_t group_size) {
  return SyncPolicy{PolicyKind::kStrided, tile_m, tile_n, stride_tiles, group_size, stride_tiles};
}

// A 'same' R x S convolution over an output of width `width_q` pixels (rows are flattened N*P*Q): the
// window of output pixel row r reaches rows r - halo .. r + halo of the producer, halo = (R/2)*Q + S/2.
inline SyncPolicy Conv2DTileSync(int32_t tile_m, int32_t tile_n, int32_t tiles_n, int32_t window_r,
                                 int32_t window_s, int32_t width_q) {
  return SyncPolicy{PolicyKind::kConv2DTile, tile_m, tile_n, tiles_n, 1, 0, (window_r / 2) * width_q + window_s / 2};
}

}  // namespace cusync
