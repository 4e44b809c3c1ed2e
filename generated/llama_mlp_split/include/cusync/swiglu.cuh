// cusync runtime: the SwiGLU stage, out = silu(gate) * up, tile by tile (plain CUDA, any backend).
//
// One producer: it writes gate | up as one [M, 2n] output, and a tile of this stage reads gate columns
// [c0, c0 + BLK_N) and up columns [n + c0, n + c0 + BLK_N), i.e. two producer tiles `stride` tiles apart:
// with StridedSync both post to one semaphore that waits for 2 posts; with TileSync or RowSync the two
// waits are done one after the other.
// Two producers (`b` in the spec): gate is a [M, n] output of one stage and up of another; the tile
// waits on each producer's tile through its own edge (a consumer of several producers).
// One thread waits (ending on ld.acquire.gpu); __syncthreads then orders every thread's loads after it.
#pragma once

#include <cuda_runtime.h>

#include "cutlass/array.h"
#include "cutlass/numeric_conversion.h"
#include "cutlass/numeric_types.h"

#include "cusync/stage.cuh"
#include "cusync/status.h"

namespace cusync {

template <typename Element, int kBlockM, int kBlockN>
struct SwiGluStage {
  // 512 threads, and every thread issues all of its loads before its first use: the stage is a pure
  // stream (measured on the H200: 128 threads with a load-use loop moved 0.45 TB/s, the GEMMs around it
  // waited on it).
  static int const kThreads = 512;
  static int const kVector = 8;                          // 16-byte accesses
  static int const kThreadsPerRow = kBlockN / kVector;
  static int const kRowsPerPass = kThreads / kThreadsPerRow;
  static_assert(kBlockN % kVector == 0, "tile.threadblock[1] of a swiglu stage must be a multiple of 8");
  static_assert(kThreads % kThreadsPerRow == 0 && kThreadsPerRow <= kThreads,
                "tile.threadblock[1] of a swiglu stage must divide 4096 and be at most 4096");
  static_assert(kBlockM % kRowsPerPass == 0, "tile.threadblock[0] of a swiglu stage must be a multiple of 512*8/cols");
  static int const kPasses = kBlockM / kRowsPerPass;

  struct Params {
    Element const* in;   // [m, 2n]: gate | up (one producer), or gate [m, n] (two producers)
    Element const* up;   // nullptr (one producer), or up [m, n]
    Element* out;        // [m, n]
    int m;
    int n;
    StageSync sync;
    int64_t in_ld;       // elements between rows of in, up and out: at least 2n (one producer) or n, and
    int64_t up_ld;       // multiples of kVector (the chain checks both at initialize() and update())
    int64_t out_ld;
  };

  using Vector = cutlass::Array<Element, kVector>;

  static __device__ void run(Params const& p) {
    TileCoord const tile = begin_tile(p.sync);
    int const row0 = tile.m * kBlockM;
    int const col0 = tile.n * kBlockN;
    bool const two_producers = p.up != nullptr;
    if (p.sync.input.enabled || p.sync.input_b.enabled) {
      if (threadIdx.x == 0) {
        uint32_t const epoch = current_epoch(p.sync.state);
        if (p.sync.input.enabled) p.sync.input.wait_for(row0, col0, epoch, tile);  // gate tile
        if (two_producers) {
          if (p.sync.input_b.enabled) p.sync.input_b.wait_for(row0, col0, epoch, tile);  // up tile, 2nd producer
        } else if (p.sync.input.enabled) {
          p.sync.input.wait_for(row0, p.n + col0, epoch, tile);  // up tile (same semaphore if strided)
        }
      }
      __syncthreads();
    }
    int64_t const in_ld = p.in_ld;
    int64_t const up_ld = two_producers ? p.up_ld : p.in_ld;
    int64_t const up_offset = two_producers ? 0 : p.n;
    cutlass::NumericArrayConverter<float, Element, kVector> to_float;
    cutlass::NumericArrayConverter<Element, float, kVector> to_element;
    int const col = col0 + int(threadIdx.x % kThreadsPerRow) * kVector;
    int const row_in_pass = int(threadIdx.x / kThreadsPerRow);
    Vector gate_v[kPasses], up_v[kPasses];
    CUTLASS_PRAGMA_UNROLL
    for (int pass = 0; pass < kPasses; ++pass) {
      int const row = row0 + pass * kRowsPerPass + row_in_pass;
      if (row < p.m && col < p.n) {
        Element const* gate_row = p.in + int64_t(row) * in_ld;
        Element const* up_row = (two_producers ? p.up : p.in) + int64_t(row) * up_ld + up_offset;
        // ld.global.cg: read producer data from L2, never from a possibly stale L1 line.
        *reinterpret_cast<uint4*>(&gate_v[pass]) = __ldcg(reinterpret_cast<uint4 const*>(gate_row + col));
        *reinterpret_cast<uint4*>(&up_v[pass]) = __ldcg(reinterpret_cast<uint4 const*>(up_row + col));
      }
    }
    CUTLASS_PRAGMA_UNROLL
    for (int pass = 0; pass < kPasses; ++pass) {
      int const row = row0 + pass * kRowsPerPass + row_in_pass;
      if (row < p.m && col < p.n) {
        cutlass::Array<float, kVector> gate = to_float(gate_v[pass]), up = to_float(up_v[pass]), result;
        CUTLASS_PRAGMA_UNROLL
        for (int i = 0; i < kVector; ++i) {
          result[i] = gate[i] / (1.0f + __expf(-gate[i])) * up[i];
        }
        *reinterpret_cast<Vector*>(p.out + int64_t(row) * p.out_ld + col) = to_element(result);
      }
    }
    end_tile(p.sync, tile);
  }

  // programmatic (sm90): launched as a programmatic dependent of the kernel before it on the stream,
  // which may still be running; the waits above are what order this stage after its producer tiles.
  static Status launch(Params const& params, bool programmatic, cudaStream_t stream);
};

template <typename Stage>
__global__ void __launch_bounds__(Stage::kThreads) swiglu_kernel(__grid_constant__ typename Stage::Params const params) {
  Stage::run(params);
}

template <typename Element, int kBlockM, int kBlockN>
Status SwiGluStage<Element, kBlockM, kBlockN>::launch(Params const& params, bool programmatic, cudaStream_t stream) {
  return launch_stage_kernel(swiglu_kernel<SwiGluStage>, dim3(unsigned(params.sync.tiles_m * params.sync.tiles_n)),
                             dim3(kThreads), 0, programmatic, stream, params);
}

}  // namespace cusync
