// cusync runtime: what the attention chain hands to a stage unit's launch_<stage>().
#pragma once

#include <cstdint>

#include "cusync/attention.cuh"
#include "cusync/attention_chain.h"
#include "cusync/stage.cuh"

namespace cusync {

// One launch of a GEMM stage: `batch` GEMMs of one shape, with per-z operand pointers (device arrays),
// or (split_k > 1) one GEMM on a0, b0, d0 cut into split_k K slices.
struct AttentionGemmLaunch {
  int m, n, k, batch;
  void const* const* a;
  void const* const* b;
  void* const* d;
  int64_t lda, ldb, ldd;
  float alpha;
  StageSync sync;
  AttentionTile tile;
  int split_k = 1;
  void const* a0 = nullptr;
  void const* b0 = nullptr;
  void* d0 = nullptr;
  int* split_semaphores = nullptr;
};

struct AttentionSoftmaxLaunch {
  void const* scores;
  void* probs;
  int rows;   // new tokens per sequence
  int keys;   // cached + new tokens
  StageSync sync;
  AttentionTile tile;
};

}  // namespace cusync
