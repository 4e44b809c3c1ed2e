// cusync runtime: epoch-tagged semaphores and the bounded spin-wait.
//
// A semaphore is one 64-bit word: (epoch << 32) | posts. Each run of a chain has a new epoch (a device
// counter that the last block of the previous run bumped, see close_run in stage.cuh), so semaphores
// are never reset between runs, a captured CUDA graph replays correctly, and a semaphore that a smaller
// M did not touch in the last run is simply stale: the first post of the new epoch replaces the old
// value instead of adding to it.
#pragma once

#include <cstdint>

#include "cusync/ptx.cuh"
#include "cusync/sync_error.h"

namespace cusync {

__host__ __device__ constexpr uint64_t tagged(uint32_t epoch, uint32_t posts) {
  return (uint64_t(epoch) << 32) | posts;
}

// Called by ONE thread after __syncthreads(): the block's stores of the tile are done.
// fence.acq_rel.gpu, then two relaxed reductions form the release:
//   red.max(epoch << 32)  lifts a semaphore left over from an earlier run to (epoch, 0); it cannot
//                         lower a value of this epoch, which is always >= (epoch, 0);
//   red.add(1)            counts this post.
// Both are fire-and-forget and ordered with each other (one thread, one address), so tens of tiles
// finishing at once do not serialize the way a CAS loop did (measured: +40 us at M=1 on GPT-3 shapes).
__device__ __forceinline__ void post_add(uint64_t* sem, uint32_t epoch) {
  ptx::fence_acq_rel_gpu();
  ptx::red_max_relaxed_gpu(sem, tagged(epoch, 0));
  ptx::red_add_relaxed_gpu(sem, 1);
}

// The no_atomic_add optimization: a semaphore that gets exactly one post per run is set by a release store.
__device__ __forceinline__ void post_store(uint64_t* sem, uint32_t epoch) {
  ptx::fence_acq_rel_gpu();
  ptx::st_release_gpu(sem, tagged(epoch, 1));
}

struct WaitSite {       // who waits, for the error record
  int32_t stage;
  int32_t producer;
  int32_t tile_m;
  int32_t tile_n;
  int32_t producer_tile_m;
  int32_t producer_tile_n;
  int32_t semaphore;
};

__device__ __forceinline__ void record_timeout_inline(SyncErrorInfo* error, WaitSite site, uint64_t expected,
                                                      uint64_t observed) {
  if (error != nullptr && atomicCAS(&error->flag, 0u, 1u) == 0u) {
    error->stage = site.stage;
    error->producer = site.producer;
    error->tile_m = site.tile_m;
    error->tile_n = site.tile_n;
    error->producer_tile_m = site.producer_tile_m;
    error->producer_tile_n = site.producer_tile_n;
    error->semaphore = site.semaphore;
    error->expected = expected;
    error->observed = observed;
    __threadfence();
  }
}

__device__ __noinline__ inline void record_timeout(SyncErrorInfo* error, WaitSite site, uint64_t expected,
                                                   uint64_t observed) {
  record_timeout_inline(error, site, expected, observed);
}

// Spins until *sem >= expected. Every poll is an ld.acquire.gpu, so the wait always ends on an acquire
// (the original cuSync skipped it when the first weak load already matched). Backs off with __nanosleep
// and gives up after timeout_ns of %globaltimer, leaving a SyncErrorInfo for the host instead of hanging.
// Returns false on timeout; the caller goes on (its results are then undefined, and the host says so).
//
// Two spellings of one loop: spin_wait_at_least is a call (sm80 kernels keep their mainloop small),
// spin_wait_inline has none. A warp-specialized sm90 kernel is one function whose warps run different
// roles: a call anywhere in it made ptxas spill in the 40-register load warp (measured: 100 bytes) and
// keep the math warps' wgmma descriptors out of uniform registers, so sm90 code waits inline.
template <typename Word>
__device__ __forceinline__ bool spin_wait_inline(Word const* sem, Word expected, uint64_t timeout_ns,
                                                 SyncErrorInfo* error, WaitSite site) {
  Word seen = ptx::ld_acquire_gpu(sem);
  if (seen >= expected) return true;
  uint64_t const start = ptx::globaltimer_ns();
  unsigned sleep_ns = 32;
  while (true) {
    __nanosleep(sleep_ns);
    sleep_ns = sleep_ns < 1024 ? sleep_ns * 2 : 1024;
    seen = ptx::ld_acquire_gpu(sem);
    if (seen >= expected) return true;
    // Once any waiter has timed out the run is lost: give up at once instead of timing out again.
    bool const already_failed = error != nullptr && ptx::ld_relaxed_gpu(&error->flag) != 0u;
    if (already_failed || ptx::globaltimer_ns() - start > timeout_ns) {
      record_timeout_inline(error, site, uint64_t(expected), uint64_t(seen));
      return false;
    }
  }
}

template <typename Word>
__device__ __noinline__ bool spin_wait_at_least(Word const* sem, Word expected, uint64_t timeout_ns,
                                                SyncErrorInfo* error, WaitSite site) {
  return spin_wait_inline(sem, expected, timeout_ns, error, site);
}

}  // namespace cusync
