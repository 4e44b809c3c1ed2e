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

}  // namespace

int main() {
  Probe chain(kTables);
  check(chain.run(0) == cusync::Status::kNotInitialized, "run before initialize");
  check(chain.run_sequential(0) == cusync::Status::kNotInitialized, "run_sequential before initialize");
  check(chain.check_sync_error(nullptr, 0) == cusync::Status::kNotInitialized, "check_sync_error before initialize");
  cusync::ChainPointers bad;  // null pointers: refused before any CUDA call
  bad.m = 16;
  check(chain.initialize(bad, 0, 0) == cusync::Status::kInvalidArgument, "null pointers are refused");
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
