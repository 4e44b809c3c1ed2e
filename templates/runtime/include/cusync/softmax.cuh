// cusync runtime: the row-wise softmax stage of the attention chain (plain CUDA, any backend).
//
// A tile is kRows rows of one (sequence, head) z: virtual row v = z * tiles_m + m (cusync/attention.cuh).
// Thread 0 waits for the scores semaphore of that virtual row (every scores tile of those rows posted),
// __syncthreads orders the block's loads after its acquire, and then each warp normalizes whole rows in
// two passes over the row: an online pass for the maximum and the sum of exponentials together (the sum
// is rescaled whenever the maximum grows), and one to write P. Causal masking: query t of a sequence
// with L cached tokens sees keys [0, L + t]; masked keys are written as exact zeros so that pv can run
// its K loop over every key. Loads are ld.global.cg: producer data is read from L2, never from a
// possibly stale L1 line. 1024 threads: the rows of a tile are few next to the SMs (one tile per 128
// rows of one head), so each block keeps 32 rows in flight (measured on the H200: 256 threads and
// three passes took 87 us for GPT-3 at 1024 tokens).
#pragma once

#include <cuda_runtime.h>

#include "cutlass/array.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/numeric_types.h"

#include "cusync/attention.cuh"
#include "cusync/stage.cuh"
#include "cusync/status.h"

namespace cusync {

template <typename Element, int kRows>
struct SoftmaxStage {
  static int const kThreads = 1024;
  static int const kWarps = kThreads / 32;
  static int const kVector = 8;  // 16-byte accesses; the chain requires keys % 8 == 0
  static_assert(kRows > 0, "the softmax tile needs at least one row");

  struct Params {
    Element const* scores;  // [z][rows][keys]
    Element* probs;         // [z][rows][keys]
    int32_t rows;           // new tokens per sequence (s)
    int32_t keys;           // L + s
    bool causal;
    AttentionTile tile;
    StageSync sync;
  };

  using Vector = cutlass::Array<Element, kVector>;
  using Floats = cutlass::Array<float, kVector>;

  static __device__ float warp_max(float v) {
    for (int d = 16; d > 0; d >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, d));
    return v;
  }
  // Merges the lanes' (maximum, sum of exp(x - maximum)) pairs.
  static __device__ void warp_merge(float& max_v, float& sum) {
    for (int d = 16; d > 0; d >>= 1) {
      float const other_max = __shfl_xor_sync(0xffffffffu, max_v, d);
      float const other_sum = __shfl_xor_sync(0xffffffffu, sum, d);
      float const merged = fmaxf(max_v, other_max);
      sum = (max_v == -INFINITY ? 0.f : sum * __expf(max_v - merged)) +
            (other_max == -INFINITY ? 0.f : other_sum * __expf(other_max - merged));
      max_v = merged;
    }
  }
  static __device__ Floats load(Element const* at) {
    cutlass::NumericArrayConverter<float, Element, kVector> to_float;
    Vector v;
    *reinterpret_cast<uint4*>(&v) = __ldcg(reinterpret_cast<uint4 const*>(at));
    return to_float(v);
  }

  static __device__ void run(Params const& p) {
    TileCoord const v = begin_tile(p.sync);
    if (p.sync.input.enabled) {
      if (threadIdx.x == 0) p.tile.wait_inputs(p.sync.input, p.sync.input_b, v, current_epoch(p.sync.state));
      __syncthreads();
    }
    int32_t const z = p.tile.z_of(v), m = p.tile.m_of(v);
    int64_t const z_offset = int64_t(z) * p.rows * p.keys;
    int const warp = int(threadIdx.x) / 32, lane = int(threadIdx.x) % 32;
    cutlass::NumericArrayConverter<Element, float, kVector> to_element;
    int32_t const row_end = (m + 1) * kRows < p.rows ? (m + 1) * kRows : p.rows;
    for (int32_t row = m * kRows + warp; row < row_end; row += kWarps) {
      Element const* in = p.scores + z_offset + int64_t(row) * p.keys;
      Element* out = p.probs + z_offset + int64_t(row) * p.keys;
      int32_t const last_key = p.tile.cache_tokens + row;  // causal: keys [0, L + t]
      int32_t const visible = p.causal && last_key + 1 < p.keys ? last_key + 1 : p.keys;
      float max_v = -INFINITY, sum = 0.f;
      for (int32_t c = lane * kVector; c < visible; c += 32 * kVector) {
        Floats const x = load(in + c);
        float chunk_max = -INFINITY;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kVector; ++i) chunk_max = c + i < visible ? fmaxf(chunk_max, x[i]) : chunk_max;
        float const new_max = fmaxf(max_v, chunk_max);
        sum = max_v == -INFINITY ? 0.f : sum * __expf(max_v - new_max);
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kVector; ++i) sum += c + i < visible ? __expf(x[i] - new_max) : 0.f;
        max_v = new_max;
      }
      warp_merge(max_v, sum);
      float const inv = 1.f / sum;
      for (int32_t c = lane * kVector; c < p.keys; c += 32 * kVector) {
        Floats x = c < visible ? load(in + c) : Floats{};
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kVector; ++i) x[i] = c + i < visible ? __expf(x[i] - max_v) * inv : 0.f;
        *reinterpret_cast<Vector*>(out + c) = to_element(x);
      }
    }
    end_tile(p.sync, v);
  }

  static Status launch(Params const& params, cudaStream_t stream);
};

template <typename Stage>
__global__ void __launch_bounds__(Stage::kThreads) softmax_kernel(__grid_constant__ typename Stage::Params const params) {
  Stage::run(params);
}

template <typename Element, int kRows>
Status SoftmaxStage<Element, kRows>::launch(Params const& params, cudaStream_t stream) {
  unsigned const blocks = unsigned(params.sync.tiles_m * params.sync.tiles_n);
  softmax_kernel<SoftmaxStage><<<blocks, kThreads, 0, stream>>>(params);
  return cudaGetLastError() == cudaSuccess ? Status::kSuccess : Status::kCudaError;
}

}  // namespace cusync
