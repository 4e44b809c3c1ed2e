// race_min: does compute-sanitizer's racecheck lose barrier ordering in a kernel that runs wgmma? (NOTES d17)
// One CTA of two consumer warpgroups and an idle ninth warp, as mode stream's kernel: per round each warpgroup
// stores a B operand (8 x 16 fp16) to its shared buffer, runs one wgmma m64n8k16 on a shared A (64 x 16), waits,
// and then all 256 consumer threads do the finish of bulk_chain.cuh: partials to shared memory, named barrier 1,
// sums, thread 0 writes a flag, barrier 1, every thread reads the flag, barrier 1. MMA=0 replaces the wgmma by
// register arithmetic, with everything else the same. If racecheck reports the flag or the partials only with
// MMA=1, it is the tool; if with both, the finish is wrong.
// Build and run (on an sm_90a GPU):
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DMMA=1 -I templates/sm90/include \
//     scripts/decode_probe/race_min.cu -o race_min1
//   compute-sanitizer --tool racecheck ./race_min1   (and -DMMA=0; and with --check-warpgroup-mma no)
#include <cstdio>
#include <cuda_fp16.h>

#include "cusync/sm90/gmma_ss.cuh"

#ifndef MMA
#define MMA 1
#endif

constexpr int kRounds = 8;

__device__ __forceinline__ void bar_all() { asm volatile("bar.sync 1, 256;" ::: "memory"); }
__device__ __forceinline__ void bar_wg(int g) {
  if (g == 0) asm volatile("bar.sync 2, 128;" ::: "memory");
  else asm volatile("bar.sync 3, 128;" ::: "memory");
}

__global__ void __launch_bounds__(288, 1) race_min(float* out) {
  __shared__ __align__(1024) uint16_t a[64 * 16];      // A: 64 x 16, K-major core matrices (LBO 128, SBO 256)
  __shared__ __align__(1024) uint16_t b[2][8 * 16];    // B per warpgroup: 8 x 16 (LBO 128)
  __shared__ float scratch[2][64 * 8];                 // partials [part][m][64]
  __shared__ int flag;
  int const tid = int(threadIdx.x), wg = tid >> 7, wt = tid & 127, lane = tid & 31;
  if (tid >= 256) return;  // the ninth warp: idle, as the producer is for these barriers
  for (int i = tid; i < 64 * 16; i += 256) a[i] = __half_as_ushort(__float2half(float((i * 7) % 5) - 2.f));
  bar_all();
  uint32_t const sa = static_cast<uint32_t>(__cvta_generic_to_shared(a));
  uint32_t const sb = static_cast<uint32_t>(__cvta_generic_to_shared(b[wg]));
  float total = 0.f;
  for (int r = 0; r < kRounds; ++r) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    bar_wg(wg);  // the previous round's wgmma of every warp done before b is rewritten
    b[wg][wt] = __half_as_ushort(__float2half(float((wt + r + wg) % 3)));
    cusync::gmma::fence_proxy_shared();
    bar_wg(wg);
#if MMA
    cusync::gmma::fence_regs(acc);
    cusync::gmma::fence();
    cusync::gmma::mma_64xN<8, false>(cusync::gmma::desc_k_major(sa, 128, 256), cusync::gmma::desc_k_major(sb, 128, 2048), acc);
    cusync::gmma::commit();
    cusync::gmma::wait<0>();
    cusync::gmma::fence_regs(acc);
#else
    for (int e = 0; e < 4; ++e) acc[e] = float(b[wg][(wt + e) % 128]) + float(a[(wt * 4 + e) % 1024]);
#endif
    // The finish, as bulk_chain.cuh's wgmma overload of finish_piece and finish_stored.
    int const col = 16 * ((tid >> 5) & 3) + (lane >> 2), m = 2 * (lane & 3);
    float* dst = scratch[wg];
    dst[m * 64 + col] = acc[0];
    dst[(m + 1) * 64 + col] = acc[1];
    dst[m * 64 + col + 8] = acc[2];
    dst[(m + 1) * 64 + col + 8] = acc[3];
    bar_all();
    float s = 0.f;
    for (int i = tid; i < 64 * 8; i += 256) s += scratch[0][i] + scratch[1][i];
    bar_all();
    if (tid == 0) flag = (r & 1);
    bar_all();
    if (flag) total += s;
    bar_all();
  }
  out[tid] = total;
}

int main() {
  float* out = nullptr;
  if (cudaMalloc(&out, 256 * sizeof(float)) != cudaSuccess) return 2;
  race_min<<<1, 288>>>(out);
  cudaError_t const e = cudaDeviceSynchronize();
  float h[256];
  cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
  printf("race_min MMA=%d: %s (out[0] %g)\n", MMA, cudaGetErrorString(e), h[0]);
  return e == cudaSuccess ? 0 : 1;
}
