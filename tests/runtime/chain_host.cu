// Host-side checks of the chain runtime (cusync/chain.cuh, sm80/chain.cuh) on a hand-made table: what
// needs no device (argument checks, policy overrides, the emitted wait values in the policies, moves,
// configuration by M). Prints "N failures".
#include <cstdio>
#include <cstring>
#include <utility>

#include "cusync/sm80/chain.cuh"

namespace {

int failures = 0;
void check(bool ok, char const* what) {
  if (!ok) {
    std::printf("FAIL: %s\n", what);
    ++failures;
  }
}

cusync::Status no_launch(cusync::StageLaunch const&, cudaStream_t) { return cusync::Status::kSuccess; }
cusync::Status no_prepare() { return cusync::Status::kSuccess; }

// Two GEMMs: g1 [M, 1000] in 128x128 tiles (8 per row), g2 reads it by RowSync; two configurations.
constexpr cusync::StageInfo kTable[2][2] = {
    {{"g1", 1000, 128, 128, -1, cusync::PolicyKind::kNone, false, false, false, 0, cusync::TileOrder::kRowMajor, 1, -1,
      cusync::PolicyKind::kNone, 0, 0, 0},
     {"g2", 512, 64, 128, 0, cusync::PolicyKind::kRow, true, true, true, 0, cusync::TileOrder::kRowMajor, 1, -1,
      cusync::PolicyKind::kNone, 8, 0, 8}},
    {{"g1", 1000, 128, 256, -1, cusync::PolicyKind::kNone, false, false, false, 0, cusync::TileOrder::kRowMajor, 1, -1,
      cusync::PolicyKind::kNone, 0, 0, 0},
     {"g2", 512, 128, 128, 0, cusync::PolicyKind::kRow, true, false, true, 0, cusync::TileOrder::kRowMajor, 1, -1,
      cusync::PolicyKind::kNone, 4, 0, 4}},
};
static_assert(cusync::wait_values_consistent(kTable), "the hand-made table is consistent");
constexpr cusync::StageInfo kWrong[1][2] = {{kTable[0][0], {"g2", 512, 64, 128, 0, cusync::PolicyKind::kRow, true, true,
                                                            true, 0, cusync::TileOrder::kRowMajor, 1, -1,
                                                            cusync::PolicyKind::kNone, 7, 0, 8}}};
static_assert(!cusync::wait_values_consistent(kWrong), "one post short is refused");

constexpr int kMaxM[2] = {256, 2147483647};
constexpr cusync::LaunchFn kLaunch[2] = {&no_launch, &no_launch};
constexpr cusync::PrepareFn kPrepare[2] = {&no_prepare, &no_prepare};
constexpr cusync::ChainTables kTables{2, 2, 1 << 20, &kTable[0][0], kMaxM, kLaunch, kPrepare, false, false, false, true};

// Reaches the protected helpers.
struct Probe : cusync::sm80::Chain {
  using cusync::sm80::Chain::Chain;
  int config(int m) const { return config_for(m); }
  cusync::SyncPolicy policy(int m) {
    args_.m = m;
    config_ = config_for(m);
    return make_policy(1, 0);
  }
};

// Pointers the chain never dereferences on the host (argument checks only), with the emitted row widths
// and field names of the table above: g1 = input [M, 256] x w1 [256, 1000], g2 = g1_out x w2 [1000, 512].
cusync::ChainPointers shaped(int m) {
  // One fake buffer per Arguments field (input, g1_weight, g1_out, g2_weight, g2_out), never dereferenced, far
  // enough apart for 16 rows of the widest leading dimension used here: outputs may not overlap other operands.
  alignas(16) static uint16_t fake[5][16 * 4096 + 8];
  int const a_buf[2] = {0, 2}, b_buf[2] = {1, 3}, d_buf[2] = {2, 4};
  cusync::ChainPointers p;
  p.m = m;
  char const* a_field[2] = {"input", "g1_out"};
  char const* b_field[2] = {"g1_weight", "g2_weight"};
  char const* d_field[2] = {"g1_out", "g2_out"};
  int const a_cols[2] = {256, 1000}, d_cols[2] = {1000, 512};
  for (int s = 0; s < 2; ++s) {
    p.a[s] = fake[a_buf[s]];
    p.b[s] = fake[b_buf[s]];
    p.d[s] = fake[d_buf[s]];
    p.b_required[s] = true;
    p.a_cols[s] = a_cols[s];
    p.b_cols[s] = d_cols[s];
    p.d_cols[s] = d_cols[s];
    p.a_field[s] = a_field[s];
    p.b_field[s] = b_field[s];
    p.d_field[s] = d_field[s];
  }
  return p;
}

bool says(cusync::StagedChain const& chain, char const* text) { return std::strstr(chain.last_error(), text) != nullptr; }

}  // namespace

int main() {
  Probe chain(kTables);
  check(chain.run(0) == cusync::Status::kNotInitialized, "run before initialize");
  check(chain.run_sequential(0) == cusync::Status::kNotInitialized, "run_sequential before initialize");
  check(chain.check_sync_error(nullptr, 0) == cusync::Status::kNotInitialized, "check_sync_error before initialize");
  cusync::ChainPointers bad;  // null pointers: refused before any CUDA call
  bad.m = 16;
  check(chain.initialize(bad, 0, 0) == cusync::Status::kInvalidArgument, "null pointers are refused");
  // Shapes (issue 12 item 2): 0 is the generated value; any other N or K is refused, naming the field.
  cusync::ChainPointers wrong = shaped(16);
  wrong.n[1] = 256;
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "g2_n = 256") &&
            says(chain, "N = 512") && says(chain, "stages[1].n"), "a wrong N is refused, naming the field");
  wrong = shaped(16);
  wrong.k[0] = 255;
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "g1_k = 255") &&
            says(chain, "stages[0].k"), "a wrong K is refused, naming the field");
  wrong = shaped(16);
  wrong.b[1] = nullptr;
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "g2_weight is null"),
        "a null pointer is named");
  check(chain.initialize(shaped(1 << 21), 0, 0) == cusync::Status::kInvalidArgument && says(chain, "m = 2097152"),
        "M above MAX_M is named");
  // Pointers 16-byte aligned.
  wrong = shaped(16);
  wrong.d[0] = reinterpret_cast<char*>(wrong.d[0]) + 2;
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "g1_out = ") &&
            says(chain, "16-byte aligned"), "a misaligned matrix is refused, naming the field");
  // A bias the spec asks for (item 5) must be given.
  wrong = shaped(16);
  wrong.bias_field[1] = "g2_bias";
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "g2_bias is null") &&
            says(chain, "stages[1] a bias"), "a missing bias is refused, naming the field");
  // Leading dimensions (item 3): 0 is dense; else at least the row width and a multiple of 8 elements.
  wrong = shaped(16);
  wrong.lda[0] = 128;
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "input_ld = 128") &&
            says(chain, "at least 256"), "a leading dimension below the row width is refused");
  wrong = shaped(16);
  wrong.ldd[1] = 516;
  check(chain.initialize(wrong, 0, 0) == cusync::Status::kInvalidArgument && says(chain, "g2_out_ld = 516") &&
            says(chain, "pad it to 520"), "a leading dimension that is not a multiple of 8 is refused");
  // Caller-provided memory (item 4): pieces 256-byte aligned, counted in initialize()'s order; a null or
  // misaligned workspace is refused before any CUDA call.
  cusync::Workspace count;
  count.take(10);
  count.take(1);
  check(count.used == 257, "workspace pieces start at multiples of 256 bytes");
  alignas(256) static char memory[4096];
  cusync::Workspace const null_ws{nullptr, 4096, 0}, misaligned{memory + 16, 4000, 0};
  check(chain.initialize(shaped(16), 0, 0, &null_ws) == cusync::Status::kInvalidArgument && says(chain, "workspace is null"),
        "a null workspace is refused");
  check(chain.initialize(shaped(16), 0, 0, &misaligned) == cusync::Status::kInvalidArgument && says(chain, "256-byte aligned"),
        "a misaligned workspace is refused");
  check(chain.workspace_size(0) == 0 && chain.workspace_size((1 << 20) + 1) == 0, "workspace_size of an M out of range is 0");
  cusync::ChainPointers right = shaped(16);
  right.lda[0] = 264, right.ldb[0] = 1000, right.ldd[0] = 1024, right.lda[1] = 1024, right.ldd[1] = 4096;
  right.n[0] = 1000, right.k[0] = 256, right.n[1] = 512, right.k[1] = 1000;
  {
    Probe fresh(kTables);  // past the checks: without a device, the first CUDA call fails instead
    check(fresh.initialize(right, 0, 0) != cusync::Status::kInvalidArgument && fresh.last_error()[0] == '\0',
          "the generated N and K, and padded leading dimensions, pass the checks");
  }
  check(chain.config(1) == 0 && chain.config(256) == 0 && chain.config(257) == 1, "configuration by M");
  cusync::SyncPolicy row = chain.policy(100);
  check(row.kind == cusync::PolicyKind::kRow && row.posts == 8 && row.tile_n == 128, "the emitted wait value (config 0)");
  row = chain.policy(1000);
  check(row.posts == 4 && row.tile_n == 256, "the emitted wait value (config 1)");
  check(chain.set_policy(cusync::PolicyKind::kTile) == cusync::Status::kInvalidArgument, "TileSync where it does not line up");
  check(chain.set_policy(cusync::PolicyKind::kRow) == cusync::Status::kSuccess, "RowSync override");
  check(chain.policy(100).posts == 8, "the override's emitted wait value");
  check(std::strcmp(cusync::StagedChain::stage_name(kTables, 1), "g2") == 0 &&
        std::strcmp(cusync::StagedChain::stage_name(kTables, 2), "(no stage)") == 0, "stage names");
  Probe moved(std::move(chain));
  check(!chain.initialized() && moved.config(300) == 1, "a moved-from chain is as if just constructed");
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
