// The public API of a two-GEMM chain on a GPU: the C ABI (<name>_c.h) and the move-only C++ class compute
// the same chain. Built against a generated project's library (chain_under_test.h names it, as for
// epoch_wrap.cu, plus C_FN(x): the C function prefix). Prints one JSON line; exit 0 when every check holds.
//   1. C ABI: create, initialize (real buffers), run_sequential, run (the library's mode), check_sync_error;
//   2. C++: initialize a chain, move it into another (the source reports kNotInitialized), run_sequential;
//   3. outputs of 1 and 2 bitwise equal (same kernels, same order), every element written (poisoned first);
//   4. (sm90) autotune; 5. (a gated gemm1, epilogue swiglu) the chain's interleaved copy of the weights
//      follows a new weight pointer given to update(), and refresh_weights() after an in-place change.
#include <cstdint>
#include <cstdio>
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include "chain_under_test.h"
#include "fill.cuh"

namespace {

constexpr int kM = 1000;
#if defined(CHAIN_BF16)
constexpr uint16_t kExponent = 0x7F80;  // bf16 Inf/NaN: every exponent bit set (the poison is 0xFFFF)
#else
constexpr uint16_t kExponent = 0x7C00;  // fp16
#endif
#if !defined(GEMM1_WEIGHT_N)
#define GEMM1_WEIGHT_N GEMM1_N
#endif

bool ok_cuda(cudaError_t e, char const* what) {
  if (e != cudaSuccess) std::printf("{\"ok\": false, \"error\": \"%s: %s\"}\n", what, cudaGetErrorString(e));
  return e == cudaSuccess;
}

}  // namespace

int main() {
  size_t const in = size_t(kM) * INPUT_WIDTH, w1 = size_t(INPUT_WIDTH) * GEMM1_WEIGHT_N, o1 = size_t(kM) * GEMM1_N;
  size_t const w2 = size_t(GEMM1_N) * GEMM2_N, o2 = size_t(kM) * GEMM2_N;
  uint16_t *x, *b1, *b2, *y1[2], *y2[2];
  if (!ok_cuda(cudaMalloc(&x, in * 2), "malloc") || !ok_cuda(cudaMalloc(&b1, w1 * 2), "malloc") ||
      !ok_cuda(cudaMalloc(&b2, w2 * 2), "malloc"))
    return 1;
  for (int i = 0; i < 2; ++i) {
    if (!ok_cuda(cudaMalloc(&y1[i], o1 * 2), "malloc") || !ok_cuda(cudaMalloc(&y2[i], o2 * 2), "malloc")) return 1;
    cudaMemset(y1[i], 0xFF, o1 * 2);  // NaN: an element never written stays NaN
    cudaMemset(y2[i], 0xFF, o2 * 2);
  }
  fill<<<512, 256>>>(reinterpret_cast<CHAIN_NS::Element*>(x), int64_t(in), 1u, 2.0f);
  fill<<<512, 256>>>(reinterpret_cast<CHAIN_NS::Element*>(b1), int64_t(w1), 2u, 0.05f);
  fill<<<512, 256>>>(reinterpret_cast<CHAIN_NS::Element*>(b2), int64_t(w2), 3u, 0.05f);
  if (!ok_cuda(cudaDeviceSynchronize(), "fill")) return 1;

  // 1. The C ABI.
  C_FN(chain)* c = nullptr;
  C_FN(arguments) ca;
  std::memset(&ca, 0, sizeof(ca));
  ca.m = kM;
  ca.input = x;
  ca.gemm1_weight = b1;
  ca.gemm1_out = y1[0];
  ca.gemm2_weight = b2;
  ca.gemm2_out = y2[0];
  int const created = C_FN(create)(&c);
  int const initialized = C_FN(initialize)(c, &ca, kM, 0);
  int const sequential = C_FN(run_sequential)(c, 0);
  int const checked = C_FN(check_sync_error)(c, 0);
  std::vector<uint16_t> from_c(o2), from_cpp(o2);
  cudaMemcpy(from_c.data(), y2[0], o2 * 2, cudaMemcpyDeviceToHost);
  ca.gemm1_out = y1[1];
  ca.gemm2_out = y2[1];
  int const updated = C_FN(update)(c, &ca);
  int const ran = C_FN(run)(c, 0);  // the library's own mode for M (stream-K and cuBLASLt sum in another order)
  int const ran_checked = C_FN(check_sync_error)(c, 0);
  int const destroyed = C_FN(destroy)(c);
  char const* name = C_FN(status_string)(initialized);

  // 2. The C++ class, moved after initialize.
  cudaMemset(y2[1], 0xFF, o2 * 2);
  CHAIN_NS::Arguments args;
  args.m = kM;
  args.input = reinterpret_cast<CHAIN_NS::Element const*>(x);
  args.gemm1_weight = reinterpret_cast<CHAIN_NS::Element const*>(b1);
  args.gemm1_out = reinterpret_cast<CHAIN_NS::Element*>(y1[1]);
  args.gemm2_weight = reinterpret_cast<CHAIN_NS::Element const*>(b2);
  args.gemm2_out = reinterpret_cast<CHAIN_NS::Element*>(y2[1]);
  CHAIN_NS::CHAIN_CLASS first;
  bool const init_ok = first.initialize(args, kM) == cusync::Status::kSuccess;
  CHAIN_NS::CHAIN_CLASS second(std::move(first));
  bool const moved_from_empty = first.run_sequential(0) == cusync::Status::kNotInitialized;
  CHAIN_NS::CHAIN_CLASS third;
  third = std::move(second);
  bool const run_ok = third.run_sequential(0) == cusync::Status::kSuccess && third.check_sync_error() == cusync::Status::kSuccess;
  cudaMemcpy(from_cpp.data(), y2[1], o2 * 2, cudaMemcpyDeviceToHost);
  bool tuned = true;
  char tune_json[512] = "";
#if defined(CHAIN_SM90)
  // 4. autotune (sm90): every mode timed at two M on this GPU; run() then takes the winner (its reason
  // says so), still computes the chain (poisoned first, every element written, no sync error); an M
  // above max_m is refused and leaves the table as it was.
  int const tune_ms[2] = {kM, 200};
  int const too_big[1] = {kM + 1};
  bool const tune_ok = third.autotune(tune_ms, 2, 0, 3) == cusync::Status::kSuccess;
  bool const reason_ok = std::strstr(third.mode_reason(), "autotune") != nullptr;
  bool const refused = third.autotune(too_big, 1, 0) == cusync::Status::kInvalidArgument &&
                       std::strstr(third.mode_reason(), "autotune") != nullptr;  // a refused call changes nothing
  cudaMemset(y2[1], 0xFF, o2 * 2);
  bool const tuned_run_ok = third.run(0) == cusync::Status::kSuccess && third.check_sync_error() == cusync::Status::kSuccess;
  std::vector<uint16_t> from_tuned(o2);
  cudaMemcpy(from_tuned.data(), y2[1], o2 * 2, cudaMemcpyDeviceToHost);
  size_t bad = 0;
  for (uint16_t v : from_tuned) bad += (v & kExponent) == kExponent;
  tuned = tune_ok && reason_ok && refused && tuned_run_ok && bad == 0;
  std::snprintf(tune_json, sizeof(tune_json),
                ", \"autotune\": %s, \"autotune_reason\": \"%s\", \"autotune_mode\": %d, \"autotune_refused_big_m\": %s, "
                "\"autotune_run\": %s, \"autotune_inf_or_nan\": %zu", tune_ok ? "true" : "false", third.mode_reason(),
                int(third.mode()), refused ? "true" : "false", tuned_run_ok ? "true" : "false", bad);
#endif
  bool gated = true;
  char gated_json[256] = "";
#if defined(GEMM1_GATED)
  // 5. A second weight buffer: update() with it, then a fresh chain on it, agree bitwise (and differ from
  // the first weights' result); after copying the first weights into it in place, refresh_weights()
  // brings back the first result.
  uint16_t* b1b = nullptr;
  if (!ok_cuda(cudaMalloc(&b1b, w1 * 2), "malloc")) return 1;
  fill<<<512, 256>>>(reinterpret_cast<CHAIN_NS::Element*>(b1b), int64_t(w1), 9u, 0.05f);
  auto run_into = [&](CHAIN_NS::CHAIN_CLASS& chain, std::vector<uint16_t>& out) {
    cudaMemset(y2[1], 0xFF, o2 * 2);
    bool const ok = chain.run_sequential(0) == cusync::Status::kSuccess && cudaDeviceSynchronize() == cudaSuccess;
    out.resize(o2);
    cudaMemcpy(out.data(), y2[1], o2 * 2, cudaMemcpyDeviceToHost);
    return ok;
  };
  std::vector<uint16_t> first_weights, updated_weights, fresh, refreshed;
  bool ok5 = run_into(third, first_weights);
  args.gemm1_weight = reinterpret_cast<CHAIN_NS::Element const*>(b1b);
  ok5 = ok5 && third.update(args) == cusync::Status::kSuccess && run_into(third, updated_weights);
  CHAIN_NS::CHAIN_CLASS fourth;
  ok5 = ok5 && fourth.initialize(args, kM) == cusync::Status::kSuccess && run_into(fourth, fresh);
  ok5 = ok5 && cudaMemcpy(b1b, b1, w1 * 2, cudaMemcpyDeviceToDevice) == cudaSuccess;
  ok5 = ok5 && third.refresh_weights(0) == cusync::Status::kSuccess && run_into(third, refreshed);
  bool const follows_update = updated_weights == fresh && updated_weights != first_weights;
  bool const follows_refresh = refreshed == first_weights && first_weights == from_cpp;
  gated = ok5 && follows_update && follows_refresh;
  std::snprintf(gated_json, sizeof(gated_json), ", \"gated_update_follows\": %s, \"gated_refresh_follows\": %s",
                follows_update ? "true" : "false", follows_refresh ? "true" : "false");
  cudaFree(b1b);
#endif
  bool const no_error = ok_cuda(cudaDeviceSynchronize(), "after runs");

  size_t nan = 0;
  for (uint16_t v : from_c) nan += (v & kExponent) == kExponent;  // Inf/NaN (the poison is 0xFFFF)
  bool const equal = std::memcmp(from_c.data(), from_cpp.data(), o2 * 2) == 0;
  bool const poison_gone = std::memcmp(from_c.data(), std::vector<uint16_t>(o2, 0xFFFF).data(), 2) != 0;
  bool const ok = tuned && gated && created == 0 && initialized == 0 && sequential == 0 && checked == 0 && updated == 0 && ran == 0 &&
                  ran_checked == 0 && destroyed == 0 && init_ok && moved_from_empty && run_ok && no_error && equal &&
                  poison_gone && std::find(from_c.begin(), from_c.end(), uint16_t(0xFFFF)) == from_c.end();
  std::printf("{\"ok\": %s, \"c_abi\": [%d, %d, %d, %d, %d, %d, %d, %d], \"status_0\": \"%s\", \"cpp_init\": %s, "
              "\"moved_from_not_initialized\": %s, \"cpp_run\": %s, \"bitwise_c_vs_cpp\": %s, \"inf_or_nan_halves\": %zu%s%s}\n",
              ok ? "true" : "false", created, initialized, sequential, checked, updated, ran, ran_checked, destroyed, name,
              init_ok ? "true" : "false", moved_from_empty ? "true" : "false", run_ok ? "true" : "false",
              equal ? "true" : "false", nan, tune_json, gated_json);
  return ok ? 0 : 1;
}
