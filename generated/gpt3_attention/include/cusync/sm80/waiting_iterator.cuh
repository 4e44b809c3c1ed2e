// cusync sm80 backend: the A-operand global iterator of a consumer GEMM, made to wait for its producer.
//
// CUTLASS 2.x's MmaMultistage issues the cp.async copies of one K-block of A after calling
// set_iteration_index(0) (prologue stages and mainloop alike, kStages-1 blocks ahead of the math), and
// moves to the next K-block with add_tile_offset({0, 1}). So the wait goes in set_iteration_index(0):
// before the first cp.async of each K-block, lane 0 of every warp spins with ld.acquire.gpu on the
// semaphore guarding the producer tile that holds this K-block, and __syncwarp orders the warp's
// cp.async reads after that acquire. (Spinning in every thread made thousands of pollers hammer one L2
// line and slowed the producer down.) Masked iterations (past the end of K, after clear_mask) do not
// wait: no post will ever cover them. The next K-block that needs a new semaphore is remembered, so a
// RowSync consumer waits once per tile and a TileSync consumer once per producer tile. The test is uniform across the
// block (it depends only on the tile row and the K-block), so the warps never diverge around it.
#pragma once

#include <cstdint>

#include "cutlass/cutlass.h"
#include "cutlass/matrix_coord.h"

#include "cusync/stage.cuh"

namespace cusync::sm80 {

template <typename Base_>
class WaitingIteratorA : public Base_ {
 public:
  using Base = Base_;
  using Layout = typename Base::Layout;
  using Pointer = typename Base::Pointer;
  using TensorCoord = typename Base::TensorCoord;
  using Shape = typename Base::Shape;  // (BLK_M, BLK_K)
  static int const kBlockK = Shape::kColumn;

  // CUTLASS builds Params from the A layout; the wait is filled in by the host afterwards.
  class Params : public Base::Params {
   public:
    InputWait wait{};
    Params() = default;
    CUTLASS_HOST_DEVICE Params(Layout const& layout) : Base::Params(layout) {}
  };

  CUTLASS_DEVICE
  WaitingIteratorA(Params const& params, Pointer pointer, TensorCoord extent, int thread_id,
                   TensorCoord const& threadblock_offset, int const* indices = nullptr)
      : Base(params, pointer, extent, thread_id, threadblock_offset, indices),
        wait_(&params.wait),
        row_(threadblock_offset.row()),
        k_block_(threadblock_offset.column() / kBlockK),
        epoch_(params.wait.enabled ? current_epoch(params.wait.state) : 0u),
        next_wait_(params.wait.enabled ? 0 : INT32_MAX) {}

  CUTLASS_DEVICE void set_iteration_index(int index) {
    // One register compare per K-block on the fast path: next_wait_ is the first K-block that needs a
    // semaphore not yet waited for (never again, for RowSync; at the next producer tile, for TileSync).
    if (index == 0 && k_block_ >= next_wait_ && !masked_) wait_for_k_block();
    Base::set_iteration_index(index);
  }

  CUTLASS_DEVICE void wait_for_k_block() {
    int32_t const col = k_block_ * kBlockK;
    if (cutlass::canonical_lane_idx() == 0) wait_->wait_for(row_, col, epoch_, cusync_block_tile);
    __syncwarp();
    if (wait_->policy.kind == PolicyKind::kTile) {
      next_wait_ = (col / wait_->policy.tile_n + 1) * (wait_->policy.tile_n / kBlockK);
    } else {
      next_wait_ = INT32_MAX;  // RowSync / StridedSync: one semaphore covers every K-block of the row
    }
  }

  CUTLASS_DEVICE void add_tile_offset(TensorCoord const& tile_offset) {
    Base::add_tile_offset(tile_offset);
    k_block_ += tile_offset.column();
  }

  // clear_mask(false) leaves a cleared mask cleared (CUTLASS's semantics), so masked_ is sticky too:
  // the mainloop calls clear_mask(gemm_k_iterations == 0) again after K is exhausted.
  CUTLASS_DEVICE void clear_mask(bool enable = true) {
    Base::clear_mask(enable);
    masked_ = masked_ || enable;
  }

 private:
  InputWait const* wait_;
  int32_t row_;
  int32_t k_block_;
  uint32_t epoch_;
  int32_t next_wait_;
  bool masked_ = false;
};

}  // namespace cusync::sm80
