// Misuse of a generated sm90 library (the two_gemm_sm90 golden) that must come back as kInvalidArgument with
// last_error() naming the fields, before anything is launched; and the right uses next to each, accepted.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "two_gemm_sm90.h"

#include "expect.h"

extern int g_device, g_capturing, g_launches;
using namespace two_gemm_sm90;
using cusync::Status;


int main() {
  constexpr int kM = 256, kK = 4096, kN = 4096;
  auto buf = [](size_t elems) { return static_cast<Element*>(aligned_alloc(256, elems * 2)); };
  Element *x = buf(2 * kM * kK), *w1 = buf(size_t(kK) * kN), *y1 = buf(kM * kN), *w2 = buf(size_t(kN) * kN),
          *y2 = buf(kM * kN);
  auto good = [&] {
    Arguments a;
    a.m = kM, a.input = x, a.gemm1_weight = w1, a.gemm1_out = y1, a.gemm2_weight = w2, a.gemm2_out = y2;
    return a;
  };
  auto refused = [&](Arguments a, char const* what, char const* names) {
    TwoGemmSm90 c;
    g_launches = 0;
    Status const s = c.initialize(a, kM);
    expect(s == Status::kInvalidArgument && std::strstr(c.last_error(), names) != nullptr && g_launches == 0, what,
           c.last_error());
  };
  {
    TwoGemmSm90 c;
    g_launches = 0;
    bool const ok = c.initialize(good(), kM) == Status::kSuccess && c.run(nullptr) == Status::kSuccess;
    expect(ok && g_launches == 2, "separate buffers: initialize() and run() launch both GEMMs");
  }
  Arguments a = good();
  a.gemm1_out = x;
  refused(a, "gemm1_out == input", "overlap");
  a = good();
  a.gemm2_out = y1;
  refused(a, "gemm2_out == gemm1_out", "overlap");
  a = good();
  a.gemm1_out = x + 8 * kK;
  refused(a, "gemm1_out 8 rows into input", "overlap");
  {
    TwoGemmSm90 c;
    a = good();
    a.gemm1_out = x + size_t(kM) * kK;  // right after input's M rows: touching, not overlapping
    expect(c.initialize(a, kM) == Status::kSuccess, "gemm1_out right after input's rows", c.last_error());
  }
  a = good();
  a.gemm2_out = w1 + 64 * kN;
  refused(a, "gemm2_out inside gemm1_weight", "gemm1_weight");
  {
    TwoGemmSm90 c;
    size_t const bytes = TwoGemmSm90::workspace_size(kM);
    char* ws = static_cast<char*>(aligned_alloc(256, (bytes + 255) / 256 * 256 + size_t(kM) * kN * 2));  // + gemm1_out
    a = good();
    a.gemm1_out = reinterpret_cast<Element*>(ws + 4096);  // the chain's own state lies there
    Status const s = c.initialize(a, ws, bytes, kM);
    expect(s == Status::kInvalidArgument && std::strstr(c.last_error(), "workspace") != nullptr,
           "gemm1_out inside the caller's workspace", c.last_error());
    a.gemm1_out = reinterpret_cast<Element*>(ws + (bytes + 255) / 256 * 256);  // right after what the chain uses
    expect(bytes > 0 && c.initialize(a, ws, bytes, kM) == Status::kSuccess && c.run(nullptr) == Status::kSuccess,
           "gemm1_out after the workspace's bytes", c.last_error());
  }
  {
    TwoGemmSm90 c;
    expect(c.initialize(good(), kM) == Status::kSuccess, "initialize for the overrides");
    expect(c.set_mode(static_cast<cusync::Mode>(42)) == Status::kInvalidArgument && c.mode() != cusync::Mode(42),
           "set_mode(42) refused", c.last_error());
    expect(c.set_tile_order(7) == Status::kInvalidArgument && c.set_tile_order(-2) == Status::kInvalidArgument,
           "set_tile_order(7) and (-2) refused", c.last_error());
    g_launches = 0;
    expect(c.run_mode(nullptr, static_cast<cusync::Mode>(-5)) == Status::kInvalidArgument && g_launches == 0,
           "run_mode(-5) launches nothing", c.last_error());
    expect(c.set_mode(cusync::Mode::kStock) == Status::kSuccess && c.set_tile_order(-1) == Status::kSuccess &&
               c.run(nullptr) == Status::kSuccess,
           "set_mode(kStock), the spec's order, run()");
  }
  {
    TwoGemmSm90 c;
    a = good();
    a.m = 64;
    expect(c.initialize(a, kM) == Status::kSuccess, "initialize at M = 64 for the trace");
    int64_t const small = c.trace_words();
    uint64_t* trace = static_cast<uint64_t*>(aligned_alloc(256, size_t(small) * 8 * 8));
    expect(c.set_trace(trace) == Status::kSuccess && c.run(nullptr) == Status::kSuccess, "trace sized for M = 64");
    a.m = kM;
    g_launches = 0;
    bool const refused_run = c.update(a) == Status::kSuccess && c.run_mode(nullptr, cusync::Mode::kOverlap) ==
                             Status::kInvalidArgument && g_launches == 0 && std::strstr(c.last_error(), "trace") != nullptr;
    expect(refused_run, "a trace buffer for M = 64 refused at M = 256", c.last_error());
    expect(c.trace_words() <= 8 * small && c.set_trace(trace, 8 * small) == Status::kSuccess &&
               c.run_mode(nullptr, cusync::Mode::kOverlap) == Status::kSuccess,
           "the same run with the buffer's real size", c.last_error());
  }
  a = good();
  a.input_ld = int64_t(1) << 40;
  refused(a, "input_ld of 2^40 elements", "input_ld");
  {
    TwoGemmSm90 c;
    a = good();
    a.input_ld = 2 * kK;
    a.m = kM / 2;
    expect(c.initialize(a, kM) == Status::kSuccess, "input_ld of two rows", c.last_error());
  }
  {
    TwoGemmSm90 c;
    expect(c.initialize(good(), kM) == Status::kSuccess, "initialize on device 0");
    g_device = 1;
    g_launches = 0;
    Status const s = c.run(nullptr);
    g_device = 0;
    expect(s == Status::kInvalidArgument && g_launches == 0 && std::strstr(c.last_error(), "device") != nullptr,
           "run() on another device", c.last_error());
    expect(c.run(nullptr) == Status::kSuccess, "run() back on device 0");
  }
  {
    TwoGemmSm90 c;
    expect(c.initialize(good(), kM) == Status::kSuccess, "initialize for autotune");
    int const ms[] = {1, 64};
    g_capturing = 1;
    g_launches = 0;
    Status const s = c.autotune(ms, 2, nullptr);
    g_capturing = 0;
    expect(s == Status::kInvalidArgument && g_launches == 0, "autotune() on a capturing stream launches nothing",
           c.last_error());
  }
  {
    TwoGemmSm90 c;
    g_capturing = 1;
    Status const s = c.initialize(good(), kM);
    g_capturing = 0;
    expect(s == Status::kInvalidArgument, "initialize() on a capturing stream", c.last_error());
    expect(c.initialize(good(), kM) == Status::kSuccess && c.run(nullptr) == Status::kSuccess,
           "initialize() again after it failed, then run()", c.last_error());
  }
  return report();
}
