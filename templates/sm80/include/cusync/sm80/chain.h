// cusync sm80 backend: the chain's run() on two streams, with the wait kernel and the one-wave fallback.
//
// run(stream): stage i on stream i % 2 (the caller's stream or the side stream), forked from and joined
// back into the caller's stream. The epoch of a run is opened by the last block of the run before it.
// Before a consumer is launched, the wait kernel returns only once every block of its producer has
// started: from then on the producer needs no more SM slots, so consumer blocks that occupy SMs and spin
// can never starve a producer block that is not yet scheduled. With avoid_wait_kernel (the plan proved
// that producer and consumer blocks are co-resident) the wait kernel is skipped where they are.
// Declarations only; the definitions are in cusync/sm80/chain.cuh.
#pragma once

#include "cusync/chain.h"

namespace cusync::sm80 {

class Chain : public StagedChain {
 public:
  explicit Chain(ChainTables const& tables) : StagedChain(tables) {}
  ~Chain();
  // Moves take every buffer, stream and event; `other` is left as if just constructed.
  Chain(Chain&& other) noexcept;
  Chain& operator=(Chain&& other) noexcept;
  void swap(Chain& other) noexcept;

  // caller: carve the state and the semaphores from the caller's memory (StagedChain::initialize).
  Status initialize(ChainPointers const& args, int max_m, cudaStream_t stream, Workspace const* caller = nullptr);
  // Overlapped, unless every producer fits in one wave at this M (then back to back: see overlaps()).
  Status run(cudaStream_t stream);
  void set_sequential_fallback(bool enabled) { sequential_fallback_ = enabled; }
  bool overlaps() const;

 private:
  bool sequential_fallback_ = true;
  TwoStreams streams_;
  cudaEvent_t done_[kMaxChainStages] = {};  // stage s finished (edges without tile sync only)
};

}  // namespace cusync::sm80
