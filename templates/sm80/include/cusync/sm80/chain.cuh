// cusync sm80 backend: the definitions of cusync/sm80/chain.h (a project's src/<name>.cu includes this).
#pragma once

#include "cusync/chain.cuh"
#include "cusync/chain_kernels.cuh"
#include "cusync/sm80/chain.h"

namespace cusync::sm80 {

inline Chain::~Chain() {
  for (cudaEvent_t done : done_) {
    if (done != nullptr) cudaEventDestroy(done);
  }
}

inline Chain::Chain(Chain&& other) noexcept : StagedChain(*other.t_) { swap(other); }

inline Chain& Chain::operator=(Chain&& other) noexcept { return move_assign(*this, other); }

inline void Chain::swap(Chain& other) noexcept {
  std::swap(sequential_fallback_, other.sequential_fallback_);
  streams_.swap(other.streams_);
  std::swap(done_, other.done_);
  swap_staged(other);
}

// A failed initialize() gives back the state it took (the object is not initialized, and may be again).
inline Status Chain::initialize(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller) {
  bool const fresh = state_ == nullptr;
  Status status = StagedChain::initialize(args, max_m, stream, caller);
  if (status == Status::kSuccess && streams_.side() == nullptr) status = streams_.create();
  for (int s = 0; s < t_->num_stages && t_->has_unsynced_edge && status == Status::kSuccess; ++s) {
    if (done_[s] == nullptr) status = from_cuda(cudaEventCreateWithFlags(&done_[s], cudaEventDisableTiming));
  }
  // Only the stream the state was uploaded on, never the whole device: the chain may run on any stream next.
  if (status == Status::kSuccess) status = from_cuda(cudaStreamSynchronize(stream));
  if (status != Status::kSuccess && fresh) release_base();
  return status;
}

// Back to back unless some producer has more tiles than fit at once (more than one wave): when all its
// tiles run at once and finish together, a consumer cannot start early and overlap only adds overhead.
inline bool Chain::overlaps() const {
  if (!sequential_fallback_) return true;
  for (int s = 0; s < t_->num_stages; ++s) {
    for (int p : {info(s).producer, info(s).producer_b}) {
      if (p >= 0 && tiles_m(p) * tiles_n(p) > sms_ * info(p).blocks_per_sm) return true;
    }
  }
  return false;
}

inline Status Chain::run(cudaStream_t stream) {
  if (state_ == nullptr) return Status::kNotInitialized;
  if (Status const status = check_run(); status != Status::kSuccess) return status;
  if (!overlaps()) return run_sequential(stream);
  auto* state = static_cast<ChainState*>(state_);
  cudaStream_t streams[2] = {stream, single_stream_ ? stream : streams_.side()};
  Status status = streams_.fork(stream);
  if (status != Status::kSuccess) return status;
  for (int s = 0; s < t_->num_stages; ++s) {
    cudaStream_t const on = streams[s % 2];
    for (int p : {topology(s).producer, topology(s).producer_b}) {
      if (p < 0) continue;
      // An edge without tile sync (policy none) waits for the whole producer kernel: stream order when
      // both run on one stream, an event when the producer ran on the other one.
      if (!tile_synced(s, p)) {
        if (streams[p % 2] != on && (status = from_cuda(cudaStreamWaitEvent(on, done_[p], 0))) != Status::kSuccess) return status;
        continue;
      }
      if (t_->avoid_wait_kernel && coresident(s, p)) continue;
      unsigned const producer_blocks = unsigned(tiles_m(p) * tiles_n(p));
      wait_started_kernel<<<1, 32, 0, on>>>(state, s, p, producer_blocks, timeout_ns_);
      if ((status = from_cuda(cudaGetLastError())) != Status::kSuccess) return status;
    }
    if ((status = launch_stage(s, /*synced=*/true, on)) != Status::kSuccess) return status;
    if (t_->has_unsynced_edge && (status = from_cuda(cudaEventRecord(done_[s], on))) != Status::kSuccess) return status;
  }
  return streams_.join(stream);
}

}  // namespace cusync::sm80
