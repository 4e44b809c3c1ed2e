// cusync runtime: tile orders, i.e. which output tile the i-th started block of a stage computes.
#pragma once

#include <cstdint>

namespace cusync {

enum class TileOrder : int32_t {
  kRowMajor = 0,     // all N tiles of tile row 0 first: rows complete early (what RowSync consumers want)
  kColumnMajor = 1,  // all M tiles of tile column 0 first (CUTLASS's identity swizzle)
};

struct TileCoord {
  int32_t m;
  int32_t n;
};

__host__ __device__ inline TileCoord tile_of(TileOrder order, int32_t linear, int32_t tiles_m, int32_t tiles_n) {
  if (order == TileOrder::kRowMajor) return TileCoord{linear / tiles_n, linear % tiles_n};
  return TileCoord{linear % tiles_m, linear / tiles_m};
}

}  // namespace cusync
