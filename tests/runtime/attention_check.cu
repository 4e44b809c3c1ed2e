// The attention chain's run-time shape check (Gpt3Attention::check, through initialize()) on the host:
// shapes whose grid passes CUDA's 2^31 - 1 blocks, or whose token count passes int, are refused with
// kInvalidArgument before any CUDA call, so this runs without a GPU. Built by tests/test_attention.py
// with generated/gpt3_attention/src/gpt3_attention.cu alone: the stage units (CUTLASS, minutes to build)
// are stubs here, never called.
#include <climits>
#include <cstdio>
#include <cstring>

#include "gpt3_attention.h"
#include "gpt3_attention_stages.h"

namespace gpt3_attention::detail {
cusync::Status prepare_qkv() { return cusync::Status::kCudaError; }
cusync::Status prepare_scores() { return cusync::Status::kCudaError; }
cusync::Status prepare_pv() { return cusync::Status::kCudaError; }
cusync::Status prepare_proj() { return cusync::Status::kCudaError; }
cusync::Status launch_qkv(GemmLaunch const&, cudaStream_t) { return cusync::Status::kCudaError; }
cusync::Status launch_scores(GemmLaunch const&, cudaStream_t) { return cusync::Status::kCudaError; }
cusync::Status launch_pv(GemmLaunch const&, cudaStream_t) { return cusync::Status::kCudaError; }
cusync::Status launch_proj(GemmLaunch const&, cudaStream_t) { return cusync::Status::kCudaError; }
cusync::Status launch_softmax(SoftmaxLaunch const&, cudaStream_t) { return cusync::Status::kCudaError; }
}  // namespace gpt3_attention::detail

namespace {

int failures = 0;

void expect_refused(char const* what, int batch, int new_tokens, int cache_tokens, char const* words) {
  gpt3_attention::Arguments args;
  static gpt3_attention::Element dummy[1];  // never dereferenced: check() runs before any CUDA call
  args.x = args.w_qkv = args.w_o = dummy;
  args.kv = args.y = dummy;
  args.batch = batch;
  args.new_tokens = new_tokens;
  args.cache_tokens = cache_tokens;
  args.kv_capacity = INT_MAX;
  gpt3_attention::Gpt3Attention chain;
  cusync::Status const status = chain.initialize(args);
  bool const ok = status == cusync::Status::kInvalidArgument && std::strstr(chain.last_error(), words) != nullptr;
  std::printf("%s %s: status %d, \"%s\"\n", ok ? "ok  " : "FAIL", what, int(status), chain.last_error());
  failures += ok ? 0 : 1;
}

}  // namespace

int main() {
  // 12 heads x ceil(2^21 / 128) x ceil(2^22 / 128) = 12 * 2^14 * 2^15 scores blocks
  expect_refused("scores grid above 2^31 - 1 blocks", 1, 1 << 21, 1 << 21, "2^31 - 1 blocks");
  expect_refused("cache + new tokens above INT_MAX", 1, 8, INT_MAX - 7, "below 2^31");
  expect_refused("cache + new tokens not a multiple of 8", 1, 8, 3, "multiple of 8");
  std::printf("%d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
