// The stage functions of the two_gemm_sm90 golden project as recorders (stage_stubs.h).
#include "two_gemm_sm90_stages.h"

#include "stage_stubs.h"

int g_launches = 0;

namespace two_gemm_sm90::detail {
CUSYNC_TEST_STAGE(gemm1)
CUSYNC_TEST_STAGE(gemm2)

// Mode kStream's slab kernel (src/two_gemm_sm90_slab.cu in a real build): a launch counter.
static cusync::Status fake_slab_prepare() { return cusync::Status::kSuccess; }
static cusync::Status fake_slab_run(cusync::sm90::SlabRun const&, cudaStream_t, char const**) { return record(); }
cusync::sm90::SlabKernels const* slab_kernels() {
  static cusync::sm90::SlabKernels const kernels{&fake_slab_prepare, &fake_slab_run};
  return &kernels;
}
}  // namespace two_gemm_sm90::detail
