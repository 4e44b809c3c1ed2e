// Swap-AB split-K probe (issue 27): at decode sizes (M <= 128 tokens) a GEMM D[M, N] = A[M, K] x W is a
// weight stream. Seen transposed, D^T[N, M] = W^T[N, K] x A^T[K, M], the weights fill wgmma's 64-row side
// and the tokens its narrow N side (8..256), so no MMA rows are padding; CUTLASS's stream-K scheduler in
// split-K mode (deterministic, fixed-order fixup) spreads the few output tiles over every SM.
// Not part of any generated project: it measures whether CUTLASS's TMA + wgmma kernels, so arranged, stream
// weights faster than cuBLASLt at these sizes. Build and run: scripts/swap_probe/run.sh.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <cuda_runtime.h>

namespace swap_probe {

struct Problem {
  int m, n, k;      // the GEMM as the chain sees it: D[m, n] = A[m, k] x B
  bool b_col;       // B as [n, k] row-major (nn.Linear's weight); otherwise [k, n] row-major
  void const* a;
  void const* b;
  void* d;
  int ahead_l2 = 0; // the weights-ahead kernel: weight boxes its weight warp prefetches into L2 on its first tile
};

// mode: 0 data-parallel (splits = 1), 1 split-K with `splits`, 2 CUTLASS's stream-K heuristic.
struct Kernel {
  std::string name;
  int tile_n;  // the token side of the tile
  bool packed; // reads the weights packed per 128-row tile of W^T (main.cu's pack_weights), not as stored
  size_t (*workspace)(Problem const&, int mode, int splits, int sms);
  // clear && !programmatic: clear the workspace, then launch; clear && programmatic: clear only;
  // !clear: launch only (programmatic: as a dependent launch of the kernel before it).
  bool (*launch)(Problem const&, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic,
                 cudaStream_t);
  // The same configuration on the weights-ahead kernel (weights_ahead.cuh); the same workspace.
  bool (*launch_ahead)(Problem const&, int mode, int splits, int sms, void* workspace, bool clear, bool programmatic,
                       cudaStream_t);
};

void add_swap_16(std::vector<Kernel>&);
void add_swap_32(std::vector<Kernel>&);
void add_swap_64(std::vector<Kernel>&);
void add_swap_128(std::vector<Kernel>&);

}  // namespace swap_probe
