// The stage functions of the two_gemm_sm90 golden project (CUTLASS kernels in a real build) as recorders: each
// launch is counted, so a test sees what a run would have launched without a GPU.
#include "two_gemm_sm90_stages.h"

namespace cs = cusync;
int g_launches = 0;

static cs::Status record() {
  ++g_launches;
  return cs::Status::kSuccess;
}

namespace two_gemm_sm90::detail {
#define CUSYNC_TEST_STAGE(x)                                                                              \
  cs::Status prepare_##x() { return cs::Status::kSuccess; }                                              \
  cs::Status launch_##x(StageLaunch const&, cudaStream_t) { return record(); }                           \
  cs::Status prepare_##x##_stock() { return cs::Status::kSuccess; }                                      \
  cs::Status launch_##x##_stock(StageLaunch const&, cudaStream_t) { return record(); }                   \
  cs::Status launch_##x##_cluster(StageLaunch const&, cudaStream_t) { return record(); }                 \
  cs::Status launch_##x##_pingpong(StageLaunch const&, cudaStream_t) { return record(); }                \
  cs::Status launch_##x##_cublaslt(StageLaunch const&, cudaStream_t) { return record(); }                \
  size_t streamk_workspace_##x(int m, int, int) { return size_t(m) * 64; }                               \
  cs::Status clear_##x##_streamk(StageLaunch const&, cudaStream_t) { return cs::Status::kSuccess; }      \
  cs::Status launch_##x##_streamk(StageLaunch const&, cudaStream_t) { return record(); }
CUSYNC_TEST_STAGE(gemm1)
CUSYNC_TEST_STAGE(gemm2)
}  // namespace two_gemm_sm90::detail
