// One token-side tile width of scripts/swap_probe (compiled once per width with -DPROBE_NT=n). fp16 in,
// fp32 accumulation; CUTLASS's cooperative TMA warp-specialized kernel over 128 weight rows x PROBE_NT
// tokens x 64, its stream-K scheduler; D^T written column-major, i.e. D row-major.
#include "kernels.cuh"

#define PROBE_CAT2(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)
#define PROBE_NS PROBE_CAT(nt, PROBE_NT)
#define PROBE_ADD PROBE_CAT(add_swap_, PROBE_NT)

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/sm90_tile_scheduler_stream_k.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/util/packed_stride.hpp"

// The library's stream-K scheduler tag: CUTLASS's scheduler with is_last_tile() fixed for GDC builds.
#include "cusync/sm90/gemm.cuh"
#include "weights_ahead.cuh"

namespace swap_probe {
namespace PROBE_NS {

using cute::Shape; using cute::_1; using cute::_64; using cute::_128; using cute::Int; using cute::make_shape;

// Class template over the layout (at namespace scope the builders' types do not survive nvcc's host stubs).
// LayoutW: CUTLASS's tag for the swapped A operand W^T[N, K]: RowMajor when W is stored [N, K] (K contiguous),
// ColumnMajor when W is stored [K, N] (N contiguous: an MN-major wgmma operand).
// kAhead: the weights-ahead kernel (weights_ahead.cuh): A and B loaded by two warps, the weights without
// waiting for the previous grid; its scheduler triggers the next programmatic launch at entry.
template <class LayoutW, class Tile, bool kPacked = false, bool kAhead = false>
struct Gemm {
  using Element = cutlass::half_t;
  static constexpr int kAlign = 8;
  using Cluster = Shape<_1, _1, _1>;
  using Fusion = cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, void, cutlass::layout::ColumnMajor, kAlign, Element, cutlass::layout::ColumnMajor, kAlign,
      cutlass::epilogue::TmaWarpSpecializedCooperative, Fusion>::CollectiveOp;
  using BuiltMainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, LayoutW, kAlign,
      Element, cutlass::layout::ColumnMajor, kAlign,  // the tokens: A[M, K] row-major is B'[N' = M, K] K-major
      float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      cutlass::gemm::KernelTmaWarpSpecializedCooperative>::CollectiveOp;
  using Mainloop = std::conditional_t<kAhead, WeightsAheadMainloop<BuiltMainloop>, BuiltMainloop>;
  using Scheduler = std::conditional_t<kAhead, EarlyTriggerStreamKScheduler, cusync::sm90::StreamKScheduler>;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue, Scheduler>;
  static_assert(!kAhead || Kernel::IsMainloopAuxiliaryLoadNeeded, "the weight warp runs as CUTLASS's MainloopAux");

  static typename Kernel::Arguments arguments(Problem const& p, int mode, int splits, int sms) {
    typename Kernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.epilogue.ptr_D = static_cast<Element*>(p.d);
    if constexpr (kPacked) {
      // W packed per 128-row tile of W^T: element (n, k) at ((n / 128) * K + k) * 128 + n % 128, so that each
      // stage's 128 x 64 box is 16 KB of contiguous memory. Seen as a batch of N / 128 GEMMs [128, K] (MN-major,
      // ld 128, batch stride 128 K) over the same tokens (batch stride 0), each writing 128 rows of D^T.
      int const batches = p.n / 128;
      args.problem_shape = {128, p.m, p.k, batches};
      args.mainloop.ptr_A = static_cast<Element const*>(p.b);
      args.mainloop.dA = typename Kernel::StrideA{};
      cute::get<1>(args.mainloop.dA) = 128;
      cute::get<2>(args.mainloop.dA) = int64_t(128) * p.k;
      args.mainloop.ptr_B = static_cast<Element const*>(p.a);
      args.mainloop.dB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, make_shape(p.m, p.k, 1));
      cute::get<2>(args.mainloop.dB) = 0;
      args.epilogue.dD = typename Kernel::StrideD{};
      cute::get<1>(args.epilogue.dD) = p.n;
      cute::get<2>(args.epilogue.dD) = 128;
      args.epilogue.dC = args.epilogue.dD;
    } else {
      args.problem_shape = {p.n, p.m, p.k, 1};  // swapped
      args.mainloop.ptr_A = static_cast<Element const*>(p.b);
      args.mainloop.dA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, make_shape(p.n, p.k, 1));
      args.mainloop.ptr_B = static_cast<Element const*>(p.a);
      args.mainloop.dB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, make_shape(p.m, p.k, 1));
      args.epilogue.dC = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, make_shape(p.n, p.m, 1));
      args.epilogue.dD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, make_shape(p.n, p.m, 1));
    }
    if constexpr (kAhead) args.mainloop.l2_blocks = p.ahead_l2;
    args.hw_info.sm_count = sms;
    using Decomposition = cutlass::gemm::kernel::detail::DecompositionMode;
    args.scheduler.splits = mode == 1 ? splits : 1;
    args.scheduler.decomposition_mode =
        mode == 0 ? Decomposition::DataParallel : mode == 1 ? Decomposition::SplitK : Decomposition::Heuristic;
    return args;
  }

  static size_t workspace(Problem const& p, int mode, int splits, int sms) {
    return Kernel::get_workspace_size(arguments(p, mode, splits, sms));
  }

  static bool launch(Problem const& p, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic,
                     cudaStream_t stream) {
    auto const args = arguments(p, mode, splits, sms);
    if (Kernel::can_implement(args) != true) return false;
    static bool prepared = false;
    int const smem = int(Kernel::SharedStorageSize);
    if (!prepared) {
      if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return false;
      prepared = true;
    }
    if (clear && Kernel::initialize_workspace(args, workspace, stream) != cutlass::Status::kSuccess) return false;
    if (clear && programmatic) return true;  // clear only (a chain clears every stage first, then launches)
    typename Kernel::Params const params = Kernel::to_underlying_arguments(args, workspace);
    cudaLaunchConfig_t config{};
    config.gridDim = Kernel::get_grid_shape(params);
    config.blockDim = dim3(Kernel::MaxThreadsPerBlock, 1, 1);
    config.dynamicSmemBytes = size_t(smem);
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attribute[0].val.programmaticStreamSerializationAllowed = 1;
    config.attrs = attribute;
    config.numAttrs = programmatic && !clear ? 1 : 0;
    return cudaLaunchKernelEx(&config, cutlass::device_kernel<Kernel>, params) == cudaSuccess;
  }
};

using TileNT = Shape<_128, Int<PROBE_NT>, _64>;

size_t workspace_any(Problem const& p, int mode, int splits, int sms) {
  return p.b_col ? Gemm<cutlass::layout::RowMajor, TileNT>::workspace(p, mode, splits, sms)
                 : Gemm<cutlass::layout::ColumnMajor, TileNT>::workspace(p, mode, splits, sms);
}
bool launch_any(Problem const& p, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic, cudaStream_t stream) {
  return p.b_col ? Gemm<cutlass::layout::RowMajor, TileNT>::launch(p, mode, splits, sms, workspace, clear, programmatic, stream)
                 : Gemm<cutlass::layout::ColumnMajor, TileNT>::launch(p, mode, splits, sms, workspace, clear, programmatic, stream);
}

bool launch_ahead(Problem const& p, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic, cudaStream_t stream) {
  return p.b_col ? Gemm<cutlass::layout::RowMajor, TileNT, false, true>::launch(p, mode, splits, sms, workspace, clear, programmatic, stream)
                 : Gemm<cutlass::layout::ColumnMajor, TileNT, false, true>::launch(p, mode, splits, sms, workspace, clear, programmatic, stream);
}

// Packed weights (main.cu's pack_weights): one layout whatever W's.
size_t workspace_packed(Problem const& p, int mode, int splits, int sms) {
  return Gemm<cutlass::layout::ColumnMajor, TileNT, true>::workspace(p, mode, splits, sms);
}
bool launch_packed(Problem const& p, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic, cudaStream_t stream) {
  return Gemm<cutlass::layout::ColumnMajor, TileNT, true>::launch(p, mode, splits, sms, workspace, clear, programmatic, stream);
}
bool launch_packed_ahead(Problem const& p, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic, cudaStream_t stream) {
  return Gemm<cutlass::layout::ColumnMajor, TileNT, true, true>::launch(p, mode, splits, sms, workspace, clear, programmatic, stream);
}

}  // namespace PROBE_NS

void PROBE_ADD(std::vector<Kernel>& out) {
  out.push_back({"swap128x" + std::to_string(PROBE_NT), PROBE_NT, false, &PROBE_NS::workspace_any, &PROBE_NS::launch_any,
                 &PROBE_NS::launch_ahead});
  out.push_back({"pswap128x" + std::to_string(PROBE_NT), PROBE_NT, true, &PROBE_NS::workspace_packed,
                 &PROBE_NS::launch_packed, &PROBE_NS::launch_packed_ahead});
}

}  // namespace swap_probe
