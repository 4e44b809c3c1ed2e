// cusync conv backend: one launch of one conv stage, what ConvChain hands to a stage unit's launch_<stage>(),
// for either kernel family (SyncedConv, cusync/conv/conv.cuh; SyncedConvSm90, cusync/conv/conv_sm90.cuh: the
// stage unit includes its own first).
#pragma once

#include "cusync/conv/chain.h"
#include "cusync/conv/window.cuh"
#include "cusync/stage.cuh"

namespace cusync::conv {

struct ConvLaunch {
  int batch;
  void const* x;         // the input the window reads: the chain input or the producer's output
  void const* filter;
  void const* bias;      // null without bias
  void const* residual;  // null without residual
  void* y;
  StageSync sync;
  ConvWaits waits;
  bool programmatic;     // a programmatic dependent launch of the kernel before it on the stream (sm90)
  bool bounded;          // the kernel built for more blocks per SM (SyncedConv::kMinBlocks)
  bool persistent;       // the stage's persistent kernel (ConvChain::persistent), where its unit has one
  bool cluster;          // with persistent: its cluster kernel (ConvStageInfo::cluster_n), where its unit has one
  int grid_limit;        // a persistent kernel's most CTAs (ConvChain::grid_limit)
};

// The stage's CUTLASS problem from the table row and the run's batch.
template <typename Conv, typename Element>
Status launch_conv(ConvStageInfo const& info, ConvLaunch const& l, cudaStream_t stream) {
  typename Conv::Problem const problem{l.batch, info.h, info.w, info.c, info.k, info.r, info.s, info.p, info.q,
                                       info.pad, info.stride, info.dilation,
                                       static_cast<Element const*>(l.x), static_cast<Element const*>(l.filter),
                                       static_cast<Element const*>(l.bias), static_cast<Element const*>(l.residual),
                                       static_cast<Element*>(l.y)};
  if constexpr (Conv::kPersistent) {
    return Conv::launch(problem, l.sync, l.waits, l.programmatic, l.grid_limit, stream);
  } else {
    return Conv::launch(problem, l.sync, l.waits, l.programmatic, l.bounded, stream);
  }
}

}  // namespace cusync::conv
