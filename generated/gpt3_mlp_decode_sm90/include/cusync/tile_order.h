// cusync runtime: tile orders, i.e. which output tile the i-th started block of a stage computes.
#pragma once

#include <cstdint>

namespace cusync {

enum class TileOrder : int32_t {
  kRowMajor = 0,     // all N tiles of tile row 0 first: rows complete early (what RowSync consumers want)
  kColumnMajor = 1,  // all M tiles of tile column 0 first (CUTLASS's identity swizzle)
  kBanded = 2,       // bands of kBandRows tile rows, column by column inside a band: a band's rows complete
                     // together, and each B (weight) tile is read from memory once per band, not once per row
  kColumnBanded = 3, // bands of kBandRows tile columns, row by row inside a band (CUTLASS's raster along M
                     // with swizzle 4): the band's B columns stay in L2 while A streams down M; a tile row
                     // completes only with the last band (for TileSync or no sync, not RowSync)
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
  if (order == TileOrder::kColumnBanded) {
    int32_t const band = linear / (kBandRows * tiles_m);
    int32_t const first_col = band * kBandRows;
    int32_t const cols = tiles_n - first_col < kBandRows ? tiles_n - first_col : kBandRows;
    int32_t const r = linear - first_col * tiles_m;
    return TileCoord{r / cols, first_col + r % cols};
  }
  return TileCoord{linear % tiles_m, linear / tiles_m};
}

}  // namespace cusync
