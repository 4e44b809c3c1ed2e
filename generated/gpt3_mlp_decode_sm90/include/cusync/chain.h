// cusync runtime: the chain lifecycle every backend shares, written once.
//
// A generated project holds only what is specific to its spec: the kernel types of its stages, the
// constexpr stage tables the plan emits (src/<name>_stages.h), and a thin public class that owns one of
// the classes below and forwards to it. What is here is generic:
//   ChainBase    the device state (cusync::ChainState), the semaphore pool and its epochs, the sync-error
//                record, the test hooks (missing posts, the epoch), the timeout.
//   TwoStreams   a side stream and the fork/join events of a run on two streams (sm80 backends).
//   StagedChain  a chain described by a ChainTables: tile configurations picked by M, argument checks,
//                policies (the spec's, or a run-time override), one launch of one stage with its waits
//                and posts, the trace, run_sequential().
// The backends add their run(): cusync/sm80/chain.h (two streams, the wait kernel, the fallback) and
// cusync/sm90/chain.h (run() modes, PDL, stream-K workspaces, cuBLASLt).
//
// Declarations only, with no device code, so that the public header of a project can hold the class
// (host compilers include it); the definitions are in cusync/chain.cuh, which only the project's
// src/<name>.cu includes.
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cusync/policy.h"
#include "cusync/status.h"
#include "cusync/sync_error.h"
#include "cusync/tile_order.h"

namespace cusync {

constexpr int kMaxChainStages = 16;   // = kMaxStages (stage.cuh), checked there; spec.limits.MAX_STAGES
constexpr int kMaxConfigs = 8;        // spec.limits.MAX_TILE_CONFIGS
constexpr int kLdAlignment = 8;       // leading dimensions are multiples of 8 elements (16 bytes of fp16 / bf16)
constexpr int kElementBytes = 2;      // every matrix of a chain is fp16 or bf16
constexpr int64_t kMaxLd = (int64_t(1) << 40) / kElementBytes - kLdAlignment;  // elements: TMA strides < 2^40 bytes

// What the chain knows of one stage in one tile configuration: every number is emitted by the plan
// (cusync_gen/plan.py) into src/<name>_stages.h; nothing here is derived again at run time.
struct StageInfo {
  char const* name;
  int n;                         // output columns
  int tile_m;
  int tile_n;
  int producer;                  // stage index of the input edge's producer, -1 for the chain input
  PolicyKind policy;             // the spec's policy of the input edge
  bool gemm_consumer;            // the input edge feeds a GEMM A operand (policy may be overridden)
  bool tile_policy_ok;           // TileSync lines up with the producer's tiles
  bool row_policy_ok;            // RowSync lines up with the producer's tiles
  int stride_tiles;              // StridedSync group distance in producer tiles, 0 otherwise
  TileOrder order;
  int blocks_per_sm;             // occupancy, from threads and shared memory
  int producer_b;                // a second producer (two-producer swiglu), -1 if none
  PolicyKind policy_b;           // the spec's policy of the edge from producer_b
  int wait_value;                // posts one semaphore of the input edge receives per run (EdgePlan.wait_value,
                                 // what verify.py proves); 0 without an input edge
  int wait_value_b;              // the same for the edge from producer_b
  int row_wait_value;            // the input edge's wait value under a run-time RowSync override (set_policy)
};

// Posts one semaphore receives per run under `kind`, for a producer of `producer_tiles_n` tiles per row
// (policy.h's factories): only for the static_asserts that check the emitted wait values.
constexpr int policy_posts(PolicyKind kind, int producer_tiles_n, int group_size) {
  return kind == PolicyKind::kRow ? producer_tiles_n : kind == PolicyKind::kTile ? 1
       : kind == PolicyKind::kStrided ? group_size : 0;
}

// A project's stage tables and stage functions (src/<name>.cu fills one in, from <name>_stages.h).
struct StageLaunch;
using LaunchFn = Status (*)(StageLaunch const&, cudaStream_t);
using PrepareFn = Status (*)();
struct ChainTables {
  int num_stages;
  int num_configs;
  int max_m;                     // kMaxM
  StageInfo const* stages;       // [num_configs][num_stages], row-major
  int const* config_max_m;       // [num_configs]; the last is INT_MAX
  LaunchFn const* launch;        // [num_stages]
  PrepareFn const* prepare;      // [num_stages]
  bool no_atomic_add;
  bool avoid_wait_kernel;        // sm80: skip the wait kernel where producer and consumer are co-resident
  bool has_unsynced_edge;        // some edge is sync: none (run() orders it by the stream or an event)
  bool ticket_order;             // the default of set_ticket_order (false with avoid_custom_order)
  StageInfo const& at(int config, int stage) const { return stages[config * num_stages + stage]; }
};

// One launch's pointers: M rows, operand a, operand b and the output of every stage; what the caller
// asked for beyond them (each GEMM's shape), and what the generator emitted to check it against (each
// operand's dense row width and the Arguments field it comes from, for the messages of last_error()).
struct ChainPointers {
  int m = 0;
  void const* a[kMaxChainStages] = {};
  void const* b[kMaxChainStages] = {};   // weights (GEMMs), the second producer's output, or null
  void* d[kMaxChainStages] = {};
  bool b_required[kMaxChainStages] = {};  // a GEMM's weights must not be null (marks the GEMM stages)
  int64_t lda[kMaxChainStages] = {};      // leading dimensions in elements (0: dense, the row width)
  int64_t ldb[kMaxChainStages] = {};
  int64_t ldd[kMaxChainStages] = {};
  int n[kMaxChainStages] = {};            // the caller's N and K of each GEMM (0: the generated value)
  int k[kMaxChainStages] = {};
  int a_cols[kMaxChainStages] = {};       // emitted: dense row widths (a GEMM's K is a_cols, its N d_cols)
  int b_cols[kMaxChainStages] = {};
  int b_rows[kMaxChainStages] = {};       // emitted: a GEMM's weight rows (K, or N column-major; 0: unchecked)
  int d_cols[kMaxChainStages] = {};
  char const* a_field[kMaxChainStages] = {};  // emitted: the Arguments fields ("input", "gemm1_out", ...)
  char const* b_field[kMaxChainStages] = {};
  char const* d_field[kMaxChainStages] = {};
  void const* bias[kMaxChainStages] = {};      // a GEMM's [n] bias vector (spec `bias: true`), else null
  char const* bias_field[kMaxChainStages] = {};  // emitted where the spec asks for a bias (then it must not be null)
};

// How a stage is launched relative to the kernel before it on the stream (sm90; all false on sm80).
struct LaunchOrder {
  bool programmatic = false;          // programmatic dependent launch of the previous kernel
  bool trigger_dependents = false;    // the next kernel is a programmatic launch of this one
  bool wait_primary_at_exit = false;  // end only after the previous kernel ended
};

inline Status from_cuda(cudaError_t err) { return err == cudaSuccess ? Status::kSuccess : Status::kCudaError; }

// Move assignment of the chain classes: move `other` into a temporary (which leaves it as if just
// constructed), then swap, so that the temporary frees what `self` held.
template <typename Chain>
Chain& move_assign(Chain& self, Chain& other) noexcept {
  if (&self != &other) {
    Chain taken(static_cast<Chain&&>(other));
    self.swap(taken);
  }
  return self;
}

// Device memory carved out of one block the caller provides (initialize()'s workspace overload), in
// pieces aligned to kAlignment bytes taken in a fixed order; with a null base it only counts the bytes
// (workspace_size(), which takes the same pieces in the same order).
struct Workspace {
  static constexpr size_t kAlignment = 256;
  char* base = nullptr;
  size_t bytes = 0;                   // what the caller provided
  size_t used = 0;                    // the end of the last piece taken
  void* take(size_t size) {
    used = (used + kAlignment - 1) / kAlignment * kAlignment;
    void* piece = base != nullptr ? base + used : nullptr;
    used += size;
    return piece;
  }
};

// The device state of one chain instance: what every backend allocates, checks and frees the same way.
class ChainBase {
 public:
  ChainBase() = default;
  ~ChainBase();
  ChainBase(ChainBase const&) = delete;
  ChainBase& operator=(ChainBase const&) = delete;

  void set_single_stream(bool single_stream) { single_stream_ = single_stream; }
  void set_sync_timeout_ns(uint64_t timeout_ns) { timeout_ns_ = timeout_ns; }
  Status check_sync_error(SyncErrorInfo* info, cudaStream_t stream);
  Status clear_sync_error(cudaStream_t stream);
  // Test hooks (the project's <name>_testing.h).
  Status inject_missing_posts(int stage, int num_stages);
  Status set_epoch_for_testing(uint32_t epoch, cudaStream_t stream);
  bool initialized() const { return state_ != nullptr; }
  int sms() const { return sms_; }
  // Whether the current device is the one initialize() ran on (the SM count, the kernels' attributes, the
  // state and cuBLASLt's handle all belong to it).
  bool on_own_device() const {
    int device = -1;
    return cudaGetDevice(&device) == cudaSuccess && device == device_;
  }

 protected:
  void swap_base(ChainBase& other) noexcept;
  // Frees the state and the semaphores (unless they are the caller's) and leaves the object uninitialized.
  void release_base();
  // The device's SM count, the state and a pool of `words` semaphores, zeroed on `stream` (synchronized):
  // cudaMalloc'ed, or carved from `carve` (the caller's workspace; then never freed here).
  Status allocate_state(int64_t words, cudaStream_t stream, Workspace* carve = nullptr);
  // The pieces allocate_state() takes, for workspace_size().
  static void take_state(Workspace& w, int64_t words);
  static Status device_sms(int* sms);

  int sms_ = 0;
  int device_ = -1;                            // the device initialize() ran on
  bool single_stream_ = false;
  int missing_posts_stage_ = -1;
  uint64_t timeout_ns_ = 2000000000ull;
  void* state_ = nullptr;                      // cusync::ChainState
  uint64_t* semaphores_ = nullptr;
  bool owns_memory_ = true;                    // false: every device buffer is in the caller's workspace
};

// A side stream and the events that fork a run from the caller's stream and join it back.
class TwoStreams {
 public:
  TwoStreams() = default;
  ~TwoStreams();
  TwoStreams(TwoStreams const&) = delete;
  TwoStreams& operator=(TwoStreams const&) = delete;
  void swap(TwoStreams& other) noexcept;
  Status create();
  Status fork(cudaStream_t stream);  // the side stream waits for the work queued on `stream`
  Status join(cudaStream_t stream);  // `stream` waits for the work queued on the side stream
  cudaStream_t side() const { return side_stream_; }

 private:
  cudaStream_t side_stream_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
};

// A chain of stages described by a ChainTables.
class StagedChain : public ChainBase {
 public:
  explicit StagedChain(ChainTables const& tables) : t_(&tables), ticket_order_(tables.ticket_order) {}

  // Checks the pointers, allocates the state and the semaphores for max(max_m, args.m) rows, prepares
  // every stage; the backend's initialize() adds its own resources. `caller` (base and bytes): carve every
  // device buffer from that memory instead (at least workspace_size(max(max_m, args.m)) bytes, 256-byte
  // aligned), the backend's too (carve_ holds where the next piece starts).
  Status initialize(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller = nullptr);
  // Bytes of device memory initialize() takes for max_m rows on the current device (0 if max_m is out of
  // 1 .. kMaxM or the device cannot be queried): the state, the semaphores and the backend's buffers.
  size_t workspace_size(int max_m) const;
  Status update(ChainPointers const& args);
  Status set_policy(PolicyKind policy);
  // The tile trace of later runs into `trace` (nullptr: off), a buffer of `words` 64-bit words (-1: trace_words()
  // at the current M). A run whose M needs more is refused (kInvalidArgument) rather than written past it.
  Status set_trace(uint64_t* trace, int64_t words = -1);
  int64_t trace_offset(int stage) const;
  void set_ticket_order(bool ticket_order) { ticket_order_ = ticket_order; }
  Status run_sequential(cudaStream_t stream);
  // Why the last initialize() or update() returned kInvalidArgument: the field and the fix ("" after a success).
  char const* last_error() const { return last_error_; }
  static char const* stage_name(ChainTables const& tables, int stage);

 protected:
  void swap_staged(StagedChain& other) noexcept;
  // kInvalidArgument with last_error() naming the field, or kSuccess (and last_error() cleared).
  Status check_arguments(ChainPointers const& args);
  Status check_overlaps(ChainPointers const& args);  // part of check_arguments()
  // kInvalidArgument (last_error() says why) off the device of initialize(), or where the trace buffer is too
  // small for the current M; before a run launches anything.
  Status check_run();
  Status invalid(char const* format, ...);
  int config_for(int m) const;
  StageInfo const& info(int stage) const { return t_->at(config_, stage); }
  StageInfo const& topology(int stage) const { return t_->at(0, stage); }  // the same in every configuration
  bool has_consumer(int stage) const;
  int tiles_m(int stage) const;
  int tiles_n(int stage) const;
  PolicyKind effective_policy(int consumer, int producer) const;
  SyncPolicy make_policy(int consumer, int producer) const;
  bool tile_synced(int consumer, int producer) const { return effective_policy(consumer, producer) != PolicyKind::kNone; }
  bool coresident(int consumer, int producer) const;
  // One launch of `stage` on the current arguments, with no synchronization filled in yet.
  void fill_unsynced(StageLaunch& launch, int stage, bool programmatic) const;
  Status launch_stage(int stage, bool synced, cudaStream_t stream, LaunchOrder order = {});
  virtual void fill_backend(StageLaunch&, int) const {}
  // Work a backend queues on the run's stream before a run's first stage (sm90: re-interleaving the
  // weights of a gated GEMM whose pointer update() changed).
  virtual Status prepare_run(cudaStream_t) { return Status::kSuccess; }
  // The backend's pieces of the caller's workspace, after the state's (workspace_size()).
  virtual void take_backend(Workspace&, int /*max_m*/, int /*sms*/) const {}
  // Semaphore words for max_m rows (the finest grid of every configuration); each stage's offset per configuration.
  static int64_t semaphore_words(ChainTables const& t, int max_m, int64_t (*offset)[kMaxChainStages]);
  // sm90: every stage's queue in this order (-1: the spec's).
  int tile_order_override_ = -1;

  ChainTables const* t_;
  ChainPointers args_{};
  int max_m_ = 0;
  int config_ = 0;                             // the tile configuration for args_.m
  PolicyKind policy_override_ = PolicyKind::kNone;
  uint64_t* trace_ = nullptr;
  int64_t trace_capacity_ = 0;                 // words of trace_
  bool ticket_order_ = true;
  int64_t semaphore_offset_[kMaxConfigs][kMaxChainStages] = {};
  char last_error_[256] = {};
  Workspace carve_{};                          // the caller's workspace (base null: self-allocated; bytes: what the chain uses)
};

}  // namespace cusync
