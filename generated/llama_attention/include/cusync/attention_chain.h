// cusync runtime: the attention chain's lifecycle (qkv -> scores -> softmax -> pv -> proj), written once
// for every attention project; a project emits its constants and stage functions (AttentionTables) and
// a thin public class that owns an AttentionChain. Declarations only (host compilers include this
// through the project's public header); the definitions are in cusync/attention_chain.cuh.
//
// run(stream): stage i on stream i % 2 (the caller's stream or the side stream), forked from and joined
// back into the caller's stream. Before stage i is launched, the wait kernel returns only once every
// block of stage i - 1 has started: from then on the producer needs no more SM slots, so consumer blocks
// that occupy SMs and spin can never starve a producer block that is not yet scheduled. Stage i + 2
// follows stage i on the same stream, so at most two stages overlap. The epoch of a run is opened by the
// last block of the run before it (proj, the sink: every other stage's tiles have been waited for by then).
#pragma once

#include <cstdint>

#include <cuda_runtime.h>

#include "cusync/chain.h"
#include "cusync/status.h"
#include "cusync/sync_error.h"

namespace cusync {

struct AttentionGemmLaunch;     // cusync/attention_launch.cuh
struct AttentionSoftmaxLaunch;

// The arguments of one run (the project's Arguments, with untyped pointers).
struct AttentionArguments {
  int batch = 1, new_tokens = 0, cache_tokens = 0, kv_capacity = 0;
  void const* x = nullptr;
  void const* w_qkv = nullptr;
  void const* w_o = nullptr;
  void* kv = nullptr;
  void* y = nullptr;
};

// A project's constants (from the plan) and stage functions (src/<name>_stages.h).
struct AttentionTables {
  int hidden, heads, head_dim, width;  // width = heads * head_dim
  int max_generation_batch;            // sequences per generation step (one O tile row)
  int min_overlap_rows;                // run() overlaps from this many rows on
  bool causal;
  int element_bytes;
  int qkv_tile_m, qkv_tile_n, scores_tile_m, scores_tile_n, pv_tile_m, pv_tile_n, proj_tile_m, proj_tile_n;
  int softmax_rows;
  PrepareFn prepare[4];                // qkv, scores, pv, proj
  Status (*launch_gemm[4])(AttentionGemmLaunch const&, cudaStream_t);
  Status (*launch_softmax)(AttentionSoftmaxLaunch const&, cudaStream_t);
};

class AttentionChain : public ChainBase {
 public:
  static constexpr int kNumStages = 5;
  explicit AttentionChain(AttentionTables const& tables) : t_(&tables) {}
  ~AttentionChain();
  // Moves take every buffer, stream and event; `other` is left as if just constructed.
  AttentionChain(AttentionChain&& other) noexcept;
  AttentionChain& operator=(AttentionChain&& other) noexcept;
  void swap(AttentionChain& other) noexcept;

  Status initialize(AttentionArguments const& args, int max_rows, int max_keys, cudaStream_t stream);
  Status update(AttentionArguments const& args, cudaStream_t stream);
  char const* last_error() const { return last_error_; }
  Status run(cudaStream_t stream);
  void set_sequential_fallback(bool enabled) { sequential_fallback_ = enabled; }
  bool overlaps() const { return !sequential_fallback_ || args_.batch * args_.new_tokens >= t_->min_overlap_rows; }
  Status run_sequential(cudaStream_t stream);
  Status run_stage(int stage, cudaStream_t stream);
  static char const* stage_name(int stage);
  void const* scores() const { return scores_; }
  void const* probs() const { return probs_; }
  void const* heads_out() const { return heads_out_; }

 private:
  Status check(AttentionArguments const& args, int max_rows, int max_keys);
  Status launch_stage(int stage, bool synced, cudaStream_t stream);
  int blocks(int stage) const;

  AttentionTables const* t_;
  AttentionArguments args_{};
  int max_rows_ = 0;
  int max_keys_ = 0;
  bool sequential_fallback_ = true;
  char const* last_error_ = "";
  void* scores_ = nullptr;                // S: [batch * heads][s][keys]
  void* probs_ = nullptr;                 // P: same shape
  void* heads_out_ = nullptr;             // O: [batch * s, width]
  void const** pointers_ = nullptr;       // per-z operand pointers of every GEMM stage (device)
  int* split_semaphores_ = nullptr;       // CUTLASS's serial split-K semaphores: qkv's tiles, then proj's
  int64_t split_offset_ = 0;              // where proj's start
  int64_t semaphore_offset_[kNumStages] = {};
  int64_t pointer_offset_[kNumStages][3] = {};  // where stage s's A, B, D arrays start in pointers_
  TwoStreams streams_;
};

}  // namespace cusync
