// cusync sm90 backend: the chain's run() modes (cusync/sm90/dispatch.h) on the caller's stream.
//
// Mode kOverlap: every stage on the caller's stream; a stage whose inputs are all tile-synced is a
// programmatic dependent launch (PDL) of the stage before it, and every CTA of that stage triggers it at
// entry. The consumer kernel therefore launches only once every producer CTA has started: its CTAs take
// SMs only as producer CTAs leave, so a spinning consumer tile can never starve a producer tile. The
// epoch of a run is opened by the last tile of the run before it. The other modes run CUTLASS's own
// kernels (or cuBLASLt's) for the GEMMs, chained with PDL. Declarations only; the definitions are in
// cusync/sm90/chain.cuh.
#pragma once

#include <cstddef>

#include "cusync/chain.h"
#include "cusync/sm90/dispatch.h"
#include "cusync/sm90/stream_mode.h"

namespace cusync::sm90 {

// A project's baselines (null for stages that are not GEMMs) and its measured dispatch table, emitted
// into src/<name>_stages.h and collected by src/<name>.cu.
using WorkspaceFn = size_t (*)(int m, int sms, int config);
// Copies a gated GEMM's weights [gate | up] (src, rows ld elements apart, 0: dense) into the dense
// interleaved layout its kernels read (dst).
using InterleaveFn = Status (*)(void const* src, int64_t ld, void* dst, cudaStream_t stream);
struct BaselineTables {
  LaunchFn const* stock;         // CUTLASS's persistent kernels for the same tiles (mode kStock)
  PrepareFn const* prepare_stock;
  WorkspaceFn const* streamk_workspace;
  LaunchFn const* clear_streamk;
  LaunchFn const* streamk;
  LaunchFn const* cluster;
  LaunchFn const* pingpong;
  LaunchFn const* cublaslt;
  // Gated GEMMs (epilogue swiglu: gemm_gated[s]): their weights, interleaved by interleave[s] into a
  // buffer of weight_bytes[s] that the chain owns (null and 0 for every other stage).
  bool const* gemm_gated;
  InterleaveFn const* interleave;
  size_t const* weight_bytes;
  // Mode kStream (a spec with optimizations.stream_weights; else null): its kernels for the chain's element
  // type; its two GEMMs' stages (the first and last), epilogues as StreamAct, K and N (a gated GEMM's 2 n: the
  // generated shapes, which size its memory before any arguments exist, workspace_size()); halves: a SwiGLU
  // stage of its own sits between them, so the first GEMM's weights are [gate | up] halves, its output the
  // SwiGLU's input and the SwiGLU stage's output what the second reads.
  StreamKernels const* (*stream)();
  int const* stream_stage;
  int const* stream_act;
  int const* stream_k;
  int const* stream_n;
  bool stream_halves;
  // Mode kStream's kernel at M <= kSlabMaxM (every chain whose shapes the slab kernel takes; else null): the slab
  // chain over the weights as the caller laid them out; slab_w1_col: the first GEMM's weights are column-major
  // (each weight column contiguous, the case in which it streams at full speed); slab_w2_col: the second's are
  // (then it has no partials: each CTA computes whole output columns after every slab's post).
  SlabKernels const* (*slab)();
  bool slab_w1_col;
  bool slab_w2_col;
  int dispatch_sms;              // the measured table applies on GPUs with this many SMs
  char const* dispatch_gpu;
  int num_dispatch;
  DispatchEntry const* dispatch;
};

class Chain : public StagedChain {
 public:
  Chain(ChainTables const& tables, BaselineTables const& baselines) : StagedChain(tables), b_(&baselines) {}
  ~Chain();
  // Moves take every buffer and the cuBLASLt context; `other` is left as if just constructed.
  Chain(Chain&& other) noexcept;
  Chain& operator=(Chain&& other) noexcept;
  void swap(Chain& other) noexcept;

  // caller: carve every device buffer (state, semaphores, stream-K workspaces, cuBLASLt's workspace, the
  // gated GEMMs' interleaved weights) from the caller's memory; cuBLASLt's handle stays the chain's
  // (StagedChain::initialize).
  Status initialize(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller = nullptr);
  // StagedChain::update; a gated GEMM whose weight pointer changed gets its weights interleaved again,
  // on the stream of the next run.
  Status update(ChainPointers const& args);
  // Interleaves every gated GEMM's weights again from the current pointers, on `stream` (after the
  // caller changed them in place: the kernels read the chain's interleaved copy, made at initialize()).
  Status refresh_weights(cudaStream_t stream);
  Status run(cudaStream_t stream) { return run_mode(stream, mode()); }
  Status run_mode(cudaStream_t stream, Mode mode);
  Mode mode() const;
  char const* mode_reason() const;
  bool cublaslt_available() const;
  // Whether mode kStream can compute the chain at the current M (a spec with optimizations.stream_weights,
  // M <= kStreamMaxM).
  bool stream_available() const { return slab_available() || (stream_mem_ != nullptr && args_.m <= kStreamMaxM); }
  // Whether mode kStream runs the slab kernel at the current M (cusync/sm90/slab_chain.cuh: M <= kSlabMaxM).
  bool slab_available() const { return slab_mem_ != nullptr && args_.m <= kSlabMaxM; }
  // Testing (the epoch wrap): the epoch of the next run of the synced kernels (ChainBase) and of mode kStream.
  Status set_epoch_for_testing(uint32_t epoch, cudaStream_t stream);
  // Which of cuBLASLt's candidate algorithms stage s ran in its last kCublasLt run (0: the heuristic's
  // first; another after autotune()'s search); -1: not a cuBLASLt GEMM or not run yet.
  int lt_algorithm(int stage) const;
  // kInvalidArgument (and nothing changes) for a value that is not a cusync::Mode.
  Status set_mode(Mode mode);
  // Times every mode at each of ms[0..count) on this GPU and makes the fastest per M run()'s first choice
  // after set_mode() (cusync/sm90/autotune.h); a call that fails leaves the table as it was. At each M
  // it first picks cuBLASLt's algorithm per GEMM shape for mode kCublasLt (kept for the process).
  Status autotune(int const* ms, int count, cudaStream_t stream, int rounds);
  void clear_autotune() { tuned_entries_ = 0, tuned_timed_ = 0; }
  void set_sequential_fallback(bool enabled) { mode_override_ = enabled ? Mode::kAuto : Mode::kOverlap; }
  bool overlaps() const { return mode() == Mode::kOverlap; }
  Status run_stock(cudaStream_t stream, bool programmatic) { return run_cutlass(stream, programmatic, Mode::kStock); }
  Status run_streamk(cudaStream_t stream) { return run_mode(stream, Mode::kStreamK); }
  // -1: each stage's order from the spec; else a cusync::TileOrder (kInvalidArgument for another value).
  Status set_tile_order(int order);

 private:
  void fill_backend(StageLaunch& launch, int stage) const override;
  Status prepare_run(cudaStream_t stream) override;
  Status search_lt_algorithms(cudaStream_t stream, int rounds, int preheat_ms);
  void take_backend(Workspace& w, int max_m, int sms) const override;
  // Bytes of every GEMM's stream-K workspace for max_m rows on `sms` SMs; each stage's offset.
  int64_t streamk_bytes(int max_m, int sms, int64_t* offset) const;
  // Bytes of the gated GEMMs' interleaved weights; each stage's offset.
  int64_t gated_bytes(int64_t* offset) const;
  Status run_cutlass(cudaStream_t stream, bool programmatic, Mode kernels);
  Status initialize_steps(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller);
  Status run_overlapped(cudaStream_t stream);
  Status run_stream(cudaStream_t stream);
  Status run_slab(cudaStream_t stream);
  // Mode kStream's device memory (stream_layout) for this chain on `sms` SMs; 0 without the mode.
  int64_t stream_bytes(int sms, StreamLayout* layout) const;
  // The slab kernel's device memory (slab_layout) on `sms` SMs; 0 without it.
  int64_t slab_bytes(int sms, SlabLayout* layout) const;
  void release_backend();  // frees what initialize_steps() took (the chain's own memory only)

  BaselineTables const* b_;
  Mode mode_override_ = Mode::kAuto;
  mutable char mode_reason_[256] = {};
  int tuned_entries_ = 0;                      // autotune()'s table: tuned_[0 .. tuned_entries_)
  DispatchEntry tuned_[kMaxTunedMs] = {};
  TunedTimes tuned_times_[kMaxTunedMs] = {};  // what autotune() timed at each M (mode_reason says it)
  int tuned_timed_ = 0;
  void* streamk_workspace_ = nullptr;          // every GEMM stage's stream-K workspace
  void* lt_ = nullptr;                         // cusync::sm90::LtContext (mode kCublasLt)
  int64_t streamk_offset_[kMaxChainStages] = {};
  void* gated_weights_ = nullptr;              // every gated GEMM's interleaved weights
  int64_t gated_offset_[kMaxChainStages] = {};
  void* stream_mem_ = nullptr;                 // mode kStream's state, workspaces and packed weights
  StreamLayout stream_layout_{};
  void* slab_mem_ = nullptr;                   // the slab kernel's state, semaphores and partials
  SlabLayout slab_layout_{};
  void const* gated_source_[kMaxChainStages] = {};  // the weight pointers the chain's copies (interleaved or
  int64_t gated_source_ld_[kMaxChainStages] = {};   // packed) were made from, and their ldb
  bool weights_stale_ = false;
};

}  // namespace cusync::sm90
