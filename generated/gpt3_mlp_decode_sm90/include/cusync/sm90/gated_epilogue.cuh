// cusync sm90 backend: the fused gated-MLP (SwiGLU) epilogue, out = act(gate) * up, and the weight
// interleave it needs.
//
// The GEMM runs over weights whose gate and up columns the library has interleaved in groups of 8
// (interleave_gate_up below): columns 16q .. 16q+7 of the interleaved B are gate columns 8q .. 8q+7, and
// columns 16q+8 .. 16q+15 the matching up columns. In the wgmma accumulator fragment every thread holds,
// for its rows, the columns 8v + 2t + {0, 1} (v = 0 .. tile N / 8 - 1, t = lane % 4: PTX ISA, wgmma
// "register fragment" layout of D), so the thread that holds gate column c also holds its up column
// c + 8, one fragment step later: the epilogue combines them in registers and stores the output
// [M, N / 2] directly (two adjacent outputs per 32-bit store), with no shared memory and no pass
// through an [M, N] intermediate. A GEMM tile of width T writes output columns [j T/2, (j+1) T/2).
//
// GatedEpilogue derives CUTLASS's DefaultEpilogue (its arguments, workspace and can_implement) and
// replaces only operator(); cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter makes
// it a collective of CUTLASS's warp-specialized kernels (cooperative, ping-pong, stream-K), as
// CUTLASS's own builder does for its non-TMA epilogues. The output's row stride is the D stride of the
// arguments (make_arguments: [M, N / 2] packed).
#pragma once

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/epilogue/collective/default_epilogue.hpp"
#include "cutlass/epilogue/collective/detail.hpp"
#include "cutlass/epilogue/dispatch_policy.hpp"
#include "cutlass/epilogue/thread/linear_combination.h"
#include "cutlass/numeric_conversion.h"

#include "cusync/status.h"

namespace cusync::sm90 {

// Columns per gate (and per up) group of the interleaved weights: one 8-column step of the wgmma
// accumulator layout.
constexpr int kGateGroup = 8;

template <class Element, template <class> class Activation>
class GatedEpilogue
    : public cutlass::epilogue::collective::DefaultEpilogue<
          void, cute::Stride<int64_t, cute::_1, int64_t>, cute::Stride<int64_t, cute::_1, int64_t>,
          cutlass::epilogue::thread::LinearCombination<Element, 1, float, float>,
          cutlass::gemm::EpilogueDefault> {
  using Base = cutlass::epilogue::collective::DefaultEpilogue<
      void, cute::Stride<int64_t, cute::_1, int64_t>, cute::Stride<int64_t, cute::_1, int64_t>,
      cutlass::epilogue::thread::LinearCombination<Element, 1, float, float>, cutlass::gemm::EpilogueDefault>;

 public:
  using typename Base::Params;
  using typename Base::SharedStorage;
  // make_arguments reads this: D is [M, N / 2].
  static constexpr bool kGatedOutput = true;

  CUTLASS_HOST_DEVICE GatedEpilogue(Params const& params, SharedStorage const& storage = SharedStorage())
      : Base(params, storage), out_(params.ptr_D), ld_out_(cute::get<0>(params.dD)) {}

  template <class ProblemShapeMNKL, class BlockShapeMNK, class BlockCoordMNKL, class FrgEngine, class FrgLayout,
            class TiledMma, class ResidueMNK>
  CUTLASS_DEVICE void operator()(ProblemShapeMNKL problem_shape_mnkl, BlockShapeMNK blk_shape_MNK,
                                 BlockCoordMNKL blk_coord_mnkl, cute::Tensor<FrgEngine, FrgLayout> const& accumulators,
                                 TiledMma tiled_mma, ResidueMNK, int thread_idx, char*) {
    using namespace cute;
    static_assert(is_static<FrgLayout>::value, "accumulator layout must be static");
    // ((2 columns, 2 row halves, V column steps of 8), MMA_M, MMA_N): the wgmma accumulator.
    static_assert(rank<0>(FrgLayout{}) == 3 && size<0, 0>(FrgLayout{}) == 2 && size<0, 1>(FrgLayout{}) == 2,
                  "GatedEpilogue expects the sm90 wgmma accumulator fragment ((2,2,N/8),MMA_M,MMA_N)");
    constexpr int kSteps = size<0, 2>(FrgLayout{});
    static_assert(kSteps % 2 == 0, "the tile N of a gated GEMM must be a multiple of 16 (gate and up groups of 8)");

    int const m = get<0>(problem_shape_mnkl);
    int const n = get<1>(problem_shape_mnkl);  // the GEMM's N: gate and up, 2 x the output width
    // The coordinates of every accumulator element in the GEMM's [M, N], as CUTLASS's own epilogue
    // computes them (identity tensor of the tile, partitioned like the accumulators).
    auto [m_coord, n_coord, k_coord, l_coord] = blk_coord_mnkl;
    Tensor c_tile = local_tile(make_identity_tensor(make_shape(m, n)), take<0, 2>(blk_shape_MNK),
                               make_coord(m_coord, n_coord));
    Tensor coord = tiled_mma.get_thread_slice(thread_idx).partition_C(c_tile);
    // The layout the pairing relies on, checked on the coordinates: a thread's columns step by 1
    // (mode 0,0) and by kGateGroup (mode 0,2), its rows by 8 (mode 0,1).
    using Steps = decltype(stride<0>(coord.layout()));
    static_assert(std::is_same_v<Steps, decltype(make_stride(E<1>{}, Int<8>{} * E<0>{}, Int<kGateGroup>{} * E<1>{}))>,
                  "GatedEpilogue: the accumulator fragment does not step 8 columns per mode (0,2)");

    Activation<float> act;
    cutlass::NumericConverter<Element, float> convert;
    CUTLASS_PRAGMA_UNROLL
    for (int rest = 0; rest < size<1>(accumulators) * size<2>(accumulators); ++rest) {
      int const mm = rest % size<1>(accumulators);
      int const nn = rest / size<1>(accumulators);
      CUTLASS_PRAGMA_UNROLL
      for (int half = 0; half < 2; ++half) {  // rows r and r + 8
        CUTLASS_PRAGMA_UNROLL
        for (int step = 0; step < kSteps; step += 2) {  // gate columns at step, up columns at step + 1
          auto const gate0 = make_coord(make_coord(0, half, step), mm, nn);
          auto const gate1 = make_coord(make_coord(1, half, step), mm, nn);
          auto const up0 = make_coord(make_coord(0, half, step + 1), mm, nn);
          auto const up1 = make_coord(make_coord(1, half, step + 1), mm, nn);
          int const row = get<0>(coord(gate0));
          int const col = get<1>(coord(gate0));  // a gate column: col % 16 < 8
          if (row < m && col < n) {
            Element out[2];
            out[0] = convert(act(accumulators(gate0)) * accumulators(up0));
            out[1] = convert(act(accumulators(gate1)) * accumulators(up1));
            int64_t const out_col = int64_t(col / (2 * kGateGroup)) * kGateGroup + col % kGateGroup;
            // col is even (2t + 8v) and the output row stride a multiple of 8: a 4-byte aligned pair.
            *reinterpret_cast<uint32_t*>(out_ + int64_t(row) * ld_out_ + out_col) = *reinterpret_cast<uint32_t*>(out);
          }
        }
      }
    }
  }

 private:
  Element* out_;
  int64_t ld_out_;
};

template <class Element, template <class> class Activation>
using GatedCollectiveEpilogue =
    cutlass::epilogue::collective::detail::Sm90TmaWarpSpecializedAdapter<GatedEpilogue<Element, Activation>>;

// Whether a collective epilogue writes the gated [M, N / 2] output (GatedEpilogue) or D[M, N].
template <class Epilogue, class = void>
struct IsGatedEpilogue : std::false_type {};
template <class Epilogue>
struct IsGatedEpilogue<Epilogue, std::void_t<decltype(Epilogue::kGatedOutput)>>
    : std::integral_constant<bool, Epilogue::kGatedOutput> {};

namespace detail {

// One 16-byte chunk (8 elements of 16 bits) per thread. Row layout (B is [k, 2n], N contiguous): chunk
// 2q of a row is gate chunk q, chunk 2q + 1 is up chunk q (at n / 8 + q). Column layout (B is [2n, k]):
// row 16q + r is gate row 8q + r (r < 8) or up row n + 8q + r - 8, each row k elements. (A template,
// so that a header included by many translation units defines it once.)
// The source's rows are ld_src elements apart; the destination is dense.
template <class Chunk>
__global__ void interleave_gate_up_kernel(Chunk const* src, int64_t ld_src, Chunk* dst, int64_t k, int64_t n, bool b_col) {
  static_assert(sizeof(Chunk) == 16, "one chunk is 8 16-bit elements");
  int64_t const chunks = k * n * 2 / 8;
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < chunks; i += int64_t(gridDim.x) * blockDim.x) {
    int64_t from;
    if (!b_col) {
      int64_t const per_row = 2 * n / 8;
      int64_t const row = i / per_row, c = i % per_row;
      from = row * (ld_src / 8) + ((c % 2 == 0) ? c / 2 : n / 8 + c / 2);
    } else {
      int64_t const per_row = k / 8;
      int64_t const row = i / per_row, c = i % per_row;
      int64_t const group = row / (2 * kGateGroup), r = row % (2 * kGateGroup);
      int64_t const src_row = r < kGateGroup ? group * kGateGroup + r : n + group * kGateGroup + r - kGateGroup;
      from = src_row * (ld_src / 8) + c;
    }
    dst[i] = src[from];
  }
}

// out[m, n] (rows ld_out apart) = act(gate) * up from a dense gate_up [m, 2n] in the interleaved column
// order (groups of kGateGroup gate columns, then their up columns): one group per thread, 16 bytes of
// each in, 16 bytes out.
template <class Element, template <class> class Activation>
__global__ void combine_gated_kernel(Element const* gate_up, Element* out, int64_t ld_out, int64_t m, int64_t n) {
  static_assert(sizeof(Element) == 2 && kGateGroup == 8, "one group is one 16-byte vector");
  int64_t const groups = m * (n / kGateGroup);
  Activation<float> const act{};
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < groups; i += int64_t(gridDim.x) * blockDim.x) {
    uint4 const g = reinterpret_cast<uint4 const*>(gate_up)[2 * i];
    uint4 const u = reinterpret_cast<uint4 const*>(gate_up)[2 * i + 1];
    uint4 o;
    Element const* ge = reinterpret_cast<Element const*>(&g);
    Element const* ue = reinterpret_cast<Element const*>(&u);
    Element* oe = reinterpret_cast<Element*>(&o);
#pragma unroll
    for (int j = 0; j < kGateGroup; ++j) oe[j] = Element(act(float(ge[j])) * float(ue[j]));
    int64_t const row = i / (n / kGateGroup), group = i % (n / kGateGroup);
    reinterpret_cast<uint4*>(out + row * ld_out)[group] = o;
  }
}

}  // namespace detail

// The gated output from a GEMM that wrote gate | up in the interleaved order ([m, 2n] dense, e.g.
// cuBLASLt's GEMM over the interleaved weights): out [m, n] = act(gate) * up, rows ld_out elements apart
// (0: n), on `stream`. 16-byte aligned, ld_out a multiple of 8.
template <class Element, template <class> class Activation>
Status combine_gated(void const* gate_up, void* out, int64_t ld_out, int m, int n, cudaStream_t stream) {
  if (m <= 0) return Status::kSuccess;
  int64_t const groups = int64_t(m) * (n / kGateGroup);
  unsigned const blocks = unsigned(std::min<int64_t>((groups + 255) / 256, 132 * 16));
  detail::combine_gated_kernel<Element, Activation><<<blocks, 256, 0, stream>>>(
      static_cast<Element const*>(gate_up), static_cast<Element*>(out), ld_out > 0 ? ld_out : n, m, n);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

// Bytes of the [m, 2n] gate | up a combined (unfused) gated GEMM writes first.
inline size_t gate_up_bytes(int m, int n) { return size_t(m) * size_t(2 * n) * 2; }

// dst (dense) = the weights [gate | up] (B of a gated GEMM: [k, 2n] row-major, or [2n, k] with b_col;
// rows ld_src elements apart, 0: dense) with gate and up interleaved in groups of kGateGroup, on
// `stream`. n, k and ld_src are multiples of 8 (the spec and the chain check them) and both pointers
// 16-byte aligned.
inline Status interleave_gate_up(void const* src, int64_t ld_src, void* dst, int64_t k, int64_t n, bool b_col,
                                 cudaStream_t stream) {
  int64_t const dense = b_col ? k : 2 * n;
  if (ld_src == 0) ld_src = dense;
  if (src == nullptr || dst == nullptr || n % kGateGroup != 0 || k % 8 != 0 || ld_src < dense || ld_src % 8 != 0 ||
      (reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 != 0) {
    return Status::kInvalidArgument;
  }
  detail::interleave_gate_up_kernel<uint4><<<264, 256, 0, stream>>>(static_cast<uint4 const*>(src), ld_src,
                                                                     static_cast<uint4*>(dst), k, n, b_col);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

}  // namespace cusync::sm90
