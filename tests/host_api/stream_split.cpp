// Run() mode kStream on a chain whose SwiGLU is a stage of its own (llama_mlp_sm90 with optimizations.stream_weights:
// gemm1 -> glu -> gemm2) on a simulated device: gemm1's [gate | up] halves are packed interleaved, the launch fuses
// the SwiGLU (gemm1's epilogue writes glu_out, and gate | up as they are into gemm1_out), gemm2 reads glu_out.
#include <cstdio>
#include <cstdlib>

#include "llama_mlp_sm90_stream.h"

#include "expect.h"

extern int g_launches, g_packs, g_pack_k[2], g_pack_n[2];
extern bool g_pack_halves[2];
extern void const* g_pack_src[2];
extern cusync::sm90::StreamRun g_stream_run;
using namespace llama_mlp_sm90_stream;
using cusync::Mode;
using cusync::Status;


int main() {
  constexpr int kK = 8192, kN = 2816, kN2 = 8192, kMaxM = 64;
  auto buf = [](size_t elems) { return static_cast<Element*>(aligned_alloc(256, (elems * 2 + 255) / 256 * 256)); };
  Element *x = buf(size_t(kMaxM) * kK), *w1 = buf(size_t(kK) * 2 * kN), *h2 = buf(size_t(kMaxM) * 2 * kN),
          *h = buf(size_t(kMaxM) * kN), *w2 = buf(size_t(kN) * kN2), *y = buf(size_t(kMaxM) * kN2);
  Arguments a;
  a.m = 5, a.input = x, a.gemm1_weight = w1, a.gemm1_out = h2, a.glu_out = h, a.gemm2_weight = w2, a.gemm2_out = y;
  LlamaMlpSm90Stream c;
  expect(c.initialize(a, kMaxM) == Status::kSuccess, "initialize", c.last_error());
  expect(g_packs == 2 && g_pack_src[0] == w1 && g_pack_halves[0] && g_pack_k[0] == kK && g_pack_n[0] == 2 * kN &&
             g_pack_src[1] == w2 && !g_pack_halves[1] && g_pack_k[1] == kN && g_pack_n[1] == kN2,
         "gemm1's [gate | up] halves packed interleaved, gemm2's as they are");
  g_launches = 0;
  expect(c.set_mode(Mode::kStream) == Status::kSuccess && c.mode() == Mode::kStream && c.run(nullptr) == Status::kSuccess &&
             g_launches == 1, "run() with set_mode(kStream): one launch");
  cusync::sm90::StreamRun const& r = g_stream_run;
  expect(r.stage[0] == 0 && r.stage[1] == 2 && r.gemm[0].act == 3 && r.gemm[0].n == 2 * kN && r.gemm[0].x == x &&
             r.gemm[0].out == h && r.gemm[0].ldo == kN && r.gemm[0].out_raw == h2 && r.gemm[0].ldo_raw == 2 * kN &&
             r.gemm[1].x == h && r.gemm[1].out == y && r.gemm[1].out_raw == nullptr && r.gemm[1].k == kN,
         "the SwiGLU fused: glu_out from gemm1's epilogue, gate | up into gemm1_out, gemm2 reads glu_out");
  return report();
}
