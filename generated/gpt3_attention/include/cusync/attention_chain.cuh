// cusync runtime: the definitions of cusync/attention_chain.h (a project's src/<name>.cu includes this).
#pragma once

#include <algorithm>
#include <climits>
#include <cmath>
#include <utility>
#include <vector>

#include "cusync/attention_chain.h"
#include "cusync/attention_launch.cuh"
#include "cusync/chain.cuh"
#include "cusync/chain_kernels.cuh"
#include "cusync/policy.h"

namespace cusync {
namespace attention_detail {

enum Stage : int { kQkv = 0, kScores = 1, kSoftmax = 2, kPv = 3, kProj = 4 };
constexpr char const* kStageNames[5] = {"qkv", "scores", "softmax", "pv", "proj"};
constexpr int kGemmStages[4] = {kQkv, kScores, kPv, kProj};

inline int div_up(int a, int b) { return a / b + (a % b != 0); }  // a >= 0, b > 0; no overflow near INT_MAX

// Serial split-K for qkv and proj when their M x N grid is small (a generation step's few rows): the
// most K slices (up to 16) that keep the grid within two blocks per SM, each slice a whole number of
// 64-element K blocks (so that CUTLASS cuts K exactly as counted here). attention_plan.split_k_for is the
// same rule (the plan's proofs use it with each SM count; the library, with the device's).
inline int split_k_for(int tiles, int k, int sms) {
  int best = 1;
  for (int slices = 2; slices <= 16; ++slices) {
    if (tiles * slices <= 2 * sms && (k / 64) % slices == 0 && k % 64 == 0) best = slices;
  }
  return best;
}

// The run's shape, derived from the arguments: everything the launches below need.
struct Shape {
  AttentionTables const& t;
  int batch, s, cache, keys, rows, z, split_qkv, split_proj;
  Shape(AttentionTables const& tables, AttentionArguments const& a, int sms)
      : t(tables), batch(a.batch), s(a.new_tokens), cache(a.cache_tokens), keys(a.cache_tokens + a.new_tokens),
        rows(a.batch * a.new_tokens), z(a.batch * tables.heads),
        split_qkv(split_k_for(div_up(rows, t.qkv_tile_m) * div_up(3 * t.width, t.qkv_tile_n), t.hidden, sms)),
        split_proj(split_k_for(div_up(rows, t.proj_tile_m) * div_up(t.hidden, t.proj_tile_n), t.width, sms)) {}
  int split(int stage) const { return stage == kQkv ? split_qkv : stage == kProj ? split_proj : 1; }
  int tiles_m(int stage) const {  // tile rows (virtual rows z * tiles_m + m: z is (sequence, head) or K slice)
    switch (stage) {
      case kQkv: return split_qkv * div_up(rows, t.qkv_tile_m);
      case kScores: return z * div_up(s, t.scores_tile_m);
      case kSoftmax: return z * div_up(s, t.softmax_rows);
      case kPv: return z * div_up(s, t.pv_tile_m);
      default: return split_proj * div_up(rows, t.proj_tile_m);
    }
  }
  int tiles_n(int stage) const {
    switch (stage) {
      case kQkv: return div_up(3 * t.width, t.qkv_tile_n);
      case kScores: return div_up(keys, t.scores_tile_n);
      case kSoftmax: return 1;
      case kPv: return div_up(t.head_dim, t.pv_tile_n);
      default: return div_up(t.hidden, t.proj_tile_n);
    }
  }
  // The semaphores stage `p` posts to, as its consumer sees them.
  SyncPolicy output_policy(int p) const {
    switch (p) {
      case kQkv: {  // every K slice of a tile posts
        SyncPolicy policy = RowSync(t.qkv_tile_m, t.qkv_tile_n, tiles_n(kQkv));
        policy.posts = tiles_n(kQkv) * split_qkv;
        return policy;
      }
      case kScores: return RowSync(t.scores_tile_m, t.scores_tile_n, tiles_n(kScores));
      case kSoftmax: return RowSync(t.softmax_rows, keys, 1);
      case kPv: {  // one semaphore per O tile row, posted by every head's pv tiles (of every sequence, if s = 1)
        SyncPolicy policy = RowSync(t.pv_tile_m, t.pv_tile_n, tiles_n(kPv));
        policy.posts = t.heads * tiles_n(kPv) * (s == 1 ? batch : 1);
        return policy;
      }
      default: return NoSync();
    }
  }
  AttentionTile tile(int stage) const {
    AttentionTile tl;
    tl.stage = AttentionStage(stage);
    tl.heads = t.heads;
    tl.new_tokens = s;
    tl.cache_tokens = cache;
    bool const batched = stage == kScores || stage == kSoftmax || stage == kPv;
    tl.tiles_m = batched ? tiles_m(stage) / z : tiles_m(stage) / split(stage);
    tl.causal = t.causal;
    tl.tile_m = stage == kQkv ? t.qkv_tile_m : stage == kScores ? t.scores_tile_m : stage == kSoftmax ? t.softmax_rows
              : stage == kPv ? t.pv_tile_m : t.proj_tile_m;
    tl.tile_n = stage == kQkv ? t.qkv_tile_n : stage == kScores ? t.scores_tile_n : stage == kPv ? t.pv_tile_n : t.proj_tile_n;
    tl.qkv_tiles_m = tiles_m(kQkv) / split_qkv;
    return tl;
  }
};

}  // namespace attention_detail

inline AttentionChain::~AttentionChain() {
  for (void* p : {static_cast<void*>(split_semaphores_), static_cast<void*>(pointers_), heads_out_, probs_, scores_}) {
    if (p != nullptr) cudaFree(p);
  }
}

inline AttentionChain::AttentionChain(AttentionChain&& other) noexcept : t_(other.t_) { swap(other); }

inline AttentionChain& AttentionChain::operator=(AttentionChain&& other) noexcept { return move_assign(*this, other); }

inline void AttentionChain::swap(AttentionChain& other) noexcept {
  using std::swap;
  swap_base(other);
  swap(t_, other.t_);
  swap(args_, other.args_);
  swap(max_rows_, other.max_rows_);
  swap(max_keys_, other.max_keys_);
  swap(sequential_fallback_, other.sequential_fallback_);
  swap(last_error_, other.last_error_);
  swap(scores_, other.scores_);
  swap(probs_, other.probs_);
  swap(heads_out_, other.heads_out_);
  swap(pointers_, other.pointers_);
  swap(split_semaphores_, other.split_semaphores_);
  swap(split_offset_, other.split_offset_);
  swap(semaphore_offset_, other.semaphore_offset_);
  swap(pointer_offset_, other.pointer_offset_);
  streams_.swap(other.streams_);
}

inline char const* AttentionChain::stage_name(int stage) {
  return (stage >= 0 && stage < kNumStages) ? attention_detail::kStageNames[stage] : "(no stage)";
}

// The shapes this chain supports; each refusal says which argument to change.
inline Status AttentionChain::check(AttentionArguments const& a, int max_rows, int max_keys) {
  auto invalid = [this](char const* why) { last_error_ = why; return Status::kInvalidArgument; };
  if (a.x == nullptr || a.w_qkv == nullptr || a.w_o == nullptr || a.kv == nullptr || a.y == nullptr)
    return invalid("x, w_qkv, w_o, kv and y must all be device pointers");
  if (a.batch < 1 || a.new_tokens < 1 || a.cache_tokens < 0) return invalid("batch and new_tokens must be >= 1, cache_tokens >= 0");
  if (a.batch > 1 && a.new_tokens > 1)
    return invalid("several sequences each with several new tokens: run a prompt per sequence (batch = 1), or generate (new_tokens = 1)");
  if (a.new_tokens == 1 && a.batch > t_->max_generation_batch) return invalid("generation batch is larger than kMaxGenerationBatch (one O tile row)");
  int64_t const keys = int64_t(a.cache_tokens) + a.new_tokens;  // int64: both may be near INT_MAX
  if (keys > INT_MAX) return invalid("cache_tokens + new_tokens must be below 2^31");
  if (keys % 8 != 0) return invalid("cache_tokens + new_tokens must be a multiple of 8 (16-byte rows of S and P)");
  if (a.kv_capacity < keys) return invalid("kv_capacity must be >= cache_tokens + new_tokens");
  if (max_rows > 0 && a.batch * a.new_tokens > max_rows) return invalid("batch * new_tokens exceeds initialize()'s max_rows");
  if (max_keys > 0 && keys > max_keys) return invalid("cache_tokens + new_tokens exceeds initialize()'s max_keys");
  // Every stage's grid within CUDA's 2^31 - 1 blocks (the int tile counts of Shape too); the plan's
  // check_shape says the same. The scores grid, batch * heads * ceil(s / tile) * ceil(keys / tile), is the
  // one that passes it (long prompts with many heads). Split-K only splits grids of at most 2 * SMs blocks.
  auto tiles = [](int64_t n, int64_t tile) { return (n + tile - 1) / tile; };
  auto fits = [](int64_t x, int64_t y, int64_t w) { return x <= INT_MAX / y / w; };  // x * y * w <= INT_MAX, all > 0
  AttentionTables const& t = *t_;
  int64_t const rows = int64_t(a.batch) * a.new_tokens, z = int64_t(a.batch) * t.heads;
  if (!fits(tiles(rows, t.qkv_tile_m), tiles(3 * int64_t(t.width), t.qkv_tile_n), 1) ||
      !fits(z, tiles(a.new_tokens, t.scores_tile_m), tiles(keys, t.scores_tile_n)) ||
      !fits(z, tiles(a.new_tokens, t.softmax_rows), 1) ||
      !fits(z, tiles(a.new_tokens, t.pv_tile_m), tiles(t.head_dim, t.pv_tile_n)) ||
      !fits(tiles(rows, t.proj_tile_m), tiles(t.hidden, t.proj_tile_n), 1))
    return invalid("a stage's grid would have more than 2^31 - 1 blocks: use fewer new_tokens, cache_tokens or sequences");
  last_error_ = "";
  return Status::kSuccess;
}

inline Status AttentionChain::initialize(AttentionArguments const& args, int max_rows, int max_keys, cudaStream_t stream) {
  using namespace attention_detail;
  if (state_ != nullptr) { last_error_ = "initialize() was already called"; return Status::kInvalidArgument; }
  Status status = check(args, 0, 0);
  if (status != Status::kSuccess) return status;
  AttentionTables const& t = *t_;
  max_rows_ = std::max(max_rows, args.batch * args.new_tokens);
  max_keys_ = std::max(max_keys, args.cache_tokens + args.new_tokens);
  // Worst cases over every shape within the limits: z * ceil(s / tile) <= heads * rows virtual rows.
  int64_t const virtual_rows = int64_t(t.heads) * max_rows_;
  int64_t const sems[kNumStages] = {div_up(max_rows_, t.qkv_tile_m), virtual_rows, virtual_rows, div_up(max_rows_, t.pv_tile_m), 0};
  int64_t words = 0;
  for (int s = 0; s < kNumStages; ++s) { semaphore_offset_[s] = words; words += sems[s]; }
  int64_t pointers = 0;
  for (int s : kGemmStages) {
    int64_t const z = (s == kScores || s == kPv) ? int64_t(t.heads) * max_rows_ : 1;
    for (int operand = 0; operand < 3; ++operand) { pointer_offset_[s][operand] = pointers; pointers += z; }
  }
  int64_t const workspace = int64_t(t.heads) * max_rows_ * max_keys_;  // S and P: rows * heads * keys
  if ((status = allocate_state(words, stream)) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaMalloc(&scores_, t.element_bytes * workspace))) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaMalloc(&probs_, t.element_bytes * workspace))) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaMalloc(&heads_out_, t.element_bytes * int64_t(max_rows_) * t.width))) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaMalloc(&pointers_, sizeof(void*) * pointers))) != Status::kSuccess) return status;
  // CUTLASS's serial split-K semaphores, one int per qkv and proj tile; zero once, each run leaves them zero.
  split_offset_ = int64_t(div_up(max_rows_, t.qkv_tile_m)) * div_up(3 * t.width, t.qkv_tile_n);
  int64_t const split_words = split_offset_ + int64_t(div_up(max_rows_, t.proj_tile_m)) * div_up(t.hidden, t.proj_tile_n);
  if ((status = from_cuda(cudaMalloc(&split_semaphores_, sizeof(int) * split_words))) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaMemsetAsync(split_semaphores_, 0, sizeof(int) * split_words, stream))) != Status::kSuccess) return status;
  if ((status = streams_.create()) != Status::kSuccess) return status;
  for (PrepareFn prepare : t.prepare) {
    if ((status = prepare()) != Status::kSuccess) return status;
  }
  return update(args, stream);  // synchronizes `stream`: everything above is done when it returns
}

// Per-z operand pointers: sequence b = z / heads, head h = z % heads. Row r of sequence b's KV rows is
// kv + (b * kv_capacity + r) * 3D, holding Q | K | V; head h's columns start at h * dh in each third.
inline Status AttentionChain::update(AttentionArguments const& args, cudaStream_t stream) {
  using namespace attention_detail;
  if (state_ == nullptr) return Status::kNotInitialized;
  Status const status = check(args, max_rows_, max_keys_);
  if (status != Status::kSuccess) return status;
  args_ = args;
  AttentionTables const& t = *t_;
  Shape const shape(t, args, sms_);
  auto at = [&](void const* base, int64_t elements) -> void const* {
    return static_cast<char const*>(base) + elements * t.element_bytes;
  };
  int64_t const row = 3 * int64_t(t.width);
  std::vector<void const*> host(size_t(pointer_offset_[kProj][2] + 1), nullptr);
  auto put = [&](int stage, int operand, int z, void const* p) { host[size_t(pointer_offset_[stage][operand] + z)] = p; };
  put(kQkv, 0, 0, args.x);
  put(kQkv, 1, 0, args.w_qkv);
  put(kQkv, 2, 0, at(args.kv, int64_t(args.cache_tokens) * row));
  for (int z = 0; z < shape.z; ++z) {
    int64_t const b = z / t.heads, h = z % t.heads;
    void const* seq = at(args.kv, b * args.kv_capacity * row);
    put(kScores, 0, z, at(seq, int64_t(args.cache_tokens) * row + h * t.head_dim));    // Q of the new tokens
    put(kScores, 1, z, at(seq, t.width + h * t.head_dim));                             // K of all tokens
    put(kScores, 2, z, at(scores_, int64_t(z) * shape.s * shape.keys));
    put(kPv, 0, z, at(probs_, int64_t(z) * shape.s * shape.keys));
    put(kPv, 1, z, at(seq, 2 * t.width + h * t.head_dim));                             // V of all tokens
    put(kPv, 2, z, at(heads_out_, b * shape.s * t.width + h * t.head_dim));
  }
  put(kProj, 0, 0, heads_out_);
  put(kProj, 1, 0, args.w_o);
  put(kProj, 2, 0, args.y);
  // After the runs already queued on `stream` (they read the old pointers); synchronized, because `host` is
  // a local and the next run, on whatever stream, reads these (update() is not capturable anyway).
  Status const copied = from_cuda(cudaMemcpyAsync(pointers_, host.data(), sizeof(void*) * host.size(),
                                                  cudaMemcpyHostToDevice, stream));
  return copied != Status::kSuccess ? copied : from_cuda(cudaStreamSynchronize(stream));
}

inline Status AttentionChain::run_stage(int stage, cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  if (stage < 0 || stage >= kNumStages) return Status::kInvalidArgument;
  return launch_stage(stage, /*synced=*/false, stream);
}

inline int AttentionChain::blocks(int stage) const {
  attention_detail::Shape const shape(*t_, args_, sms_);
  return shape.tiles_m(stage) * shape.tiles_n(stage);
}

inline Status AttentionChain::launch_stage(int s, bool synced, cudaStream_t stream) {
  using namespace attention_detail;
  AttentionTables const& t = *t_;
  Shape const shape(t, args_, sms_);
  StageSync sync;
  sync.state = static_cast<ChainState*>(state_);
  sync.stage = s;
  sync.enabled = synced;
  sync.order = TileOrder::kRowMajor;  // virtual rows: z by z, each row by row
  sync.tiles_m = shape.tiles_m(s);
  sync.tiles_n = shape.tiles_n(s);
  sync.num_stages = kNumStages;
  sync.counts_finish = s == kProj;
  sync.run_blocks = unsigned(blocks(kProj));
  auto edge_from = [&](int producer) {
    InputWait wait;
    wait.state = sync.state;
    wait.stage = s;
    wait.producer = producer;
    wait.policy = shape.output_policy(producer);
    wait.semaphores = semaphores_ + semaphore_offset_[producer];
    wait.timeout_ns = timeout_ns_;
    wait.enabled = true;
    return wait;
  };
  if (synced && s > kQkv) sync.input = edge_from(s - 1);
  if (synced && s == kPv) sync.input_b = edge_from(kQkv);  // V (see cusync/attention.cuh)
  if (s != kProj && s != missing_posts_stage_) {
    sync.output = shape.output_policy(s);
    sync.out_semaphores = semaphores_ + semaphore_offset_[s];
  }
  AttentionTile const tile = shape.tile(s);
  if (s == kSoftmax) {
    return t.launch_softmax(AttentionSoftmaxLaunch{scores_, probs_, shape.s, shape.keys, sync, tile}, stream);
  }
  auto const* a = reinterpret_cast<void const* const*>(pointers_ + pointer_offset_[s][0]);
  auto const* b = reinterpret_cast<void const* const*>(pointers_ + pointer_offset_[s][1]);
  auto* d = reinterpret_cast<void* const*>(const_cast<void**>(pointers_ + pointer_offset_[s][2]));
  int64_t const row = 3 * int64_t(t.width);
  switch (s) {
    case kQkv: {  // new tokens' rows go straight into the KV rows: one sequence (ld 3D) or one token each
      AttentionGemmLaunch launch{shape.rows, 3 * t.width, t.hidden, 1, a, b, d, t.hidden, row,
                                 shape.s == 1 ? args_.kv_capacity * row : row, 1.0f, sync, tile};
      launch.split_k = shape.split_qkv;
      launch.a0 = args_.x;
      launch.b0 = args_.w_qkv;
      launch.d0 = static_cast<char*>(args_.kv) + int64_t(args_.cache_tokens) * row * t.element_bytes;
      launch.split_semaphores = split_semaphores_;
      return t.launch_gemm[0](launch, stream);
    }
    case kScores:  // B = K^T: K's rows read as a column-major [dh, keys] operand
      return t.launch_gemm[1]({shape.s, shape.keys, t.head_dim, shape.z, a, b, d, row, row, shape.keys,
                               1.0f / std::sqrt(float(t.head_dim)), sync, tile}, stream);
    case kPv:
      return t.launch_gemm[2]({shape.s, t.head_dim, shape.keys, shape.z, a, b, d, shape.keys, row, t.width, 1.0f,
                               sync, tile}, stream);
    default: {
      AttentionGemmLaunch launch{shape.rows, t.hidden, t.width, 1, a, b, d, t.width, t.hidden, t.hidden, 1.0f, sync, tile};
      launch.split_k = shape.split_proj;
      launch.a0 = heads_out_;
      launch.b0 = args_.w_o;
      launch.d0 = args_.y;
      launch.split_semaphores = split_semaphores_ + split_offset_;
      return t.launch_gemm[3](launch, stream);
    }
  }
}

inline Status AttentionChain::run(cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  if (!overlaps()) return run_sequential(stream);
  auto* state = static_cast<ChainState*>(state_);
  cudaStream_t streams[2] = {stream, single_stream_ ? stream : streams_.side()};
  Status status = streams_.fork(stream);
  if (status != Status::kSuccess) return status;
  for (int s = 0; s < kNumStages; ++s) {
    cudaStream_t const on = streams[s % 2];
    if (s > 0) {
      wait_started_kernel<<<1, 32, 0, on>>>(state, s, s - 1, unsigned(blocks(s - 1)), timeout_ns_);
      if ((status = from_cuda(cudaGetLastError())) != Status::kSuccess) return status;
    }
    if ((status = launch_stage(s, /*synced=*/true, on)) != Status::kSuccess) return status;
  }
  return streams_.join(stream);
}

inline Status AttentionChain::run_sequential(cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  for (int s = 0; s < kNumStages; ++s) {
    Status const status = launch_stage(s, /*synced=*/false, stream);
    if (status != Status::kSuccess) return status;
  }
  return Status::kSuccess;
}

}  // namespace cusync
