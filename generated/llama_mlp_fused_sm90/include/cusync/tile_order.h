// cusync runtime: tile orders, i.e. which output tile the i-th started block of a stage computes.
#pragma once

#include <cstdint>

namespace cusync {

enum class TileOrder : int32_t {
  kRowMajor = 0,     // all N tiles of tile row 0 first: rows complete early (what RowSync consumers want)
  kColumnMajor = 1,  // all M tiles of tile column 0 first (CUTLASS's identity swizzle)
  kBanded = 2,       // bands of kBandRows tile rows, column by column inside a band: a band's rows complete
                     // together, and each B (weight) tile is read from memory once per band, not once per row
};

constexpr int32_t kBandRows = 4;

struct TileCoord {
  int32_t m;
  int32_t n;
};

__host__ __device__ inline TileCoord tile_of(TileOrder order, int32_t linear, int32_t tiles_m, int32_t tiles_n) {
  if (order == TileOrder::kRowMajor) return TileCoord{linear / tiles_n, linear % tiles_n};
  if (order == TileOrder::kBanded) {
    int32_t const band = linear / (kBandRows * tiles_n);
    int32_t const first_row = band * kBandRows;
    int32_t const rows = tiles_m - first_row < kBandRows ? tiles_m - first_row : kBandRows;
    int32_t const r = linear - first_row * tiles_n;
    return TileCoord{first_row + r % rows, r / rows};
  }
  return TileCoord{linear % tiles_m, linear / tiles_m};
}

}  // namespace cusync
