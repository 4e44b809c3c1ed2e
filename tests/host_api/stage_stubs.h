// The stage functions of a generated sm90 chain (CUTLASS kernels in a real build) as recorders, for the host API
// tests: each launch is counted (g_launches, defined by the stubs unit), so a test sees what a run would have
// launched without a GPU. CUSYNC_TEST_STAGE(name) defines one GEMM stage's functions, inside the chain's
// detail namespace, after its <name>_stages.h.
#pragma once

extern int g_launches;

inline cusync::Status record() {
  ++g_launches;
  return cusync::Status::kSuccess;
}

#define CUSYNC_TEST_STAGE(x)                                                                                  \
  cusync::Status prepare_##x() { return cusync::Status::kSuccess; }                                          \
  cusync::Status launch_##x(StageLaunch const&, cudaStream_t) { return record(); }                           \
  cusync::Status prepare_##x##_stock() { return cusync::Status::kSuccess; }                                  \
  cusync::Status launch_##x##_stock(StageLaunch const&, cudaStream_t) { return record(); }                   \
  cusync::Status launch_##x##_cluster(StageLaunch const&, cudaStream_t) { return record(); }                 \
  cusync::Status launch_##x##_pingpong(StageLaunch const&, cudaStream_t) { return record(); }                \
  cusync::Status launch_##x##_cublaslt(StageLaunch const&, cudaStream_t) { return record(); }                \
  size_t streamk_workspace_##x(int m, int, int) { return size_t(m) * 64; }                                   \
  cusync::Status clear_##x##_streamk(StageLaunch const&, cudaStream_t) { return cusync::Status::kSuccess; }  \
  cusync::Status launch_##x##_streamk(StageLaunch const&, cudaStream_t) { return record(); }
