// cusync sm90 backend: a persistent tile scheduler that hands out tiles in dependency order.
//
// CUTLASS's persistent scheduler gives CTA b the tiles b, b + grid, b + 2 grid, ...: a tile's owner is
// fixed when the grid launches. When a consumer kernel's CTAs start one by one as producer CTAs leave,
// the first consumer CTAs to start may then own tiles whose producer rows are not ready, while ready
// tiles wait for a CTA that has not started. Here every tile is a ticket from one atomic counter per
// stage, taken in the stage's tile order (row-major: a producer's rows complete first, which is what a
// RowSync consumer waits for), so tiles start in exactly the order the chain wants them, and a CTA that
// starts late simply takes the next ticket.
//
// The warp roles of a warp-specialized kernel must agree on the tile. The mainloop load warp (warp 0)
// is always ahead of the math warps, so it takes the tickets and publishes each one in a small ring in
// shared memory; the math warps read the ring in the same sequence. A slot is reused only after every
// reader warp has read it, so the ring never overruns however far the load warp runs ahead.
//
// The counter resets itself: each CTA takes exactly one ticket past the end; the last CTA to do so sets
// the counter back to zero. No host memset, and a captured CUDA graph replays correctly.
#pragma once

#include <cstdint>

#include "cutlass/gemm/kernel/sm90_tile_scheduler.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

#include "cusync/ptx.cuh"
#include "cusync/stage.cuh"
#include "cusync/tile_order.h"

namespace cusync::sm90 {

// Selects TicketTileScheduler in cutlass::gemm::kernel::GemmUniversal (the tile scheduler tag).
struct TicketScheduler {};

// The device state and shape of one stage's tile queue.
struct TileQueue {
  uint32_t* next = nullptr;          // tickets taken in this run (reset by the last CTA)
  uint32_t* exited = nullptr;        // CTAs that took their past-the-end ticket in this run
  int32_t tiles_m = 0;
  int32_t tiles_n = 0;
  TileOrder order = TileOrder::kRowMajor;
  bool dynamic = true;               // tickets; false: CTA b takes tiles b, b + grid, ... (no atomics, no ring)
  int32_t reader_warps = 0;          // warps other than the load warp that follow the ring (math warps)
  bool trigger_dependents = false;   // PDL: let the next kernel launch once every CTA has started
  bool wait_primary_at_exit = false; // finish only after the kernel this one was launched behind finished
  uint64_t timeout_ns = 2000000000ull;
  uint32_t ring_offset = 0;          // bytes from the start of dynamic shared memory to the ticket ring
  uint64_t* trace = nullptr;         // optional tile trace (TileTrace): the start of each tile
};

namespace detail {

constexpr int kRingSlots = 16;

struct TicketRing {
  int32_t tile[kRingSlots];         // linear tile index, -1 past the end
  uint32_t reads[kRingSlots];       // reader warps that have read the slot, over all its uses
  uint32_t published;               // sequence numbers 0 .. published-1 are in the ring
};

// The ring lives in dynamic shared memory, after the kernel's own SharedStorage (the launcher allocates
// it there): a static __shared__ variable would shift CUTLASS's dynamic shared memory off the 1024-byte
// alignment its swizzled TMA buffers need.
__device__ __forceinline__ TicketRing& ticket_ring(uint32_t offset) {
  extern __shared__ __align__(16) unsigned char cusync_dynamic_smem[];
  return *reinterpret_cast<TicketRing*>(cusync_dynamic_smem + offset);
}

__device__ __forceinline__ uint32_t ld_acquire_cta(uint32_t const* p) {
  uint32_t v;
  asm volatile("ld.acquire.cta.shared::cta.u32 %0, [%1];" : "=r"(v) : "r"(uint32_t(__cvta_generic_to_shared(p))) : "memory");
  return v;
}

__device__ __forceinline__ void st_release_cta(uint32_t* p, uint32_t v) {
  asm volatile("st.release.cta.shared::cta.u32 [%0], %1;" : : "r"(uint32_t(__cvta_generic_to_shared(p))), "r"(v) : "memory");
}

// Spins on a shared-memory counter of this CTA until it reaches `target`. The warp roles of one CTA
// cannot disagree unless the kernel is broken, and then no error record can save the run: after the
// timeout the kernel traps (the host sees cudaErrorLaunchFailure) instead of hanging the GPU.
__device__ __forceinline__ void spin_until_at_least(uint32_t const* counter, uint32_t target, uint64_t timeout_ns) {
  if (ld_acquire_cta(counter) >= target) return;
  uint64_t const start = ptx::globaltimer_ns();
  while (ld_acquire_cta(counter) < target) {
    __nanosleep(32);
    if (ptx::globaltimer_ns() - start > timeout_ns) __trap();
  }
}

__device__ __forceinline__ void red_release_cta_add(uint32_t* p, uint32_t v) {
  asm volatile("red.release.cta.shared::cta.add.u32 [%0], %1;" : : "r"(uint32_t(__cvta_generic_to_shared(p))), "r"(v) : "memory");
}

}  // namespace detail

class TicketTileScheduler : public cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90 {
  using Base = cutlass::gemm::kernel::detail::PersistentTileSchedulerSm90;

 public:
  using WorkTileInfo = typename Base::WorkTileInfo;

  struct Arguments : Base::Arguments {
    TileQueue queue{};
  };
  struct Params : Base::Params {
    TileQueue queue{};
  };

  template <class ProblemShapeMNKL, class TileShape, class ClusterShape>
  static Params to_underlying_arguments(ProblemShapeMNKL problem_shape_mnkl, TileShape tile_shape,
                                        ClusterShape cluster_shape, cutlass::KernelHardwareInfo const& hw_info,
                                        Arguments const& arguments, void* workspace = nullptr,
                                        uint32_t epilogue_subtile = 1, uint32_t ktile_start_alignment_count = 1u) {
    static_assert(cute::size(ClusterShape{}) == 1, "the ticket scheduler hands out single-CTA tiles: cluster 1x1x1");
    Params params;
    static_cast<Base::Params&>(params) = Base::to_underlying_arguments(
        problem_shape_mnkl, tile_shape, cluster_shape, hw_info, arguments, workspace, epilogue_subtile,
        ktile_start_alignment_count);
    params.queue = arguments.queue;
    return params;
  }

  CUTLASS_HOST_DEVICE TicketTileScheduler() {}

  // Every thread constructs the scheduler once, at kernel entry (uniform control flow), so thread 0
  // can take the CTA's first ticket here and one barrier publishes it to all roles.
  CUTLASS_DEVICE explicit TicketTileScheduler(Params const& params) : Base(params), queue_(&params.queue) {
    if (queue_->trigger_dependents) {
      // Programmatic dependent launch: the consumer kernel may start once every CTA of this kernel has
      // started, i.e. when no CTA of this kernel still needs an SM. Its CTAs then take SMs only as ours
      // leave, so a spinning consumer can never starve a producer tile.
      asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
    }
    if (!queue_->dynamic) return;  // static assignment: every warp computes its tiles itself
    detail::TicketRing& ring = detail::ticket_ring(queue_->ring_offset);
    if (threadIdx.x == 0) {
      for (int i = 0; i < detail::kRingSlots; ++i) ring.reads[i] = 0;
      ring.tile[0] = take_ticket();
      ring.published = 1;
    }
    __syncthreads();
  }

  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    sequence_ = 0;
    return work_of(queue_->dynamic ? detail::ticket_ring(queue_->ring_offset).tile[0] : static_tile(0));
  }

  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) { return cute::make_tuple(next_work(), true); }

  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo, TileSchedulerPipeline&, TileSchedulerPipelineState) {
    return cute::make_tuple(next_work(), true);
  }

 private:
  // Static assignment (a stage that waits for nothing, or a run with synchronization off): CTA b takes
  // the tiles b, b + grid, b + 2 grid, ... of the stage's order, like CUTLASS's persistent scheduler,
  // with no atomic and no ring handshake. Tickets only pay where CTAs start at different times and must
  // take the tiles whose inputs are ready first: a consumer that waits on its producer.
  CUTLASS_DEVICE int32_t static_tile(uint32_t seq) const {
    int64_t const linear = int64_t(blockIdx.x) + int64_t(seq) * int64_t(gridDim.x);
    if (linear >= int64_t(queue_->tiles_m) * queue_->tiles_n) return -1;
    if (queue_->trace != nullptr && threadIdx.x == 0) {
      TileCoord const t = tile_of(queue_->order, int32_t(linear), queue_->tiles_m, queue_->tiles_n);
      TileTrace::record(queue_->trace, t.m, t.n, queue_->tiles_n, 0);
    }
    return int32_t(linear);
  }

  // Thread 0 only. The load warp takes the next ticket when it has issued the current tile's last loads,
  // so the atomic's round trip hides behind the MMAs of the stages still in flight and the epilogue.
  // (Taking it a tile ahead would hide nothing more and would let a busy CTA hold a tile that an idle
  // one could run.) Past the end: counts this CTA out, and the last CTA resets the queue for the next
  // run (every CTA has taken its last ticket by then).
  CUTLASS_DEVICE int32_t take_ticket() const {
    int32_t const total = queue_->tiles_m * queue_->tiles_n;
    uint32_t const ticket = atomicAdd(queue_->next, 1u);
    if (ticket < uint32_t(total)) {
      if (queue_->trace != nullptr) {
        TileCoord const t = tile_of(queue_->order, int32_t(ticket), queue_->tiles_m, queue_->tiles_n);
        TileTrace::record(queue_->trace, t.m, t.n, queue_->tiles_n, 0);
      }
      return int32_t(ticket);
    }
    __threadfence();
    uint32_t const ctas = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(queue_->exited, 1u) == ctas - 1u) {
      *reinterpret_cast<uint32_t volatile*>(queue_->next) = 0u;
      *reinterpret_cast<uint32_t volatile*>(queue_->exited) = 0u;
    }
    return -1;
  }

  // `linear` is the same in every lane. Broadcasting it from lane 0 says so to the compiler: a tile index
  // read from shared memory (the ring) is otherwise a per-thread value, and everything the kernel derives
  // from the tile (the tile loop, the mainloop's pipeline state and wgmma descriptors) would then live in
  // per-thread registers, moved to uniform registers before every wgmma (measured: 64 instead of 48
  // instructions in the math warps' K loop, and about 5-11% of the GEMM's time).
  CUTLASS_DEVICE WorkTileInfo work_of(int32_t lane_linear) const {
    int32_t const linear = __shfl_sync(0xffffffffu, lane_linear, 0);
    if (linear < 0) {
      if (queue_->wait_primary_at_exit) asm volatile("griddepcontrol.wait;" : : : "memory");
      return WorkTileInfo::invalid_work_tile();
    }
    TileCoord const t = tile_of(queue_->order, linear, queue_->tiles_m, queue_->tiles_n);
    return WorkTileInfo{t.m, t.n, 0, true};
  }

  // The load warp (warp 0) publishes sequence number `sequence_`; every other warp that asks reads it.
  CUTLASS_DEVICE WorkTileInfo next_work() {
    uint32_t const seq = ++sequence_;
    if (!queue_->dynamic) return work_of(static_tile(seq));
    detail::TicketRing& ring = detail::ticket_ring(queue_->ring_offset);
    uint32_t const slot = seq % detail::kRingSlots;
    int32_t linear;
    bool const loader = cutlass::canonical_warp_idx_sync() == 0;
    if (loader) {
      if (threadIdx.x == 0) {
        // The slot's previous use (seq - kRingSlots) must have been read by every reader warp. Reads of
        // sequence 0 (taken at entry, read in initial_work_tile_info) are not counted: the math warps read
        // it before their first tile, long before this warp is kRingSlots tiles ahead.
        uint32_t const uses = seq / detail::kRingSlots - (slot == 0 ? 1u : 0u);
        detail::spin_until_at_least(&ring.reads[slot], uses * uint32_t(queue_->reader_warps), queue_->timeout_ns);
        int32_t const previous = ring.tile[(seq - 1) % detail::kRingSlots];
        ring.tile[slot] = previous < 0 ? -1 : take_ticket();
        detail::st_release_cta(&ring.published, seq + 1);
      }
      __syncwarp();
      linear = ring.tile[slot];
    } else {
      detail::spin_until_at_least(&ring.published, seq + 1, queue_->timeout_ns);
      linear = ring.tile[slot];
      __syncwarp();
      if (cute::elect_one_sync()) detail::red_release_cta_add(&ring.reads[slot], 1u);
    }
    return work_of(linear);
  }

  TileQueue const* queue_ = nullptr;  // in the kernel's parameters (__grid_constant__)
  uint32_t sequence_ = 0;             // this thread's position in the ring
};

}  // namespace cusync::sm90

namespace cutlass::gemm::kernel::detail {

template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<cusync::sm90::TicketScheduler, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = cusync::sm90::TicketTileScheduler;
};

}  // namespace cutlass::gemm::kernel::detail
