// Host-side checks of the CuSync policy index math (compiled by nvcc, run on the CPU; no GPU needed).
// For every policy and many grid shapes: every producer tile posts to a semaphore inside the allocated
// range; each semaphore receives exactly `posts` posts per run; a consumer's wait index for any element
// is the semaphore its producer tile posts to; tile orders are permutations of the grid.
#include <cstdio>
#include <vector>

#include "cusync/policy.h"
#include "cusync/tile_order.h"

static int failures = 0;
#define CHECK(cond, ...)                      \
  do {                                        \
    if (!(cond)) {                            \
      std::printf("FAIL %s: ", #cond);        \
      std::printf(__VA_ARGS__);               \
      std::printf("\n");                      \
      ++failures;                             \
    }                                         \
  } while (0)

static void check_policy(char const* name, cusync::SyncPolicy const& p, int tiles_m, int tiles_n) {
  int const count = p.semaphore_count(tiles_m);
  std::vector<int> posts(count, 0);
  for (int pm = 0; pm < tiles_m; ++pm) {
    for (int pn = 0; pn < tiles_n; ++pn) {
      int const s = p.semaphore_of(pm, pn);
      CHECK(s >= 0 && s < count, "%s: tile (%d,%d) -> semaphore %d of %d", name, pm, pn, s, count);
      if (s >= 0 && s < count) ++posts[s];
      // A consumer reading any element of this producer tile waits on the same semaphore.
      int const row = pm * p.tile_m + p.tile_m - 1, col = pn * p.tile_n + p.tile_n / 2;
      CHECK(p.semaphore_of(row / p.tile_m, col / p.tile_n) == s, "%s: element (%d,%d)", name, row, col);
    }
  }
  for (int s = 0; s < count; ++s) CHECK(posts[s] == p.posts, "%s: semaphore %d gets %d posts, expected %d", name, s, posts[s], p.posts);
}

int main() {
  int checked = 0;
  for (int tiles_m = 1; tiles_m <= 9; ++tiles_m) {
    for (int half = 1; half <= 12; ++half) {
      int const tiles_n = 2 * half;
      check_policy("TileSync", cusync::TileSync(128, 128, tiles_n), tiles_m, tiles_n);
      check_policy("RowSync", cusync::RowSync(64, 128, tiles_n), tiles_m, tiles_n);
      check_policy("StridedSync", cusync::StridedSync(128, 64, half, 2), tiles_m, tiles_n);
      check_policy("Conv2DTileSync", cusync::Conv2DTileSync(128, 64, tiles_n, 3, 3, 56), tiles_m, tiles_n);
      for (auto order : {cusync::TileOrder::kRowMajor, cusync::TileOrder::kColumnMajor, cusync::TileOrder::kBanded,
                         cusync::TileOrder::kColumnBanded}) {
        std::vector<int> seen(tiles_m * tiles_n, 0);
        for (int i = 0; i < tiles_m * tiles_n; ++i) {
          cusync::TileCoord t = cusync::tile_of(order, i, tiles_m, tiles_n);
          CHECK(t.m >= 0 && t.m < tiles_m && t.n >= 0 && t.n < tiles_n, "tile_of(%d) out of grid", i);
          ++seen[t.m * tiles_n + t.n];
        }
        for (int v : seen) CHECK(v == 1, "tile order is not a permutation");
      }
      checked += 5;
    }
  }
  // RowSync: tile order row-major completes row 0 first.
  cusync::TileCoord const t = cusync::tile_of(cusync::TileOrder::kRowMajor, 5, 4, 8);
  CHECK(t.m == 0 && t.n == 5, "row-major ticket 5 of a 4x8 grid is (%d,%d)", t.m, t.n);
  // Banded: kBandRows (4) tile rows column by column, then the last 2 rows of a 10x4 grid.
  cusync::TileCoord const b0 = cusync::tile_of(cusync::TileOrder::kBanded, 4, 10, 4);
  cusync::TileCoord const b1 = cusync::tile_of(cusync::TileOrder::kBanded, 33, 10, 4);
  cusync::TileCoord const b2 = cusync::tile_of(cusync::TileOrder::kBanded, 34, 10, 4);
  CHECK(b0.m == 0 && b0.n == 1 && b1.m == 9 && b1.n == 0 && b2.m == 8 && b2.n == 1, "banded order");
  // Column-banded: kBandRows (4) tile columns row by row, then the last 2 columns of a 3x10 grid.
  cusync::TileCoord const c0 = cusync::tile_of(cusync::TileOrder::kColumnBanded, 4, 3, 10);
  cusync::TileCoord const c1 = cusync::tile_of(cusync::TileOrder::kColumnBanded, 24, 3, 10);
  cusync::TileCoord const c2 = cusync::tile_of(cusync::TileOrder::kColumnBanded, 29, 3, 10);
  CHECK(c0.m == 1 && c0.n == 0 && c1.m == 0 && c1.n == 8 && c2.m == 2 && c2.n == 9, "column-banded order");
  // Conv2DTileSync halo: a 3x3 window on 56-wide images reaches 57 rows; a 128-row tile at rows
  // [128, 256) waits for producer row tiles 0..2 of 10, and the first tile for 0..1.
  cusync::SyncPolicy const conv = cusync::Conv2DTileSync(128, 64, 4, 3, 3, 56);
  CHECK(conv.halo_rows == 57, "halo %d", conv.halo_rows);
  CHECK(conv.first_row_tile(128) == 0 && conv.last_row_tile(256, 10) == 2, "window of tile 1");
  CHECK(conv.first_row_tile(0) == 0 && conv.last_row_tile(128, 10) == 1, "window of tile 0");
  CHECK(conv.last_row_tile(1280, 10) == 9, "window clamps to the last producer row tile");
  // RowSync without halo covers exactly its own row tile.
  cusync::SyncPolicy const row = cusync::RowSync(128, 128, 8);
  CHECK(row.first_row_tile(256) == 2 && row.last_row_tile(384, 10) == 2, "row window");
  std::printf("policy math: %d grids checked, %d failures\n", checked, failures);
  return failures == 0 ? 0 : 1;
}
