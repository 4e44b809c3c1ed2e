// One configuration of scripts/gemm_probe (compiled once per configuration with -DPROBE_CONFIG=n, so
// that the configurations compile in parallel). fp16 in, fp32 accumulation, D row-major, no epilogue
// activation, both B layouts.
#include "kernels.cuh"

#define PROBE_CAT2(a, b) a##b
#define PROBE_CAT(a, b) PROBE_CAT2(a, b)
#define PROBE_NS PROBE_CAT(config, PROBE_CONFIG)

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/device_kernel.h"
#include "cutlass/epilogue/collective/collective_builder.hpp"
#include "cutlass/epilogue/fusion/operations.hpp"
#include "cutlass/gemm/collective/collective_builder.hpp"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/gemm_universal.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"
#include "cutlass/util/packed_stride.hpp"

namespace probe {
// A named namespace per configuration: the kernel stubs cannot name types of an anonymous namespace, and
// the same names in two configurations' objects must not collide at link time.
namespace PROBE_NS {

using cute::Shape; using cute::_1; using cute::_2; using cute::_64; using cute::_128; using cute::_256; using cute::make_shape; using cute::size;

#if PROBE_CONFIG == 0
using TileShape_ = Shape<_128, _256, _64>;
using ClusterShape_ = Shape<_1, _1, _1>;
using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpiSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#define PROBE_ADD add_kernels_coop_128x256
#define PROBE_NAME "coop_128x256_1x1"
#elif PROBE_CONFIG == 1
using TileShape_ = Shape<_128, _256, _64>;
using ClusterShape_ = Shape<_2, _1, _1>;
using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpiSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#define PROBE_ADD add_kernels_coop_128x256_c2
#define PROBE_NAME "coop_128x256_2x1"
#elif PROBE_CONFIG == 2
using TileShape_ = Shape<_256, _128, _64>;
using ClusterShape_ = Shape<_1, _1, _1>;
using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpiSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#define PROBE_ADD add_kernels_coop_256x128
#define PROBE_NAME "coop_256x128_1x1"
#elif PROBE_CONFIG == 3
using TileShape_ = Shape<_256, _128, _64>;
using ClusterShape_ = Shape<_1, _2, _1>;
using Schedule = cutlass::gemm::KernelTmaWarpSpecializedCooperative;
using EpiSchedule = cutlass::epilogue::TmaWarpSpecializedCooperative;
#define PROBE_ADD add_kernels_coop_256x128_c2
#define PROBE_NAME "coop_256x128_1x2"
#elif PROBE_CONFIG == 4
using TileShape_ = Shape<_128, _128, _64>;
using ClusterShape_ = Shape<_1, _1, _1>;
using Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using EpiSchedule = cutlass::epilogue::TmaWarpSpecialized;
#define PROBE_ADD add_kernels_pingpong_128x128
#define PROBE_NAME "pingpong_128x128_1x1"
#else
using TileShape_ = Shape<_64, _256, _64>;
using ClusterShape_ = Shape<_1, _1, _1>;
using Schedule = cutlass::gemm::KernelTmaWarpSpecializedPingpong;
using EpiSchedule = cutlass::epilogue::TmaWarpSpecialized;
#define PROBE_ADD add_kernels_pingpong_64x256
#define PROBE_NAME "pingpong_64x256_1x1"
#endif

// A class template over every parameter, as cusync/sm90/gemm.cuh does (at namespace scope the
// epilogue builder's type does not survive nvcc's host stubs).
template <class Tile, class Cluster, class MainSchedule, class EpilogueSchedule, class LayoutB>
struct Gemm {
  using Element = cutlass::half_t;
  static constexpr int kAlign = 8;
  using Fusion = cutlass::epilogue::fusion::LinearCombination<Element, float, void, float>;
  using Epilogue = typename cutlass::epilogue::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Tile, Cluster, cutlass::epilogue::collective::EpilogueTileAuto,
      float, float, void, cutlass::layout::RowMajor, kAlign, Element, cutlass::layout::RowMajor, kAlign,
      EpilogueSchedule, Fusion>::CollectiveOp;
  using Mainloop = typename cutlass::gemm::collective::CollectiveBuilder<
      cutlass::arch::Sm90, cutlass::arch::OpClassTensorOp, Element, cutlass::layout::RowMajor, kAlign, Element, LayoutB,
      kAlign, float, Tile, Cluster,
      cutlass::gemm::collective::StageCountAutoCarveout<static_cast<int>(sizeof(typename Epilogue::SharedStorage))>,
      MainSchedule>::CollectiveOp;
  using Kernel = cutlass::gemm::kernel::GemmUniversal<Shape<int, int, int, int>, Mainloop, Epilogue,
                                                      cutlass::gemm::PersistentScheduler>;

  static bool launch(Problem const& p, int raster, int swizzle, int sms, cudaStream_t stream) {
    typename Kernel::Arguments args{};
    args.mode = cutlass::gemm::GemmUniversalMode::kGemm;
    args.problem_shape = {p.m, p.n, p.k, 1};
    args.mainloop.ptr_A = static_cast<Element const*>(p.a);
    args.mainloop.dA = cutlass::make_cute_packed_stride(typename Kernel::StrideA{}, make_shape(p.m, p.k, 1));
    args.mainloop.ptr_B = static_cast<Element const*>(p.b);
    args.mainloop.dB = cutlass::make_cute_packed_stride(typename Kernel::StrideB{}, make_shape(p.n, p.k, 1));
    args.epilogue.thread.alpha = 1.0f;
    args.epilogue.thread.beta = 0.0f;
    args.epilogue.dC = cutlass::make_cute_packed_stride(typename Kernel::StrideC{}, make_shape(p.m, p.n, 1));
    args.epilogue.ptr_D = static_cast<Element*>(p.d);
    args.epilogue.dD = cutlass::make_cute_packed_stride(typename Kernel::StrideD{}, make_shape(p.m, p.n, 1));
    args.hw_info.sm_count = sms;
    using Raster = cutlass::gemm::kernel::detail::RasterOrderOptions;
    args.scheduler.raster_order = raster == 1 ? Raster::AlongM : raster == 2 ? Raster::AlongN : Raster::Heuristic;
    args.scheduler.max_swizzle_size = swizzle;
    if (Kernel::can_implement(args) != true) return false;
    static bool prepared = false;
    int const smem = int(Kernel::SharedStorageSize);
    if (!prepared) {
      if (cudaFuncSetAttribute(cutlass::device_kernel<Kernel>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem) != cudaSuccess)
        return false;
      prepared = true;
    }
    typename Kernel::Params const params = Kernel::to_underlying_arguments(args, nullptr);
    cudaLaunchConfig_t config{};
    config.gridDim = Kernel::get_grid_shape(params);
    config.blockDim = dim3(Kernel::MaxThreadsPerBlock, 1, 1);
    config.dynamicSmemBytes = size_t(smem);
    config.stream = stream;
    cudaLaunchAttribute attribute[1];
    attribute[0].id = cudaLaunchAttributeClusterDimension;
    attribute[0].val.clusterDim.x = unsigned(size<0>(Cluster{}));
    attribute[0].val.clusterDim.y = unsigned(size<1>(Cluster{}));
    attribute[0].val.clusterDim.z = 1;
    config.attrs = attribute;
    config.numAttrs = size(Cluster{}) > 1 ? 1 : 0;
    return cudaLaunchKernelEx(&config, cutlass::device_kernel<Kernel>, params) == cudaSuccess;
  }
};

bool launch_any(Problem const& p, int raster, int swizzle, int sms, cudaStream_t stream) {
  return p.b_col ? Gemm<TileShape_, ClusterShape_, Schedule, EpiSchedule, cutlass::layout::ColumnMajor>::launch(p, raster, swizzle, sms, stream)
                 : Gemm<TileShape_, ClusterShape_, Schedule, EpiSchedule, cutlass::layout::RowMajor>::launch(p, raster, swizzle, sms, stream);
}

}  // namespace PROBE_NS

void PROBE_ADD(std::vector<Kernel>& out) { out.push_back({PROBE_NAME, &PROBE_NS::launch_any}); }

}  // namespace probe
