// Weights ahead of the chain's boundary (issue 27, NOTES d10): the swap-AB GEMM of kernel_tu.cu with its
// two operands loaded by two warps, so that gemm2's weight boxes stream into the pipeline's stages while its
// activations (gemm1's output) are not yet there.
//
// CUTLASS's load warp issues A and B of a stage together, after griddepcontrol.wait (a GDC build waits there
// for the whole previous grid), so a programmatic launch of gemm2 only hides its launch (d9). Here, derived
// from CUTLASS's classes and nothing of them copied:
//   WeightsAheadMainloop: CUTLASS's collective whose load() issues only B (the tokens: gemm1's output), and
//     whose load_auxiliary() issues only A (the weights). The cooperative kernel runs load_auxiliary() in its
//     fourth producer warp (MainloopAux) over the same tile sequence, where the policy says it has one
//     (HasAuxiliaryLoad below); that warp does not wait for the previous grid.
//   Both complete the stage's one full barrier. The load warp's leader lane arrives on it with the stage's
//     whole transaction count (A's and B's bytes, as CUTLASS's pipeline does); the weights' copy may complete
//     first, which the mbarrier's signed tx-count allows (the phase cannot complete before the leader's
//     arrival). The weight warp waits for the stage to be empty with the same producer_acquire(), which
//     arrives only in the leader, so each stage still has one arrival per phase.
//   On its first tile the weight warp can also prefetch `l2_blocks` further weight boxes into L2 (TMA bulk
//     prefetch), beyond the stages it fills.
//   EarlyTriggerStreamK: the stream-K scheduler whose construction (every thread, at kernel entry) executes
//     griddepcontrol.launch_dependents, so gemm2's CTAs are scheduled as soon as gemm1's CTAs leave SMs free,
//     not when the last one exits. A gemm2 CTA cannot take an SM that a gemm1 CTA still needs: the trigger
//     completes only once every gemm1 CTA has started.
// Correctness needs no semaphore: the activations are loaded after griddepcontrol.wait (gemm1 complete and
// flushed), the weights are not written by the chain.
#pragma once

#include "cute/tensor.hpp"
#include "cutlass/cutlass.h"
#include "cutlass/gemm/dispatch_policy.hpp"
#include "cutlass/gemm/kernel/tile_scheduler.hpp"

#include "cusync/sm90/gemm.cuh"

// The activations' loads are ordered after gemm1 only by the griddepcontrol.wait that CUTLASS's load warp
// executes in a GDC build.
#ifndef CUTLASS_ENABLE_GDC_FOR_SM90
#error "weights_ahead.cuh needs CUTLASS_ENABLE_GDC_FOR_SM90 (the load warp's griddepcontrol.wait orders gemm2 after gemm1)"
#endif

namespace swap_probe {

template <class BasePolicy>
struct WeightsAheadPolicy : BasePolicy {};

}  // namespace swap_probe

namespace cutlass::gemm::kernel::detail {
template <class BasePolicy>
struct HasAuxiliaryLoad<swap_probe::WeightsAheadPolicy<BasePolicy>> : cute::true_type {};
}  // namespace cutlass::gemm::kernel::detail

namespace swap_probe {

template <class Base>  // CUTLASS's sm90 TMA warp-specialized collective (one CTA per cluster: no multicast)
struct WeightsAheadMainloop : Base {
  using DispatchPolicy = WeightsAheadPolicy<typename Base::DispatchPolicy>;
  using typename Base::MainloopPipeline;
  using typename Base::PipelineState;
  using typename Base::TensorStorage;
  static constexpr int kStages = int(Base::DispatchPolicy::Stages);
  static_assert(cute::size(typename Base::DispatchPolicy::ClusterShape{}) == 1, "no multicast: one CTA per cluster");

  struct Arguments : Base::Arguments {
    int l2_blocks = 0;  // weight boxes prefetched into L2 on the first tile, beyond the stages
  };
  struct Params : Base::Params {
    int l2_blocks = 0;
  };

  template <class ProblemShape>
  static Params to_underlying_arguments(ProblemShape const& shape, Arguments const& args, void* workspace) {
    Params params;
    static_cast<typename Base::Params&>(params) = Base::to_underlying_arguments(shape, args, workspace);
    params.l2_blocks = args.l2_blocks;
    return params;
  }

  // The load warp (after the kernel's griddepcontrol.wait): the tokens only.
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load(Params const& params, MainloopPipeline pipeline, PipelineState write,
                           cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                           KTileIterator k_tile_iter, int k_tile_count, int, uint32_t, TensorStorage& shared) {
    using namespace cute;
    if (!elect_one_sync()) return;
    Tensor sB = make_tensor(make_smem_ptr(shared.smem_B.data()), typename Base::SmemLayoutB{});  // (N, K, stage)
    Tensor gB = get<1>(load_inputs)(_, _, get<1>(blk_coord), _, get<3>(blk_coord));           // (N, K, k)
    auto copy_b = params.tma_load_b.get_slice(0);
    Tensor src = copy_b.partition_S(gB);
    Tensor dst = copy_b.partition_D(sB);
    for (; k_tile_count > 0; --k_tile_count) {
      pipeline.producer_acquire(write);  // the leader: waits for the stage, then expects A's and B's bytes
      copy(params.tma_load_b.with(*pipeline.producer_get_barrier(write), uint16_t(0)), src(_, _, _, *k_tile_iter),
           dst(_, _, _, write.index()));
      ++k_tile_iter;
      ++write;
    }
  }

  // The weight warp (the kernel's MainloopAux), same tiles, same stages: the weights only, without waiting
  // for the previous grid.
  template <class TensorA, class TensorB, class KTileIterator, class BlockCoord>
  CUTLASS_DEVICE void load_auxiliary(Params const& params, MainloopPipeline pipeline, PipelineState write,
                                     cute::tuple<TensorA, TensorB> const& load_inputs, BlockCoord const& blk_coord,
                                     KTileIterator k_tile_iter, int k_tile_count, int, uint32_t,
                                     TensorStorage& shared) {
    using namespace cute;
    if (!elect_one_sync()) return;
    Tensor sA = make_tensor(make_smem_ptr(shared.smem_A.data()), typename Base::SmemLayoutA{});  // (M, K, stage)
    Tensor gA = get<0>(load_inputs)(_, _, get<0>(blk_coord), _, get<3>(blk_coord));           // (M, K, k)
    auto copy_a = params.tma_load_a.get_slice(0);
    Tensor src = copy_a.partition_S(gA);
    Tensor dst = copy_a.partition_D(sA);
    int const prefetch = first_tile_ ? params.l2_blocks : 0;
    first_tile_ = false;
    for (int i = 0; i < k_tile_count; ++i) {
      if (i == kStages && prefetch > 0) {
        // Every stage is filled and the next acquire waits for the math warps: put the boxes after these on
        // their way to L2 first.
        auto it = k_tile_iter;
        for (int j = i; j < k_tile_count && j < i + prefetch; ++j, ++it) prefetch_box(params, src(_, _, _, *it));
      }
      pipeline.producer_acquire(write);  // not the leader: waits for the stage only
      copy(params.tma_load_a.with(*pipeline.producer_get_barrier(write), uint16_t(0)), src(_, _, _, *k_tile_iter),
           dst(_, _, _, write.index()));
      ++k_tile_iter;
      ++write;
    }
  }

 private:
  template <class Box>
  CUTLASS_DEVICE static void prefetch_box(Params const& params, Box const& box) {
    cute::prefetch(params.tma_load_a, box);
  }

  bool first_tile_ = true;
};

// Selects EarlyTriggerStreamK in cutlass::gemm::kernel::GemmUniversal.
struct EarlyTriggerStreamKScheduler {};

template <class TileShape, class ClusterShape>
class EarlyTriggerStreamK : public cusync::sm90::StreamKTileScheduler<TileShape, ClusterShape> {
  using Base = cusync::sm90::StreamKTileScheduler<TileShape, ClusterShape>;

 public:
  using Base::Base;
  CUTLASS_HOST_DEVICE EarlyTriggerStreamK() {}
  CUTLASS_DEVICE explicit EarlyTriggerStreamK(typename Base::Params const& params) : Base(params) {
    asm volatile("griddepcontrol.launch_dependents;" : : : "memory");
  }
};

}  // namespace swap_probe

namespace cutlass::gemm::kernel::detail {
template <class ArchTag, class TileShape, class ClusterShape, uint32_t SchedulerPipelineStageCount>
struct TileSchedulerSelector<swap_probe::EarlyTriggerStreamKScheduler, ArchTag, TileShape, ClusterShape,
                             SchedulerPipelineStageCount> {
  using Scheduler = swap_probe::EarlyTriggerStreamK<TileShape, ClusterShape>;
};
}  // namespace cutlass::gemm::kernel::detail
