// cusync runtime: CuStage, the per-kernel view of the chain's synchronization state.
//
// Each stage kernel, at block entry, takes a ticket from its stage's started counter (that ticket is the
// block's place in the tile order, and the counter is what the wait kernel watches), waits on its input
// edge's semaphores before it reads producer data, and posts its output semaphore after its tile is
// stored. With `enabled == false` the same kernel runs with no counters, waits or posts: that is
// run_sequential(), bitwise identical by construction because the math does not change.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cusync/policy.h"
#include "cusync/ptx.cuh"
#include "cusync/semaphore.cuh"
#include "cusync/status.h"
#include "cusync/sync_error.h"
#include "cusync/tile_order.h"

namespace cusync {

constexpr int kMaxStages = 16;

// Device-resident state of one chain instance; lives across runs (only the epoch moves).
struct ChainState {
  uint32_t epoch;                      // this run's epoch; the last block of a run bumps it for the next
  uint32_t finished;                   // blocks of this run that have finished (back to 0 at run end)
  uint32_t started[kMaxStages];        // blocks of each stage that have entered, ever (monotonic)
  uint32_t started_base[kMaxStages];   // started[] at the beginning of this run
  uint32_t queue_next[kMaxStages];     // sm90 persistent stages: tile tickets taken in this run
  uint32_t queue_exited[kMaxStages];   // sm90 persistent stages: CTAs that found the queue empty
  uint64_t* semaphores;                // the chain's whole semaphore pool (zeroed when the epoch wraps)
  uint64_t semaphore_words;
  SyncErrorInfo error;
};

// The last epoch before the 32-bit counter wraps. A semaphore tagged with it compares >= every wait
// value of the next 2^32 runs, so close_run zeroes the pool before it moves on to epoch 0 (see there).
constexpr uint32_t kLastEpoch = 0xFFFFFFFFu;

// Host side: a fresh state for a chain whose semaphores are the `words` words at `semaphores` (epoch 0,
// counters and error record cleared, every semaphore zero). Call once, before the first run. Ordered on
// `stream` (the copy's source is staged before this returns); the caller synchronizes that stream.
inline cudaError_t init_chain_state(ChainState* state, uint64_t* semaphores, uint64_t words, cudaStream_t stream) {
  ChainState fresh{};
  fresh.semaphores = semaphores;
  fresh.semaphore_words = words;
  cudaError_t err = cudaMemcpyAsync(state, &fresh, sizeof(ChainState), cudaMemcpyHostToDevice, stream);
  if (err == cudaSuccess && words > 0) err = cudaMemsetAsync(semaphores, 0, sizeof(uint64_t) * words, stream);
  if (err == cudaSuccess) err = cudaStreamSynchronize(stream);  // `fresh` is a local: done before it goes
  return err;
}

// Host side, for tests of the wrap: the epoch the next run will use (ordered on `stream`, which this
// synchronizes: `epoch` is a local).
inline cudaError_t set_chain_epoch(ChainState* state, uint32_t epoch, cudaStream_t stream) {
  cudaError_t const err = cudaMemcpyAsync(&state->epoch, &epoch, sizeof(epoch), cudaMemcpyHostToDevice, stream);
  return err == cudaSuccess ? cudaStreamSynchronize(stream) : err;
}

// The input edge of a stage: which producer, which policy, where its semaphores are.
struct InputWait {
  ChainState* state = nullptr;
  int32_t stage = 0;
  int32_t producer = -1;
  SyncPolicy policy{};
  uint64_t const* semaphores = nullptr;
  uint64_t timeout_ns = 0;
  bool enabled = false;                // false: sequential run or external input

  // Blocks until the producer tile holding element (row, col) of the producer's output is posted in
  // this run. Returns the semaphore index so that callers can skip repeated waits on the same one.
  // kInline: the spin is inlined (no call: see spin_wait_inline), as sm90 kernels need.
  template <bool kInline = false>
  __device__ __forceinline__ int32_t wait_for(int32_t row, int32_t col, uint32_t epoch, TileCoord self) const {
    int32_t const pm = row / policy.tile_m;
    int32_t const pn = col / policy.tile_n;
    int32_t const index = policy.semaphore_of(pm, pn);
    WaitSite const site{stage, producer, self.m, self.n, pm, pn, index};
    uint64_t const expected = tagged(epoch, uint32_t(policy.posts));
    if constexpr (kInline) {
      spin_wait_inline<uint64_t>(semaphores + index, expected, timeout_ns, &state->error, site);
    } else {
      spin_wait_at_least<uint64_t>(semaphores + index, expected, timeout_ns, &state->error, site);
    }
    return index;
  }

  // Blocks until every producer tile holding rows [row_begin, row_end) of column `col` is posted,
  // widened by the policy's halo (Conv2DTileSync: the R x S window of an implicit-GEMM convolution).
  template <bool kInline = false>
  __device__ __forceinline__ void wait_for_rows(int32_t row_begin, int32_t row_end, int32_t col, int32_t producer_tiles_m,
                                                uint32_t epoch, TileCoord self) const {
    int32_t const last = policy.last_row_tile(row_end, producer_tiles_m);
    for (int32_t pm = policy.first_row_tile(row_begin); pm <= last; ++pm) {
      wait_for<kInline>(pm * policy.tile_m, col, epoch, self);
    }
  }
};

struct StageSync {
  ChainState* state = nullptr;
  int32_t stage = 0;
  bool enabled = false;
  bool dynamic_order = true;           // false (avoid_custom_order): tile order follows blockIdx.x
  bool store_post = false;             // no_atomic_add: one release store per semaphore
  uint64_t timeout_ns = 0;             // the chain's sync timeout (bounds the kernel's other waits too)
  TileOrder order = TileOrder::kRowMajor;
  int32_t tiles_m = 0;
  int32_t tiles_n = 0;
  InputWait input{};                   // the edge into operand A (GEMM) or `a` (elementwise)
  InputWait input_b{};                 // a second producer's edge (elementwise stages with `b`), if any
  SyncPolicy output{};
  uint64_t* out_semaphores = nullptr;
  int32_t num_stages = 0;
  bool counts_finish = false;          // a sink stage (nothing consumes it): its blocks count `finished`
  uint32_t run_blocks = 0;             // blocks of all sink stages of this run (the last one closes the epoch)
  int32_t finish_stride = 0;           // sm90 persistent sink in static row-major order: a math warp group's tiles
                                       // lie this far apart in linear order, and it counts its finished tiles
                                       // once, after its last (0: each tile counts itself)
  bool trigger_dependents = false;     // sm90: the next stage is a programmatic dependent launch of this one
  bool wait_primary_at_exit = false;   // sm90: end only after the kernel this one was launched behind ended
  uint64_t* trace = nullptr;           // optional: per tile {start ns, end ns, SM} (see TileTrace)
};

// The opt-in tile trace (set_trace): five words per tile of a stage, indexed m * tiles_n + n.
struct TileTrace {
  // %globaltimer when the tile was taken, when it was stored, SM id, m << 32 | n, and when its waits ended and its
  // loads could begin (the conv kernels, whose waits all come before a tile's first load; 0 where not recorded).
  static constexpr int kWords = 5;
  static constexpr int kReady = 4;
  __device__ static void record(uint64_t* trace, int32_t tile_m, int32_t tile_n, int32_t tiles_n, int word) {
    if (trace == nullptr) return;
    uint64_t* entry = trace + (int64_t(tile_m) * tiles_n + tile_n) * kWords;
    entry[word] = ptx::globaltimer_ns();
    if (word == 0) {
      uint32_t sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      entry[2] = sm;
      entry[3] = (uint64_t(uint32_t(tile_m)) << 32) | uint32_t(tile_n);
    }
  }
};

// The tile this block computes; written by thread 0 in begin_tile, read by all threads (and by waiters
// that report a timeout).
static __shared__ TileCoord cusync_block_tile;

__device__ __forceinline__ uint32_t current_epoch(ChainState const* state) {
  return ptx::ld_relaxed_gpu(&state->epoch);
}

// Every thread calls this first. Thread 0 takes the block's ticket; __syncthreads broadcasts the tile.
__device__ __forceinline__ TileCoord begin_tile(StageSync const& sync) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // The next stage may launch once every block of this one has started (and so holds its SM slot).
  if (sync.trigger_dependents) asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
#endif
  if (threadIdx.x == 0) {
    int32_t linear = int32_t(blockIdx.x);
    if (sync.enabled && sync.dynamic_order) {
      // The ticket is the block's place in the tile order: blocks start in ticket order, so tiles are
      // started in exactly the order the consumer wants them, whatever the hardware does.
      linear = int32_t(atomicAdd(&sync.state->started[sync.stage], 1u) -
                       ptx::ld_relaxed_gpu(&sync.state->started_base[sync.stage]));
    } else if (sync.enabled) {
      // avoid_custom_order: the hardware's block order is the tile order; only count the start (for
      // the wait kernel), without waiting for the atomic's answer.
      ptx::red_add_relaxed_gpu(&sync.state->started[sync.stage], 1u);
    }
    cusync_block_tile = tile_of(sync.order, linear, sync.tiles_m, sync.tiles_n);
    TileTrace::record(sync.trace, cusync_block_tile.m, cusync_block_tile.n, sync.tiles_n, 0);
  }
  __syncthreads();
  return cusync_block_tile;
}

// The last block of the sink stages to finish opens the next epoch. Every tile of every other stage has
// been waited for by then (each consumer grid reads all of its producer's tiles), so every block of the
// run has counted its start and the started counters may be snapshot; the next run's kernels start after
// this one's (stream order) and see the new epoch. No extra kernel is launched.
//
// The epoch is 32 bits and would wrap after 2^32 runs (about a day of 20 us runs). A semaphore posted in
// epoch kLastEpoch would then satisfy every wait of the following runs at once: a silent race for the
// rest of the process, and red.max could never lower it. So the run of epoch kLastEpoch zeroes the whole
// pool and the next run starts at epoch 0, exactly as after initialize(). That is safe here: every post
// of this run has been waited for (seen complete) by its consumers, so no post is still in flight, and
// the next run starts only after this kernel ends. It costs one pass over the pool every 2^32 runs.
//
// `lanes` threads close the run together: 1 (the thread that counted the last finish, alone) or 32 (its
// whole warp, converged; lane = threadIdx.x % 32). `closer` is that thread. In an sm90 warp-specialized
// kernel the whole warp calls it under a warp-uniform branch: a loop inside one elected lane's branch made
// ptxas keep every loop-carried value of the math warps' tile loop (the mainloop's pipeline state, the
// wgmma descriptors) in per-thread registers, moved to uniform ones before each wgmma (measured
// on an H200). Here every loop's trip count is the same in every lane and a lane's share is one predicated store.
__device__ __forceinline__ void close_run_lanes(StageSync const& sync, bool closer, int lane, int lanes) {
  ChainState* state = sync.state;
  // Acquire side of the finished counter (in the thread that read it): see every start the sinks saw.
  // The warp barrier then orders the other lanes' reads after that acquire.
  if (closer) ptx::fence_acq_rel_gpu();
  if (lanes > 1) __syncwarp();
  if (lane == 0) state->finished = 0;
  for (int32_t base = 0; base < sync.num_stages; base += lanes) {
    int32_t const s = base + lane;
    if (s < sync.num_stages) state->started_base[s] = ptx::ld_relaxed_gpu(&state->started[s]);
  }
  uint32_t const epoch = state->epoch;  // written only here, by lane 0, after every lane read it
  if (epoch == kLastEpoch) {
    for (uint64_t base = 0; base < state->semaphore_words; base += uint64_t(lanes)) {
      uint64_t const i = base + uint64_t(lane);
      if (i < state->semaphore_words) state->semaphores[i] = 0;
    }
  }
  // Every lane's stores, then one release: the barrier and lane 0's fence publish them with the epoch.
  if (lanes > 1) __syncwarp();
  if (lane == 0) {
    __threadfence();
    state->epoch = epoch == kLastEpoch ? 0u : epoch + 1u;
  }
}

__device__ __forceinline__ void close_run_inline(StageSync const& sync) { close_run_lanes(sync, true, 0, 1); }

// The same as a call, for sm80 kernels (see spin_wait_at_least for why sm90 ones inline it).
__device__ __noinline__ inline void close_run(StageSync const& sync) { close_run_inline(sync); }

// Every thread calls this after its last store of the tile. The barrier orders all threads' stores
// before thread 0's fence + post (a release pattern that is cumulative over the block's stores).
__device__ __forceinline__ void end_tile(StageSync const& sync, TileCoord tile) {
  if (sync.trace != nullptr) {
    __syncthreads();
    if (threadIdx.x == 0) TileTrace::record(sync.trace, tile.m, tile.n, sync.tiles_n, 1);
  }
  if (!sync.enabled) return;
  __syncthreads();
  if (threadIdx.x == 0) {
    uint32_t const epoch = current_epoch(sync.state);
    if (sync.output.enabled()) {
      uint64_t* sem = sync.out_semaphores + sync.output.semaphore_of(tile.m, tile.n);
      if (sync.store_post) {
        post_store(sem, epoch);
      } else {
        post_add(sem, epoch);
      }
    }
    if (sync.counts_finish) {
      ptx::fence_acq_rel_gpu();
      if (atomicAdd(&sync.state->finished, 1u) == sync.run_blocks - 1u) close_run(sync);
    }
  }
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  // A programmatic dependent launch can end before the kernel it was launched behind; waiting here
  // keeps "the last kernel of a run ended" meaning "the whole run ended" for stream order after it.
  if (sync.wait_primary_at_exit) asm volatile("griddepcontrol.wait;" : : : "memory");
#endif
}

// The launch attribute of a kernel built for thread block clusters of `cluster` CTAs (sm_90).
inline cudaLaunchAttribute cluster_attribute(dim3 cluster) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = cluster.x;
  attribute.val.clusterDim.y = cluster.y;
  attribute.val.clusterDim.z = cluster.z;
  return attribute;
}

// Launches kernel(params) on `stream` with `grid` x `block` threads and `smem` bytes of dynamic shared memory,
// as a programmatic dependent launch of the kernel before it on the stream where `programmatic` (sm90: it may
// start while that kernel still runs; its hooks order it after what it reads),
// in clusters of `cluster` CTAs where it has more than one.
template <typename Params>
inline Status launch_stage_kernel(void (*kernel)(Params), dim3 grid, dim3 block, size_t smem, bool programmatic,
                                  cudaStream_t stream, Params const& params, dim3 cluster = dim3(1u, 1u, 1u)) {
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = smem;
  config.stream = stream;
  cudaLaunchAttribute attribute[2];
  unsigned count = 0;
  if (programmatic) {
    attribute[count].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[count++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster.x * cluster.y * cluster.z > 1u) attribute[count++] = cluster_attribute(cluster);
  config.attrs = attribute;
  config.numAttrs = count;
  return cudaLaunchKernelEx(&config, kernel, params) == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// The paper's name for a stage's synchronization view.
using CuStage = StageSync;

}  // namespace cusync
