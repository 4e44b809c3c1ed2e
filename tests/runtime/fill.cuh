// The GPU test drivers' inputs: element i is a hash of i and `seed`, uniform in [-scale/2, scale/2),
// rounded to T (any 16-bit float type: __half, __nv_bfloat16), the same on every run.
#pragma once

#include <cstdint>

template <class T>
__global__ void fill(T* x, int64_t n, uint32_t seed, float scale) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    uint32_t h = uint32_t(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 0x2c1b3c6dU;
    h ^= h >> 12;
    x[i] = T((float(h & 0xFFFF) / 65535.0f - 0.5f) * scale);
  }
}
