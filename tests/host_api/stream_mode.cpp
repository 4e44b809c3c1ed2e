// Run() mode kStream in a generated library (tests/data/decode_stream_sm90.yaml: a gated gemm1, gemm2 with a bias)
// on a simulated device: the weights it packs at initialize() and after update() changes them, the run it
// launches (shapes, epilogues, pointers; the slab kernel up to M = 4 over the caller's weights, the bulk kernel
// above), run()'s rule (the mode at M <= 64, another above), and the mode refused above 64 before anything launches.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "decode_stream_sm90.h"

#include "expect.h"

extern int g_launches, g_packs, g_pack_k[2], g_pack_n[2];
extern int64_t g_pack_ld[2];
extern void const* g_pack_src[2];
extern cusync::sm90::StreamRun g_stream_run;
extern cusync::sm90::SlabRun g_slab_run;
using namespace decode_stream_sm90;
using cusync::Mode;
using cusync::Status;


int main() {
  constexpr int kK = 1088, kN1 = 1408, kN2 = 1000, kMaxM = 128;
  auto buf = [](size_t elems) { return static_cast<Element*>(aligned_alloc(256, (elems * 2 + 255) / 256 * 256)); };
  Element *x = buf(size_t(kMaxM) * kK), *w1 = buf(size_t(kK) * 2 * kN1), *h = buf(size_t(kMaxM) * kN1),
          *w2 = buf(size_t(kN1) * kN2), *w2b = buf(size_t(kN1) * kN2), *bias = buf(kN2), *y = buf(size_t(kMaxM) * kN2);
  Arguments a;
  a.m = 1, a.input = x, a.gate_up_weight = w1, a.gate_up_out = h, a.down_weight = w2, a.down_bias = bias, a.down_out = y;
  DecodeStreamSm90 c;
  expect(c.initialize(a, kMaxM) == Status::kSuccess, "initialize", c.last_error());
  expect(g_packs == 2 && g_pack_k[0] == kK && g_pack_n[0] == 2 * kN1 && g_pack_ld[0] == 2 * kN1 && g_pack_src[0] != w1 &&
             g_pack_k[1] == kN1 && g_pack_n[1] == kN2 && g_pack_ld[1] == kN2 && g_pack_src[1] == w2,
         "both GEMMs packed: gate_up from the interleaved copy (2n columns), down from the caller's weights");
  expect(c.stream_available() && c.mode() != Mode::kStream && std::strstr(c.mode_reason(), "default rule") != nullptr,
         "without a measured table run() keeps the tile-count rule at M = 1", c.mode_reason());
  expect(c.set_mode(Mode::kStream) == Status::kSuccess && c.mode() == Mode::kStream, "set_mode(kStream)");
  g_launches = 0;
  expect(c.run(nullptr) == Status::kSuccess && g_launches == 1 && g_slab_run.args.m == 1 && g_stream_run.m == 0,
         "run() at M = 1: one launch, the slab kernel");
  {
    cusync::sm90::SlabArgs const& s = g_slab_run.args;
    bool const shapes = g_slab_run.grid == 132 && s.k1 == kK && s.hidden == kN1 && s.n2 == kN2 && s.act1 == 3 &&
                        s.act2 == 0 && s.gate == cusync::sm90::kInterleaved && !s.w1_col && s.skip_post == -1;
    bool const pointers = s.x == x && s.w1 != w1 && s.ldw1 == 2 * kN1 && s.b1 == nullptr && s.h == h && s.w2 == w2 &&
                          s.ldw2 == kN2 && s.b2 == bias && s.y == y && s.ldy == kN2 && s.ws != nullptr &&
                          s.posts != nullptr && g_slab_run.state != nullptr && g_slab_run.error != nullptr;
    expect(shapes && pointers, "the slab run: shapes, epilogues, the interleaved gate_up copy and the caller's down weights");
  }
  a.m = 5;
  g_launches = 0;
  expect(c.update(a) == Status::kSuccess && c.run(nullptr) == Status::kSuccess && g_launches == 1,
         "run() at M = 5: one launch, the bulk kernel");
  cusync::sm90::StreamRun const& r = g_stream_run;
  bool const shapes = r.m == 5 && r.grid == 132 && r.gemm[0].n == 2 * kN1 && r.gemm[0].k == kK && r.gemm[0].act == 3 &&
                      r.gemm[1].n == kN2 && r.gemm[1].k == kN1 && r.gemm[1].act == 0 && r.skip_post_tile == -1;
  bool const pointers = r.gemm[0].x == x && r.gemm[0].out == h && r.gemm[0].bias == nullptr && r.gemm[1].x == h &&
                        r.gemm[1].out == y && r.gemm[1].bias == bias && r.gemm[0].ldx == kK && r.gemm[1].ldo == kN2 &&
                        r.sems != nullptr && r.state != nullptr && r.error != nullptr;
  expect(shapes && pointers, "the run's shapes, epilogues (swiglu, identity) and pointers");
  a.m = 64;
  expect(c.update(a) == Status::kSuccess && c.mode() == Mode::kStream, "M = 64: still mode stream");
  a.m = 65;
  expect(c.update(a) == Status::kSuccess && !c.stream_available() && c.set_mode(Mode::kAuto) == Status::kSuccess &&
             c.mode() != Mode::kStream,
         "M = 65: not available, run() takes another mode", c.mode_reason());
  g_launches = 0;
  expect(c.run_mode(nullptr, Mode::kStream) == Status::kInvalidArgument && g_launches == 0 &&
             std::strstr(c.last_error(), "mode stream") != nullptr,
         "run_mode(kStream) at M = 65 is refused before anything launches", c.last_error());
  a.m = 3, a.down_weight = w2b;
  int const packs = g_packs;
  expect(c.update(a) == Status::kSuccess && c.set_mode(Mode::kStream) == Status::kSuccess && c.run(nullptr) == Status::kSuccess && g_packs > packs &&
             g_pack_src[1] == w2b && g_slab_run.args.m == 3 && g_slab_run.args.w2 == w2b,
         "new down weights: packed again on the next run, and the slab kernel reads them as they are");
  {
    DecodeStreamSm90 w;
    size_t const bytes = DecodeStreamSm90::workspace_size(kMaxM);
    char* ws = static_cast<char*>(aligned_alloc(256, bytes));
    a.m = 8;
    bool const ok = w.initialize(a, ws, bytes, kMaxM) == Status::kSuccess && w.set_mode(Mode::kStream) == Status::kSuccess &&
                    w.run(nullptr) == Status::kSuccess;
    char const* sems = static_cast<char const*>(static_cast<void const*>(g_stream_run.sems));
    char const* end = static_cast<char const*>(g_stream_run.gemm[1].packed) + cusync::sm90::stream_packed_bytes(kN1, kN2);
    expect(ok && sems >= ws && end <= ws + bytes && g_stream_run.m == 8,
           "workspace_size() counts mode stream's memory, and a caller's workspace holds all of it", w.last_error());
  }
  return report();
}
