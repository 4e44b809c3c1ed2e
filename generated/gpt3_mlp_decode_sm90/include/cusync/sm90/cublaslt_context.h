// cusync sm90 backend: the cuBLASLt context of a chain (run() mode kCublasLt): one handle and one
// workspace, shared by the chain's GEMMs (they run one after another on the caller's stream). Host only.
// Built in where CMake found cuBLASLt (CUSYNC_HAVE_CUBLASLT); elsewhere the mode is unavailable and
// create_lt_context leaves the context empty.
#pragma once

#include <cstddef>

#include <cuda_runtime.h>

#ifndef CUSYNC_HAVE_CUBLASLT
#define CUSYNC_HAVE_CUBLASLT 0
#endif
#if CUSYNC_HAVE_CUBLASLT
#include <cublasLt.h>
#endif

#include "cusync/status.h"

namespace cusync::sm90 {

// What PyTorch gives cuBLAS on Hopper; cuBLASLt's heuristic is asked for algorithms that fit in it.
constexpr size_t kLtWorkspaceBytes = size_t(32) << 20;

constexpr bool kHaveCublasLt = CUSYNC_HAVE_CUBLASLT != 0;

// autotune()'s algorithm search: how many of the heuristic's algorithms each GEMM keeps as candidates,
// and the stages a context tracks (kMaxChainStages).
constexpr int kLtSearchAlgos = 8;
constexpr int kLtMaxStages = 16;

#if CUSYNC_HAVE_CUBLASLT
struct LtContext {
  cublasLtHandle_t handle = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  bool owns_workspace = false;
  // The algorithm search of autotune() (Chain::search_lt_algorithms): the chain sets `stage` before each
  // of its cuBLASLt GEMMs; the GEMM of stage select_stage makes its plan take candidate select_candidate,
  // and every GEMM reports how many candidates its plan has.
  int stage = -1;
  int select_stage = -1;
  int select_candidate = 0;
  mutable int stage_candidates[kLtMaxStages] = {};
  mutable int stage_algorithm[kLtMaxStages] = {};  // the candidate each stage's GEMM ran last (0: the heuristic's first)
  // That candidate's configuration as cuBLASLt reports it: K splits (1: none) and the split-K reduction
  // scheme (cublasLtReductionScheme_t; 0: none), so a caller can see whether a tuned choice splits K.
  mutable int stage_splitk[kLtMaxStages] = {};
  mutable int stage_reduction[kLtMaxStages] = {};
};

// workspace: kLtWorkspaceBytes of the caller's memory, or null to allocate them. The handle is always
// the context's own (cuBLASLt allocates it; it is not device memory of the chain's to carve).
inline Status create_lt_context(LtContext** out, void* workspace = nullptr) {
  auto* ctx = new LtContext{};
  *out = ctx;
  if (cublasLtCreate(&ctx->handle) != CUBLAS_STATUS_SUCCESS) return Status::kLibraryError;
  ctx->owns_workspace = workspace == nullptr;
  if (workspace != nullptr) {
    ctx->workspace = workspace;
  } else if (cudaMalloc(&ctx->workspace, kLtWorkspaceBytes) != cudaSuccess) {
    return Status::kCudaError;
  }
  ctx->workspace_bytes = kLtWorkspaceBytes;
  return Status::kSuccess;
}

inline void destroy_lt_context(LtContext* ctx) {
  if (ctx == nullptr) return;
  if (ctx->handle != nullptr) cublasLtDestroy(ctx->handle);
  if (ctx->workspace != nullptr && ctx->owns_workspace) cudaFree(ctx->workspace);
  delete ctx;
}
#else
struct LtContext {  // never made without cuBLASLt (create_lt_context leaves it null)
  int stage = -1, select_stage = -1, select_candidate = 0;
  int stage_candidates[kLtMaxStages] = {};
  int stage_algorithm[kLtMaxStages] = {};
  int stage_splitk[kLtMaxStages] = {};
  int stage_reduction[kLtMaxStages] = {};
};
inline Status create_lt_context(LtContext** out, void* = nullptr) {
  *out = nullptr;
  return Status::kSuccess;
}
inline void destroy_lt_context(LtContext*) {}
#endif

}  // namespace cusync::sm90
