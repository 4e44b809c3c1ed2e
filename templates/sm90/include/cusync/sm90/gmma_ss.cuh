// cusync sm90: warpgroup MMA (wgmma.mma_async) with both operands in shared memory, for kernels that stage their
// own operands (no CuTe): shared-memory matrix descriptors of the no-swizzle K-major layout and the m64nNk16
// instructions for N = 8, 16, 32, 64 with fp32 accumulators, fp16 or bf16 inputs.
//
// LAYOUT (no swizzle, K-major). An operand of R rows (M for A, N for B) and 16 k is (R / 8) x 2 core matrices of
// 8 rows x 8 k (16 bytes a row, 128 contiguous bytes). The descriptor gives the operand's first core matrix, the
// byte distance between core matrices adjacent in k (LBO) and between those adjacent in rows (SBO).
//
// ACCUMULATORS. Thread (warp w of the warpgroup, lane l) holds D rows 16 w + l / 4 and + 8; d[4 j + 0, 1] are
// columns 8 j + 2 (l % 4) + 0, 1 of the first row, d[4 j + 2, 3] the same columns of the second.
#pragma once

#include <cstdint>

namespace cusync::gmma {

// Descriptor of a no-swizzle operand at shared address `addr` (16-byte aligned; all byte values multiples of 16
// below 256 KB).
__device__ __forceinline__ uint64_t desc_k_major(uint32_t addr, uint32_t lbo, uint32_t sbo) {
  return uint64_t((addr >> 4) & 0x3FFFu) | uint64_t((lbo >> 4) & 0x3FFFu) << 16 | uint64_t((sbo >> 4) & 0x3FFFu) << 32;
}
// Descriptor of a K-major operand in the 128-byte swizzle layout that a TMA load with SWIZZLE_128B writes: rows of
// 64 k (128 bytes), 8-row atoms of 1024 bytes (1024-byte aligned), their 16-byte units XOR-swizzled by the row;
// `sbo` the distance between 8-row atoms. A k16 step further into the row starts 32 bytes further on (the hardware
// applies the swizzle to the address bits). The leading offset is unused in this layout (set to 16 bytes).
__device__ __forceinline__ uint64_t desc_k_major_sw128(uint32_t addr, uint32_t sbo) {
  return uint64_t((addr >> 4) & 0x3FFFu) | uint64_t(1) << 16 | uint64_t((sbo >> 4) & 0x3FFFu) << 32 | uint64_t(1) << 62;
}
// Before the first wgmma that reads registers or shared memory written since the last one (wgmma.fence).
__device__ __forceinline__ void fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int kPending>
__device__ __forceinline__ void wait() { asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(kPending) : "memory"); }
// Generic-proxy stores to shared memory, before a wgmma (async proxy) of this CTA reads them.
__device__ __forceinline__ void fence_proxy_shared() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
// Keeps the compiler from moving accumulator reads or writes across the asynchronous MMA.
template <int kN>
__device__ __forceinline__ void fence_regs(float (&d)[kN]) {
#pragma unroll
  for (int i = 0; i < kN; ++i) asm volatile("" : "+f"(d[i])::"memory");
}

// The instructions, one per N: TY is the input type's PTX name (f16 or bf16); d, da, db and accumulate are the
// caller's names.
#define CUSYNC_GMMA_64x8(TY) \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %6, 0;\n" \
               " wgmma.mma_async.sync.aligned.m64n8k16.f32." TY "." TY " {%0, %1, %2, %3}, %4, %5, p, 1, 1, 0, 0;\n}" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]) \
               : "l"(da), "l"(db), "r"(accumulate))
#define CUSYNC_GMMA_64x16(TY) \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %10, 0;\n" \
               " wgmma.mma_async.sync.aligned.m64n16k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, 0, 0;\n}" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]) \
               : "l"(da), "l"(db), "r"(accumulate))
#define CUSYNC_GMMA_64x32(TY) \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %18, 0;\n" \
               " wgmma.mma_async.sync.aligned.m64n32k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}, %16, %17, p, 1, 1, 0, 0;\n}" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]) \
               : "l"(da), "l"(db), "r"(accumulate))
#define CUSYNC_GMMA_64x64(TY) \
  asm volatile("{\n .reg .pred p;\n setp.ne.b32 p, %34, 0;\n" \
               " wgmma.mma_async.sync.aligned.m64n64k16.f32." TY "." TY " {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, %33, p, 1, 1, 0, 0;\n}" \
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]) \
               : "l"(da), "l"(db), "r"(accumulate))

// D (64 x kN, fp32) += A (64 x 16) B^T (B: kN x 16), with A and B K-major in shared memory (descriptors da, db).
template <int kN, bool kBf16>
__device__ __forceinline__ void mma_64xN(uint64_t da, uint64_t db, float (&d)[kN / 2]) {
  static_assert(kN == 8 || kN == 16 || kN == 32 || kN == 64, "N must be 8, 16, 32 or 64");
  int const accumulate = 1;  // D += A B (0 would be D = A B)
#define CUSYNC_GMMA_TYPED(SHAPE) \
  if constexpr (kBf16)           \
    SHAPE("bf16");               \
  else                           \
    SHAPE("f16")
  if constexpr (kN == 8) {
    CUSYNC_GMMA_TYPED(CUSYNC_GMMA_64x8);
  } else if constexpr (kN == 16) {
    CUSYNC_GMMA_TYPED(CUSYNC_GMMA_64x16);
  } else if constexpr (kN == 32) {
    CUSYNC_GMMA_TYPED(CUSYNC_GMMA_64x32);
  } else {
    CUSYNC_GMMA_TYPED(CUSYNC_GMMA_64x64);
  }
#undef CUSYNC_GMMA_TYPED
}
#undef CUSYNC_GMMA_64x8
#undef CUSYNC_GMMA_64x16
#undef CUSYNC_GMMA_64x32
#undef CUSYNC_GMMA_64x64

}  // namespace cusync::gmma
