// cusync conv backend: the definitions of cusync/conv/chain.h. Not inline: exactly one translation unit of a
// project (src/<name>.cu) includes this, so the library holds every member for its users.
#pragma once

#include <algorithm>
#include <climits>
#include <cstdio>

#include "cusync/chain_kernels.cuh"
#include "cusync/conv/chain.h"
#include "cusync/conv/launch.cuh"
#include "cusync/policy.h"
#include "cusync/stage.cuh"
#include "cusync/time_modes.h"

namespace cusync::conv {

static_assert(ConvChain::kTraceWordsPerTile == TileTrace::kWords, "the trace's words per tile");

namespace detail {
inline Status from_cuda(cudaError_t err) { return err == cudaSuccess ? Status::kSuccess : Status::kCudaError; }
inline int div_up(int64_t a, int64_t b) { return int((a + b - 1) / b); }
}  // namespace detail

ConvChain::ConvChain(ConvTables const& tables) : t_(&tables) {
  for (ConvTables const* t = &tables; t != nullptr && num_configs_ < kMaxConvConfigs; t = t->smaller) configs_[num_configs_++] = t;
}

ConvChain::~ConvChain() {
  if (join_ != nullptr) cudaEventDestroy(join_);
  if (fork_ != nullptr) cudaEventDestroy(fork_);
  if (side_ != nullptr) cudaStreamDestroy(side_);
  if (semaphores_ != nullptr) cudaFree(semaphores_);
  if (state_ != nullptr) cudaFree(state_);
}

int ConvChain::tiles_m(int stage, int batch) const {
  ConvStageInfo const& s = at(batch).stages[stage];
  return detail::div_up(int64_t(batch) * s.p * s.q, s.tile_m);
}

int ConvChain::tiles_n(int stage, int batch) const {
  ConvStageInfo const& s = at(batch).stages[stage];
  return detail::div_up(s.k, s.tile_n);
}

int64_t ConvChain::blocks(int stage, int batch) const {
  // A persistent stage has more tiles than grid_limit (that is when it runs persistent): one CTA per slot (the
  // cluster kernel takes as many or fewer: whole clusters the GPU holds at once).
  return persistent(stage, batch) ? grid_limit(stage, batch) : int64_t(tiles_m(stage, batch)) * tiles_n(stage, batch);
}

char const* ConvChain::stage_name(int stage) const {
  return stage >= 0 && stage < t_->num_stages ? t_->stages[stage].name : stage == kChainInput ? "input" : "(none)";
}

bool ConvChain::has_consumer(int stage) const {
  for (int c = stage + 1; c < t_->num_stages; ++c) {
    if (t_->stages[c].producer == stage || t_->stages[c].residual == stage) return true;
  }
  return false;
}

Status ConvChain::initialize(int max_batch, cudaStream_t stream) {
  using detail::from_cuda;
  if (state_ != nullptr) { last_error_ = "initialize() was already called"; return Status::kInvalidArgument; }
  if (max_batch < 1) { last_error_ = "max_batch must be >= 1"; return Status::kInvalidArgument; }
  for (int s = 0; s < t_->num_stages; ++s) {
    ConvStageInfo const& i = t_->stages[s];
    if (int64_t(max_batch) * i.p * i.q > INT_MAX / 2 || int64_t(max_batch) * i.h * i.w > INT_MAX / 2) {
      last_error_ = "max_batch * pixels of a stage must stay below 2^30";
      return Status::kInvalidArgument;
    }
  }
  max_batch_ = max_batch;
  int64_t words = 0;
  for (int s = 0; s < t_->num_stages; ++s) {
    semaphore_offset_[s] = words;
    // RowSync: one semaphore per tile row, as many as the most any configuration has (at its largest batch)
    int rows = 0;
    for (int c = 0; c < num_configs_ && has_consumer(s); ++c) {
      int const top = c == 0 ? max_batch : std::min(max_batch, configs_[c - 1]->smaller_batch_max);
      ConvStageInfo const& i = configs_[c]->stages[s];
      rows = std::max(rows, detail::div_up(int64_t(top) * i.p * i.q, i.tile_m));
    }
    words += rows;
  }
  Status status = from_cuda(cudaMalloc(&state_, sizeof(ChainState)));
  if (status == Status::kSuccess) status = from_cuda(cudaMalloc(&semaphores_, sizeof(uint64_t) * (words > 0 ? words : 1)));
  if (status == Status::kSuccess)
    status = from_cuda(init_chain_state(static_cast<ChainState*>(state_), semaphores_, uint64_t(words), stream));
  if (status == Status::kSuccess) status = from_cuda(cudaStreamCreateWithFlags(&side_, cudaStreamNonBlocking));
  if (status == Status::kSuccess) status = from_cuda(cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming));
  if (status == Status::kSuccess) status = from_cuda(cudaEventCreateWithFlags(&join_, cudaEventDisableTiming));
  for (int c = 0; c < num_configs_; ++c) {
    for (int s = 0; s < t_->num_stages && status == Status::kSuccess; ++s) status = configs_[c]->prepare[s]();
  }
  int device = 0;
  if (status == Status::kSuccess) status = from_cuda(cudaGetDevice(&device));
  if (status == Status::kSuccess) status = from_cuda(cudaDeviceGetAttribute(&sms_, cudaDevAttrMultiProcessorCount, device));
  if (status == Status::kSuccess) status = from_cuda(cudaDeviceGetAttribute(&cc_major_, cudaDevAttrComputeCapabilityMajor, device));
  for (int c = 0; c < num_configs_ && status == Status::kSuccess; ++c) {
    for (int s = 0; s < t_->num_stages; ++s) {
      occupancy_[c][s][0] = configs_[c]->occupancy[s](false);
      occupancy_[c][s][1] = configs_[c]->occupancy[s](true);
    }
  }
  return status;
}

Status ConvChain::check(ConvArguments const& a) {
  if (state_ == nullptr) return Status::kNotInitialized;
  auto invalid = [this](char const* why) { last_error_ = why; return Status::kInvalidArgument; };
  if (a.batch < 1 || a.batch > max_batch_) return invalid("batch must be in 1 .. initialize()'s max_batch");
  if (a.input == nullptr) return invalid("input must be a device pointer");
  for (int s = 0; s < t_->num_stages; ++s) {
    if (a.filter[s] == nullptr || a.output[s] == nullptr) return invalid("every stage needs filter and output pointers");
    if (t_->stages[s].bias && a.bias[s] == nullptr) return invalid("a stage with bias needs its bias pointer");
  }
  if (trace_ != nullptr && trace_words(a.batch) > trace_capacity_) {
    return invalid("the trace buffer is smaller than trace_words(batch): call set_trace() with a larger buffer (or nullptr)");
  }
  last_error_ = "";
  return Status::kSuccess;
}

int64_t ConvChain::trace_offset(int stage, int batch) const {
  int64_t words = 0;
  for (int s = 0; s < stage && s < t_->num_stages; ++s) words += int64_t(tiles_m(s, batch)) * tiles_n(s, batch) * TileTrace::kWords;
  return words;
}

Status ConvChain::set_trace(uint64_t* trace, int64_t words) {
  if (trace != nullptr && (words < -1 || (words == -1 && state_ == nullptr))) {
    last_error_ = "set_trace: pass the buffer's size in words (or -1, after initialize(): trace_words(max_batch))";
    return Status::kInvalidArgument;
  }
  if (words == -1) {  // the most any batch needs: a smaller batch may run smaller tiles (tile_configs), more of them
    words = 0;
    for (int b = 1; b <= max_batch_; ++b) words = std::max(words, trace_words(b));
  }
  trace_ = trace;
  trace_capacity_ = trace == nullptr ? 0 : words;
  return Status::kSuccess;
}

Status ConvChain::launch_stage(int s, ConvArguments const& a, bool synced, cudaStream_t stream, bool programmatic) {
  ConvTables const& t = at(a.batch);  // the tile configuration of this batch
  ConvStageInfo const& info = t.stages[s];
  auto* state = static_cast<ChainState*>(state_);
  ConvLaunch l{};
  // One stream with programmatic dependent launch: every block of stage s lets stage s + 1 launch at its
  // entry (so a consumer block takes an SM slot only once every producer block holds one), and stage s + 1
  // is a programmatic dependent launch of stage s. A programmatic launch may end before the kernel it was
  // launched behind, so each one waits for that kernel at its exit: the end of the last stage is then the
  // end of the run for whatever the stream does next (as in the sm90 GEMM chains).
  // Back to back chained (not synced): no trigger, so a stage's grid launches when every block of the one
  // before has exited (its launch, not the kernel's end, is what the chaining hides); each stage waits for its
  // whole primary kernel before its first load (griddepcontrol.wait), and so ends after it. With the trigger
  // at entry the next stage's blocks became resident while the kernel before ran, and behind a producer of one
  // wave their tiles then ended 1.3-1.5x later after the producer's last store than those of blocks launched
  // after it (tile traces on an H100: the chained run 27.5 against 23.2 us at ResNet 14 x 14 x 256, batch 20,
  // 65.0 against 60.9 at VGG 14 x 14 x 512, batch 20); without it the chained run is 1.02-1.04x faster than
  // plain back to back there and level with the trigger at the examples.
  // hooks (ConvHooks): what the synced kernels do around each tile; profile_stage adds kHookAssumePosted.
  unsigned const hooks = profile_hooks_ != 0 ? profile_hooks_ : hooks_;
  l.programmatic = programmatic && s > 0;
  l.bounded = bounded(s, a.batch);
  l.persistent = persistent(s, a.batch);
  l.grid_limit = grid_limit(s, a.batch);
  l.sync.trigger_dependents = synced && programmatic && s + 1 < t_->num_stages;
  l.sync.wait_primary_at_exit = synced && l.programmatic;
  l.waits.wait_primary_first = !synced && l.programmatic;
  l.waits.hooks = synced ? hooks : 0u;
  l.batch = a.batch;
  l.x = info.producer == kChainInput ? a.input : a.output[info.producer];
  l.filter = a.filter[s];
  l.bias = info.bias ? a.bias[s] : nullptr;
  l.residual = info.residual == kNoResidual ? nullptr : info.residual == kChainInput ? a.input : a.output[info.residual];
  l.y = a.output[s];
  StageSync& sync = l.sync;
  sync.state = state;
  sync.stage = s;
  sync.enabled = synced;
  // Block order on the one-stream programmatic launch (kHookBlockOrder): a consumer block is scheduled only once
  // every producer block has started, so no order of tiles can starve a producer.
  sync.dynamic_order = ticket_order_ && !(programmatic && (hooks & kHookBlockOrder) != 0u) && (profile_drop_ & 1u) == 0u;
  // The overlap's persistent consumers in static tile order run in thread block clusters where the unit has that
  // kernel (overlap_cluster): launched while the producer runs, their CTAs take SMs in the order the producer's
  // leave them, away from the tiles they share activations with, and each tile then paid ~1.35x its L2 traffic's
  // time; a cluster's two CTAs are placed together and load the shared activations once (TMA multicast). Tickets
  // (the two-stream overlap) hand tiles to single CTAs: no clusters there.
  l.cluster = synced && !sync.dynamic_order && overlap_cluster(s, a.batch);
  sync.timeout_ns = timeout_ns_;
  sync.trace = trace_ != nullptr ? trace_ + trace_offset(s, a.batch) : nullptr;
  sync.order = TileOrder::kRowMajor;  // tile rows are runs of output pixels: the first image rows complete first
  sync.tiles_m = tiles_m(s, a.batch);
  sync.tiles_n = tiles_n(s, a.batch);
  sync.num_stages = t_->num_stages;
  for (int sink = 0; sink < t_->num_stages; ++sink) {
    if (!has_consumer(sink)) sync.run_blocks += unsigned(tiles_m(sink, a.batch) * tiles_n(sink, a.batch));
  }
  sync.counts_finish = !has_consumer(s) && (profile_drop_ & 8u) == 0u;
  auto make_wait = [&](int producer) {
    InputWait wait;
    wait.state = state;
    wait.stage = s;
    wait.producer = producer;
    ConvStageInfo const& p = t.stages[producer];
    wait.policy = RowSync(p.tile_m, p.tile_n, tiles_n(producer, a.batch));
    wait.semaphores = semaphores_ + semaphore_offset_[producer];
    wait.timeout_ns = timeout_ns_;
    wait.enabled = true;
    return wait;
  };
  if (synced && info.producer >= 0 && (profile_drop_ & 2u) == 0u) sync.input = make_wait(info.producer);
  if (synced && has_consumer(s) && s != missing_posts_ && (profile_drop_ & 4u) == 0u) {
    sync.output = RowSync(info.tile_m, info.tile_n, tiles_n(s, a.batch));
    sync.out_semaphores = semaphores_ + semaphore_offset_[s];
  }
  ConvWaits& w = l.waits;
  w.window = ConvWindow{info.h, info.w, info.p, info.q, info.r, info.stride, info.pad, info.dilation};
  w.pixels = int64_t(a.batch) * info.p * info.q;
  w.tile_m = info.tile_m;
  w.producer_tiles_m = info.producer >= 0 ? tiles_m(info.producer, a.batch) : 0;
  if (synced && info.residual >= 0 && (profile_drop_ & 2u) == 0u) {
    w.residual = make_wait(info.residual);
    w.residual_tiles_m = tiles_m(info.residual, a.batch);
  }
  return t.launch[s](l, stream);
}

Status ConvChain::run_unsynced(ConvArguments const& a, cudaStream_t stream, bool programmatic) {
  Status status = check(a);
  for (int s = 0; s < t_->num_stages && status == Status::kSuccess; ++s) status = launch_stage(s, a, false, stream, programmatic);
  return status;
}

Status ConvChain::run_sequential(ConvArguments const& a, cudaStream_t stream) { return run_unsynced(a, stream, false); }

Status ConvChain::profile_stage(int stage, ConvArguments const& a, unsigned hooks, unsigned drop, cudaStream_t stream) {
  if (stage < 0 || stage >= t_->num_stages) return Status::kInvalidArgument;
  Status status = check(a);
  if (status != Status::kSuccess) return status;
  profile_hooks_ = hooks | kHookAssumePosted;
  profile_drop_ = drop;
  status = launch_stage(stage, a, true, stream, false);
  profile_hooks_ = 0;
  profile_drop_ = 0;
  return status;
}

Status ConvChain::run_chained(ConvArguments const& a, cudaStream_t stream) { return run_unsynced(a, stream, programmatic()); }

Status ConvChain::run_stage(int stage, ConvArguments const& a, cudaStream_t stream) {
  if (stage < 0 || stage >= t_->num_stages) return Status::kInvalidArgument;
  Status const status = check(a);
  return status != Status::kSuccess ? status : launch_stage(stage, a, false, stream, false);
}

// The avoid-wait-kernel rule of cuSync, for the whole chain: when the blocks of every stage fit on the GPU at
// once (each stage's grid over its blocks per SM, summed, at most the SMs), every producer block finds a slot
// whatever the consumers hold, so the wait kernels (a launch each, a few microseconds in a graph) are skipped.
bool ConvChain::waits_for_start(int batch) const {
  if (always_wait_ || sms_ <= 0) return true;
  double slots = 0.0;
  for (int s = 0; s < t_->num_stages; ++s) {
    if (blocks_per_sm(s, batch) <= 0) return true;
    slots += double(blocks(s, batch)) / blocks_per_sm(s, batch);
  }
  return slots > double(sms_);
}

Status ConvChain::run(ConvArguments const& a, cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  switch (mode(a.batch)) {
    case ConvMode::kOverlap: return run_overlapped(a, stream);
    case ConvMode::kChained: return run_chained(a, stream);
    default: return run_sequential(a, stream);
  }
}

ConvMode ConvChain::mode(int batch) const {
  if (mode_override_ != ConvMode::kAuto) {
    std::snprintf(mode_reason_, sizeof(mode_reason_), "set_mode(%s)", to_string(mode_override_));
    return mode_override_;
  }
  for (int i = 0; i < tuned_count_; ++i) {  // ascending batches
    if (batch <= tuned_batch_[i]) {
      std::snprintf(mode_reason_, sizeof(mode_reason_),
                    "autotune on this GPU at batch %d: back to back %.1f us, overlap %.1f us, back to back + PDL %.1f us",
                    tuned_batch_[i], double(tuned_us_[i][0]), double(tuned_us_[i][1]), double(tuned_us_[i][2]));
      return tuned_mode_[i];
    }
  }
  return rule_mode(batch);
}

ConvMode ConvChain::rule_mode(int batch) const {
  // The producers (stages some stage reads): their tiles at this batch and the blocks the GPU holds at once.
  int64_t tiles[kMaxConvStages], slots[kMaxConvStages];
  char const* names[kMaxConvStages];
  int count = 0;
  for (int s = 0; s < t_->num_stages; ++s) {
    if (!has_consumer(s)) continue;
    tiles[count] = int64_t(tiles_m(s, batch)) * tiles_n(s, batch);
    slots[count] = int64_t(sms_) * (blocks_per_sm(s, batch) > 0 ? blocks_per_sm(s, batch) : 1);
    names[count++] = stage_name(s);
  }
  int min_k_steps = INT_MAX;
  for (int s = 0; s < t_->num_stages; ++s) min_k_steps = std::min(min_k_steps, at(batch).stages[s].k_steps);
  return default_conv_mode(count, tiles, slots, names, min_k_steps, t_->overlap_rule, programmatic(), mode_reason_,
                           int(sizeof(mode_reason_)));
}

char const* ConvChain::mode_reason(int batch) const {
  mode(batch);
  return mode_reason_;
}

Status ConvChain::autotune(ConvArguments const& args, int const* batches, int count, int rounds, cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  if (count < 1 || count > kMaxTunedBatches || rounds < 1 || rounds > kMaxTuneRounds || batches == nullptr) {
    last_error_ = "autotune: 1 .. kMaxTunedBatches batches and 1 .. kMaxTuneRounds rounds";
    return Status::kInvalidArgument;
  }
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &capture) != cudaSuccess) return Status::kCudaError;
  if (capture != cudaStreamCaptureStatusNone) {  // before anything is launched into the caller's graph
    last_error_ = "autotune() on a capturing stream: it times and synchronizes; call it before the capture";
    return Status::kInvalidArgument;
  }
  int sorted[kMaxTunedBatches];
  std::copy(batches, batches + count, sorted);
  std::sort(sorted, sorted + count);
  int tuned_batch[kMaxTunedBatches];
  ConvMode tuned_mode[kMaxTunedBatches];
  float tuned_us[kMaxTunedBatches][3];
  Status status = Status::kSuccess;
  for (int i = 0; i < count && status == Status::kSuccess; ++i) {
    ConvArguments a = args;
    a.batch = sorted[i];
    if ((status = check(a)) != Status::kSuccess) break;
    // The rule's choice first (it wins a tie), then the other modes; back to back + PDL only where programmatic().
    ConvMode candidates[3];
    int n = 0;
    candidates[n++] = rule_mode(a.batch);
    for (ConvMode m : {ConvMode::kSequential, ConvMode::kOverlap, ConvMode::kChained}) {
      if (m != candidates[0] && (m != ConvMode::kChained || programmatic())) candidates[n++] = m;
    }
    auto run_mode = [&](ConvMode m, cudaStream_t s) {
      return m == ConvMode::kOverlap ? run_overlapped(a, s) : m == ConvMode::kChained ? run_chained(a, s) : run_sequential(a, s);
    };
    float median_us[3] = {};
    int best = 0;
    status = time_modes(run_mode, candidates, n, rounds, stream, median_us, &best, i == 0 ? kTunePreheatMs : kTunePreheatMs / 10);
    if (status != Status::kSuccess) break;
    tuned_us[i][0] = tuned_us[i][1] = tuned_us[i][2] = 0.0f;  // 0: not timed
    for (int k = 0; k < n; ++k) {
      tuned_us[i][candidates[k] == ConvMode::kSequential ? 0 : candidates[k] == ConvMode::kOverlap ? 1 : 2] = median_us[k];
    }
    tuned_batch[i] = sorted[i];
    tuned_mode[i] = candidates[best];
  }
  if (status == Status::kSuccess) status = sync_error(nullptr, stream);  // a timed-out wait: keep the old table
  if (status != Status::kSuccess) return status;
  for (int i = 0; i < count; ++i) {
    tuned_batch_[i] = tuned_batch[i];
    tuned_mode_[i] = tuned_mode[i];
    tuned_us_[i][0] = tuned_us[i][0];
    tuned_us_[i][1] = tuned_us[i][1];
    tuned_us_[i][2] = tuned_us[i][2];
  }
  tuned_count_ = count;
  return Status::kSuccess;
}

// The overlap. Where the device and the kernels have programmatic dependent launch: one stream, each stage
// a programmatic dependent launch of the one before (launch_stage says how). Every block of a stage
// triggers the next stage's launch at its entry, so a consumer block is scheduled only once every producer
// block has started: spinning consumer blocks never hold an SM slot an unstarted producer block needs, and
// every earlier stage (a residual's producer) has started too. No consumer calls griddepcontrol.wait before
// its work (that would wait for the whole producer grid): the tile waits carry the dependency.
//
// Elsewhere: two streams, stage s on streams[s % 2]: a stage is launched once every block of its producer
// has started (the wait kernel, on the stage's stream), so its spinning blocks never hold SM slots a
// producer block still needs. Every earlier stage has then started too (each launch waited for the one
// before), so a residual edge to any earlier stage is safe as well.
Status ConvChain::run_overlapped(ConvArguments const& a, cudaStream_t stream) {
  using detail::from_cuda;
  Status status = check(a);
  if (status != Status::kSuccess) return status;
  if (programmatic()) {
    for (int s = 0; s < t_->num_stages && status == Status::kSuccess; ++s) {
      status = launch_stage(s, a, true, stream, /*programmatic=*/true);
    }
    return status;
  }
  auto* state = static_cast<ChainState*>(state_);
  cudaStream_t const streams[2] = {stream, side_};
  bool const wait_kernels = waits_for_start(a.batch);
  if ((status = from_cuda(cudaEventRecord(fork_, stream))) != Status::kSuccess) return status;
  if ((status = from_cuda(cudaStreamWaitEvent(side_, fork_, 0))) != Status::kSuccess) return status;
  for (int s = 0; s < t_->num_stages; ++s) {
    cudaStream_t const on = streams[s % 2];
    int const p = t_->stages[s].producer;
    if (p >= 0 && wait_kernels) {
      unsigned const producer_blocks = unsigned(blocks(p, a.batch));
      wait_started_kernel<<<1, 32, 0, on>>>(state, s, p, producer_blocks, timeout_ns_);
      if ((status = from_cuda(cudaGetLastError())) != Status::kSuccess) return status;
    }
    if ((status = launch_stage(s, a, true, on, /*programmatic=*/false)) != Status::kSuccess) return status;
  }
  if ((status = from_cuda(cudaEventRecord(join_, side_))) != Status::kSuccess) return status;
  return from_cuda(cudaStreamWaitEvent(stream, join_, 0));
}

Status ConvChain::sync_error(SyncErrorInfo* info, cudaStream_t stream) {
  using detail::from_cuda;
  if (state_ == nullptr) return Status::kNotInitialized;
  SyncErrorInfo error{};
  auto* state = static_cast<ChainState*>(state_);
  Status status = from_cuda(cudaMemcpyAsync(&error, &state->error, sizeof(error), cudaMemcpyDeviceToHost, stream));
  if (status == Status::kSuccess) status = from_cuda(cudaStreamSynchronize(stream));
  if (status != Status::kSuccess) return status;
  if (info != nullptr) *info = error;
  if (error.flag == 0) return Status::kSuccess;
  status = from_cuda(cudaMemsetAsync(&state->error, 0, sizeof(SyncErrorInfo), stream));
  if (status == Status::kSuccess) status = from_cuda(cudaStreamSynchronize(stream));
  return status != Status::kSuccess ? status : Status::kSyncTimeout;
}

std::string ConvChain::describe(SyncErrorInfo const& e) const {
  char text[512];
  if (e.flag == 0) return "no sync timeout";
  if (e.tile_m < 0) {
    std::snprintf(text, sizeof(text), "stage %s: the wait for every block of %s to start timed out (%llu of %llu started)",
                  stage_name(e.stage), stage_name(e.producer), (unsigned long long)e.observed,
                  (unsigned long long)e.expected);
  } else {
    std::snprintf(text, sizeof(text),
                  "stage %s, tile (m %d, n %d), timed out waiting for %s tile row %d (semaphore %d: wanted %u posts "
                  "in epoch %u, saw %u in epoch %u)",
                  stage_name(e.stage), e.tile_m, e.tile_n, stage_name(e.producer), e.producer_tile_m, e.semaphore,
                  unsigned(e.expected & 0xFFFFFFFFu), unsigned(e.expected >> 32), unsigned(e.observed & 0xFFFFFFFFu),
                  unsigned(e.observed >> 32));
  }
  return text;
}

Status ConvChain::inject_missing_posts(int stage) {
  if (stage < -1 || stage >= t_->num_stages) return Status::kInvalidArgument;
  missing_posts_ = stage;
  return Status::kSuccess;
}

}  // namespace cusync::conv
