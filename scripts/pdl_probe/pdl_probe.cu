// Does a grid launched (programmatic dependent launch) while the grid before it still runs do its work more
// slowly than one launched after it? (benchmarks/NOTES.md c17: conv consumer tiles 1.3-1.5x slower.)
// P: `blocks` CTAs, one per SM (shared memory), each spins `spin_us` (optionally griddepcontrol.launch_dependents
// at entry). C: the same CTAs, griddepcontrol.wait at entry, then a fixed amount of work of one kind:
//   0 FMA chains in registers, 1 loads from L2 (a buffer that fits in L2, read by every CTA), 2 loads from DRAM
//   (a large buffer, a slice per CTA), 3 shared-memory round trips, 4 1D bulk copies of 16 KB from L2 on an
//   mbarrier, 5 2D tensor-map copies (the descriptor prefetched before the wait).
// Each variant a CUDA graph of P then C, replayed; per CTA of C the time from its wait's end to its work's end,
// and when its work began after the last block of P ended (the release).
// nvcc -O3 -arch=sm_90a -o pdl_probe pdl_probe.cu ; ./pdl_probe [blocks 124] [spin us 20]
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>

#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("%s: %s (line %d)\n", #x, cudaGetErrorString(e), __LINE__); return 1; } } while (0)

__device__ __forceinline__ uint64_t now() { uint64_t t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint32_t smid() { uint32_t s; asm volatile("mov.u32 %0, %%smid;" : "=r"(s)); return s; }

__global__ void producer(int trigger, uint64_t spin_ns, uint64_t* ends) {
  extern __shared__ char smem[];
  if (trigger) asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
  uint64_t const t0 = now();
  while (now() - t0 < spin_ns) { }
  if (threadIdx.x == 0) { smem[0] = 1; ends[blockIdx.x] = now(); }
}

__global__ void consumer(int kind, float const* __restrict__ l2buf, int l2n, float const* __restrict__ big, int64_t slice,
                         uint64_t* rec, float* sink, int iters, __grid_constant__ CUtensorMap const tmap) {
  extern __shared__ __align__(1024) float sm[];
  __shared__ __align__(8) uint64_t bar;
  if (kind == 5 && threadIdx.x == 0) asm volatile("prefetch.tensormap [%0];" :: "l"(&tmap) : "memory");
  asm volatile("griddepcontrol.wait;" ::: "memory");
  __syncthreads();
  uint64_t const t0 = now();
  float acc = 0.f;
  if (kind == 0) {
    float a = threadIdx.x * 1e-3f, b = 1.0001f, c = 0.9999f, d = 0.5f;
    for (int i = 0; i < iters; ++i) { a = fmaf(a, b, c); d = fmaf(d, c, b); }
    acc = a + d;
  } else if (kind == 1) {
    for (int i = 0; i < iters; ++i) {
      int const j = (int)((blockIdx.x * 977u + i * 256u + threadIdx.x) % (unsigned)l2n);
      float v; asm volatile("ld.global.cg.f32 %0, [%1];" : "=f"(v) : "l"(l2buf + j)); acc += v;
    }
  } else if (kind == 2) {
    float const* p = big + blockIdx.x * slice;
    for (int64_t i = threadIdx.x * 4; i < slice; i += blockDim.x * 4) {
      float4 v; asm volatile("ld.global.cg.v4.f32 {%0,%1,%2,%3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p + i));
      acc += v.x + v.y + v.z + v.w;
    }
  } else if (kind >= 4) {  // TMA: 4 1D bulk copies of 16 KB from L2, 5 2D tensor boxes (64 x 128 fp32 = 32 KB)
    uint32_t const b = (uint32_t)__cvta_generic_to_shared(&bar);
    uint32_t const dst = (uint32_t)__cvta_generic_to_shared(sm);
    if (threadIdx.x == 0) asm volatile("mbarrier.init.shared.b64 [%0], 1;" :: "r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    __syncthreads();
    uint32_t phase = 0;
    for (int i = 0; i < iters; ++i) {
      if (threadIdx.x == 0) {
        uint32_t const bytes = kind == 4 ? 16384u : 32768u;
        asm volatile("mbarrier.arrive.expect_tx.shared.b64 _, [%0], %1;" :: "r"(b), "r"(bytes) : "memory");
        if (kind == 4) {
          float const* src = l2buf + ((blockIdx.x * 7 + i) % 256) * 4096;
          asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
                       :: "r"(dst), "l"(src), "r"(16384u), "r"(b) : "memory");
        } else {
          int const x = 0, y = ((blockIdx.x * 7 + i) % 256) * 64;
          asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];"
                       :: "r"(dst), "l"(&tmap), "r"(x), "r"(y), "r"(b) : "memory");
        }
      }
      asm volatile("{ .reg .pred p; W: mbarrier.try_wait.parity.shared.b64 p, [%0], %1; @!p bra W; }" :: "r"(b), "r"(phase) : "memory");
      phase ^= 1u;
      acc += sm[threadIdx.x];
      __syncthreads();
    }
  } else {
    sm[threadIdx.x] = threadIdx.x;
    __syncthreads();
    for (int i = 0; i < iters; ++i) { acc += sm[(threadIdx.x + i) & 255]; sm[(threadIdx.x * 7 + i) & 255] = acc; }
  }
  __syncthreads();
  if (threadIdx.x == 0) { rec[blockIdx.x * 3] = t0; rec[blockIdx.x * 3 + 1] = now(); rec[blockIdx.x * 3 + 2] = smid(); }
  if (acc == 12345.f) sink[threadIdx.x] = acc;
}

int main(int argc, char** argv) {
  int blocks = argc > 1 ? atoi(argv[1]) : 124;
  double spin_us = argc > 2 ? atof(argv[2]) : 20.0;
  int const smem = 200 * 1024;
  CK(cudaFuncSetAttribute(producer, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  CK(cudaFuncSetAttribute(consumer, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
  int const l2n = 4 << 20;                 // 16 MB: in L2
  int64_t const dslice = 256 << 10;        // floats: 1 MB per CTA from DRAM
  float *l2buf, *big, *sink; uint64_t* rec;
  CK(cudaMalloc(&l2buf, l2n * 4)); CK(cudaMemset(l2buf, 0, l2n * 4));
  CK(cudaMalloc(&big, int64_t(blocks) * dslice * 4)); CK(cudaMemset(big, 0, int64_t(blocks) * dslice * 4));
  CK(cudaMalloc(&sink, 4096)); CK(cudaMalloc(&rec, blocks * 3 * 8));
  uint64_t* ends; CK(cudaMalloc(&ends, blocks * 8));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  char const* kinds[] = {"fma", "l2", "dram", "smem", "bulk", "tma2d"};
  int const iters[] = {20000, 4000, 0, 20000, 2000, 1000};
  CUtensorMap tmap;
  {  // l2buf as a 2D fp32 tensor of 16384 rows x 256 columns, boxes of 64 rows x 128 columns (32 KB), no swizzle
    using Encode = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, cuuint64_t const*, cuuint64_t const*,
                                cuuint32_t const*, cuuint32_t const*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                CUtensorMapL2promotion, CUtensorMapFloatOOBfill);
    void* fn = nullptr; cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &fn, cudaEnableDefault, &q));
    cuuint64_t dims[2] = {256, 16384}, strides[1] = {256 * 4};
    cuuint32_t box[2] = {128, 64}, es[2] = {1, 1};
    CUresult r = ((Encode)fn)(&tmap, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 2, l2buf, dims, strides, box, es, CU_TENSOR_MAP_INTERLEAVE_NONE,
                              CU_TENSOR_MAP_SWIZZLE_NONE, CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) { std::printf("tensormap encode failed %d\n", int(r)); return 1; }
  }
  char const* modes[] = {"plain", "pdl_trigger_at_entry", "pdl_no_trigger"};
  for (int kind = 0; kind < 6; ++kind) {
    for (int mode = 0; mode < 3; ++mode) {
      cudaGraph_t g; cudaGraphExec_t ge;
      CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
      producer<<<blocks, 128, smem, s>>>(mode == 1, uint64_t(spin_us * 1000), ends);
      cudaLaunchConfig_t cfg = {}; cfg.gridDim = blocks; cfg.blockDim = 256; cfg.dynamicSmemBytes = smem; cfg.stream = s;
      cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization; at[0].val.programmaticStreamSerializationAllowed = 1;
      cfg.attrs = at; cfg.numAttrs = mode > 0 ? 1 : 0;
      CK(cudaLaunchKernelEx(&cfg, consumer, kind, (float const*)l2buf, l2n, (float const*)big, dslice, rec, sink, iters[kind], tmap));
      CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
      cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
      for (int i = 0; i < 200; ++i) CK(cudaGraphLaunch(ge, s));
      std::vector<float> totals;
      for (int r = 0; r < 30; ++r) {
        CK(cudaEventRecord(e0, s)); for (int i = 0; i < 10; ++i) CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s));
        CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); totals.push_back(ms * 100.f);
      }
      std::vector<uint64_t> h(blocks * 3); CK(cudaMemcpy(h.data(), rec, blocks * 24, cudaMemcpyDeviceToHost));
      std::vector<uint64_t> pe(blocks); CK(cudaMemcpy(pe.data(), ends, blocks * 8, cudaMemcpyDeviceToHost));
      uint64_t const last = *std::max_element(pe.begin(), pe.end());
      std::vector<double> d, start;  // each block's work; its start of work after the producer's last block ended
      for (int b = 0; b < blocks; ++b) {
        d.push_back((h[b * 3 + 1] - h[b * 3]) * 1e-3);
        start.push_back((double(h[b * 3]) - double(last)) * 1e-3);
      }
      std::sort(d.begin(), d.end()); std::sort(start.begin(), start.end()); std::sort(totals.begin(), totals.end());
      std::printf("PROBE kind %-5s mode %-22s graph %.1f us  consumer CTA work min %.2f med %.2f max %.2f us  "
                  "start after the producer's end min %.2f med %.2f max %.2f us\n", kinds[kind], modes[mode],
                  totals[totals.size() / 2], d.front(), d[d.size() / 2], d.back(), start.front(), start[start.size() / 2],
                  start.back());
      CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
    }
  }
  return 0;
}
