// cusync runtime: raw PTX wrappers, kept apart from what they mean (see semaphore.cuh for the meaning).
#pragma once

#include <cstdint>

namespace cusync::ptx {

// ld.acquire.gpu: later loads of this thread (cp.async included) observe what the releaser published.
__device__ __forceinline__ uint64_t ld_acquire_gpu(uint64_t const* addr) {
  uint64_t value;
  asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(addr) : "memory");
  return value;
}

__device__ __forceinline__ uint32_t ld_acquire_gpu(uint32_t const* addr) {
  uint32_t value;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(addr) : "memory");
  return value;
}

__device__ __forceinline__ uint32_t ld_relaxed_gpu(uint32_t const* addr) {
  uint32_t value;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(value) : "l"(addr) : "memory");
  return value;
}

__device__ __forceinline__ uint64_t ld_relaxed_gpu(uint64_t const* addr) {
  uint64_t value;
  asm volatile("ld.relaxed.gpu.global.u64 %0, [%1];" : "=l"(value) : "l"(addr) : "memory");
  return value;
}

__device__ __forceinline__ void st_release_gpu(uint64_t* addr, uint64_t value) {
  asm volatile("st.release.gpu.global.u64 [%0], %1;" : : "l"(addr), "l"(value) : "memory");
}

// Fire-and-forget reductions (no return value, so the posting thread does not wait for L2).
__device__ __forceinline__ void red_max_relaxed_gpu(uint64_t* addr, uint64_t value) {
  asm volatile("red.relaxed.gpu.global.max.u64 [%0], %1;" : : "l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ void red_add_relaxed_gpu(uint64_t* addr, uint64_t value) {
  asm volatile("red.relaxed.gpu.global.add.u64 [%0], %1;" : : "l"(addr), "l"(value) : "memory");
}

__device__ __forceinline__ void red_add_relaxed_gpu(uint32_t* addr, uint32_t value) {
  asm volatile("red.relaxed.gpu.global.add.u32 [%0], %1;" : : "l"(addr), "r"(value) : "memory");
}

// fence.acq_rel.gpu: with a preceding __syncthreads, makes the whole block's stores visible
// before the relaxed atomic that follows it (the release pattern of the PTX memory model).
__device__ __forceinline__ void fence_acq_rel_gpu() {
  asm volatile("fence.acq_rel.gpu;" : : : "memory");
}

__device__ __forceinline__ uint64_t globaltimer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

}  // namespace cusync::ptx
