// cusync sm90 backend: the definitions of cusync/sm90/chain.h (a project's src/<name>.cu includes this).
#pragma once

#include <algorithm>
#include <cstdio>
#include <tuple>

#include "cusync/chain.cuh"
#include "cusync/sm90/autotune.h"
#include "cusync/sm90/chain.h"
#include "cusync/sm90/cublaslt_context.h"

namespace cusync::sm90 {

// Stream-K workspaces start at multiples of this many bytes.
constexpr int64_t kWorkspaceAlignment = 256;

inline Chain::~Chain() { release_backend(); }

inline void Chain::release_backend() {
  if (owns_memory_) {  // else carved from the caller's workspace
    for (void* p : {streamk_workspace_, gated_weights_, stream_mem_, slab_mem_}) {
      if (p != nullptr) cudaFree(p);
    }
  }
  streamk_workspace_ = gated_weights_ = stream_mem_ = slab_mem_ = nullptr;
  destroy_lt_context(static_cast<LtContext*>(lt_));
  lt_ = nullptr;
}

inline Chain::Chain(Chain&& other) noexcept : StagedChain(*other.t_), b_(other.b_) { swap(other); }

inline Chain& Chain::operator=(Chain&& other) noexcept { return move_assign(*this, other); }

inline void Chain::swap(Chain& other) noexcept {
  using std::swap;
  swap(b_, other.b_);
  swap(mode_override_, other.mode_override_);
  swap(mode_reason_, other.mode_reason_);
  swap(tuned_entries_, other.tuned_entries_);
  swap(tuned_, other.tuned_);
  swap(tuned_times_, other.tuned_times_);
  swap(tuned_timed_, other.tuned_timed_);
  swap(streamk_workspace_, other.streamk_workspace_);
  swap(lt_, other.lt_);
  swap(streamk_offset_, other.streamk_offset_);
  swap(gated_weights_, other.gated_weights_);
  swap(gated_offset_, other.gated_offset_);
  swap(stream_mem_, other.stream_mem_);
  swap(stream_layout_, other.stream_layout_);
  swap(slab_mem_, other.slab_mem_);
  swap(slab_layout_, other.slab_layout_);
  swap(gated_source_, other.gated_source_);
  swap(gated_source_ld_, other.gated_source_ld_);
  swap(weights_stale_, other.weights_stale_);
  swap_staged(other);
}

// Stream-K workspaces: a stage's size depends on M only through its tile rows, so the largest over every
// tile-row count up to max_m (in every configuration) covers every later M.
inline int64_t Chain::streamk_bytes(int max_m, int sms, int64_t* offset) const {
  int64_t bytes = 0;
  for (int s = 0; s < t_->num_stages; ++s) {
    if (offset != nullptr) offset[s] = bytes;
    if (b_->streamk_workspace[s] == nullptr) continue;
    int64_t most = 0;
    for (int c = 0; c < t_->num_configs; ++c) {
      int const tile_m = t_->at(c, s).tile_m;
      for (int rows = 1; rows <= ceil_div(max_m, tile_m); ++rows) {
        most = std::max<int64_t>(most, int64_t(b_->streamk_workspace[s](rows * tile_m, sms, c)));
      }
    }
    bytes += (most + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  }
  return std::max<int64_t>(bytes, 1);
}

// Bytes of the gated GEMMs' interleaved weights (cusync/sm90/gated_epilogue.cuh); each stage's offset.
inline int64_t Chain::gated_bytes(int64_t* offset) const {
  int64_t bytes = 0;
  for (int s = 0; s < t_->num_stages; ++s) {
    if (offset != nullptr) offset[s] = bytes;
    if (b_->gemm_gated[s]) bytes += int64_t(b_->weight_bytes[s] + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  }
  return bytes;
}

// Mode kStream's block (stream_layout) for the chain's two GEMMs; 0 where the spec did not ask for the mode.
inline int64_t Chain::stream_bytes(int sms, StreamLayout* layout) const {
  if (b_->stream == nullptr) return 0;
  int const k[2] = {b_->stream_k[0], b_->stream_k[1]}, n[2] = {b_->stream_n[0], b_->stream_n[1]};
  StreamLayout const l = stream_layout(k, n, sms);
  if (layout != nullptr) *layout = l;
  return l.total;
}

// The slab kernel's block (slab_layout) for the chain's second GEMM; 0 where the chain has no slab kernel.
inline int64_t Chain::slab_bytes(int sms, SlabLayout* layout) const {
  if (b_->slab == nullptr) return 0;
  SlabLayout const l = slab_layout(b_->stream_n[1], sms, !b_->slab_w2_col);
  if (layout != nullptr) *layout = l;
  return l.total;
}

// After the state's pieces, in initialize()'s order: the stream-K workspaces, cuBLASLt's, the gated
// GEMMs' interleaved weights, mode kStream's block.
inline void Chain::take_backend(Workspace& w, int max_m, int sms) const {
  w.take(size_t(streamk_bytes(max_m, sms, nullptr)));
  if (kHaveCublasLt) w.take(kLtWorkspaceBytes);
  if (int64_t const gated = gated_bytes(nullptr); gated > 0) w.take(size_t(gated));
  if (int64_t const stream = stream_bytes(sms, nullptr); stream > 0) w.take(size_t(stream));
  if (int64_t const slab = slab_bytes(sms, nullptr); slab > 0) w.take(size_t(slab));
}

// A failed initialize() gives back whatever it took, so that the object is as before (not initialized, its
// settings kept) and initialize() may be called again; last_error() still says why.
inline Status Chain::initialize(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller) {
  bool const fresh = state_ == nullptr;
  Status const status = initialize_steps(args, max_m, stream, caller);
  if (status != Status::kSuccess && fresh) {
    release_backend();
    weights_stale_ = false;
    release_base();
  }
  return status;
}

inline Status Chain::initialize_steps(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller) {
  Status status = StagedChain::initialize(args, max_m, stream, caller);
  if (status != Status::kSuccess) return status;
  for (int s = 0; s < t_->num_stages; ++s) {
    if (b_->prepare_stock[s] != nullptr && (status = b_->prepare_stock[s]()) != Status::kSuccess) return status;
  }
  size_t const streamk = size_t(streamk_bytes(max_m_, sms_, streamk_offset_));
  if (caller != nullptr) {
    streamk_workspace_ = carve_.take(streamk);
  } else if ((status = from_cuda(cudaMalloc(&streamk_workspace_, streamk))) != Status::kSuccess) {
    return status;
  }
  LtContext* lt = nullptr;
  status = create_lt_context(&lt, caller != nullptr && kHaveCublasLt ? carve_.take(kLtWorkspaceBytes) : nullptr);
  lt_ = lt;
  if (status != Status::kSuccess) return status;
  // Gated GEMMs read their weights interleaved (cusync/sm90/gated_epilogue.cuh): one copy each.
  if (int64_t const gated = gated_bytes(gated_offset_); gated > 0) {
    if (caller != nullptr) {
      gated_weights_ = carve_.take(size_t(gated));
    } else if ((status = from_cuda(cudaMalloc(&gated_weights_, size_t(gated)))) != Status::kSuccess) {
      return status;
    }
  }
  // Mode kStream: the state, semaphores and counters zeroed once, the weights packed (refresh_weights).
  if (int64_t const bytes = stream_bytes(sms_, &stream_layout_); bytes > 0) {
    if (caller != nullptr) {
      stream_mem_ = carve_.take(size_t(bytes));
    } else if ((status = from_cuda(cudaMalloc(&stream_mem_, size_t(bytes)))) != Status::kSuccess) {
      return status;
    }
    if ((status = b_->stream()->prepare()) != Status::kSuccess) return status;
    if ((status = from_cuda(cudaMemsetAsync(stream_mem_, 0, size_t(stream_layout_.zeroed), stream))) != Status::kSuccess) {
      return status;
    }
  }
  // The slab kernel: its state and semaphores zeroed once.
  if (int64_t const bytes = slab_bytes(sms_, &slab_layout_); bytes > 0) {
    if (caller != nullptr) {
      slab_mem_ = carve_.take(size_t(bytes));
    } else if ((status = from_cuda(cudaMalloc(&slab_mem_, size_t(bytes)))) != Status::kSuccess) {
      return status;
    }
    if ((status = b_->slab()->prepare()) != Status::kSuccess) return status;
    if ((status = from_cuda(cudaMemsetAsync(slab_mem_, 0, size_t(slab_layout_.zeroed), stream))) != Status::kSuccess) {
      return status;
    }
  }
  if ((gated_weights_ != nullptr || stream_mem_ != nullptr) && (status = refresh_weights(stream)) != Status::kSuccess) {
    return status;
  }
  // Only the stream the state was uploaded on, never the whole device: the chain may run on any stream next.
  return from_cuda(cudaStreamSynchronize(stream));
}

inline void Chain::fill_backend(StageLaunch& launch, int s) const {
  launch.workspace = static_cast<char*>(streamk_workspace_) + streamk_offset_[s];
  launch.lt = lt_;
  if (b_->gemm_gated[s]) {  // the chain's dense interleaved copy, whatever the caller's ldb
    launch.b = static_cast<char const*>(gated_weights_) + gated_offset_[s];
    launch.ldb = args_.b_cols[s];
  }
}

inline Status Chain::update(ChainPointers const& args) {
  Status const status = StagedChain::update(args);
  if (status != Status::kSuccess) return status;
  for (int s = 0; s < t_->num_stages; ++s) {
    bool const copied = b_->gemm_gated[s] || (stream_mem_ != nullptr && args_.b_required[s]);
    if (copied && (args_.b[s] != gated_source_[s] || args_.ldb[s] != gated_source_ld_[s])) weights_stale_ = true;
  }
  return Status::kSuccess;
}

// A gated GEMM's interleaved copy first; mode kStream packs every GEMM's weights (a gated GEMM's from that
// copy, whose gate and up columns alternate in groups of 8 as the kernel's SwiGLU epilogue reads them).
inline Status Chain::refresh_weights(cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  for (int s = 0; s < t_->num_stages; ++s) {
    int const g = stream_mem_ == nullptr ? -1 : s == b_->stream_stage[0] ? 0 : s == b_->stream_stage[1] ? 1 : -1;
    bool const stream_packed = g >= 0;
    if (!b_->gemm_gated[s] && !stream_packed) continue;
    Status status = Status::kSuccess;
    void const* dense = args_.b[s];
    int64_t ld = args_.ldb[s] != 0 ? args_.ldb[s] : args_.b_cols[s];
    if (b_->gemm_gated[s]) {
      void* interleaved = static_cast<char*>(gated_weights_) + gated_offset_[s];
      status = b_->interleave[s](args_.b[s], args_.ldb[s], interleaved, stream);
      dense = interleaved, ld = args_.b_cols[s];
    }
    if (status == Status::kSuccess && stream_packed) {
      status = b_->stream()->pack(dense, ld, b_->stream_k[g], b_->stream_n[g], g == 0 && b_->stream_halves,
                                  static_cast<char*>(stream_mem_) + stream_layout_.packed[g], stream);
    }
    if (status != Status::kSuccess) return status;
    gated_source_[s] = args_.b[s];
    gated_source_ld_[s] = args_.ldb[s];
  }
  weights_stale_ = false;
  return Status::kSuccess;
}

inline Status Chain::prepare_run(cudaStream_t stream) {
  if (Status const status = check_run(); status != Status::kSuccess) return status;
  if (!weights_stale_) return Status::kSuccess;
  // Under stream capture the copy is only recorded into the caller's graph: an eager run before that graph
  // is replayed must still copy, so the weights stay stale until a run that executes.
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return Status::kCudaError;
  bool const stale = capture != cudaStreamCaptureStatusNone;
  Status const status = refresh_weights(stream);
  weights_stale_ = weights_stale_ || stale;
  return status;
}

inline bool Chain::cublaslt_available() const { return kHaveCublasLt; }

inline Status Chain::set_epoch_for_testing(uint32_t epoch, cudaStream_t stream) {
  Status status = ChainBase::set_epoch_for_testing(epoch, stream);
  // Mode kStream's run states (the bulk kernel's, the slab kernel's): the first word is the epoch
  // (cusync::stream::StreamState). Their tagged words are cleared first, so that no word of an earlier, higher
  // epoch satisfies a wait of the new one. Synchronized: the copy reads `epoch` from this frame.
  for (auto [mem, zeroed, state] : {std::tuple<void*, int64_t, int64_t>{stream_mem_, stream_layout_.zeroed, stream_layout_.state},
                                    std::tuple<void*, int64_t, int64_t>{slab_mem_, slab_layout_.zeroed, slab_layout_.state}}) {
    if (status != Status::kSuccess || mem == nullptr) continue;
    status = from_cuda(cudaMemsetAsync(mem, 0, size_t(zeroed), stream));
    if (status == Status::kSuccess) {
      status = from_cuda(cudaMemcpyAsync(static_cast<char*>(mem) + state, &epoch, sizeof(epoch), cudaMemcpyHostToDevice, stream));
    }
    if (status == Status::kSuccess) status = from_cuda(cudaStreamSynchronize(stream));
  }
  return status;
}

inline int Chain::lt_algorithm(int stage) const {
  auto const* lt = static_cast<LtContext const*>(lt_);
  if (lt == nullptr || t_ == nullptr || stage < 0 || stage >= t_->num_stages || stage >= kLtMaxStages ||
      b_->cublaslt[stage] == nullptr || lt->stage_candidates[stage] == 0) {
    return -1;
  }
  return lt->stage_algorithm[stage];
}

inline char const* Chain::mode_reason() const {
  mode();  // fills mode_reason_ for the current M
  return mode_reason_;
}

// set_mode() first; else autotune()'s table up to the largest M it timed; else the measured table where
// the device has its SM count and M is within it (a cublaslt entry becomes stream-K in a library built
// without cuBLASLt); else cusync::default_mode.
inline Mode Chain::mode() const {
  if (mode_override_ != Mode::kAuto) {
    std::snprintf(mode_reason_, sizeof(mode_reason_), "set_mode(%s)", to_string(mode_override_));
    return mode_override_;
  }
  int const m = args_.m;
  if (int const e = dispatch_entry(tuned_, tuned_entries_, m); e >= 0) {
    int len = std::snprintf(mode_reason_, sizeof(mode_reason_), "autotune on this GPU: M <= %d", tuned_[e].m_max);
    int t = 0;  // the times at the smallest timed M >= m (the one whose winner this entry holds), else the largest
    while (t + 1 < tuned_timed_ && tuned_times_[t].m < m) ++t;
    if (t < tuned_timed_ && tuned_times_[t].count > 0) {
      TunedTimes const& at = tuned_times_[t];
      len += std::snprintf(mode_reason_ + len, sizeof(mode_reason_) - size_t(len), " (timed at M = %d:", at.m);
      for (int i = 0; i < at.count && len < int(sizeof(mode_reason_)); ++i) {
        len += std::snprintf(mode_reason_ + len, sizeof(mode_reason_) - size_t(len), "%s %s %.1f us", i ? "," : "",
                             to_string(at.mode[i]), double(at.us[i]));
      }
      if (len < int(sizeof(mode_reason_))) std::snprintf(mode_reason_ + len, sizeof(mode_reason_) - size_t(len), ")");
    }
    return tuned_[e].mode;
  }
  int e = sms_ == b_->dispatch_sms ? dispatch_entry(b_->dispatch, b_->num_dispatch, m) : -1;
  if (e >= 0 && b_->dispatch[e].mode == Mode::kStream && !stream_available()) e = -1;  // the spec's rules prevent it
  if (e >= 0) {
    Mode const mode = b_->dispatch[e].mode;
    bool const unavailable = mode == Mode::kCublasLt && !kHaveCublasLt;
    std::snprintf(mode_reason_, sizeof(mode_reason_), "dispatch table (measured on %s, %d SMs): M <= %d%s",
                  b_->dispatch_gpu, b_->dispatch_sms, b_->dispatch[e].m_max,
                  unavailable ? ": cublaslt, built without cuBLASLt, so stream-K" : "");
    return unavailable ? Mode::kStreamK : mode;
  }
  if (Mode const slab = slab_default(m, slab_available() && b_->slab_w1_col, b_->slab_w2_col, mode_reason_, int(sizeof(mode_reason_)));
      slab != Mode::kAuto) {
    return slab;
  }
  int64_t pingpong_tiles[kMaxChainStages];
  char const* names[kMaxChainStages];
  int gemms = 0;
  for (int s = 0; s < t_->num_stages; ++s) {
    if (b_->stock[s] == nullptr) continue;  // GEMMs only: an elementwise stage is one short pass
    int const gemm_n = b_->gemm_gated[s] ? 2 * topology(s).n : topology(s).n;  // a gated GEMM computes gate and up
    pingpong_tiles[gemms] = int64_t(ceil_div(m, kPingpongTile)) * ceil_div(gemm_n, kPingpongTile);
    names[gemms++] = topology(s).name;
  }
  return default_mode(pingpong_tiles, names, gemms, sms_, kHaveCublasLt, mode_reason_, int(sizeof(mode_reason_)));
}

inline Status Chain::autotune(int const* ms, int count, cudaStream_t stream, int rounds) {
  if (state_ == nullptr) return Status::kNotInitialized;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return Status::kCudaError;
  if (capture != cudaStreamCaptureStatusNone) {  // before anything is launched into the caller's graph
    return invalid("autotune() on a capturing stream: it times and synchronizes; call it before the capture");
  }
  ChainPointers const saved = args_;
  int const earlier = tuned_entries_;
  DispatchEntry table[kMaxTunedMs];
  int entries = 0;
  tuned_entries_ = 0;  // the candidates start from what run() takes without a tuned table
  auto set_m = [&](int m) {
    ChainPointers at = saved;
    if (m > 0) at.m = m;
    return update(at);
  };
  Status const status = autotune_chain(
      ms, count, max_m_, rounds, kHaveCublasLt && lt_ != nullptr,
      stream_mem_ != nullptr ? kStreamMaxM : slab_mem_ != nullptr ? kSlabMaxM : 0, stream,
      set_m, [&] { return mode(); },
      [&](Mode c, cudaStream_t s) { return run_mode(s, c); },
      [&](int r, int preheat_ms) { return search_lt_algorithms(stream, r, preheat_ms); }, table, &entries,
      tuned_times_, &tuned_timed_);
  if (status != Status::kSuccess) {
    tuned_entries_ = earlier;  // a call that fails changes nothing
    return status;
  }
  std::copy(table, table + entries, tuned_);
  tuned_entries_ = entries;
  return status;
}

// autotune()'s search of cuBLASLt's algorithms at the current M: stage by stage, each GEMM's candidates
// (the heuristic's first kLtSearchAlgos) are timed as the whole chain in mode kCublasLt, CUDA graphs round
// robin as time_modes() times modes, the other GEMMs on the algorithms already chosen; the fastest (the
// heuristic's order wins ties) stays with the GEMM's shape. In the chain, not alone: a GEMM timed back to
// back with itself ranked the algorithms differently at small M. GEMMs of one shape share
// their choice (the last stage's search decides).
static_assert(kLtSearchAlgos <= kMaxTunedModes, "time_modes() times every candidate algorithm at once");
static_assert(kLtMaxStages >= kMaxChainStages, "the cuBLASLt context tracks every stage");
inline Status Chain::search_lt_algorithms(cudaStream_t stream, int rounds, int preheat_ms) {
  auto* lt = static_cast<LtContext*>(lt_);
  if (!kHaveCublasLt || lt == nullptr) return Status::kSuccess;
  struct Reset {  // no selection survives the search, whatever path returns
    LtContext* lt;
    ~Reset() { lt->select_stage = -1; }
  } const reset{lt};
  lt->select_stage = -1;
  Status status = run_mode(stream, Mode::kCublasLt);  // makes the plans and reports their candidates
  if (status == Status::kSuccess) status = cusync::detail::from_cuda_error(cudaStreamSynchronize(stream));
  for (int s = 0; s < t_->num_stages && s < kLtMaxStages && status == Status::kSuccess; ++s) {
    int const n = std::min(lt->stage_candidates[s], kLtSearchAlgos);
    if (b_->cublaslt[s] == nullptr || n <= 1) continue;
    int candidates[kLtSearchAlgos];
    for (int k = 0; k < n; ++k) candidates[k] = k;
    auto run_candidate = [&](int k, cudaStream_t on) {
      lt->select_stage = s, lt->select_candidate = k;
      Status const ran = run_mode(on, Mode::kCublasLt);
      lt->select_stage = -1;
      return ran;
    };
    float median_us[kMaxTunedModes];
    int best = 0;
    status = time_modes(run_candidate, candidates, n, rounds, stream, median_us, &best, preheat_ms);
    preheat_ms = 0;  // once, before the first stage's candidates
    if (status == Status::kSuccess) status = run_candidate(candidates[best], stream);  // the winner stays chosen
  }
  if (status == Status::kSuccess) status = cusync::detail::from_cuda_error(cudaStreamSynchronize(stream));
  return status;
}

inline Status Chain::set_mode(Mode mode) {
  if (!valid_mode(mode)) {
    return invalid("set_mode(%d): not a cusync::Mode (kAuto = -1 .. kStream = %d)", int(mode), int(Mode::kStream));
  }
  mode_override_ = mode;
  return Status::kSuccess;
}

inline Status Chain::set_tile_order(int order) {
  if (order < -1 || order > int(TileOrder::kColumnBanded)) {
    return invalid("set_tile_order(%d): pass -1 (the spec's order) or a cusync::TileOrder (0 .. %d)", order,
                   int(TileOrder::kColumnBanded));
  }
  tile_order_override_ = order;
  return Status::kSuccess;
}

inline Status Chain::run_mode(cudaStream_t stream, Mode mode) {
  if (state_ == nullptr) return Status::kNotInitialized;
  if (!valid_mode(mode)) {  // before prepare_run() opens a run
    return invalid("run_mode(%d): not a cusync::Mode (kAuto = -1 .. kStream = %d)", int(mode), int(Mode::kStream));
  }
  if (Status const status = prepare_run(stream); status != Status::kSuccess) return status;
  switch (mode) {
    case Mode::kOverlap: return run_overlapped(stream);
    case Mode::kStock:
    case Mode::kStreamK:
    case Mode::kCluster:
    case Mode::kPingpong:
    case Mode::kCublasLt: return run_cutlass(stream, /*programmatic=*/true, mode);
    case Mode::kStream: return run_stream(stream);
    case Mode::kAuto: return run(stream);
  }
  return Status::kInvalidArgument;
}

// Both GEMMs in one persistent kernel (cusync/sm90/stream_mode.h): the slab kernel up to kSlabMaxM rows, else
// the bulk kernel over the weights the chain packed.
inline Status Chain::run_stream(cudaStream_t stream) {
  if (slab_available()) return run_slab(stream);
  if (stream_mem_ == nullptr && slab_mem_ != nullptr) {
    return invalid("mode stream: M = %d is above %d, where the slab kernel stops, and this chain was generated without "
                   "optimizations.stream_weights (the packed weights the larger kernel streams): regenerate with it, "
                   "or pick another mode", args_.m, kSlabMaxM);
  }
  if (stream_mem_ == nullptr) {
    return invalid("mode stream: this chain was generated without optimizations.stream_weights (the packed weights "
                   "it streams): regenerate with it, or pick another mode");
  }
  if (args_.m > kStreamMaxM) return invalid("mode stream: M = %d is above %d: pick another mode", args_.m, kStreamMaxM);
  char* base = static_cast<char*>(stream_mem_);
  StreamLayout const& l = stream_layout_;
  StreamRun r;
  r.m = args_.m;
  auto ld = [](int64_t given, int cols) { return given != 0 ? given : int64_t(cols); };
  for (int g = 0; g < 2; ++g) {
    int const s = b_->stream_stage[g];
    // The stage whose output this GEMM's epilogue writes: a SwiGLU stage of its own takes gemm1's activation.
    int const out = g == 0 && b_->stream_halves ? s + 1 : s;
    StreamGemmArgs& a = r.gemm[g];
    a.x = args_.a[s], a.ldx = ld(args_.lda[s], args_.a_cols[s]);
    a.packed = base + l.packed[g];
    a.bias = args_.bias[s];
    a.out = args_.d[out], a.ldo = ld(args_.ldd[out], args_.d_cols[out]);
    if (out != s) a.out_raw = args_.d[s], a.ldo_raw = ld(args_.ldd[s], args_.d_cols[s]);  // gate | up, as is
    a.n = b_->stream_n[g], a.k = b_->stream_k[g], a.act = b_->stream_act[g];
    a.ws = reinterpret_cast<float*>(base + l.ws[g]);
    a.arrivals = reinterpret_cast<uint64_t*>(base + l.arrivals[g]);
    r.stage[g] = s;
  }
  r.sems = reinterpret_cast<uint64_t*>(base + l.sems);
  r.state = base + l.state;
  r.error = &static_cast<ChainState*>(state_)->error;
  r.timeout_ns = timeout_ns_;
  r.grid = sms_;
  // Testing (inject_missing_posts): gemm2 waits on gemm1's posts, which stand for the SwiGLU stage's in the split form.
  bool const skip = missing_posts_stage_ == b_->stream_stage[0] ||
                    (b_->stream_halves && missing_posts_stage_ == b_->stream_stage[0] + 1);
  r.skip_post_tile = skip ? stream_tiles(r.gemm[0].n) - 1 : -1;
  Status const status = b_->stream()->run(r, stream);
  return status == Status::kInvalidArgument ? invalid("mode stream: the kernel refused these arguments") : status;
}

// The slab kernel (cusync/sm90/slab_chain.cuh) over the caller's weights (a gated GEMM's: the chain's interleaved
// copy), one CTA per SM.
inline Status Chain::run_slab(cudaStream_t stream) {
  int const s1 = b_->stream_stage[0], s2 = b_->stream_stage[1];
  int const out1 = b_->stream_halves ? s1 + 1 : s1;  // the stage whose output gemm2 reads
  auto ld = [](int64_t given, int cols) { return given != 0 ? given : int64_t(cols); };
  char* base = static_cast<char*>(slab_mem_);
  SlabRun r;
  SlabArgs& a = r.args;
  a.m = args_.m;
  a.x = args_.a[s1], a.ldx = ld(args_.lda[s1], args_.a_cols[s1]);
  a.w1 = args_.b[s1], a.ldw1 = ld(args_.ldb[s1], args_.b_cols[s1]), a.w1_col = b_->slab_w1_col;
  a.gate = b_->gemm_gated[s1] ? kInterleaved : b_->stream_halves ? kHalves : kNoGate;
  if (b_->gemm_gated[s1]) {  // the chain's dense interleaved copy, whatever the caller's ldb
    a.w1 = static_cast<char const*>(gated_weights_) + gated_offset_[s1];
    a.ldw1 = args_.b_cols[s1];
  }
  a.b1 = args_.bias[s1];
  a.h = args_.d[out1], a.ldh = ld(args_.ldd[out1], args_.d_cols[out1]);
  if (out1 != s1) a.h_raw = args_.d[s1], a.ldh_raw = ld(args_.ldd[s1], args_.d_cols[s1]);
  a.w2 = args_.b[s2], a.ldw2 = ld(args_.ldb[s2], args_.b_cols[s2]), a.w2_col = b_->slab_w2_col;
  a.b2 = args_.bias[s2];
  a.y = args_.d[s2], a.ldy = ld(args_.ldd[s2], args_.d_cols[s2]);
  a.k1 = b_->stream_k[0], a.hidden = b_->stream_k[1], a.n2 = b_->stream_n[1];
  a.act1 = b_->stream_act[0], a.act2 = b_->stream_act[1];
  a.ws = b_->slab_w2_col ? nullptr : reinterpret_cast<float*>(base + slab_layout_.ws);
  a.posts = reinterpret_cast<uint64_t*>(base + slab_layout_.posts);
  a.stage[0] = s1, a.stage[1] = s2;
  r.grid = sms_;
  // Testing (inject_missing_posts): the reduction waits on gemm1's slabs, which stand for the SwiGLU stage's too.
  bool const skip = missing_posts_stage_ == s1 || (b_->stream_halves && missing_posts_stage_ == s1 + 1);
  a.skip_post = skip ? r.grid - 1 : -1;
  r.state = base + slab_layout_.state;
  r.error = &static_cast<ChainState*>(state_)->error;
  r.timeout_ns = timeout_ns_;
  char const* why = nullptr;
  Status const status = b_->slab()->run(r, stream, &why);
  return status == Status::kInvalidArgument ? invalid("mode stream: the slab kernel refused these arguments: %s",
                                                      why != nullptr ? why : "?")
                                            : status;
}

inline Status Chain::run_overlapped(cudaStream_t stream) {
  int const n = t_->num_stages;
  // Stage s may start while stage s - 1 still runs when every edge into it is tile-synced (an edge with
  // sync: none needs its whole producer: a plain launch, ordered by the stream).
  LaunchOrder order[kMaxChainStages] = {};
  for (int s = 1; s < n; ++s) {
    bool synced = !single_stream_;
    for (int p : {topology(s).producer, topology(s).producer_b}) {
      if (p >= 0 && effective_policy(s, p) == PolicyKind::kNone) synced = false;
    }
    order[s].programmatic = synced;
    order[s - 1].trigger_dependents = synced;
  }
  // A programmatic launch may end before the kernel it was launched behind. Where a plain launch (or the
  // caller's next work) follows, each programmatic stage before it waits for its primary at exit, so
  // that the end of the last kernel means the end of all of them.
  for (int s = n - 1; s >= 0; --s) {
    bool const last_in_run = s + 1 == n || !order[s + 1].programmatic || order[s + 1].wait_primary_at_exit;
    order[s].wait_primary_at_exit = order[s].programmatic && last_in_run;
  }
  for (int s = 0; s < n; ++s) {
    Status const status = launch_stage(s, /*synced=*/true, stream, order[s]);
    if (status != Status::kSuccess) return status;
  }
  return Status::kSuccess;
}

// CUTLASS's own kernels (persistent, stream-K, in clusters or ping-pong: `kernels`) or cuBLASLt's for the
// GEMMs, ours with synchronization off for the other stages. Programmatic: each GEMM is a programmatic
// dependent launch of the kernel before it (CUTLASS waits for that kernel to finish before its first load).
inline Status Chain::run_cutlass(cudaStream_t stream, bool programmatic, Mode kernels) {
  if (state_ == nullptr) return Status::kNotInitialized;
  Status status = prepare_run(stream);  // run_stock() comes here directly
  if (status != Status::kSuccess) return status;
  bool const streamk = kernels == Mode::kStreamK;
  StageLaunch launch{};
  for (int s = 0; s < t_->num_stages && streamk; ++s) {  // first: a memset between two launches would break their chain
    if (b_->clear_streamk[s] == nullptr) continue;
    launch = StageLaunch{};
    fill_unsynced(launch, s, false);
    if ((status = b_->clear_streamk[s](launch, stream)) != Status::kSuccess) return status;
  }
  for (int s = 0; s < t_->num_stages; ++s) {
    LaunchFn const kernel = streamk                       ? b_->streamk[s]
                            : kernels == Mode::kCluster  ? b_->cluster[s]
                            : kernels == Mode::kPingpong ? b_->pingpong[s]
                            : kernels == Mode::kCublasLt ? b_->cublaslt[s]
                                                         : b_->stock[s];
    if (kernel == nullptr) {  // not a GEMM: our kernel with synchronization off, a plain launch
      status = launch_stage(s, /*synced=*/false, stream);
    } else {
      if (kernels == Mode::kCublasLt && lt_ != nullptr) static_cast<LtContext*>(lt_)->stage = s;  // autotune's search
      launch = StageLaunch{};
      fill_unsynced(launch, s, programmatic && s > 0);
      status = kernel(launch, stream);
    }
    if (status != Status::kSuccess) return status;
  }
  return Status::kSuccess;
}

}  // namespace cusync::sm90
