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
// shared memory (publish_next, called by WaitingMainloop::load after a tile's last loads, so that this
// code is in the load warp's path alone); every warp, the load warp too, reads the ring in the same
// sequence. A slot is reused only after every reader warp has read it, so the ring never overruns
// however far the load warp runs ahead.
// Both CUTLASS schedules are served. Cooperative: both math warp groups work on every tile (sequence
// 0, 1, 2, ...). Ping-pong: the math warp groups take alternate tiles (group 0 the even sequence
// numbers, group 1 the odd ones: CUTLASS's advance_to_next_work(2)), so a slot has one group's warps as
// readers, and the CTA takes one ticket per group at entry so that neither waits for the other's.
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
  int32_t reader_warps = 0;          // warps that read each sequence number besides the load warp
  int32_t tiles_at_entry = 1;        // tickets taken at entry: one per math warp group with a tile of its own
  bool trigger_dependents = false;   // PDL: let the next kernel launch once every CTA has started
  bool wait_primary_at_exit = false; // finish only after the kernel this one was launched behind finished
  uint64_t timeout_ns = 2000000000ull;  // bound on a ring handshake (at least the chain's sync timeout)
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
static_assert(kRingSlots >= 4, "the ring holds at least the tickets taken at entry and one more per group");

// The ring lives in dynamic shared memory, after the kernel's own SharedStorage (the launcher allocates
// it there): a static __shared__ variable would shift CUTLASS's dynamic shared memory off the 1024-byte
// alignment its swizzled TMA buffers need.
__device__ __forceinline__ TicketRing& ticket_ring(uint32_t offset) {
  extern __shared__ __align__(16) unsigned char cusync_dynamic_smem[];
  return *reinterpret_cast<TicketRing*>(cusync_dynamic_smem + offset);
}

// Between warps, the ring is only ever accessed by atomic operations (the constructor's initialization is
// ordered by a barrier): an acquire read of a counter is `atom.or 0`, a release write `atom.exch` or
// `red.add`, and a slot's tile is an `atom.exch` written before the release of `published` and an
// `atom.or 0` read after its acquire. Plain ld.acquire / st.release and plain slot accesses ordered by them
// would be as correct, but compute-sanitizer's racecheck reports them as shared-memory hazards (a spin that
// reads the counter before its release store; a slot read ordered only through it); it does not report
// atomics, so a racecheck run of a synced kernel shows only real hazards. The cost: a shared atomic per
// lane where a load was, once per tile and warp.
__device__ __forceinline__ uint32_t atom_acquire_cta_read(uint32_t* p) {
  uint32_t v;
  asm volatile("atom.acquire.cta.shared::cta.or.b32 %0, [%1], 0;" : "=r"(v) : "r"(uint32_t(__cvta_generic_to_shared(p))) : "memory");
  return v;
}

// Returns the value it replaced (unused: an exchange is the atomic store).
__device__ __forceinline__ uint32_t atom_release_cta_store(uint32_t* p, uint32_t v) {
  uint32_t old;
  asm volatile("atom.release.cta.shared::cta.exch.b32 %0, [%1], %2;" : "=r"(old) : "r"(uint32_t(__cvta_generic_to_shared(p))), "r"(v) : "memory");
  return old;
}

__device__ __forceinline__ int32_t atom_relaxed_cta_read(int32_t* p) {
  int32_t v;
  asm volatile("atom.relaxed.cta.shared::cta.or.b32 %0, [%1], 0;" : "=r"(v) : "r"(uint32_t(__cvta_generic_to_shared(p))) : "memory");
  return v;
}

__device__ __forceinline__ int32_t atom_relaxed_cta_store(int32_t* p, int32_t v) {
  int32_t old;
  asm volatile("atom.relaxed.cta.shared::cta.exch.b32 %0, [%1], %2;" : "=r"(old) : "r"(uint32_t(__cvta_generic_to_shared(p))), "r"(v) : "memory");
  return old;
}

// Every lane of a warp that takes part reads the ring itself (the same address), and no value is defined
// in a branch on the lane: a tile index or a spin taken by one lane and broadcast (shfl, ballot, or a
// value written in `if (lane == 0)`) made ptxas keep every loop-carried value of the math warps' tile
// loop (the mainloop's pipeline state, the wgmma descriptors) in per-thread registers, moved to uniform
// ones before each wgmma: 88 instead of CUTLASS's 57 instructions per 8 wgmmas in the ping-pong kernel's
// K loop. So did the load warp's ticket code inlined into the math warps'
// get_current_work(), though they never run it: it lives in publish_next, which only the load warp's
// mainloop calls. One lane's branch holds only straight-line code that defines nothing read after it.
//
// Spins on a shared-memory counter of this CTA until it reaches `target`. The warp roles of one CTA
// cannot disagree unless the kernel is broken, and then no error record can save the run: after the
// timeout the kernel traps (the host sees cudaErrorLaunchFailure) instead of hanging the GPU.
__device__ __forceinline__ void spin_until_at_least(uint32_t* counter, uint32_t target, uint64_t timeout_ns) {
  if (atom_acquire_cta_read(counter) >= target) return;
  uint64_t const start = ptx::globaltimer_ns();
  while (atom_acquire_cta_read(counter) < target) {
    __nanosleep(32);
    if (ptx::globaltimer_ns() - start > timeout_ns) __trap();
  }
}

// A reader's wait for sequence number `seq`: returns the published count once it is past `seq`, or once
// the last number published is the end (-1: the load warp publishes nothing after it). Bounded like
// spin_until_at_least.
__device__ __forceinline__ uint32_t wait_published(TicketRing& ring, uint32_t seq, uint64_t timeout_ns) {
  uint64_t start = 0;
  for (;;) {
    uint32_t const published = atom_acquire_cta_read(&ring.published);
    if (published > seq || (published > 0 && atom_relaxed_cta_read(&ring.tile[(published - 1) % kRingSlots]) < 0)) {
      return published;
    }
    if (start == 0) start = ptx::globaltimer_ns();
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
      for (int i = 0; i < detail::kRingSlots; ++i) {
        ring.reads[i] = 0;
        ring.tile[i] = -1;  // a reader past the end reads its slot too (and drops the value)
      }
      ring.tile[0] = take_ticket(*queue_);
      for (int i = 1; i < queue_->tiles_at_entry; ++i) ring.tile[i] = ring.tile[i - 1] < 0 ? -1 : take_ticket(*queue_);
      ring.published = uint32_t(queue_->tiles_at_entry);
    }
    __syncthreads();
  }

  // The tile of this thread's current sequence number: 0, or for the ping-pong kernel's second math warp
  // group 1 (CUTLASS advances it once before asking). Both were published by the constructor.
  template <class ClusterShape>
  CUTLASS_DEVICE WorkTileInfo initial_work_tile_info(ClusterShape) {
    return work_of(queue_->dynamic ? detail::atom_relaxed_cta_read(&detail::ticket_ring(queue_->ring_offset).tile[sequence_])
                                   : static_tile(sequence_));
  }

  // CUTLASS's static-scheduler interface (the ping-pong kernel): move `count` sequence numbers on, then
  // ask for the tile there. The load warp moves one at a time and publishes each; a math warp group of
  // the ping-pong kernel moves by two.
  CUTLASS_DEVICE void advance_to_next_work(uint32_t count = 1) { sequence_ += count; }
  CUTLASS_DEVICE WorkTileInfo get_current_work() { return work_at(sequence_); }

  // The cooperative kernel's interface: the next sequence number's tile.
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }

  template <class TileSchedulerPipeline, class TileSchedulerPipelineState>
  CUTLASS_DEVICE auto fetch_next_work(WorkTileInfo, TileSchedulerPipeline&, TileSchedulerPipelineState) {
    advance_to_next_work();
    return cute::make_tuple(get_current_work(), true);
  }

  // The load warp (all its lanes, converged), once it has issued the last loads of sequence number
  // seq - 1: takes the ticket of `seq` and publishes it, so that the atomic's round trip hides behind the
  // MMAs of the stages still in flight and the epilogue. (Taking it a tile ahead would hide nothing more
  // and would let a busy CTA hold a tile that an idle one could run.) The numbers below tiles_at_entry
  // were published by the constructor; nothing is published past the end marker.
  CUTLASS_DEVICE static void publish_next(TileQueue const& queue, uint32_t seq) {
    if (!queue.dynamic || seq < uint32_t(queue.tiles_at_entry)) return;
    detail::TicketRing& ring = detail::ticket_ring(queue.ring_offset);
    uint32_t const slot = seq % detail::kRingSlots;
    // The slot's previous uses (seq - kRingSlots, seq - 2 kRingSlots, ...) must have been read by their
    // reader warps. The numbers published at entry are read in initial_work_tile_info, uncounted (CUTLASS
    // 4.2's ping-pong kernel advances its second math warp group by one before that call): every warp
    // reads them before its first tile, long before this warp is kRingSlots tiles ahead.
    uint32_t const uses = seq / detail::kRingSlots - (slot < uint32_t(queue.tiles_at_entry) ? 1u : 0u);
    detail::spin_until_at_least(&ring.reads[slot], uses * uint32_t(queue.reader_warps), queue.timeout_ns);
    if (threadIdx.x == 0) {  // thread 0 takes every ticket
      int32_t const previous = detail::atom_relaxed_cta_read(&ring.tile[(seq - 1) % detail::kRingSlots]);
      detail::atom_relaxed_cta_store(&ring.tile[slot], previous < 0 ? -1 : take_ticket(queue));
      detail::atom_release_cta_store(&ring.published, seq + 1);
    }
    __syncwarp();
  }

 private:
  // Static assignment (a stage that waits for nothing, or a run with synchronization off): CTA b takes
  // the tiles b, b + grid, b + 2 grid, ... of the stage's order, like CUTLASS's persistent scheduler,
  // with no atomic and no ring handshake. Tickets only pay where CTAs start at different times and must
  // take the tiles whose inputs are ready first: a consumer that waits on its producer.
  // A grid of clusters along y (gridDim.y CTAs a cluster, blockIdx.y the CTA's rank: the conv kernel's 1 x 2
  // clusters) numbers its CTAs b = blockIdx.x * gridDim.y + blockIdx.y, so a cluster's CTAs take consecutive tiles
  // in step (with tiles_n a multiple of gridDim.y: the same tile row, neighbouring columns).
  CUTLASS_DEVICE int32_t static_tile(uint32_t seq) const {
    int64_t const linear =
        (int64_t(blockIdx.x) + int64_t(seq) * int64_t(gridDim.x)) * int64_t(gridDim.y) + int64_t(blockIdx.y);
    if (linear >= int64_t(queue_->tiles_m) * queue_->tiles_n) return -1;
    if (queue_->trace != nullptr && threadIdx.x == 0) {
      TileCoord const t = tile_of(queue_->order, int32_t(linear), queue_->tiles_m, queue_->tiles_n);
      TileTrace::record(queue_->trace, t.m, t.n, queue_->tiles_n, 0);
    }
    return int32_t(linear);
  }

  // Thread 0 only. Past the end: counts this CTA out, and the last CTA resets the queue for the next run
  // (every CTA has taken its last ticket by then).
  CUTLASS_DEVICE static int32_t take_ticket(TileQueue const& queue) {
    int32_t const total = queue.tiles_m * queue.tiles_n;
    uint32_t const ticket = atomicAdd(queue.next, 1u);
    if (ticket < uint32_t(total)) {
      if (queue.trace != nullptr) {
        TileCoord const t = tile_of(queue.order, int32_t(ticket), queue.tiles_m, queue.tiles_n);
        TileTrace::record(queue.trace, t.m, t.n, queue.tiles_n, 0);
      }
      return int32_t(ticket);
    }
    __threadfence();
    uint32_t const ctas = gridDim.x * gridDim.y * gridDim.z;
    if (atomicAdd(queue.exited, 1u) == ctas - 1u) {
      *reinterpret_cast<uint32_t volatile*>(queue.next) = 0u;
      *reinterpret_cast<uint32_t volatile*>(queue.exited) = 0u;
    }
    return -1;
  }

  // `linear` is the same in every lane (each read the same slot, or computed the same static tile); the
  // broadcast from lane 0 keeps the warp on one value whatever the compiler assumes.
  CUTLASS_DEVICE WorkTileInfo work_of(int32_t lane_linear) const {
    int32_t const linear = __shfl_sync(0xffffffffu, lane_linear, 0);
    if (linear < 0) {
      if (queue_->wait_primary_at_exit) asm volatile("griddepcontrol.wait;" : : : "memory");
      return WorkTileInfo::invalid_work_tile();
    }
    TileCoord const t = tile_of(queue_->order, linear, queue_->tiles_m, queue_->tiles_n);
    return WorkTileInfo{t.m, t.n, 0, true};
  }

  // Every warp that asks reads sequence number `seq` from the ring: the load warp the number it published
  // itself (publish_next, after its loads of the tile before), the math warps the numbers it published for
  // them. A reader whose number lies past the end (the ping-pong group that would have taken the tile after
  // the last) sees the -1 the load warp published last and stops there.
  CUTLASS_DEVICE WorkTileInfo work_at(uint32_t seq) {
    if (!queue_->dynamic) return work_of(static_tile(seq));
    detail::TicketRing& ring = detail::ticket_ring(queue_->ring_offset);
    uint32_t const slot = seq % detail::kRingSlots;
    uint32_t const published = detail::wait_published(ring, seq, queue_->timeout_ns);
    // Past the end nothing more is published: the slot's value is dropped and needs no count.
    bool const in_ring = published > seq;
    int32_t const tile = detail::atom_relaxed_cta_read(&ring.tile[slot]);
    int32_t const linear = in_ring ? tile : -1;
    // The load warp's own reads are not counted (reader_warps counts the other warps), nor reads of the numbers
    // published at entry: publish_next expects one use fewer of those slots, since the math warp group that
    // starts on one reads it in initial_work_tile_info, uncounted (a producer warp's count there would let the
    // slot's next use be overwritten one read early).
    bool const counted = in_ring && cutlass::canonical_warp_idx_sync() != 0 && seq >= uint32_t(queue_->tiles_at_entry);
    __syncwarp();  // every lane's read of the slot before the release that lets the load warp reuse it
    bool const elected = cute::elect_one_sync();
    if (counted && elected) detail::red_release_cta_add(&ring.reads[slot], 1u);
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
