// The embedding API of a generated GEMM chain on a GPU (issue 12, item 2 onwards). Built against a
// generated project's library; chain_under_test.h (tests/conftest.py: embed_header) names the chain and
// lists its buffers (CHAIN_BUFFERS) and GEMMs (CHAIN_GEMMS). Prints one JSON line; exit 0 when every check holds.
//   1. shapes: a wrong N or K is refused (C++ and the C ABI's _layout functions), last_error() names it;
//   2. leading dimensions: every buffer padded by kPad elements per row; in every run mode the padded run
//      is bitwise equal to the dense run of the same mode (cuBLASLt: reported, it may pick another
//      algorithm for other strides), and no padding element is written; a bad ld is refused;
//   3. caller-provided memory: workspace_size() (C++ and C agree), initialize() in the caller's workspace:
//      bitwise equal to the self-allocating chain in every mode; a workspace too small or misaligned is
//      refused; the C ABI's _initialize_workspace runs, and destroying it leaves the memory to the caller;
//   4. a bias (a spec with `bias: true`, CHAIN_BIASES): every check above runs with the biases, and where
//      the last stage is an identity GEMM with a bias (CHAIN_LAST_BIAS), its output with the bias minus its
//      output with a zero bias is the bias in every row (within fp16/bf16 rounding).
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

#include <cuda_runtime.h>

#include "chain_under_test.h"
#include "fill.cuh"

namespace {

using Element = CHAIN_NS::Element;
constexpr int kM = 1000;
constexpr int64_t kPad = 24;  // elements of padding per row: a multiple of 8

struct Buffer {
  char const* name;
  int64_t rows, cols;
  bool input;
  Element* dense = nullptr;   // [rows, cols]
  Element* padded = nullptr;  // [rows, cols + kPad]
  Element* other = nullptr;   // [rows, cols]: the caller-workspace chain's outputs
};

// One [n] vector per GEMM with a bias (CHAIN_BIASES), and a zero one as long as the longest.
struct Biases {
  std::vector<Element*> vectors;
  Element* zeros = nullptr;
};
Biases biases;

std::vector<Buffer> buffers() {
  std::vector<Buffer> b;
#define CUSYNC_ADD(field, rows, cols, is_input) b.push_back(Buffer{#field, (rows) == 0 ? kM : (rows), (cols), (is_input) != 0});
  CHAIN_BUFFERS(CUSYNC_ADD)
#undef CUSYNC_ADD
  return b;
}

// The chain's Arguments over `which` of each buffer (0 dense, 1 padded, 2 other).
CHAIN_NS::Arguments arguments(std::vector<Buffer> const& b, int which) {
  CHAIN_NS::Arguments args;
  args.m = kM;
  size_t i = 0;
#define CUSYNC_SET(field, rows, cols, is_input)                                                              \
  {                                                                                                      \
    Element* p = which == 1 ? b[i].padded : which == 2 && !b[i].input ? b[i].other : b[i].dense;         \
    args.field = p;                                                                                      \
    args.field##_ld = which == 1 ? (cols) + kPad : 0;                                                    \
    ++i;                                                                                                 \
  }
  CHAIN_BUFFERS(CUSYNC_SET)
#undef CUSYNC_SET
  [[maybe_unused]] size_t j = 0;
#define CUSYNC_BIAS(stage, n) args.stage##_bias = biases.vectors[j++];
  CHAIN_BIASES(CUSYNC_BIAS)
#undef CUSYNC_BIAS
  return args;
}

void poison(std::vector<Buffer> const& b) {
  for (Buffer const& x : b) {
    if (x.input) continue;
    cudaMemset(x.dense, 0xFF, size_t(x.rows * x.cols) * sizeof(Element));
    cudaMemset(x.padded, 0xFF, size_t(x.rows * (x.cols + kPad)) * sizeof(Element));
    cudaMemset(x.other, 0xFF, size_t(x.rows * x.cols) * sizeof(Element));
  }
}

struct Mode {
  char const* name;
  int code;  // sm90: a cusync::Mode; -2: run_sequential; -3: run()
};

cusync::Status run(CHAIN_NS::CHAIN_CLASS& chain, Mode const& mode) {
  if (mode.code == -2) return chain.run_sequential(0);
  if (mode.code == -3) return chain.run(0);
#if defined(CHAIN_SM90)
  return chain.run_mode(0, cusync::Mode(mode.code));
#else
  return cusync::Status::kInvalidArgument;
#endif
}

struct Compared {
  bool bitwise = true;
  bool padding_kept = true;
  size_t differ = 0;
  double max_abs = 0;
};

// Every output of `a` (dense) against the same of `b` (padded when which == 1, else other).
Compared compare(std::vector<Buffer> const& bufs, int which) {
  Compared c;
  for (Buffer const& x : bufs) {
    if (x.input) continue;
    size_t const n = size_t(x.rows * x.cols);
    std::vector<uint16_t> dense(n), got(n);
    cudaMemcpy(dense.data(), x.dense, n * 2, cudaMemcpyDeviceToHost);
    if (which == 1) {
      std::vector<uint16_t> padded(size_t(x.rows * (x.cols + kPad)));
      cudaMemcpy(padded.data(), x.padded, padded.size() * 2, cudaMemcpyDeviceToHost);
      for (int64_t r = 0; r < x.rows; ++r) {
        std::memcpy(&got[size_t(r * x.cols)], &padded[size_t(r * (x.cols + kPad))], size_t(x.cols) * 2);
        for (int64_t j = x.cols; j < x.cols + kPad; ++j) c.padding_kept &= padded[size_t(r * (x.cols + kPad) + j)] == 0xFFFF;
      }
    } else {
      cudaMemcpy(got.data(), x.other, n * 2, cudaMemcpyDeviceToHost);
    }
    for (size_t i = 0; i < n; ++i) {
      if (dense[i] == got[i] && dense[i] != 0xFFFF) continue;
      c.bitwise = false;
      ++c.differ;
      Element ea, eb;
      std::memcpy(&ea, &dense[i], 2);
      std::memcpy(&eb, &got[i], 2);
      double const d = std::abs(double(float(ea)) - double(float(eb)));
      c.max_abs = d > c.max_abs || d != d ? d : c.max_abs;
    }
  }
  return c;
}

}  // namespace

int main() {
  std::vector<Buffer> bufs = buffers();
  uint32_t seed = 1;
  for (Buffer& x : bufs) {
    size_t const dense = size_t(x.rows * x.cols) * sizeof(Element), padded = size_t(x.rows * (x.cols + kPad)) * sizeof(Element);
    if (cudaMalloc(&x.dense, dense) != cudaSuccess || cudaMalloc(&x.padded, padded) != cudaSuccess ||
        cudaMalloc(&x.other, dense) != cudaSuccess) {
      std::printf("{\"ok\": false, \"error\": \"cudaMalloc\"}\n");
      return 1;
    }
    cudaMemset(x.padded, 0xFF, padded);
    if (x.input) {
      fill<<<512, 256>>>(x.dense, x.rows * x.cols, seed++, x.name == std::string("input") ? 2.0f : 0.05f);
      cudaMemcpy2D(x.padded, size_t(x.cols + kPad) * sizeof(Element), x.dense, size_t(x.cols) * sizeof(Element),
                   size_t(x.cols) * sizeof(Element), size_t(x.rows), cudaMemcpyDeviceToDevice);
    }
  }
#define CUSYNC_BIAS(stage, n)                                                  \
  {                                                                            \
    Element* v = nullptr;                                                      \
    cudaMalloc(&v, size_t(n) * sizeof(Element));                               \
    fill<<<64, 256>>>(v, (n), seed++, 0.5f);                                   \
    biases.vectors.push_back(v);                                               \
    if (biases.zeros == nullptr) cudaMalloc(&biases.zeros, size_t(1) << 20);   \
  }
  CHAIN_BIASES(CUSYNC_BIAS)
#undef CUSYNC_BIAS
  if (biases.zeros != nullptr) cudaMemset(biases.zeros, 0, size_t(1) << 20);
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;

  // 1. Shapes.
  CHAIN_NS::CHAIN_CLASS dense, padded;
  bool const dense_ok = dense.initialize(arguments(bufs, 0), kM) == cusync::Status::kSuccess;
  CHAIN_NS::Arguments wrong = arguments(bufs, 0);
  bool shapes_refused = true;
#define CUSYNC_WRONG(stage, n, k)                                                                            \
  wrong = arguments(bufs, 0);                                                                                \
  wrong.stage##_n = (n) + 8;                                                                                 \
  shapes_refused &= dense.update(wrong) == cusync::Status::kInvalidArgument &&                               \
                    std::strstr(dense.last_error(), #stage "_n =") != nullptr;                               \
  wrong = arguments(bufs, 0);                                                                                \
  wrong.stage##_n = (n);                                                                                     \
  wrong.stage##_k = (k) * 2;                                                                                 \
  shapes_refused &= dense.update(wrong) == cusync::Status::kInvalidArgument &&                               \
                    std::strstr(dense.last_error(), #stage "_k =") != nullptr;
  CHAIN_GEMMS(CUSYNC_WRONG)
#undef CUSYNC_WRONG
  bool const right_accepted = dense.update(arguments(bufs, 0)) == cusync::Status::kSuccess && dense.last_error()[0] == '\0';
  // The C ABI: a layout with a wrong N of the first GEMM, then one with a leading dimension too small.
  C_FN(chain)* c = nullptr;
  C_FN(arguments) ca;
  std::memset(&ca, 0, sizeof(ca));
  CHAIN_NS::Arguments const d0 = arguments(bufs, 0);
  ca.m = d0.m;
#define CUSYNC_C(field, rows, cols, is_input) ca.field = d0.field;
  CHAIN_BUFFERS(CUSYNC_C)
#undef CUSYNC_C
#define CUSYNC_C_BIAS(stage, n) ca.stage##_bias = d0.stage##_bias;
  CHAIN_BIASES(CUSYNC_C_BIAS)
#undef CUSYNC_C_BIAS
  C_FN(layout) layout;
  std::memset(&layout, 0, sizeof(layout));
  layout.FIRST_GEMM_N_FIELD = FIRST_GEMM_N + 8;
  C_FN(create)(&c);
  bool const c_wrong_n = C_FN(initialize_layout)(c, &ca, &layout, kM, 0) == 1 && std::strstr(C_FN(last_error)(c), "_n =");
  std::memset(&layout, 0, sizeof(layout));
  layout.input_ld = 8;
  bool const c_bad_ld = C_FN(initialize_layout)(c, &ca, &layout, kM, 0) == 1 && std::strstr(C_FN(last_error)(c), "input_ld");
  std::memset(&layout, 0, sizeof(layout));
  bool const c_default = C_FN(initialize_layout)(c, &ca, &layout, kM, 0) == 0;
  C_FN(destroy)(c);
  CHAIN_NS::Arguments bad = arguments(bufs, 1);
  bad.input_ld += 4;  // not a multiple of 8
  bool const bad_ld_refused = padded.initialize(bad, kM) == cusync::Status::kInvalidArgument &&
                              std::strstr(padded.last_error(), "input_ld") != nullptr;

  // 3. Caller-provided memory: sized by workspace_size(), refused when too small or misaligned.
  size_t const bytes = CHAIN_NS::CHAIN_CLASS::workspace_size(kM);
  size_t c_bytes = 0;
  bool const c_size_same = C_FN(workspace_size)(kM, &c_bytes) == 0 && c_bytes == bytes;
  char* workspace = nullptr;
  char* c_workspace = nullptr;  // the C chain's own: two live chains never share memory
  bool const workspace_alloc = bytes > 0 && cudaMalloc(&workspace, bytes) == cudaSuccess &&
                               cudaMalloc(&c_workspace, bytes) == cudaSuccess;
  CHAIN_NS::CHAIN_CLASS other;
  bool const too_small_refused = other.initialize(arguments(bufs, 2), workspace, bytes - 1, kM) == cusync::Status::kInvalidArgument &&
                                 std::strstr(other.last_error(), "workspace of") != nullptr;
  bool const misaligned_refused = other.initialize(arguments(bufs, 2), workspace + 16, bytes, kM) == cusync::Status::kInvalidArgument &&
                                  std::strstr(other.last_error(), "aligned") != nullptr;
  bool const other_ok = other.initialize(arguments(bufs, 2), workspace, bytes, kM) == cusync::Status::kSuccess;
  C_FN(chain)* cw = nullptr;
  C_FN(create)(&cw);
  bool const c_workspace_ok = C_FN(initialize_workspace)(cw, &ca, nullptr, kM, c_workspace, bytes, 0) == 0 &&
                              C_FN(run_sequential)(cw, 0) == 0;
  C_FN(destroy)(cw);  // frees nothing of c_workspace
  bool const c_workspace_kept = cudaFree(c_workspace) == cudaSuccess;  // still ours to free
  bool const workspace_checks = c_size_same && workspace_alloc && too_small_refused && misaligned_refused && other_ok &&
                               c_workspace_ok && c_workspace_kept;

  // 2. Leading dimensions, in every mode this build has (and 3: the caller-workspace chain in each).
  bool const padded_ok = padded.initialize(arguments(bufs, 1), kM) == cusync::Status::kSuccess;
  std::vector<Mode> modes = {{"run_sequential", -2}, {"run", -3}};
#if defined(CHAIN_SM90)
  modes = {{"run_sequential", -2}, {"overlap", 0}, {"stock", 1}, {"streamk", 2}, {"cluster", 3}, {"pingpong", 4}};
  if (dense.cublaslt_available()) modes.push_back({"cublaslt", 5});
#endif
  bool ok = dense_ok && padded_ok && shapes_refused && right_accepted && c_wrong_n && c_bad_ld && c_default && bad_ld_refused &&
            workspace_checks;
  std::string json = "{\"modes\": {";
  for (Mode const& mode : modes) {
    poison(bufs);
    bool const ran = run(dense, mode) == cusync::Status::kSuccess && run(padded, mode) == cusync::Status::kSuccess &&
                     run(other, mode) == cusync::Status::kSuccess && cudaDeviceSynchronize() == cudaSuccess &&
                     dense.check_sync_error() == cusync::Status::kSuccess && padded.check_sync_error() == cusync::Status::kSuccess &&
                     other.check_sync_error() == cusync::Status::kSuccess;
    Compared const cmp = compare(bufs, 1);
    Compared const in_workspace = compare(bufs, 2);  // same kernels, same strides: bitwise in every mode
    ok &= in_workspace.bitwise;
    bool const cublaslt = std::strcmp(mode.name, "cublaslt") == 0;  // another algorithm for other strides may sum otherwise
    ok &= ran && cmp.padding_kept && (cmp.bitwise || (cublaslt && cmp.max_abs < 0.05));
    char row[320];
    std::snprintf(row, sizeof(row), "%s\"%s\": {\"ran\": %s, \"bitwise\": %s, \"padding_kept\": %s, \"differ\": %zu, \"max_abs\": %g, "
                  "\"workspace_bitwise\": %s}", &mode == &modes.front() ? "" : ", ", mode.name, ran ? "true" : "false",
                  cmp.bitwise ? "true" : "false", cmp.padding_kept ? "true" : "false", cmp.differ, cmp.max_abs,
                  in_workspace.bitwise ? "true" : "false");
    json += row;
  }
  json += "}";
  bool bias_applied = true;
  double bias_err = 0;
#if defined(CHAIN_LAST_BIAS)
  {
    // 4. The last GEMM's bias: D(bias) - D(0) = bias, row by row (one rounding of D each).
    Buffer const& out = bufs.back();  // the last stage's output is the last buffer
    CHAIN_NS::Arguments zero = arguments(bufs, 0);
    zero.CHAIN_LAST_BIAS_FIELD = biases.zeros;
    size_t const n = size_t(out.rows * out.cols);
    std::vector<uint16_t> with(n), without(n), vec(size_t(CHAIN_LAST_N));
    bias_applied = dense.update(arguments(bufs, 0)) == cusync::Status::kSuccess && dense.run_sequential(0) == cusync::Status::kSuccess &&
                   cudaMemcpy(with.data(), out.dense, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
                   dense.update(zero) == cusync::Status::kSuccess && dense.run_sequential(0) == cusync::Status::kSuccess &&
                   cudaMemcpy(without.data(), out.dense, n * 2, cudaMemcpyDeviceToHost) == cudaSuccess &&
                   cudaMemcpy(vec.data(), biases.vectors.back(), vec.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess;
    auto value = [](uint16_t bits) { Element e; std::memcpy(&e, &bits, 2); return double(float(e)); };
    for (size_t i = 0; i < n && bias_applied; ++i) {
      double const got = value(with[i]) - value(without[i]), want = value(vec[i % size_t(CHAIN_LAST_N)]);
      double const err = std::abs(got - want) / (1.0 + std::abs(value(with[i])));
      bias_err = err > bias_err || err != err ? err : bias_err;
    }
    bias_applied = bias_applied && bias_err < 0.02;
    ok &= bias_applied;
  }
#endif
  char tail[896];
  std::snprintf(tail, sizeof(tail),
                ", \"biases\": %zu, \"bias_applied\": %s, \"bias_max_rel_err\": %g, \"workspace_bytes\": %zu, \"c_workspace_size_same\": %s, \"workspace_too_small_refused\": %s, "
                "\"workspace_misaligned_refused\": %s, \"workspace_init\": %s, \"c_workspace_init\": %s, \"shapes_refused\": %s, \"right_shape_accepted\": %s, \"c_wrong_n_refused\": %s, \"c_bad_ld_refused\": %s, "
                "\"c_default_layout\": %s, \"bad_ld_refused\": %s",
                biases.vectors.size(), bias_applied ? "true" : "false", bias_err, bytes, c_size_same ? "true" : "false", too_small_refused ? "true" : "false", misaligned_refused ? "true" : "false",
                other_ok ? "true" : "false", c_workspace_ok ? "true" : "false", shapes_refused ? "true" : "false", right_accepted ? "true" : "false", c_wrong_n ? "true" : "false",
                c_bad_ld ? "true" : "false", c_default ? "true" : "false", bad_ld_refused ? "true" : "false");
  json += tail;
  std::printf("{\"ok\": %s, %s}\n", ok ? "true" : "false", json.c_str() + 1);
  return ok ? 0 : 1;
}
