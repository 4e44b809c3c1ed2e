// cusync runtime: the wait kernel, launched between a producer and its consumer on sm80.
#pragma once

#include <cstdint>

#include "cusync/ptx.cuh"
#include "cusync/semaphore.cuh"
#include "cusync/stage.cuh"

namespace cusync {

// The wait kernel: launched on the consumer's stream just before the consumer, it returns once EVERY
// block of the producer has started (the original cuSync watched only block 0). Only then may consumer
// blocks take SM slots, so they can never starve a producer block that has not been scheduled yet.
static __global__ void wait_started_kernel(ChainState* state, int32_t waiting_stage, int32_t producer,
                                    uint32_t producer_blocks, uint64_t timeout_ns) {
  if (threadIdx.x != 0) return;
  uint32_t const base = ptx::ld_relaxed_gpu(&state->started_base[producer]);
  uint32_t const* counter = &state->started[producer];
  WaitSite const site{waiting_stage, producer, -1, -1, -1, -1, -1};
  uint64_t const start = ptx::globaltimer_ns();
  unsigned sleep_ns = 64;
  uint32_t seen = ptx::ld_acquire_gpu(counter) - base;
  while (seen < producer_blocks) {
    if (ptx::globaltimer_ns() - start > timeout_ns || ptx::ld_relaxed_gpu(&state->error.flag) != 0u) {
      record_timeout(&state->error, site, producer_blocks, seen);
      return;
    }
    __nanosleep(sleep_ns);
    sleep_ns = sleep_ns < 1024 ? sleep_ns * 2 : 1024;
    seen = ptx::ld_acquire_gpu(counter) - base;
  }
}

}  // namespace cusync
