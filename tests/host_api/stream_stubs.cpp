// The stage functions of a chain generated with optimizations.stream_weights as recorders, and mode kStream's
// kernels (src/<name>_stream.cu and src/<name>_slab.cu in a real build) as fakes that record what the chain asked
// of them: the weights it packed and the runs it launched. STREAM_SPLIT: llama_mlp_sm90 with the key (gemm1 -> glu -> gemm2), else
// tests/data/decode_stream_sm90.yaml (gate_up -> down).
#if defined(STREAM_SPLIT)
#include "llama_mlp_sm90_stream_stages.h"
#define STUB_NS llama_mlp_sm90_stream
#else
#include "decode_stream_sm90_stages.h"
#define STUB_NS decode_stream_sm90
#endif

#include "stage_stubs.h"

namespace cs = cusync;
int g_launches = 0;
int g_packs = 0;
int g_pack_k[2] = {}, g_pack_n[2] = {};
bool g_pack_halves[2] = {};
int64_t g_pack_ld[2] = {};
void const* g_pack_src[2] = {};
cs::sm90::StreamRun g_stream_run{};
cs::sm90::SlabRun g_slab_run{};

namespace STUB_NS::detail {
#if defined(STREAM_SPLIT)
CUSYNC_TEST_STAGE(gemm1)
CUSYNC_TEST_STAGE(gemm2)
cs::Status prepare_glu() { return cs::Status::kSuccess; }
cs::Status launch_glu(StageLaunch const&, cudaStream_t) { return record(); }
#else
CUSYNC_TEST_STAGE(gate_up)
CUSYNC_TEST_STAGE(down)
cs::Status interleave_gate_up(void const*, int64_t, void*, cudaStream_t) { return cs::Status::kSuccess; }
#endif

static cs::Status fake_prepare() { return cs::Status::kSuccess; }
static cs::Status fake_pack(void const* w, int64_t ldw, int k, int n, bool halves, void*, cudaStream_t) {
  int const g = g_packs++ % 2;
  g_pack_src[g] = w, g_pack_ld[g] = ldw, g_pack_k[g] = k, g_pack_n[g] = n, g_pack_halves[g] = halves;
  return cs::Status::kSuccess;
}
static cs::Status fake_run(cs::sm90::StreamRun const& run, cudaStream_t) {
  g_stream_run = run;
  return record();
}

cs::sm90::StreamKernels const* stream_kernels() {
  static cs::sm90::StreamKernels const kernels{&fake_prepare, &fake_pack, &fake_run};
  return &kernels;
}

// Mode kStream's slab kernel (src/<name>_slab.cu in a real build), M <= 4: records the run.
static cs::Status fake_slab_run(cs::sm90::SlabRun const& run, cudaStream_t, char const**) {
  g_slab_run = run;
  return record();
}
cs::sm90::SlabKernels const* slab_kernels() {
  static cs::sm90::SlabKernels const kernels{&fake_prepare, &fake_slab_run};
  return &kernels;
}
}  // namespace STUB_NS::detail
