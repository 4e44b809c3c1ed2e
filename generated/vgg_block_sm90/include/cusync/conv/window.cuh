// cusync conv backend: what a conv tile waits for, shared by the sm80 kernel (conv.cuh) and the sm90 one
// (conv_sm90.cuh): the producer rows under its R x S windows (ConvWindow), the residual's rows, and the
// warp-parallel bounded poll over their semaphores (ConvWaits).
#pragma once

#include <cstdint>

#include "cusync/conv/chain.h"
#include "cusync/stage.cuh"

namespace cusync::conv {

// What a consumer tile of a convolution reads of its producer: the input rows of its output pixels' R x S
// windows. Pixels are flattened NHWC rows: output pixel m = (n * P + p) * Q + q, input pixel (n * H + h) * W + w.
// A tile of output pixels [m0, m1) spans images n0..n1 and output rows p0 (of n0) .. p1 (of n1); it reads
// input rows h_lo(p0) of image n0 through h_hi(p1) of image n1, every column: one contiguous range of
// producer pixels, clamped at the image borders (padding reads no producer data). cusync_gen/conv_plan.py
// computes the same range, and cusync_gen/verify_conv.py proves it covers every pixel the window reads.
struct ConvWindow {
  int32_t h = 0, w = 0;        // the input image (the producer's output)
  int32_t p = 0, q = 0;        // the output image
  int32_t r = 1;               // filter rows
  int32_t stride = 1, pad = 0, dilation = 1;

  __host__ __device__ int32_t first_row(int32_t out_row) const {  // the first input row output row p reads
    int32_t const h0 = out_row * stride - pad;
    return h0 > 0 ? h0 : 0;
  }
  __host__ __device__ int32_t last_row(int32_t out_row) const {
    int32_t const h1 = out_row * stride - pad + (r - 1) * dilation;
    return h1 < h - 1 ? h1 : h - 1;
  }
  // Producer pixels [first, last] that output pixels [m0, m1) read. 32-bit arithmetic: every pixel index of a run
  // is below 2^30 (spec.rules and ConvChain::initialize bound batch * H * W and batch * P * Q), and a 64-bit
  // division is a long sequence that the 40-register load warp of a persistent sm90 kernel paid on every tile.
  __host__ __device__ int32_t first_pixel(int32_t m0) const {
    int32_t const pq = p * q;
    int32_t const n = m0 / pq;
    int32_t const pr = (m0 - n * pq) / q;
    return (n * h + first_row(pr)) * w;
  }
  __host__ __device__ int32_t last_pixel(int32_t m1) const {
    int32_t const pq = p * q;
    int32_t const n = (m1 - 1) / pq;
    int32_t const pr = (m1 - 1 - n * pq) / q;
    return (n * h + last_row(pr)) * w + (w - 1);
  }
};

// One semaphore a tile waits for: which edge it belongs to, which producer tile row.
struct RowWait {
  InputWait const* edge;
  int32_t producer_tile_m;
};

// The waits of one tile, polled by one warp in parallel: lane i polls semaphore i of the list (base + i for
// lists longer than 32), every poll an ld.acquire.gpu; the warp leaves once a vote says every lane's
// semaphore is complete. Backs off with __nanosleep from 32 ns, doubling up to kMaxSleepNs: short, since
// a tile row of the producer completes in microseconds, and a long sleep would delay the wake-up by as
// much. Bounded: after timeout_ns (or once another waiter gave up) the first lane whose semaphore is still
// short records the tile and that semaphore (the host's describe() names both), and the warp goes on. The
// bound is the whole call's, whatever the number of semaphores (a loader that waits for this warp's count
// may then bound its own wait by a multiple of timeout_ns).
// `at(i)` gives wait i of `count`. The caller's barrier then publishes the lanes' acquires to the block.
constexpr unsigned kMaxSleepNs = 256;

// assume_posted (profiling): every semaphore counts as complete once its first poll returns.
// kInline: the timeout's record without a call (see ConvWaits::wait_inline).
template <bool kInline, typename At>
__device__ __forceinline__ void wait_rows_warp(int32_t count, At const& at, uint32_t epoch, TileCoord self,
                                               uint64_t timeout_ns, bool assume_posted) {
  unsigned const lane = threadIdx.x % 32;
  uint64_t start = 0;  // the first time a poll found a semaphore short
  for (int32_t base = 0; base < count; base += 32) {  // warp-uniform trip count
    int32_t const i = base + int32_t(lane);
    bool const mine = i < count;
    RowWait const w = at(mine ? i : base);
    InputWait const& edge = *w.edge;
    int32_t const index = edge.policy.semaphore_of(w.producer_tile_m, 0);
    uint64_t const* sem = edge.semaphores + index;
    // The load first, then the epoch's use: at a kernel's first tile the caller's epoch load is still in flight,
    // and both round trips overlap. A lane without a semaphore reads as complete.
    uint64_t seen = mine ? ptx::ld_acquire_gpu(sem) : ~uint64_t(0);
    uint64_t const expected = assume_posted ? 0u : tagged(epoch, uint32_t(edge.policy.posts));
    if (__all_sync(0xFFFFFFFFu, seen >= expected)) continue;
    if (start == 0) start = ptx::globaltimer_ns();
    unsigned sleep_ns = 32;
    while (true) {
      __nanosleep(sleep_ns);
      sleep_ns = sleep_ns < kMaxSleepNs ? sleep_ns * 2 : kMaxSleepNs;
      if (seen < expected) seen = ptx::ld_acquire_gpu(sem);  // a complete semaphore stays complete this epoch
      if (__all_sync(0xFFFFFFFFu, seen >= expected)) break;
      bool const late = ptx::globaltimer_ns() - start > timeout_ns ||
                        (edge.state != nullptr && ptx::ld_relaxed_gpu(&edge.state->error.flag) != 0u);
      unsigned const short_lanes = __ballot_sync(0xFFFFFFFFu, seen < expected);
      if (__any_sync(0xFFFFFFFFu, late)) {
        if (lane == unsigned(__ffs(short_lanes) - 1)) {  // the first lane still short names its semaphore
          WaitSite const site{edge.stage, edge.producer, self.m, self.n, w.producer_tile_m, 0, index};
          if constexpr (kInline) {
            record_timeout_inline(&edge.state->error, site, expected, seen);
          } else {
            record_timeout(&edge.state->error, site, expected, seen);
          }
        }
        return;  // the run is lost (the host says so); do not time out once per list entry
      }
    }
  }
}

// The edges of one conv stage: its producer through the window, and an earlier stage's output added as the
// residual (same pixels as the output tile). Both producers post RowSync semaphores (one per tile row of
// output pixels, all of the row's channel tiles).
struct ConvWaits {
  ConvWindow window{};
  int64_t pixels = 0;                 // output pixels, N * P * Q
  int32_t tile_m = 0;                 // this stage's output pixels per tile
  int32_t producer_tiles_m = 0;
  int32_t residual_tiles_m = 0;
  InputWait residual{};               // disabled: no residual, or the chain input
  // Back to back chained with programmatic dependent launch (sm90): this kernel may start while the one
  // before it on the stream still runs; griddepcontrol.wait, before any load, waits for that whole kernel
  // (and its memory). What it saves is the launch: the blocks are already resident when it ends.
  bool wait_primary_first = false;
  unsigned hooks = 0;                 // ConvHooks bits (cusync/conv/chain.h); 0 where the run is not synced
  // The sm90 persistent kernel's poll warp (kHookPollAhead): the offset in dynamic shared memory of its count of
  // tiles whose waits are satisfied (cusync/conv/conv_sm90.cuh); 0: each loader waits itself.
  uint32_t polled_at = 0;

  // Warp 0 of the block (all 32 lanes), before any load of producer data; the caller's barrier publishes
  // the acquires. The producer tile rows of the window, then those of the residual, one lane each.
  __device__ __noinline__ void wait(InputWait const& input, uint32_t epoch, TileCoord tile) const {
    wait_impl<false>(input, epoch, tile);
  }
  // The same without a call, for the load warp of a warp-specialized kernel (sm90): a call anywhere in such a
  // kernel costs its other warps registers (see spin_wait_inline in cusync/semaphore.cuh).
  __device__ __forceinline__ void wait_inline(InputWait const& input, uint32_t epoch, TileCoord tile) const {
    wait_impl<true>(input, epoch, tile);
  }
  // Only the window's rows, or only the residual's: the persistent sm90 kernel reads the residual in its own
  // warp (the epilogue's loads), which waits for it there.
  __device__ __forceinline__ void wait_window_inline(InputWait const& input, uint32_t epoch, TileCoord tile) const {
    wait_impl<true>(input, epoch, tile, /*with_window=*/true, /*with_residual=*/false);
  }
  __device__ __forceinline__ void wait_residual_inline(uint32_t epoch, TileCoord tile) const {
    wait_impl<true>(residual, epoch, tile, /*with_window=*/false, /*with_residual=*/true);
  }

  // The tile's output pixels [m0, m1) (the last tile row may be short).
  __device__ __forceinline__ void tile_pixels(TileCoord tile, int32_t& m0, int32_t& m1) const {
    m0 = tile.m * tile_m;
    m1 = m0 + tile_m < int32_t(pixels) ? m0 + tile_m : int32_t(pixels);
  }
  // The producer tile rows of the tile's window: first..last (empty: last < first). The window's rows, widened
  // to the next tile row's first one (and, for the first and last tile rows, to the producer's first and last):
  // a stride larger than the window's reach leaves producer rows that no window reads, and every producer tile
  // must still be waited for by someone before the run closes (close_run in cusync/stage.cuh bumps the epoch
  // that the producer's posts are tagged with).
  __device__ __forceinline__ void window_rows(InputWait const& input, TileCoord tile, int32_t& first,
                                              int32_t& last) const {
    int32_t m0, m1;
    tile_pixels(tile, m0, m1);
    int32_t const tiles = (int32_t(pixels) + tile_m - 1) / tile_m;
    int32_t const ptm = input.policy.tile_m;
    first = tile.m == 0 ? 0 : window.first_pixel(m0) / ptm;
    last = window.last_pixel(m1) / ptm;
    if (tile.m + 1 < tiles) {
      int32_t const next = window.first_pixel(m1) / ptm - 1;
      last = next > last ? next : last;
    } else {
      last = producer_tiles_m - 1;
    }
    last = last < producer_tiles_m - 1 ? last : producer_tiles_m - 1;
  }
  // The residual's tile rows holding the tile's own output pixels.
  __device__ __forceinline__ void residual_rows(TileCoord tile, int32_t& first, int32_t& last) const {
    int32_t m0, m1;
    tile_pixels(tile, m0, m1);
    first = m0 / residual.policy.tile_m;
    last = (m1 - 1) / residual.policy.tile_m;
    last = last < residual_tiles_m - 1 ? last : residual_tiles_m - 1;
  }

  template <bool kInline>
  __device__ __forceinline__ void wait_impl(InputWait const& input, uint32_t epoch, TileCoord tile,
                                            bool with_window = true, bool with_residual = true) const {
    int32_t first = 0, last = -1;
    if (input.enabled && with_window) window_rows(input, tile, first, last);
    int32_t r_first = 0, r_last = -1;
    if (residual.enabled && with_residual) residual_rows(tile, r_first, r_last);
    int32_t const n_input = last - first + 1;
    int32_t const count = n_input + (r_last - r_first + 1);
    InputWait const* const edge_input = &input;
    InputWait const* const edge_residual = &residual;
    auto at = [&](int32_t i) {
      return i < n_input ? RowWait{edge_input, first + i} : RowWait{edge_residual, r_first + (i - n_input)};
    };
    wait_rows_warp<kInline>(count, at, epoch, tile, input.enabled && with_window ? input.timeout_ns : residual.timeout_ns,
                   (hooks & kHookAssumePosted) != 0u);
  }
};

}  // namespace cusync::conv
