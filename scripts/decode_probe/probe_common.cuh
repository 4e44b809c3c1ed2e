// What the decode probes share (slab_mlp.cu, slab_product.cu, mma_gemv.cu): the CUDA error check, a streaming
// 16-byte load, the streaming read that bounds them, the weights' fill, the device query, and the timing harness
// (each variant one CUDA graph, preheated ~0.7 s, then replayed round robin with events around each replay; medians).
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CK(x)                                                                                   \
  do {                                                                                          \
    cudaError_t e_ = (x);                                                                       \
    if (e_ != cudaSuccess) {                                                                    \
      std::fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #x, cudaGetErrorString(e_)); \
      std::exit(2);                                                                             \
    }                                                                                           \
  } while (0)

__device__ __forceinline__ uint4 ld_stream(void const* p) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}

// A plain streaming read of n 16-byte vectors (grid-stride, one sum per thread kept): the bandwidth bound.
__global__ void stream_read(uint4 const* p, size_t n, unsigned* sink) {
  unsigned acc = 0;
#pragma unroll 8
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint4 const v = ld_stream(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9e3779b9u) sink[0] = acc;
}

__global__ void fill(__half* p, size_t n, uint32_t seed, float scale) {
  for (size_t i = size_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15, h *= 2246822519u, h ^= h >> 13, h *= 3266489917u, h ^= h >> 16;
    p[i] = __float2half((float(h & 0xffffff) / 8388608.0f - 1.0f) * scale);
  }
}

static double median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// fn's launches on s, captured as one CUDA graph.
template <typename F>
cudaGraphExec_t graph_of(cudaStream_t s, F&& fn) {
  cudaGraph_t gr;
  cudaGraphExec_t ex;
  CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
  fn();
  CK(cudaStreamEndCapture(s, &gr));
  CK(cudaGraphInstantiate(&ex, gr, 0));
  return ex;
}

// Device 0's SM count, its name printed with it, and a non-blocking stream for the probe's work.
inline int probe_device(cudaStream_t* s) {
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  cudaDeviceProp prop{};
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("%s, %d SMs\n", prop.name, sms);
  CK(cudaStreamCreateWithFlags(s, cudaStreamNonBlocking));
  return sms;
}

// Each graph replayed until ~0.7 s have passed (checked every `every` replays), then `reps` rounds of all of them
// in turn, events around each replay: t[v] holds graph v's times in us.
inline std::vector<std::vector<float>> round_robin_us(cudaStream_t s, std::vector<cudaGraphExec_t> const& ex, int reps,
                                                      int every) {
  cudaEvent_t t0, t1;
  CK(cudaEventCreate(&t0));
  CK(cudaEventCreate(&t1));
  for (cudaGraphExec_t e : ex) {
    CK(cudaEventRecord(t0, s));
    for (int i = 0;; ++i) {
      CK(cudaGraphLaunch(e, s));
      if (i % every == every - 1) {
        CK(cudaEventRecord(t1, s));
        CK(cudaEventSynchronize(t1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, t0, t1));
        if (ms > 700.f) break;
      }
    }
  }
  size_t const n = ex.size();
  std::vector<std::vector<float>> t(n);
  std::vector<cudaEvent_t> ev(2 * n);
  for (auto& e : ev) CK(cudaEventCreate(&e));
  for (int rep = 0; rep < reps; ++rep) {
    for (size_t v = 0; v < n; ++v) {
      CK(cudaEventRecord(ev[2 * v], s));
      CK(cudaGraphLaunch(ex[v], s));
      CK(cudaEventRecord(ev[2 * v + 1], s));
    }
    CK(cudaStreamSynchronize(s));
    for (size_t v = 0; v < n; ++v) {
      float ms = 0;
      CK(cudaEventElapsedTime(&ms, ev[2 * v], ev[2 * v + 1]));
      t[v].push_back(ms * 1000.f);
    }
  }
  for (auto& e : ev) cudaEventDestroy(e);
  cudaEventDestroy(t0), cudaEventDestroy(t1);
  return t;
}
