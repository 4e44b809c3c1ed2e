// race_min: does compute-sanitizer's racecheck lose barrier ordering in a kernel that runs wgmma? (NOTES d17)
// One CTA of two consumer warpgroups and an idle ninth warp, as mode stream's kernel: per round each warpgroup
// stores a B operand (8 x 16 fp16) to its shared buffer, runs one wgmma m64n8k16 on a shared A (64 x 16), waits,
// and then all 256 consumer threads do the finish of bulk_chain.cuh: partials to shared memory, named barrier 1,
// sums, thread 0 writes a flag, barrier 1, every thread reads the flag, barrier 1. MMA=0 replaces the wgmma by
// register arithmetic, with everything else the same. If racecheck reports the flag or the partials only with
// MMA=1, it is the tool; if with both, the finish is wrong. RING=1 adds the kernel's weight ring: the ninth warp
// streams A into two shared slots with bulk copies on full/empty mbarriers, and the consumers take A from the
// slot (every consumer thread arrives on the slot's empty barrier after its MMA), as bulk_chain.cuh does.
// Build and run (on an sm_90a GPU):
//   nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DMMA=1 -I templates/sm90/include -I templates/runtime/include \
//     scripts/decode_probe/race_min.cu -o race_min1
//   compute-sanitizer --tool racecheck ./race_min1   (and -DMMA=0; and with --check-warpgroup-mma no)
#include <cstdio>
#include <cuda_fp16.h>

#include "cusync/sm90/gmma_ss.cuh"
#include "cusync/sm90/stream_chain_ws.cuh"  // the mbarrier helpers bulk_chain.cuh uses

#ifndef MMA
#define MMA 1
#endif
#ifndef RING
#define RING 0
#endif
#ifndef SITES
#define SITES 0
#endif

using cusync::stream::ws::dev::mbar_arrive, cusync::stream::ws::dev::mbar_expect_tx;
using cusync::stream::ws::dev::mbar_init, cusync::stream::ws::dev::mbar_wait;

constexpr int kRounds = 8;

__device__ __forceinline__ void bar_all() { asm volatile("bar.sync 1, 256;" ::: "memory"); }
__device__ __forceinline__ void bar_wg(int g) {
  if (g == 0) asm volatile("bar.sync 2, 128;" ::: "memory");
  else asm volatile("bar.sync 3, 128;" ::: "memory");
}

template <int kSite>
__device__ __forceinline__ float finish(float (*scratch)[64 * 8], int* flag, float const (&acc)[4], int tid, int lane, int wg,
                                        int r) {
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
  if (tid == 0) *flag = r & 1;
  bar_all();
  float const got = *flag ? s : 0.f;
  bar_all();
  return got;
}

__global__ void __launch_bounds__(288, 1) race_min(float* out, uint16_t const* a_src) {
  __shared__ __align__(1024) uint16_t a[64 * 16];      // A: 64 x 16, K-major core matrices (LBO 128, SBO 256)
  __shared__ __align__(1024) uint16_t ring[2][64 * 16];  // RING: A streamed per round into slot r % 2
  __shared__ __align__(8) uint64_t bars[4];             // RING: full[2], empty[2]
  __shared__ __align__(1024) uint16_t b[2][8 * 16];    // B per warpgroup: 8 x 16 (LBO 128)
  __shared__ float scratch[2][64 * 8];                 // partials [part][m][64]
  __shared__ int flag;
  int const tid = int(threadIdx.x), wg = tid >> 7, wt = tid & 127, lane = tid & 31;
  uint32_t const full0 = static_cast<uint32_t>(__cvta_generic_to_shared(&bars[0]));
  if (RING && tid == 0) {
    for (int i = 0; i < 2; ++i) mbar_init(full0 + 8 * i, 1), mbar_init(full0 + 16 + 8 * i, 256);
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  if (RING) __syncthreads();
  if (tid >= 256) {  // the ninth warp: idle, as the producer is for these barriers; with RING, the producer
    if (RING && tid == 256) {
      for (int r = 0; r < kRounds; ++r) {
        int const slot = r & 1;
        mbar_wait(full0 + 16 + 8 * slot, ((r >> 1) & 1) ^ 1u);  // empty
        mbar_expect_tx(full0 + 8 * slot, 2048);
        uint32_t const dst = static_cast<uint32_t>(__cvta_generic_to_shared(ring[slot]));
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], 2048, [%2];"
                     ::"r"(dst), "l"(a_src), "r"(full0 + 8 * slot) : "memory");
      }
    }
    return;
  }
  for (int i = tid; i < 64 * 16; i += 256) a[i] = __half_as_ushort(__float2half(float((i * 7) % 5) - 2.f));
  bar_all();
  uint32_t const sa = static_cast<uint32_t>(__cvta_generic_to_shared(a));
  uint32_t const sb = static_cast<uint32_t>(__cvta_generic_to_shared(b[wg]));
  float total = 0.f;
  for (int r = 0; r < kRounds; ++r) {
    float acc[4] = {0.f, 0.f, 0.f, 0.f};
    [[maybe_unused]] uint32_t sa_r = sa;
    if (RING) {
      mbar_wait(full0 + 8 * (r & 1), (r >> 1) & 1);
      sa_r = static_cast<uint32_t>(__cvta_generic_to_shared(ring[r & 1]));
    }
    bar_wg(wg);  // the previous round's wgmma of every warp done before b is rewritten
    b[wg][wt] = __half_as_ushort(__float2half(float((wt + r + wg) % 3)));
    cusync::gmma::fence_proxy_shared();
    bar_wg(wg);
#if MMA
    cusync::gmma::fence_regs(acc);
    cusync::gmma::fence();
    cusync::gmma::mma_64xN<8, false>(cusync::gmma::desc_k_major(sa_r, 128, 256), cusync::gmma::desc_k_major(sb, 128, 2048), acc);
    cusync::gmma::commit();
    cusync::gmma::wait<0>();
    cusync::gmma::fence_regs(acc);
#else
    uint16_t const* av = RING ? ring[r & 1] : a;
    for (int e = 0; e < 4; ++e) acc[e] = float(b[wg][(wt + e) % 128]) + float(av[(wt * 4 + e) % 1024]);
#endif
    if (RING) mbar_arrive(full0 + 16 + 8 * (r & 1));  // empty: this thread is done with the slot
    // The finish, as bulk_chain.cuh's wgmma overload of finish_piece and finish_stored. SITES=1: warpgroup 1 runs
    // it from a second copy of the code (as the kernel's main loop and tail loop both call it), the same barriers.
    if (SITES && wg == 1)
      total += finish<1>(scratch, &flag, acc, tid, lane, wg, r);
    else
      total += finish<0>(scratch, &flag, acc, tid, lane, wg, r);
  }
  out[tid] = total;
}

int main() {
  float* out = nullptr;
  uint16_t* a_src = nullptr;
  if (cudaMalloc(&out, 256 * sizeof(float)) != cudaSuccess || cudaMalloc(&a_src, 2048) != cudaSuccess) return 2;
  cudaMemset(a_src, 0x3c, 2048);  // fp16 ~1.06 everywhere
  race_min<<<1, 288>>>(out, a_src);
  cudaError_t const e = cudaDeviceSynchronize();
  float h[256];
  cudaMemcpy(h, out, sizeof(h), cudaMemcpyDeviceToHost);
  printf("race_min MMA=%d RING=%d SITES=%d: %s (out[0] %g)\n", MMA, RING, SITES, cudaGetErrorString(e), h[0]);
  return e == cudaSuccess ? 0 : 1;
}
