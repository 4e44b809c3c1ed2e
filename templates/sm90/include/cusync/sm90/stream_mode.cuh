// cusync sm90 backend: run() mode kStream, device side: cusync::sm90::stream_kernels<T>() instantiates the
// persistent chain kernel (cusync/sm90/bulk_chain.cuh) for one element type behind the function table the
// chain calls (cusync/sm90/stream_mode.h). A project's src/<name>_stream.cu is the only unit that includes it.
#pragma once

#include "cusync/sm90/bulk_chain.cuh"
#include "cusync/sm90/stream_mode.h"

namespace cusync::sm90 {
namespace stream_detail {

namespace bulk = cusync::stream::bulk;
namespace reg = cusync::stream::reg;

static_assert(bulk::kTileN == kStreamTileN && bulk::kStepBytes == kStreamStepBytes && reg::kStepK == kStreamStepK,
              "stream_mode.h sizes the packed weights as bulk_chain.cuh reads them");
static_assert(bulk::bulk_packed_bytes(8, 8) == stream_packed_bytes(8, 8) &&
                  bulk::bulk_packed_bytes(4104, 200) == stream_packed_bytes(4104, 200),
              "bulk_pack writes the bytes stream_mode.h allots");
static_assert(sizeof(cusync::stream::StreamState) <= size_t(kStreamStateBytes), "the run state fits its bytes");
static_assert(int(StreamAct::kSilu) == int(cusync::stream::Act::kSilu) &&
                  int(StreamAct::kSwiglu) == int(cusync::stream::Act::kSwiglu) &&
                  int(StreamAct::kGeluTanh) == int(cusync::stream::Act::kGeluTanh),
              "StreamAct is cusync::stream::Act");

inline Status from_error(cudaError_t e) { return e == cudaSuccess ? Status::kSuccess : Status::kCudaError; }

template <typename F>
inline void with_m_pad(int m_pad, F&& f) {
  switch (m_pad) {
    case 8: f(std::integral_constant<int, 8>{}); break;
    case 16: f(std::integral_constant<int, 16>{}); break;
    case 32: f(std::integral_constant<int, 32>{}); break;
    default: f(std::integral_constant<int, 64>{}); break;
  }
}

inline int m_pad_of(int m) { return m <= 8 ? 8 : m <= 16 ? 16 : m <= 32 ? 32 : 64; }

template <typename T>
Status prepare() {
  cudaError_t e = cudaSuccess;
  for (int m_pad : {8, 16, 32, 64}) {
    with_m_pad(m_pad, [&](auto mc) {
      constexpr int kMPad = decltype(mc)::value;
      if (e == cudaSuccess) e = bulk::bulk_prepare<T, kMPad, false>();
    });
  }
  return from_error(e);
}

template <typename T>
Status pack(void const* w, int64_t ldw, int k, int n, bool halves, void* packed, cudaStream_t stream) {
  if (w == nullptr || packed == nullptr || k <= 0 || n <= 0 || ldw < n || (halves && n % 16 != 0)) {
    return Status::kInvalidArgument;
  }
  return from_error(bulk::bulk_pack<T>(static_cast<T const*>(w), k, n, ldw, halves, packed, stream));
}

template <typename T>
Status run(StreamRun const& r, cudaStream_t stream) {
  if (r.m < 1 || r.m > kStreamMaxM || r.grid < 1 || r.state == nullptr || r.sems == nullptr) return Status::kInvalidArgument;
  int const m_pad = m_pad_of(r.m);
  bulk::BulkParams p{};
  for (int g = 0; g < 2; ++g) {
    StreamGemmArgs const& in = r.gemm[g];
    cusync::stream::StageArgs a{};
    a.x = in.x, a.ldx = in.ldx, a.w = in.packed, a.ldw = 0, a.bias = in.bias, a.out = in.out, a.ldo = in.ldo;
    a.m = r.m, a.n = in.n, a.k = in.k, a.act = in.act;
    a.ws = in.ws, a.ws_slots = 2 * int64_t(r.grid) * kStreamSlotFloats / (int64_t(kStreamTileN) * m_pad);
    a.arrivals = in.arrivals;
    a.post_sems = g == 0 ? r.sems : nullptr;
    a.wait_sems = g == 1 ? r.sems : nullptr;
    a.wait_tile_cols = g == 1 ? reg::out_tile_cols(r.gemm[0].act, kStreamTileN) : 0;
    a.wait_tiles = g == 1 ? stream_tiles(r.gemm[0].n) : 0;
    a.skip_post_tile = g == 0 ? r.skip_post_tile : -1;
    a.stage_id = r.stage[g];
    a.out_raw = in.out_raw, a.ldo_raw = in.ldo_raw;
    if (a.out_raw != nullptr && (in.act != int(StreamAct::kSwiglu) || a.ldo_raw < a.n || a.ldo_raw % 8 != 0 ||
                                 (reinterpret_cast<uintptr_t>(a.out_raw) & 15u) != 0)) {
      return Status::kInvalidArgument;
    }
    if (bulk::bulk_make(a, m_pad, r.grid, &p.gm[g]) != nullptr) return Status::kInvalidArgument;
  }
  p.grid = r.grid;
  p.which = bulk::kChain;
  p.mode = bulk::kModeFull;
  p.trace = nullptr;
  cudaError_t e = cudaSuccess;
  with_m_pad(m_pad, [&](auto mc) {
    constexpr int kMPad = decltype(mc)::value;
    e = bulk::bulk_launch<T, kMPad>(p, /*pdl=*/false, static_cast<cusync::stream::StreamState*>(r.state), r.error,
                                    r.timeout_ns, stream, /*cooperative=*/true);
  });
  return from_error(e);
}

}  // namespace stream_detail

// The function table of mode kStream for element type T (cutlass::half_t or cutlass::bfloat16_t map to the
// kernels' __half and __nv_bfloat16: the same bits).
template <typename T>
StreamKernels const& stream_kernels() {
  static constexpr StreamKernels kKernels{&stream_detail::prepare<T>, &stream_detail::pack<T>, &stream_detail::run<T>};
  return kKernels;
}

}  // namespace cusync::sm90
