// cusync conv backend: ConvChain, a chain of implicit-GEMM convolutions synchronized tile by tile.
//
// Declarations only, with no device code, so that a project's public header can hold the class. The
// project emits the constexpr stage table (src/<name>_stages.h) and one launch function per stage.
#pragma once

#include <cstdint>
#include <string>

#include <cuda_runtime.h>

#include "cusync/status.h"
#include "cusync/sync_error.h"

namespace cusync::conv {

constexpr int kMaxConvStages = 16;  // kMaxStages of cusync/stage.cuh
constexpr int kNoResidual = -2;     // ConvStageInfo::residual: no residual add
constexpr int kChainInput = -1;     // ConvStageInfo::producer / residual: the chain input

// One convolution of the chain, as the plan derived it (cusync_gen/conv_plan.py).
struct ConvStageInfo {
  char const* name;
  int producer;   // kChainInput or an earlier stage: the tensor the window reads
  int residual;   // kNoResidual, kChainInput or an earlier stage: added before the activation
  int h, w, c;    // input image
  int k, r, s;    // filters
  int p, q;       // output image
  int pad, stride, dilation;
  int tile_m, tile_n;  // output pixels x output channels per thread block
  bool bias;
};

struct ConvLaunch;
using ConvLaunchFn = Status (*)(ConvLaunch const&, cudaStream_t);
using ConvPrepareFn = Status (*)();
using ConvOccupancyFn = int (*)();  // thread blocks of the stage's kernel one SM holds at once (0: unknown)

struct ConvTables {
  int num_stages;
  ConvStageInfo const* stages;
  ConvLaunchFn const* launch;
  ConvPrepareFn const* prepare;
  ConvOccupancyFn const* occupancy;
  int element_bytes;
};

// Device pointers of one run: the chain input [batch, h, w, c] (NHWC), each stage's filters [k, r, s, c]
// (KRSC), bias [k] (stages with bias) and output [batch, p, q, k] (NHWC, dense).
struct ConvArguments {
  int batch = 0;
  void const* input = nullptr;
  void const* filter[kMaxConvStages] = {};
  void const* bias[kMaxConvStages] = {};
  void* output[kMaxConvStages] = {};
};

class ConvChain {
 public:
  explicit ConvChain(ConvTables const& tables) : t_(&tables) {}
  ~ConvChain();
  ConvChain(ConvChain const&) = delete;
  ConvChain& operator=(ConvChain const&) = delete;

  // Allocates the chain's state and semaphores for batches up to max_batch (synchronizes `stream`).
  Status initialize(int max_batch, cudaStream_t stream);
  // The tile-synced overlap: every stage in flight at once, each tile waiting for the rows it reads.
  Status run(ConvArguments const& args, cudaStream_t stream);
  // The same kernels back to back on `stream`, no waits or posts (bitwise identical results).
  Status run_sequential(ConvArguments const& args, cudaStream_t stream);
  // One stage alone (its input must be ready), for per-layer timing.
  Status run_stage(int stage, ConvArguments const& args, cudaStream_t stream);
  // kSyncTimeout when a wait of an earlier run gave up (`info` says which); clears the record.
  Status sync_error(SyncErrorInfo* info, cudaStream_t stream);
  std::string describe(SyncErrorInfo const& info) const;
  void set_sync_timeout_ns(uint64_t ns) { timeout_ns_ = ns; }
  // Testing: this stage does not post (its consumers time out); -1 turns it off.
  Status inject_missing_posts(int stage);
  int tiles_m(int stage, int batch) const;
  int tiles_n(int stage) const;
  int num_stages() const { return t_->num_stages; }
  char const* stage_name(int stage) const;
  char const* last_error() const { return last_error_; }
  // Whether run() launches the wait kernels at this batch: not when every stage's blocks fit on the GPU at
  // once (then no spinning block can keep a producer block from starting). `force` makes it always wait.
  bool waits_for_start(int batch) const;
  void set_always_wait_kernel(bool always) { always_wait_ = always; }

 private:
  Status check(ConvArguments const& args);
  bool has_consumer(int stage) const;
  Status launch_stage(int stage, ConvArguments const& args, bool synced, cudaStream_t stream);

  ConvTables const* t_;
  void* state_ = nullptr;
  uint64_t* semaphores_ = nullptr;
  int64_t semaphore_offset_[kMaxConvStages] = {};
  int max_batch_ = 0;
  uint64_t timeout_ns_ = 2000000000ull;
  int missing_posts_ = -1;
  int sms_ = 0;
  int blocks_per_sm_[kMaxConvStages] = {};
  bool always_wait_ = false;
  cudaStream_t side_ = nullptr;
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t join_ = nullptr;
  char const* last_error_ = "";
};

}  // namespace cusync::conv
