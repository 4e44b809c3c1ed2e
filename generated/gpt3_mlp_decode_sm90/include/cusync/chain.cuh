// cusync runtime: the definitions of cusync/chain.h (included by a project's src/<name>.cu only).
//
// All inline: two projects linked into one program share these definitions (they are the same text).
#pragma once

#include <algorithm>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <utility>

#include "cusync/chain.h"
#include "cusync/launch.cuh"

namespace cusync {

// ------------------------------------------------------------------------------------------------
// ChainBase

inline ChainBase::~ChainBase() { release_base(); }

inline void ChainBase::release_base() {
  if (owns_memory_) {  // else the caller's workspace
    if (semaphores_ != nullptr) cudaFree(semaphores_);
    if (state_ != nullptr) cudaFree(state_);
  }
  semaphores_ = nullptr;
  state_ = nullptr;
  owns_memory_ = true;
}

inline void ChainBase::swap_base(ChainBase& other) noexcept {
  using std::swap;
  swap(sms_, other.sms_);
  swap(device_, other.device_);
  swap(single_stream_, other.single_stream_);
  swap(missing_posts_stage_, other.missing_posts_stage_);
  swap(timeout_ns_, other.timeout_ns_);
  swap(state_, other.state_);
  swap(semaphores_, other.semaphores_);
  swap(owns_memory_, other.owns_memory_);
}

inline Status ChainBase::device_sms(int* sms) {
  int device = 0;
  Status const status = from_cuda(cudaGetDevice(&device));
  return status != Status::kSuccess ? status : from_cuda(cudaDeviceGetAttribute(sms, cudaDevAttrMultiProcessorCount, device));
}

inline void ChainBase::take_state(Workspace& w, int64_t words) {
  w.take(sizeof(ChainState));
  w.take(sizeof(uint64_t) * size_t(std::max<int64_t>(words, 1)));
}

inline Status ChainBase::allocate_state(int64_t words, cudaStream_t stream, Workspace* carve) {
  Status status = Status::kSuccess;
  if ((status = device_sms(&sms_)) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaGetDevice(&device_))) != Status::kSuccess) return status;
  words = std::max<int64_t>(words, 1);
  if (carve != nullptr) {  // the same pieces, in the same order, as take_state
    owns_memory_ = false;
    state_ = carve->take(sizeof(ChainState));
    semaphores_ = static_cast<uint64_t*>(carve->take(sizeof(uint64_t) * size_t(words)));
  } else {
    if ((status = from_cuda(cudaMalloc(&state_, sizeof(ChainState)))) != Status::kSuccess) return status;
    if ((status = from_cuda(cudaMalloc(&semaphores_, sizeof(uint64_t) * words))) != Status::kSuccess) return status;
  }
  // Zeroed here, and again only when the epoch wraps: epochs make every later run start from a clean slate.
  return from_cuda(init_chain_state(static_cast<ChainState*>(state_), semaphores_, uint64_t(words), stream));
}

inline Status ChainBase::check_sync_error(SyncErrorInfo* info, cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  SyncErrorInfo error{};
  Status status = from_cuda(cudaMemcpyAsync(&error, &static_cast<ChainState*>(state_)->error, sizeof(error),
                                            cudaMemcpyDeviceToHost, stream));
  if (status == Status::kSuccess) status = from_cuda(cudaStreamSynchronize(stream));  // this stream only
  if (status != Status::kSuccess) return status;
  if (info != nullptr) *info = error;
  return error.flag != 0 ? Status::kSyncTimeout : Status::kSuccess;
}

inline Status ChainBase::clear_sync_error(cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  return from_cuda(cudaMemsetAsync(&static_cast<ChainState*>(state_)->error, 0, sizeof(SyncErrorInfo), stream));
}

inline Status ChainBase::inject_missing_posts(int stage, int num_stages) {
  if (stage < -1 || stage >= num_stages) return Status::kInvalidArgument;
  missing_posts_stage_ = stage;
  return Status::kSuccess;
}

inline Status ChainBase::set_epoch_for_testing(uint32_t epoch, cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  return from_cuda(set_chain_epoch(static_cast<ChainState*>(state_), epoch, stream));
}

// ------------------------------------------------------------------------------------------------
// TwoStreams

inline TwoStreams::~TwoStreams() {
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (side_stream_ != nullptr) cudaStreamDestroy(side_stream_);
}

inline void TwoStreams::swap(TwoStreams& other) noexcept {
  std::swap(side_stream_, other.side_stream_);
  std::swap(fork_, other.fork_);
  std::swap(join_, other.join_);
}

inline Status TwoStreams::create() {
  Status status = Status::kSuccess;
  if ((status = from_cuda(cudaStreamCreateWithFlags(&side_stream_, cudaStreamNonBlocking))) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming))) != Status::kSuccess) return status;
  return from_cuda(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
}

inline Status TwoStreams::fork(cudaStream_t stream) {
  Status const status = from_cuda(cudaEventRecord(fork_, stream));
  return status != Status::kSuccess ? status : from_cuda(cudaStreamWaitEvent(side_stream_, fork_, 0));
}

inline Status TwoStreams::join(cudaStream_t stream) {
  Status const status = from_cuda(cudaEventRecord(join_, side_stream_));
  return status != Status::kSuccess ? status : from_cuda(cudaStreamWaitEvent(stream, join_, 0));
}

// ------------------------------------------------------------------------------------------------
// StagedChain

inline int ceil_div(int a, int b) { return (a + b - 1) / b; }

inline void StagedChain::swap_staged(StagedChain& other) noexcept {
  using std::swap;
  swap_base(other);
  swap(tile_order_override_, other.tile_order_override_);
  swap(t_, other.t_);
  swap(args_, other.args_);
  swap(max_m_, other.max_m_);
  swap(config_, other.config_);
  swap(policy_override_, other.policy_override_);
  swap(trace_, other.trace_);
  swap(trace_capacity_, other.trace_capacity_);
  swap(ticket_order_, other.ticket_order_);
  swap(semaphore_offset_, other.semaphore_offset_);
  swap(last_error_, other.last_error_);
  swap(carve_, other.carve_);
}

inline char const* StagedChain::stage_name(ChainTables const& tables, int stage) {
  return (stage >= 0 && stage < tables.num_stages) ? tables.at(0, stage).name : "(no stage)";
}

// The tile configuration for M rows: the first whose m_max covers M.
inline int StagedChain::config_for(int m) const {
  for (int c = 0; c < t_->num_configs; ++c) {
    if (m <= t_->config_max_m[c]) return c;
  }
  return t_->num_configs - 1;
}

inline bool StagedChain::has_consumer(int stage) const {
  for (int c = stage + 1; c < t_->num_stages; ++c) {
    if (topology(c).producer == stage || topology(c).producer_b == stage) return true;
  }
  return false;
}

inline int StagedChain::tiles_m(int stage) const { return ceil_div(args_.m, info(stage).tile_m); }
inline int StagedChain::tiles_n(int stage) const { return ceil_div(info(stage).n, info(stage).tile_n); }

inline Status StagedChain::invalid(char const* format, ...) {
  va_list args;
  va_start(args, format);
  std::vsnprintf(last_error_, sizeof(last_error_), format, args);
  va_end(args);
  return Status::kInvalidArgument;
}

inline Status StagedChain::check_arguments(ChainPointers const& a) {
  last_error_[0] = '\0';
  if (a.m <= 0 || a.m > t_->max_m) return invalid("m = %d is outside 1 .. %d (the spec's MAX_M): split the rows", a.m, t_->max_m);
  auto field = [](char const* f) { return f != nullptr ? f : "a pointer"; };
  for (int s = 0; s < t_->num_stages; ++s) {
    char const* name = topology(s).name;
    if (a.a[s] == nullptr) return invalid("%s is null: pass a device pointer", field(a.a_field[s]));
    if (a.d[s] == nullptr) return invalid("%s is null: pass a device pointer", field(a.d_field[s]));
    if (a.b_required[s] && a.b[s] == nullptr) return invalid("%s is null: pass a device pointer", field(a.b_field[s]));
    if (a.bias_field[s] != nullptr && a.bias[s] == nullptr) {
      return invalid("%s is null: the spec gives stages[%d] a bias, so pass a device pointer to its %d values",
                     a.bias_field[s], s, a.d_cols[s]);
    }
    // Every matrix starts 16 bytes aligned, like its rows (TMA descriptors, cp.async and vector access).
    struct { void const* p; char const* name; } const pointers[4] = {
        {a.a[s], a.a_field[s]}, {a.b[s], a.b_field[s]}, {a.d[s], a.d_field[s]}, {a.bias[s], a.bias_field[s]}};
    for (auto const& p : pointers) {
      if (reinterpret_cast<uintptr_t>(p.p) % 16 != 0) {
        return invalid("%s = %p is not 16-byte aligned: pass cudaMalloc's pointer, or one offset by a multiple of 8 "
                       "elements", field(p.name), p.p);
      }
    }
    // The kernels were compiled for one N and K per GEMM: a caller whose weights have another shape must
    // regenerate, not run on (0 means the generated value).
    if (a.n[s] != 0 && a.n[s] != a.d_cols[s]) {
      return invalid("%s_n = %d, but the kernels were generated for N = %d: pass 0 or %d, or regenerate with "
                     "stages[%d].n: %d", name, a.n[s], a.d_cols[s], a.d_cols[s], s, a.n[s]);
    }
    if (a.k[s] != 0 && a.k[s] != a.a_cols[s]) {
      return invalid("%s_k = %d, but the kernels were generated for K = %d: pass 0 or %d, or regenerate with "
                     "stages[%d].k: %d", name, a.k[s], a.a_cols[s], a.a_cols[s], s, a.k[s]);
    }
    // Leading dimensions: rows never overlap, and every row starts 16 bytes aligned (TMA descriptors and
    // the 16-byte vector loads and stores of every kernel). Semaphores count tiles, not addresses: the
    // synchronization does not depend on them.
    struct { int64_t ld; int cols; char const* name; } const operands[3] = {
        {a.lda[s], a.a_cols[s], a.a_field[s]}, {a.ldb[s], a.b_cols[s], a.b_field[s]}, {a.ldd[s], a.d_cols[s], a.d_field[s]}};
    for (auto const& o : operands) {
      if (o.ld == 0) continue;
      if (o.ld < o.cols || o.ld < 0) {
        return invalid("%s_ld = %lld is below its row width %d: pass 0 (dense) or at least %d", field(o.name),
                       (long long)o.ld, o.cols, o.cols);
      }
      if (o.ld > kMaxLd) {
        return invalid("%s_ld = %lld is above %lld elements (a TMA stride is below 2^40 bytes): pass a smaller "
                       "leading dimension", field(o.name), (long long)o.ld, (long long)kMaxLd);
      }
      if (o.ld % kLdAlignment != 0) {
        return invalid("%s_ld = %lld is not a multiple of %d elements (16-byte rows for TMA and vector access): "
                       "pad it to %lld", field(o.name), (long long)o.ld, kLdAlignment,
                       (long long)((o.ld + kLdAlignment - 1) / kLdAlignment * kLdAlignment));
      }
    }
  }
  return check_overlaps(a);
}

// A GEMM's output may not share memory with any other operand it or a stage beside it reads or writes (its
// own input, its weights, a bias, another GEMM's input or output) nor with the caller's workspace: the
// kernels would read what they, or a stage running beside them, already overwrote. Operands named by one
// Arguments field are one buffer (a consumer's input is its producer's output). Only extents known exactly
// are compared: M rows of A and of the output, K x N weights (N x K column-major), N bias values, in 2-byte
// elements, and the workspace_size() bytes of a caller's workspace.
inline Status StagedChain::check_overlaps(ChainPointers const& a) {
  struct Range { uintptr_t begin, end; char const* field; bool output; };
  Range ranges[4 * kMaxChainStages + 1];
  int count = 0;
  auto add = [&](void const* p, int64_t rows, int64_t ld, int cols, char const* field, bool output) {
    if (p == nullptr || rows <= 0 || cols <= 0) return;
    int64_t const row = ld != 0 ? ld : cols;
    uintptr_t const begin = reinterpret_cast<uintptr_t>(p);
    ranges[count++] = {begin, begin + uintptr_t(((rows - 1) * row + cols) * kElementBytes), field, output};
  };
  for (int s = 0; s < t_->num_stages; ++s) {
    if (!a.b_required[s]) continue;  // GEMM stages only
    add(a.a[s], a.m, a.lda[s], a.a_cols[s], a.a_field[s], false);
    add(a.d[s], a.m, a.ldd[s], a.d_cols[s], a.d_field[s], true);
    add(a.b[s], a.b_rows[s], a.ldb[s], a.b_cols[s], a.b_field[s], false);
    add(a.bias[s], 1, 0, a.d_cols[s], a.bias_field[s], false);
  }
  if (carve_.base != nullptr) {
    uintptr_t const begin = reinterpret_cast<uintptr_t>(carve_.base);
    ranges[count++] = {begin, begin + uintptr_t(carve_.bytes), "the workspace", true};
  }
  auto same = [](char const* x, char const* y) { return x != nullptr && y != nullptr && std::strcmp(x, y) == 0; };
  for (int i = 0; i < count; ++i) {
    for (int j = 0; j < count; ++j) {
      Range const& o = ranges[i];
      Range const& r = ranges[j];
      if (!o.output || i == j || same(o.field, r.field) || o.begin >= r.end || r.begin >= o.end) continue;
      return invalid("%s and %s overlap in memory: give each its own buffer (a GEMM's output must not share memory "
                     "with its input, its weights or bias, another stage's operand or the workspace)",
                     o.field != nullptr ? o.field : "an output", r.field != nullptr ? r.field : "an operand");
    }
  }
  return Status::kSuccess;
}

// Room for the finest grid any policy can ask for: one semaphore per producer tile, in the configuration
// that has the most tiles (configurations share the memory: epochs keep it clean).
inline int64_t StagedChain::semaphore_words(ChainTables const& t, int max_m, int64_t (*offset)[kMaxChainStages]) {
  int64_t total = 0;
  for (int c = 0; c < t.num_configs; ++c) {
    int64_t words = 0;
    for (int s = 0; s < t.num_stages; ++s) {
      StageInfo const& st = t.at(c, s);
      if (offset != nullptr) offset[c][s] = words;
      words += int64_t(ceil_div(max_m, st.tile_m)) * ceil_div(st.n, st.tile_n);
    }
    total = std::max(total, words);
  }
  return total;
}

inline size_t StagedChain::workspace_size(int max_m) const {
  if (max_m <= 0 || max_m > t_->max_m) return 0;
  int sms = sms_;
  if (sms == 0 && device_sms(&sms) != Status::kSuccess) return 0;
  Workspace w;
  take_state(w, semaphore_words(*t_, max_m, nullptr));
  take_backend(w, max_m, sms);
  return w.used;
}

inline Status StagedChain::initialize(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller) {
  if (state_ != nullptr) return invalid("initialize() was already called: use update(), or a new object");
  carve_ = Workspace{};  // no workspace of an earlier call that failed
  Status status = check_arguments(args);
  if (status != Status::kSuccess) return status;
  if (max_m > t_->max_m) return invalid("max_m = %d is above %d (the spec's MAX_M): pass at most %d", max_m, t_->max_m, t_->max_m);
  max_m_ = std::max(max_m, args.m);
  if (caller != nullptr) {
    if (caller->base == nullptr) {
      return invalid("workspace is null: pass device memory of workspace_size(%d) bytes, or call initialize() "
                     "without a workspace to let the chain allocate", max_m_);
    }
    if (reinterpret_cast<uintptr_t>(caller->base) % Workspace::kAlignment != 0) {
      return invalid("workspace %p is not %d-byte aligned: pass cudaMalloc's pointer, or one offset by a multiple of %d",
                     static_cast<void*>(caller->base), int(Workspace::kAlignment), int(Workspace::kAlignment));
    }
    size_t const need = workspace_size(max_m_);
    if (need == 0) return Status::kCudaError;  // the device could not be queried
    if (caller->bytes < need) {
      return invalid("workspace of %zu bytes is below workspace_size(%d) = %zu: pass at least that (the max_m "
                     "given to workspace_size() must be max(max_m, args.m))", caller->bytes, max_m_, need);
    }
    carve_ = Workspace{caller->base, need, 0};  // the bytes the chain writes (check_overlaps)
    if ((status = check_overlaps(args)) != Status::kSuccess) {
      carve_ = Workspace{};
      return status;
    }
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return Status::kCudaError;
  if (capture != cudaStreamCaptureStatusNone) {  // its uploads and synchronization would break the capture
    return invalid("initialize() on a capturing stream: call it once before capturing run()");
  }
  args_ = args;
  int64_t const total = semaphore_words(*t_, max_m_, semaphore_offset_);
  config_ = config_for(args.m);
  if ((status = allocate_state(total, stream, caller != nullptr ? &carve_ : nullptr)) != Status::kSuccess) return status;
  for (int s = 0; s < t_->num_stages; ++s) {
    if ((status = t_->prepare[s]()) != Status::kSuccess) return status;
  }
  return Status::kSuccess;
}

inline Status StagedChain::update(ChainPointers const& args) {
  if (state_ == nullptr) return Status::kNotInitialized;
  Status const status = check_arguments(args);
  if (status != Status::kSuccess) return status;
  if (args.m > max_m_) return invalid("m = %d is above the max_m of initialize() (%d): initialize with a larger max_m", args.m, max_m_);
  args_ = args;
  config_ = config_for(args.m);
  return Status::kSuccess;
}

inline Status StagedChain::set_policy(PolicyKind policy) {
  for (int c = 0; c < t_->num_configs; ++c) {
    for (int s = 0; s < t_->num_stages; ++s) {
      StageInfo const& st = t_->at(c, s);
      if (!st.gemm_consumer) continue;
      bool const ok = policy == PolicyKind::kNone || (policy == PolicyKind::kTile && st.tile_policy_ok) ||
                      (policy == PolicyKind::kRow && st.row_policy_ok);
      if (!ok) return Status::kInvalidArgument;
    }
  }
  if (t_->no_atomic_add && policy == PolicyKind::kRow) return Status::kInvalidArgument;
  policy_override_ = policy;
  return Status::kSuccess;
}

// The policy of the edge producer -> consumer: the spec's, or the run-time override for edges into a GEMM.
inline PolicyKind StagedChain::effective_policy(int consumer, int producer) const {
  StageInfo const& c = topology(consumer);
  if (c.gemm_consumer && policy_override_ != PolicyKind::kNone) return policy_override_;
  return c.producer_b == producer ? c.policy_b : c.policy;
}

// The semaphore grid of the edge producer -> consumer, waited for up to the emitted wait value.
inline SyncPolicy StagedChain::make_policy(int consumer, int producer) const {
  StageInfo const& c = info(consumer);
  StageInfo const& p = info(producer);
  PolicyKind const kind = effective_policy(consumer, producer);
  bool const spec = kind == (c.producer_b == producer ? c.policy_b : c.policy);
  int const posts = spec ? (c.producer_b == producer ? c.wait_value_b : c.wait_value)
                         : kind == PolicyKind::kRow ? c.row_wait_value : 1;
  SyncPolicy policy;
  switch (kind) {
    case PolicyKind::kTile: policy = TileSync(p.tile_m, p.tile_n, ceil_div(p.n, p.tile_n)); break;
    case PolicyKind::kRow: policy = RowSync(p.tile_m, p.tile_n, ceil_div(p.n, p.tile_n)); break;
    case PolicyKind::kStrided: policy = StridedSync(p.tile_m, p.tile_n, c.stride_tiles, posts); break;
    default: return NoSync();
  }
  policy.posts = posts;
  return policy;
}

// avoid_wait_kernel is only safe when producer and consumer blocks all fit on the GPU at once; the
// plan warns when the spec asks for it at an M where they do not, and run() falls back to the wait.
inline bool StagedChain::coresident(int consumer, int p) const {
  double const slots = double(tiles_m(p) * tiles_n(p)) / info(p).blocks_per_sm +
                       double(tiles_m(consumer) * tiles_n(consumer)) / info(consumer).blocks_per_sm;
  return slots <= double(sms_);
}

inline int64_t StagedChain::trace_offset(int stage) const {
  int64_t words = 0;
  for (int s = 0; s < stage && s < t_->num_stages; ++s) words += int64_t(tiles_m(s)) * tiles_n(s) * TileTrace::kWords;
  return words;
}

inline void StagedChain::fill_unsynced(StageLaunch& launch, int s, bool programmatic) const {
  launch.m = args_.m;
  launch.a = args_.a[s];
  launch.b = args_.b[s];
  launch.d = args_.d[s];
  launch.lda = args_.lda[s] != 0 ? args_.lda[s] : args_.a_cols[s];
  launch.ldb = args_.ldb[s] != 0 ? args_.ldb[s] : args_.b_cols[s];
  launch.ldd = args_.ldd[s] != 0 ? args_.ldd[s] : args_.d_cols[s];
  launch.bias = args_.bias_field[s] != nullptr ? args_.bias[s] : nullptr;
  launch.programmatic = programmatic;
  launch.sms = sms_;
  launch.config = config_;
  fill_backend(launch, s);
}

inline Status StagedChain::launch_stage(int s, bool synced, cudaStream_t stream, LaunchOrder order) {
  int const n = t_->num_stages;
  StageLaunch launch{};
  fill_unsynced(launch, s, order.programmatic);
  StageSync& sync = launch.sync;
  sync.trigger_dependents = order.trigger_dependents;
  sync.wait_primary_at_exit = order.wait_primary_at_exit;
  sync.state = static_cast<ChainState*>(state_);
  sync.stage = s;
  sync.enabled = synced;
  sync.dynamic_order = ticket_order_;
  sync.store_post = t_->no_atomic_add;
  sync.timeout_ns = timeout_ns_;
  sync.trace = trace_ != nullptr ? trace_ + trace_offset(s) : nullptr;
  sync.order = tile_order_override_ >= 0 ? TileOrder(tile_order_override_) : info(s).order;
  sync.tiles_m = tiles_m(s);
  sync.tiles_n = tiles_n(s);
  sync.num_stages = n;
  for (int t = 0; t < n; ++t) {
    if (!has_consumer(t)) sync.run_blocks += unsigned(tiles_m(t) * tiles_n(t));
  }
  sync.counts_finish = !has_consumer(s);
  auto make_wait = [&](int producer) {
    InputWait wait;
    wait.state = sync.state;
    wait.stage = s;
    wait.producer = producer;
    wait.policy = make_policy(s, producer);
    wait.semaphores = semaphores_ + semaphore_offset_[config_][producer];
    wait.timeout_ns = timeout_ns_;
    wait.enabled = wait.policy.enabled();
    return wait;
  };
  if (synced && info(s).producer >= 0) sync.input = make_wait(info(s).producer);
  if (synced && info(s).producer_b >= 0) sync.input_b = make_wait(info(s).producer_b);
  // The output policy is the policy of whichever stage consumes this one (one policy per producer).
  for (int c = s + 1; c < n && s != missing_posts_stage_; ++c) {
    if (info(c).producer == s || info(c).producer_b == s) {
      sync.output = make_policy(c, s);
      sync.out_semaphores = semaphores_ + semaphore_offset_[config_][s];
      break;
    }
  }
  return t_->launch[s](launch, stream);
}

inline Status StagedChain::check_run() {
  if (!on_own_device()) {
    return invalid("the current device is not the one initialize() ran on (device %d): cudaSetDevice(%d) first, or "
                   "initialize a chain on this device", device_, device_);
  }
  if (trace_ != nullptr && trace_offset(t_->num_stages) > trace_capacity_) {
    return invalid("the trace buffer holds %lld words, but M = %d needs trace_words() = %lld: call set_trace() with a "
                   "larger buffer (or nullptr)", (long long)trace_capacity_, args_.m,
                   (long long)trace_offset(t_->num_stages));
  }
  return Status::kSuccess;
}

inline Status StagedChain::set_trace(uint64_t* trace, int64_t words) {
  if (trace != nullptr && words < -1) return invalid("set_trace: words = %lld; pass -1 (trace_words()) or the buffer's size", (long long)words);
  trace_ = trace;
  trace_capacity_ = trace == nullptr ? 0 : words < 0 ? trace_offset(t_->num_stages) : words;
  return Status::kSuccess;
}

inline Status StagedChain::run_sequential(cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  if (Status const status = check_run(); status != Status::kSuccess) return status;
  if (Status const status = prepare_run(stream); status != Status::kSuccess) return status;
  for (int s = 0; s < t_->num_stages; ++s) {
    Status const status = launch_stage(s, /*synced=*/false, stream);
    if (status != Status::kSuccess) return status;
  }
  return Status::kSuccess;
}

}  // namespace cusync
