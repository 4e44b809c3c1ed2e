// cusync conv backend: ConvChain, a chain of implicit-GEMM convolutions synchronized tile by tile.
//
// Declarations only, with no device code, so that a project's public header can hold the class. The
// project emits the constexpr stage table (src/<name>_stages.h) and one launch function per stage.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <string>

#include <cuda_runtime.h>

#include "cusync/status.h"
#include "cusync/sync_error.h"

namespace cusync::conv {

constexpr int kMaxConvStages = 16;  // kMaxStages of cusync/stage.cuh
constexpr int kMaxConvConfigs = 9;  // the stages' own tiles and spec.limits.MAX_TILE_CONFIGS tile_configs
constexpr int kNoResidual = -2;     // ConvStageInfo::residual: no residual add
constexpr int kChainInput = -1;     // ConvStageInfo::producer / residual: the chain input

// One convolution of the chain, as the plan derived it (cusync_gen/conv_plan.py).
struct ConvStageInfo {
  char const* name;
  int producer;   // kChainInput or an earlier stage: the tensor the window reads
  int residual;   // kNoResidual, kChainInput or an earlier stage: added before the activation
  int h, w, c;    // input image
  int k, r, s;    // filters
  int p, q;       // output image
  int pad, stride, dilation;
  int tile_m, tile_n;  // output pixels x output channels per thread block
  bool bias;
  int k_steps;         // main-loop iterations of a tile: GEMM K (r * s * c) over the tile's K step
  // The overlap runs the stage's persistent kernel in thread block clusters of 1 x cluster_n tiles along the
  // channels, which share the activations' loads (sm90; 1: the stage unit has no such kernel). Its consumer CTAs,
  // launched while the producer still runs, otherwise land on SMs apart from the tiles they share data with, and
  // ran 1.35x slower; a cluster's CTAs are placed together.
  int cluster_n;
};

struct ConvLaunch;
using ConvLaunchFn = Status (*)(ConvLaunch const&, cudaStream_t);
using ConvPrepareFn = Status (*)();
// Thread blocks of the stage's kernel one SM holds at once (0: unknown); `bounded`: the kernel built to hold
// more blocks per SM (see SyncedConv in cusync/conv/conv.cuh).
using ConvOccupancyFn = int (*)(bool bounded);

// When run()'s rule takes the overlap (default_conv_mode): every stage's tiles at least min_k_steps main-loop
// iterations long, and the widest producer's last wave leaving at least min_idle_percent of its SM time idle.
struct ConvOverlapRule {
  int min_k_steps;
  int min_idle_percent;
};
// The sm80 kernels: a synced tile pays a few microseconds per wave (its first poll, the close of the run), which
// tiles of 16 iterations win back wherever a producer runs more than one wave.
constexpr ConvOverlapRule kOverlapRuleSm80{16, 0};
// The sm90 kernels (persistent beyond one wave) pay the overlap's waits and post on every tile's path: it wins
// only where the last wave leaves a fifth of the producer's SM time idle and the tiles are long (measured: 1.15x
// at 1.48 waves of 72-iteration tiles, 1.03x at 36, slower at 18 and below, and slower at 2.97 waves).
constexpr ConvOverlapRule kOverlapRuleSm90{32, 20};

struct ConvTables {
  int num_stages;
  ConvStageInfo const* stages;
  ConvLaunchFn const* launch;
  ConvPrepareFn const* prepare;
  ConvOccupancyFn const* occupancy;
  int element_bytes;
  // The kernels were built for a target with programmatic dependent launch (sm_90: every block triggers the
  // next stage's launch at entry), so the overlap may run on one stream where the device has it too.
  bool programmatic;
  // When run()'s rule takes the overlap (kOverlapRuleSm80 or kOverlapRuleSm90: see default_conv_mode).
  ConvOverlapRule overlap_rule;
  // Tiles by batch (the spec's tile_configs): batches up to smaller_batch_max run `smaller`'s kernels and stage
  // table (whose tiles differ; names, shapes, producers, residuals and bias are the same), which may name a
  // smaller configuration in turn. nullptr: these tables run every batch.
  ConvTables const* smaller = nullptr;
  int smaller_batch_max = 0;
  // The stage units also hold persistent kernels (the sm90 ping-pong kernel, PersistentConvSm90: at most the
  // blocks the GPU holds at once, each CTA walking tiles of a queue), which a stage with more tiles than one wave
  // runs (ConvChain::persistent); false: one block per tile always.
  bool persistent = false;
};

// How run() computes the chain at a batch (mode() picks; set_mode() overrides).
enum class ConvMode : int {
  kAuto = 0,        // set_mode(kAuto): back to mode()'s own choice
  kSequential = 1,  // the kernels back to back (run_sequential)
  kOverlap = 2,     // tile-synced (run_overlapped)
  kChained = 3,     // the kernels back to back, each a programmatic dependent launch of the one before (run_chained)
};

inline char const* to_string(ConvMode mode) {
  switch (mode) {
    case ConvMode::kAuto: return "auto";
    case ConvMode::kSequential: return "back-to-back";
    case ConvMode::kOverlap: return "overlap";
    case ConvMode::kChained: return "back-to-back+PDL";
  }
  return "?";
}

// run()'s rule (ConvChain::mode without set_mode or autotune), for the chain's producers (the stages some stage
// reads): tiles[i] tiles of producer names[i] at this batch, slots[i] of its blocks on the GPU at once;
// min_k_steps: the fewest main-loop iterations of any stage's tiles. The overlap where the producer with the
// most waves runs more than one, its last wave leaves at least rule.min_idle_percent of its SM time idle (its
// waves rounded up, against its tiles), and every stage's tiles take at least rule.min_k_steps iterations; else
// back to back, chained with programmatic dependent launch where `programmatic`. Where every producer's tiles
// run at once they end together, so no consumer tile can start early and the overlap could only add its fixed
// cost; what it hides is the idle part of the last wave, and each synced tile pays its waits and post, which
// short tiles do not win back. Writes why into `reason`.
// cusync_gen/conv_plan.py (ConvPlan.run_mode) mirrors it, reason text included (tests/test_conv.py).
inline ConvMode default_conv_mode(int count, int64_t const* tiles, int64_t const* slots, char const* const* names,
                                  int min_k_steps, ConvOverlapRule rule, bool programmatic, char* reason,
                                  int reason_size) {
  int widest = -1;  // the producer with the most waves (the first of equals)
  for (int i = 0; i < count; ++i) {
    if (widest < 0 || tiles[i] * slots[widest] > tiles[widest] * slots[i]) widest = i;
  }
  if (widest < 0) {
    std::snprintf(reason, size_t(reason_size), "one stage: back-to-back");
    return ConvMode::kSequential;
  }
  int64_t const t = tiles[widest], at_once = slots[widest] > 0 ? slots[widest] : 1;
  int64_t const span = std::max<int64_t>((t + at_once - 1) / at_once, 1) * at_once;  // its waves, rounded up
  int const idle_percent = int((span - t) * 100 / span);
  bool const waves = t > at_once;
  bool const idle = idle_percent >= rule.min_idle_percent;
  bool const overlap = waves && idle && min_k_steps >= rule.min_k_steps;
  ConvMode const mode = overlap ? ConvMode::kOverlap : programmatic ? ConvMode::kChained : ConvMode::kSequential;
  char const* name = names[widest];
  if (!waves) {
    std::snprintf(reason, size_t(reason_size), "rule: every producer fits in one wave (%s: %lld tiles, %lld blocks at once): %s",
                  name, (long long)t, (long long)at_once, to_string(mode));
  } else if (!idle) {
    std::snprintf(reason, size_t(reason_size), "rule: %s has %lld tiles, more than one wave (%lld blocks at once), but its last "
                  "wave leaves %d%% of its SM time idle (the overlap fills at most that; these kernels take it from %d%%): %s",
                  name, (long long)t, (long long)at_once, idle_percent, rule.min_idle_percent, to_string(mode));
  } else {
    std::snprintf(reason, size_t(reason_size), "rule: %s has %lld tiles, more than one wave (%lld blocks at once), %s %d main-loop steps%s: %s",
                  name, (long long)t, (long long)at_once,
                  overlap ? "and every stage's tiles take at least" : "but some stage's tiles take", min_k_steps,
                  overlap ? "" : " (short tiles: the overlap's per-tile cost outweighs it)", to_string(mode));
  }
  return mode;
}

constexpr int kMaxTunedBatches = 16;  // autotune(): batches timed

// What the overlap's kernels do around each tile (ConvChain::set_overlap_hooks; bits, kHooksLean by default).
// Every bit keeps the results bitwise the same; each one takes work off a tile's critical path:
enum ConvHooks : unsigned {
  kHooksLegacy = 0u,         // the epoch read again at the post; the sink's finish count (a fence and an atomic
                             // with return) after the tile; every block of a programmatic stage waits for the
                             // kernel before it at exit; tiles from the atomic ticket
  kHookEpochOnce = 1u,       // the epoch read once, at block entry; the post reuses it (no load after the tile)
  kHookEarlyFinish = 2u,     // a sink block counts its finish right after its waits (all it depends on is then
                             // posted); the count's answer is read after the tile (its latency hides behind the
                             // mainloop), and the last block to count closes the run. Needs kHookEpochOnce. sm90
                             // persistent sinks with a poll warp: it counts the CTA's tiles after its last waits
  kHookOneExitWait = 4u,     // of a programmatic stage, only the grid's last block waits for the kernel before it
                             // at exit (the grid still ends after it); the others give their SM slot back at once
  kHookBlockOrder = 8u,      // on the one-stream programmatic launch, tiles in hardware block order (no ticket):
                             // every producer block has started before a consumer block is scheduled anyway
  kHookPollAhead = 32u,      // sm90 persistent kernels in static tile order: a poll warp of their own waits for each
                             // tile's rows ahead of the load warps, which only read its count (no round trip)
  kHookFinishOnce = 64u,     // sm90 persistent sinks in static tile order: a math warp group counts its finished
                             // tiles once, after its last (one atomic per warp group, not one per tile)
  kHooksLean = 111u,         // all of the above: the default
  kHookAssumePosted = 16u,   // profiling only (profile_stage): every wait is satisfied at its first poll
};

// Device pointers of one run: the chain input [batch, h, w, c] (NHWC), each stage's filters [k, r, s, c]
// (KRSC), bias [k] (stages with bias) and output [batch, p, q, k] (NHWC, dense).
struct ConvArguments {
  int batch = 0;
  void const* input = nullptr;
  void const* filter[kMaxConvStages] = {};
  void const* bias[kMaxConvStages] = {};
  void* output[kMaxConvStages] = {};
};

class ConvChain {
 public:
  explicit ConvChain(ConvTables const& tables);
  ~ConvChain();
  ConvChain(ConvChain const&) = delete;
  ConvChain& operator=(ConvChain const&) = delete;

  // Allocates the chain's state and semaphores for batches up to max_batch (synchronizes `stream`).
  Status initialize(int max_batch, cudaStream_t stream);
  // mode(args.batch): back to back or the tile-synced overlap, whichever mode() picks at this batch.
  Status run(ConvArguments const& args, cudaStream_t stream);
  // The tile-synced overlap: every stage in flight at once, each tile waiting for the rows it reads. On a
  // device with programmatic dependent launch (compute capability 9.0+, kernels built for sm_90) all on
  // `stream`, each stage a programmatic dependent launch of the one before; else on two streams with the
  // wait kernels (see run_overlapped in chain.cuh).
  Status run_overlapped(ConvArguments const& args, cudaStream_t stream);
  // The same kernels back to back on `stream`, no waits or posts (bitwise identical results).
  Status run_sequential(ConvArguments const& args, cudaStream_t stream);
  // The same, each stage a programmatic dependent launch of the one before where programmatic(), launched
  // when every block of that kernel has exited (no early trigger: see launch_stage) and waiting for its end
  // with griddepcontrol.wait before its first load: the launch gap hidden. Elsewhere the same as
  // run_sequential.
  Status run_chained(ConvArguments const& args, cudaStream_t stream);
  // One stage alone (its input must be ready), for per-layer timing.
  Status run_stage(int stage, ConvArguments const& args, cudaStream_t stream);
  // kSyncTimeout when a wait of an earlier run gave up (`info` says which); clears the record.
  Status sync_error(SyncErrorInfo* info, cudaStream_t stream);
  std::string describe(SyncErrorInfo const& info) const;
  void set_sync_timeout_ns(uint64_t ns) { timeout_ns_ = ns; }
  // Testing: this stage does not post (its consumers time out); -1 turns it off.
  Status inject_missing_posts(int stage);
  // The tile trace of later runs, in any mode, into `trace` (nullptr: off): a device buffer of `words` 64-bit
  // words (-1: the most trace_words() of any batch up to initialize()'s max_batch), TileTrace's five words per
  // tile, stage after stage
  // (trace_offset). A tile's first word is when its block took it (before any wait), the second when its
  // epilogue stored it, the fifth when its waits ended and its loads could begin (TileTrace). A run whose batch
  // needs more words is refused (kInvalidArgument).
  Status set_trace(uint64_t* trace, int64_t words = -1);
  static constexpr int kTraceWordsPerTile = 5;  // TileTrace::kWords: taken ns, stored ns, SM, tile_m << 32 | tile_n, ready ns
  int64_t trace_offset(int stage, int batch) const;  // words before stage `stage`'s tiles at `batch`
  int64_t trace_words(int batch) const { return trace_offset(t_->num_stages, batch); }
  // The overlap's per-tile hooks (ConvHooks bits; kHooksLean by default).
  void set_overlap_hooks(unsigned hooks) { hooks_ = hooks & ~unsigned(kHookAssumePosted); }
  unsigned overlap_hooks() const { return hooks_; }
  // Whether a stage runs the kernel built for more blocks per SM (a register cap from __launch_bounds__, a few
  // spills, the largest shared-memory carve-out) at `batch`: where that kernel holds more blocks per SM on this
  // device than the plain one, the stage's tiles are one main-loop iteration (K at most the tile's K step: a
  // tile is all prologue and epilogue, latency-bound, and a third block hides it) and more than one wave of the
  // plain kernel. Elsewhere the plain kernel, whose default carve-out leaves more L1 for the 3x3 windows' reuse.
  // set_bounded_kernels(false): always the plain one.
  void set_bounded_kernels(bool bounded) { use_bounded_ = bounded; }
  // Whether the overlap runs a persistent consumer stage's cluster kernel where its unit has one
  // (ConvStageInfo::cluster_n); set_cluster_kernels(false): the kernel the other modes run (to compare the two).
  void set_cluster_kernels(bool clusters) { use_clusters_ = clusters; }
  bool overlap_cluster(int stage, int batch) const {
    return use_clusters_ && at(batch).stages[stage].cluster_n > 1 && persistent(stage, batch);
  }
  bool bounded(int stage, int batch) const {
    int const (&blocks)[2] = occupancy_[config(batch)][stage];
    return use_bounded_ && at(batch).stages[stage].k_steps <= 1 && blocks[1] > blocks[0] &&
           int64_t(tiles_m(stage, batch)) * tiles_n(stage, batch) > int64_t(sms_) * blocks[0];
  }
  int blocks_per_sm(int stage, int batch) const { return occupancy_[config(batch)][stage][bounded(stage, batch) ? 1 : 0]; }
  // Stage `stage` runs its persistent kernel at this batch: its unit has one and its tiles are more than one wave
  // (within a wave one block per tile measured faster on an H200: no queue, one math warp group per tile).
  // cusync_gen/conv_plan.py (ConvPlan.stage_persistent) mirrors it.
  bool persistent(int stage, int batch) const {
    return at(batch).persistent && sms_ > 0 &&
           int64_t(tiles_m(stage, batch)) * tiles_n(stage, batch) > grid_limit(stage, batch);
  }
  // Thread blocks stage `stage` launches at this batch: one per tile, or for a persistent kernel at most the blocks
  // the GPU holds at once (grid_limit).
  int64_t blocks(int stage, int batch) const;
  int grid_limit(int stage, int batch) const {
    return sms_ * (blocks_per_sm(stage, batch) > 0 ? blocks_per_sm(stage, batch) : 1);
  }
  // Of the kernels that run `batch` (default: the stages' own tiles).
  int blocks_per_sm_plain(int stage, int batch = INT_MAX) const { return occupancy_[config(batch)][stage][0]; }
  int blocks_per_sm_bounded(int stage, int batch = INT_MAX) const { return occupancy_[config(batch)][stage][1]; }
  // Profiling: stage `stage` alone, synchronized (ticket, waits, post, finish count as in the overlap, with
  // `hooks`), but every wait satisfied at its first poll; `drop` bits take parts out: 1 the ticket (block
  // order), 2 the waits (no poll), 4 the post, 8 a sink's finish count (which then never closes the run). Its
  // posts count up in the current epoch: consumers of later runs would not wait, so use it in a process of its
  // own, never between runs whose results matter.
  Status profile_stage(int stage, ConvArguments const& args, unsigned hooks, unsigned drop, cudaStream_t stream);
  int tiles_m(int stage, int batch) const;
  int tiles_n(int stage, int batch) const;
  // The tile configuration that runs `batch` (0: the stages' own tiles; 1, 2, ...: ever smaller batches) and
  // its tables.
  int config(int batch) const {
    int c = 0;
    while (c + 1 < num_configs_ && batch <= configs_[c]->smaller_batch_max) ++c;
    return c;
  }
  ConvTables const& at(int batch) const { return *configs_[config(batch)]; }
  int num_configs() const { return num_configs_; }
  int num_stages() const { return t_->num_stages; }
  char const* stage_name(int stage) const;
  char const* last_error() const { return last_error_; }
  // Whether run() launches the wait kernels at this batch: not when every stage's blocks fit on the GPU at
  // once (then no spinning block can keep a producer block from starting). `force` makes it always wait.
  bool waits_for_start(int batch) const;
  void set_always_wait_kernel(bool always) { always_wait_ = always; }
  // Whether run_overlapped() uses one stream with programmatic dependent launch (else two streams and the
  // wait kernels); set_two_streams(true) forces the latter (for comparison and tests).
  bool programmatic() const { return t_->programmatic && cc_major_ >= 9 && !two_streams_; }
  void set_two_streams(bool two) { two_streams_ = two; }
  // false: the overlap's blocks take their tiles in the hardware's block order (row-major blockIdx), counting
  // their start without waiting for the answer; true (the default): from an atomic ticket in tile order.
  void set_ticket_order(bool tickets) { ticket_order_ = tickets; }

  // run()'s choice at `batch`: set_mode() first; else autotune()'s table (the smallest timed batch >= batch);
  // else the rule: the overlap where some producer stage has more tiles than one wave (its grid over the
  // SMs times its blocks per SM), back to back where every producer fits in one wave (all its tiles run at
  // once and end together, so no consumer tile can start early and the overlap only adds its fixed cost):
  // chained with programmatic dependent launch where programmatic(), else plain.
  // cusync_gen/conv_plan.py (ConvPlan.run_mode) mirrors the rule.
  ConvMode mode(int batch) const;
  char const* mode_reason(int batch) const;  // why mode(batch); valid until the next call
  // kInvalidArgument (and nothing changes) for a value that is not a ConvMode.
  Status set_mode(ConvMode mode) {
    if (int(mode) < int(ConvMode::kAuto) || int(mode) > int(ConvMode::kChained)) {
      last_error_ = "set_mode: not a cusync::conv::ConvMode (kAuto = 0 .. kChained = 3)";
      return Status::kInvalidArgument;
    }
    mode_override_ = mode;
    return Status::kSuccess;
  }
  // Times back to back, the overlap and (where programmatic()) back to back chained with PDL at each of
  // batches[0..count) on this GPU and makes the fastest run()'s choice at that batch: cusync::time_modes
  // (cusync/time_modes.h), CUDA graphs of args' tensors replayed back to back after a preheat, `rounds`
  // rounds (1 .. kMaxTuneRounds) round robin, medians; the rule's own choice first, so that it wins a tie.
  // Synchronizes `stream`; args' outputs are overwritten.
  Status autotune(ConvArguments const& args, int const* batches, int count, int rounds, cudaStream_t stream);
  void clear_autotune() { tuned_count_ = 0; }

 private:
  Status check(ConvArguments const& args);
  ConvMode rule_mode(int batch) const;  // mode() without set_mode or autotune's table
  bool has_consumer(int stage) const;
  Status launch_stage(int stage, ConvArguments const& args, bool synced, cudaStream_t stream, bool programmatic);
  Status run_unsynced(ConvArguments const& args, cudaStream_t stream, bool programmatic);

  ConvTables const* t_;  // the stages' own tiles (names, shapes and edges: the same in every configuration)
  ConvTables const* configs_[kMaxConvConfigs] = {};
  int num_configs_ = 0;
  void* state_ = nullptr;
  uint64_t* semaphores_ = nullptr;
  int64_t semaphore_offset_[kMaxConvStages] = {};
  int max_batch_ = 0;
  uint64_t timeout_ns_ = 2000000000ull;
  int missing_posts_ = -1;
  int sms_ = 0;
  int occupancy_[kMaxConvConfigs][kMaxConvStages][2] = {};  // blocks per SM: the plain kernel, the bounded one
  bool use_bounded_ = true;
  bool use_clusters_ = true;
  unsigned hooks_ = kHooksLean;
  unsigned profile_hooks_ = 0;   // profile_stage: hooks | kHookAssumePosted while it launches
  unsigned profile_drop_ = 0;
  bool always_wait_ = false;
  uint64_t* trace_ = nullptr;
  int64_t trace_capacity_ = 0;  // words of trace_
  int cc_major_ = 0;
  bool two_streams_ = false;
  bool ticket_order_ = true;
  ConvMode mode_override_ = ConvMode::kAuto;
  int tuned_count_ = 0;
  int tuned_batch_[kMaxTunedBatches] = {};
  ConvMode tuned_mode_[kMaxTunedBatches] = {};
  float tuned_us_[kMaxTunedBatches][3] = {};  // back to back, overlap, back to back + PDL (0: not timed)
  mutable char mode_reason_[256] = {};
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
  char const* last_error_ = "";
};

}  // namespace cusync::conv
