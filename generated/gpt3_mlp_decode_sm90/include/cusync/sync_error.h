// cusync runtime: the record a timed-out spin-wait leaves for the host.
#pragma once

#include <cstdint>

namespace cusync {

// Written once, by the first waiter that gives up (flag 0 -> 1 by CAS); the host reads it after run().
struct SyncErrorInfo {
  uint32_t flag;       // 0: no timeout happened
  int32_t stage;       // the stage that waited (index in the chain), or -1 for a wait kernel
  int32_t producer;    // the stage it waited on
  int32_t tile_m;      // the waiting block's output tile (-1 for a wait kernel)
  int32_t tile_n;
  int32_t producer_tile_m;  // the producer tile it waited for (-1: all producer blocks to start)
  int32_t producer_tile_n;
  int32_t semaphore;   // index of the semaphore (-1: the producer's started-blocks counter)
  uint64_t expected;   // value the waiter needed (epoch << 32 | posts)
  uint64_t observed;   // value it last saw
};

}  // namespace cusync
