// GEMM kernel probe (issue 10): CUTLASS 3.x sm90 kernels of several tile, cluster and schedule shapes,
// and their scheduler's raster order and swizzle, against cuBLASLt's heuristic algorithms, for the
// GEMM shapes of MLP chains. Not part of any generated project: it answers "which kernel
// configurations can reach cuBLAS's rate on this GPU", before the generator is taught them.
// Build and run: scripts/gemm_probe/run.sh.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

namespace probe {

struct Problem {
  int m, n, k;
  bool b_col;       // B as [n, k] row-major (nn.Linear's weight); otherwise [k, n] row-major
  void const* a;
  void const* b;
  void* d;
};

// One CUTLASS configuration: launch(problem, raster (0 heuristic, 1 along M, 2 along N), swizzle, stream).
struct Kernel {
  std::string name;
  bool (*launch)(Problem const&, int raster, int swizzle, int sms, cudaStream_t);
};

void add_kernels_coop_128x256(std::vector<Kernel>&);
void add_kernels_coop_128x256_c2(std::vector<Kernel>&);
void add_kernels_coop_256x128(std::vector<Kernel>&);
void add_kernels_coop_256x128_c2(std::vector<Kernel>&);
void add_kernels_pingpong_128x128(std::vector<Kernel>&);
void add_kernels_pingpong_64x256(std::vector<Kernel>&);

}  // namespace probe
