// cusync sm90 backend: run() mode kStream's kernel (cusync/sm90/stream_mode.h): the whole two-GEMM chain
// Y = act2(act1(X @ W1 [+ b1]) @ W2 [+ b2]) in one persistent, warp-specialized kernel whose weight stream is a
// ring of 1D bulk copies (cp.async.bulk) over weights packed once, so that every 16 KB copy is one contiguous range.
//
// WHY. At decode sizes (M <= 64) a GEMM chain is a weight stream: every weight byte is used M times and never
// again, so the floor is the weights' bytes over the memory bandwidth. Two kernels back to back lose the tail of
// gemm1 and the ramp of gemm2, and a 2D TMA box of a row-major weight matrix (64 rows x 128 B, rows kilobytes
// apart) keeps DRAM pages open for 128 bytes at a time. A 1D bulk copy of a packed chunk reads 16 KB of
// consecutive bytes, the ring keeps 128-144 KB per SM in flight without registers, and the producer warp never
// waits on anything but a free slot, so gemm2's weights stream while gemm1's last tiles are reduced.
//
// LAYOUT. W is packed by bulk_pack (detail::bulk_pack_kernel): 64-column tiles, each tile's k-steps (16 rows,
// 2 KB) consecutive; a k-step is wgmma's A operand of 64 columns x 16 k in core matrices (the default) or, for the
// mma.sync consumers, four 512-byte groups, group j holding every lane's A fragment of mma tile j (the row pairs
// interleaved at pack time, so the shared loads feed the mma as they are). A chunk is kChunkSteps
// (8) k-steps of one tile: 16 KB, or less at the tile's K end. GEMM g has Q = tiles x chunks-per-tile chunks;
// CTA c of G = min(grid, Q) takes chunks [cQ/G, (c+1)Q/G) (stream-K in tile-major order, every CTA the same
// bytes). A CTA's range is one or more pieces (runs of one tile); only its first and last can be shared with
// other CTAs.
//
// WARPS. W consumer warps (BulkCfg::kConsumerWarps) and warp W, the producer: one lane walks the CTA's chunks of
// gemm1 then gemm2, waits for a free slot (mbarrier) and issues one bulk copy with complete_tx on the slot's full
// barrier (L2 evict_first). At M_pad 64 (X by TMA, below) warp W + 1 is the X warp.
//
// CONSUMERS, wgmma (CUSYNC_BULK_GMMA 1, the default; consumers_gmma): W warpgroups take chunks in turn (4 at M_pad
// 8, 3 at 16 and 32: a warpgroup's chunk is a serial chain far longer than the ring's time per chunk). Per chunk a
// warpgroup stores X's M_pad x 128 slice (loaded from L2 into registers one of its chunks ahead, after the tile
// waits) to its shared buffer in the B operand's layout and issues eight wgmma m64nM_padk16 straight on the ring
// slot, whose bytes bulk_pack laid out as the A operand's core matrices (cusync/sm90/gmma_ss.cuh): no shared loads
// into registers, M_pad / 2 accumulator registers a thread. Measured on an H100: 1.2-1.4x the mma.sync consumers
// below at M = 32-64, level at M = 1.
// X BY TMA (M_pad 64, CUSYNC_BULK_X_TMA_MIN_MPAD): each ring stage also holds its chunk's X slice, two TMA boxes of
// 64 k x M_pad rows in the 128-byte swizzle (the B operand's swizzled K-major layout), which complete on the stage's
// full barrier with the weights. The X warp walks the chunks in the producer's order: it waits for the stage to be
// free, for a GEMM that reads the producer for gemm1's tiles of the chunk's k range (polling 256 tiles a round
// trip), then issues the boxes after fence.proxy.async.global. Four consumer warpgroups then only wait for the
// stage, run the eight wgmma and free it: 16 KB of X a chunk no longer passes through their registers.
//
// CONSUMERS, mma.sync (CUSYNC_BULK_GMMA 0: consumers, consumers_chunked). The consumers read A fragments with ld.shared.v4 (a warp instruction reads 512
// consecutive bytes: no bank conflict), X's B fragments from global memory ahead of use (ld.global.cg), and run
// mma.sync m16n8k16 (swap-AB: 64 weight columns x M_pad batch rows per warp). Two ways to split a chunk:
// - M_pad 8 (kChunked): 6 warps, each taking whole chunks (w, w + 6, ...: all 8 k-steps; X one chunk ahead), so a
//   chunk's fixed work (barrier wait, X loads, position) is paid once; a slot has one consumer (consumers_chunked);
// - M_pad 16: 8 warps, 32 and 64: 4, each taking k-steps w, w + W, ... of every chunk (X kXAhead chunks ahead:
//   2, or 1 at M_pad 64, what fits in registers); a slot is free once all W have arrived.
// At few rows a warp's chunk is a short dependent chain of loads and mma, so the loop keeps its per-chunk work to
// the loads and the mma (chunk positions advance by increment, parameters stay in registers), and at M_pad <= 16
// a second warp per scheduler fills the first one's stalls.
//
// PIECE END, DETERMINISTIC. The warps' (mma.sync) or warpgroups' (wgmma) partials go to shared memory and are
// summed in their order. A tile of one
// piece is finished at once; otherwise the sum goes to workspace slot 2c (the CTA's first piece) or 2c + 1 (its
// last), the CTA arrives on the tile's epoch-tagged counter, and the last arriver sums the tile's slots in CTA
// order (fixed by arithmetic, whoever arrives last), adds the bias, applies the activation (identity, relu,
// gelu-erf, gelu-tanh, silu, or SwiGLU on gate|up interleaved in groups of 8), stores and posts the tile (gemm1).
// Same G => bitwise the same result; the two-launch mode (one GEMM per launch, no waits) has the same order, so
// the chain equals it.
//
// TILE SYNC (K-range). A consumer warp waits for gemm1's tile k / wait_tile_cols before loading the H fragments
// of k-step k (bounded spin, lane 0, then an acquire by every lane; a timeout is recorded with the producer tile
// and the kernel goes on). A warp remembers the run of producer tiles it has seen posted (Ready), so it polls
// each about once, not once per k-step. A CTA finishes all its gemm1 pieces before its first gemm2 wait, and the grid is one
// co-resident wave (one CTA per SM by shared memory), so every awaited tile is produced.
//
// ACROSS RUNS (kPdl). The kernel executes griddepcontrol.launch_dependents at entry. Launched as a programmatic
// dependent of the previous run, its producer streams W1 at once, while its consumers execute
// griddepcontrol.wait before reading the epoch, X or the workspace. The contract: the kernel before it must not
// write the weights, and a programmatic dependent of this kernel must wait (griddepcontrol.wait) before it reads
// H, Y or the run state. (The library launches it plainly: the kernel before a run may be the one that packs.)
#pragma once

#include "cusync/sm90/gmma_ss.cuh"
#include "cusync/sm90/reg_stream.cuh"
#include "cusync/sm90/stream_chain_ws.cuh"

namespace cusync::stream::bulk {

// The consumers' MMA: wgmma (1, the default), both operands in shared memory (the weights as the ring holds
// them, X staged per chunk), CUSYNC_BULK_GMMA_WG warpgroups taking alternate chunks; or mma.sync (0) from
// fragments in registers, warps as consumer_warps() says. The packed weights' layout follows the choice
// (bulk_pack), so a program packs and runs with the same setting.
#ifndef CUSYNC_BULK_GMMA
#define CUSYNC_BULK_GMMA 1
#endif
#ifndef CUSYNC_BULK_GMMA_WG
#define CUSYNC_BULK_GMMA_WG 2
#endif
// Warpgroups at M_pad 8, 16 and 32: 4, 3 and 3 (measured 8-15% faster than 2 at M <= 16 on an H200, 2-6% on an
// H100, and 2-8% at M_pad 32 on an H100; more spill or run no faster). A warpgroup's chunk is a serial chain (X's
// slice, which waits in the memory system behind the weights in flight; its store and barrier; eight wgmma and
// their wait), much longer than the ring's time per chunk, so more warpgroups in flight keep the ring drained. At
// M_pad 64 X comes by TMA (CUSYNC_BULK_XT_WG warpgroups, below); CUSYNC_BULK_GMMA_WG is the count there when it
// does not (CUSYNC_BULK_X_TMA_MIN_MPAD 128), where a third warpgroup's partial and X buffer would cost the ring
// its stages.
#ifndef CUSYNC_BULK_GMMA_WG_M8
#define CUSYNC_BULK_GMMA_WG_M8 4
#endif
#ifndef CUSYNC_BULK_GMMA_WG_M16
#define CUSYNC_BULK_GMMA_WG_M16 3
#endif
#ifndef CUSYNC_BULK_GMMA_WG_M32
#define CUSYNC_BULK_GMMA_WG_M32 3
#endif
static_assert(CUSYNC_BULK_GMMA_WG >= 1 && CUSYNC_BULK_GMMA_WG <= 6 && CUSYNC_BULK_GMMA_WG_M8 >= 1 &&
                  CUSYNC_BULK_GMMA_WG_M8 <= 6 && CUSYNC_BULK_GMMA_WG_M16 >= 1 && CUSYNC_BULK_GMMA_WG_M16 <= 6 &&
                  CUSYNC_BULK_GMMA_WG_M32 >= 1 && CUSYNC_BULK_GMMA_WG_M32 <= 6,
              "1 to 6 consumer warpgroups");
// X by TMA, at M_pad >= CUSYNC_BULK_X_TMA_MIN_MPAD (64; 128: never): each stage of the ring holds its chunk's X
// slice (M_pad rows x 128 k, two boxes of 64 k in the 128-byte swizzle) beside the weights, copied by TMA loads that
// complete on the same full barrier. The X warp issues them in the producer's chunk order, after gemm1's tiles for
// the chunk's k range are posted (for gemm2), so the consumers (CUSYNC_BULK_XT_WG warpgroups) only wait for the
// slot, run the wgmma and free it. Measured on an H100 at M = 64: 1.25-1.33x faster than X through the consumers'
// registers (16 KB of X a chunk there), at M = 33 0.99-1.15x; at M_pad 8 and 16 level on gpt3 and 11% slower on
// the llama shapes, at 32 level to 9% slower (there the chain loses to its own two launches: the hand-over).
#ifndef CUSYNC_BULK_X_TMA_MIN_MPAD
#define CUSYNC_BULK_X_TMA_MIN_MPAD 64
#endif
#ifndef CUSYNC_BULK_XT_WG
#define CUSYNC_BULK_XT_WG 4  // measured at M = 64 (H100): 1.02-1.06x faster than two warpgroups, 1.07-1.18x than one
#endif
static_assert(CUSYNC_BULK_XT_WG >= 1 && CUSYNC_BULK_XT_WG <= 6, "1 to 6 consumer warpgroups");
#ifndef CUSYNC_BULK_GMMA_X_AHEAD
#define CUSYNC_BULK_GMMA_X_AHEAD 1
#endif
static_assert(CUSYNC_BULK_GMMA_X_AHEAD >= 1 && CUSYNC_BULK_GMMA_X_AHEAD <= 4, "1 to 4 chunks of X ahead");
constexpr bool kGmma = CUSYNC_BULK_GMMA != 0;
// X by TMA at M_pad >= CUSYNC_BULK_X_TMA_MIN_MPAD (wgmma consumers only).
constexpr bool x_tma_for(int m_pad) { return kGmma && m_pad >= CUSYNC_BULK_X_TMA_MIN_MPAD; }
#ifndef CUSYNC_BULK_SMALL_M_WARPS
#define CUSYNC_BULK_SMALL_M_WARPS 8
#endif
#ifndef CUSYNC_BULK_CHUNK_PER_WARP_MAX_M
#define CUSYNC_BULK_CHUNK_PER_WARP_MAX_M 8
#endif
#ifndef CUSYNC_BULK_CHUNKED_WARPS
#define CUSYNC_BULK_CHUNKED_WARPS 6
#endif
// Whole chunks per consumer warp at M_pad <= CUSYNC_BULK_CHUNK_PER_WARP_MAX_M (8; 0: never): warp w takes chunks
// w, w + W, ... (all their k-steps), so a chunk's fixed work (its barrier wait, X loads, position) is paid once,
// not once per warp. Measured (H100): 2-3% ahead of eight warps splitting the k-steps at M_pad 8, 6-7% behind
// them at 16 (two chunks of X fragments per warp).
template <int kMPad>
constexpr bool chunk_per_warp() { return kMPad <= CUSYNC_BULK_CHUNK_PER_WARP_MAX_M; }
// Consumer warps: with a chunk each, 6 (with the producer, at most two warps per scheduler and up to 255
// registers each; 8 would put three on one scheduler and cap every warp at 168; and 6 divides the ring's 12
// stages, see consumers_chunked); else 8 splitting each chunk's k-steps at M_pad <= 16 (two per scheduler: at few
// rows a warp's chunk is a short dependent chain of loads and mma, and a second warp fills its stalls), 4 above
// (their partials and X fragments need the room).
template <int kMPad>
constexpr int consumer_warps() {
  if (x_tma_for(kMPad)) return 4 * CUSYNC_BULK_XT_WG;
  if (kGmma)
    return 4 * (kMPad == 8    ? CUSYNC_BULK_GMMA_WG_M8
                : kMPad == 16 ? CUSYNC_BULK_GMMA_WG_M16
                : kMPad == 32 ? CUSYNC_BULK_GMMA_WG_M32
                              : CUSYNC_BULK_GMMA_WG);
  return chunk_per_warp<kMPad>() ? CUSYNC_BULK_CHUNKED_WARPS : (kMPad <= 16 ? CUSYNC_BULK_SMALL_M_WARPS : 4);
}
static_assert(CUSYNC_BULK_SMALL_M_WARPS == 4 || CUSYNC_BULK_SMALL_M_WARPS == 8, "4 or 8 consumer warps");
static_assert(CUSYNC_BULK_CHUNKED_WARPS >= 2 && CUSYNC_BULK_CHUNKED_WARPS <= 12, "2 to 12 consumer warps");
constexpr int kTileN = 64;                       // weight columns per tile (one warp along N, packed)
constexpr int kStepBytes = 2048;                 // one packed k-step of a tile
#ifndef CUSYNC_BULK_CHUNK_STEPS
#define CUSYNC_BULK_CHUNK_STEPS 8
#endif
constexpr int kChunkSteps = CUSYNC_BULK_CHUNK_STEPS;  // k-steps per bulk copy (8: 16 KB; a build option)
constexpr int kChunkBytes = kChunkSteps * kStepBytes;
#ifndef CUSYNC_BULK_X_AHEAD
#define CUSYNC_BULK_X_AHEAD 2
#endif
constexpr int kXAheadMax = CUSYNC_BULK_X_AHEAD;  // chunks of X fragments in flight ahead of the mma (a build option)
static_assert(kXAheadMax >= 1 && kXAheadMax <= 8, "CUSYNC_BULK_X_AHEAD must be in 1..8");
// wgmma: the ring's stages at most, rounded down to a multiple of the consumer warpgroups (9: 8 of 16 KB at
// M_pad 8 and 64, 9 at 16 and 32). A deeper ring streams no faster, and every other load (X's slices, the polls)
// waits behind the bytes in flight: 9 ran 1-3% faster than 12 on an H200 and level to 3% faster on an H100.
#ifndef CUSYNC_BULK_RING_STAGES
#define CUSYNC_BULK_RING_STAGES (9 * 8 / CUSYNC_BULK_CHUNK_STEPS)
#endif
constexpr int kNamedBar = 1;
constexpr int kMaxSmem = 227 * 1024;

enum : int { kChain = 0, kOnlyGemm1 = 1, kOnlyGemm2 = 2 };          // which GEMMs a launch runs
enum : int { kModeFull = 0, kModeRingOnly = 1 };                    // consumers: compute, or only release slots

struct BulkGemm {
  StageArgs a;   // a.w: the packed weights
  int tiles;     // ceil(n / 64)
  int ksteps;    // ceil(k / 16)
  int chunks;    // chunks per tile: ceil(ksteps / 8)
  int64_t q;     // tiles x chunks
  int g;         // CTAs with work: min(grid, q)
  // X by TMA: X row-major (m rows, k), box (64 k, M_pad rows) with the 128-byte swizzle; a chunk's 128 k are two
  // boxes, M_pad x 128 bytes apart, each wgmma's B operand in the swizzled K-major layout.
  CUtensorMap tmx;  // 64-byte aligned by its type
};

struct BulkParams {
  BulkGemm gm[2];
  int grid;      // the grid that bulk_make split the work for (the launch grid: one co-resident wave)
  int which;     // kChain, kOnlyGemm1, kOnlyGemm2
  int mode;      // kModeFull, kModeRingOnly
  uint64_t* trace;  // optional (nullptr: off): kTraceWords %globaltimer stamps per CTA, see TraceAt
};

// The per-CTA timeline (p.trace): when each phase of the run happened, in %globaltimer ns.
enum TraceAt : int {
  kAtEntry = 0,        // barriers initialized
  kAtIssuedGemm1 = 1,  // the producer issued gemm1's last copy
  kAtIssuedAll = 2,    // the producer issued its last copy
  kAtFirstData = 3,    // the consumers' first chunk landed
  kAtDoneGemm1 = 4,    // the consumers finished gemm1 (its last piece reduced, or handed on)
  kAtGemm2Ready = 5,   // gemm2's first H fragments loaded (its first waits satisfied)
  kAtDone = 6,         // the consumers finished
  kSmId = 7,           // not a time: the SM the CTA ran on (%smid), stored at entry
  kTraceWords = 8
};

template <int kMPad>
struct BulkCfg {
  static constexpr int kMSub = kMPad / 8;
  static constexpr bool kXTma = x_tma_for(kMPad);
  static constexpr int kConsumerWarps = consumer_warps<kMPad>();
  static constexpr int kConsumerThreads = 32 * kConsumerWarps;
  static constexpr int kThreads = kConsumerThreads + 32 + (kXTma ? 32 : 0);  // + the producer warp (+ the X warp)
  static constexpr bool kChunked = !kGmma && chunk_per_warp<kMPad>();
  static constexpr int kWG = kConsumerWarps / 4;  // wgmma: consumer warpgroups
  // Partials summed at a piece end: one per warp (mma.sync), one per warpgroup (wgmma).
  static constexpr int kParts = kGmma ? kWG : kConsumerWarps;
  // wgmma: each warpgroup's X of one chunk in shared memory, M_pad rows x 128 k (the B operand).
  static constexpr int kXChunkBytes = kMPad * kChunkSteps * 32;
  static constexpr int kXBytes = kGmma && !kXTma ? kWG * kXChunkBytes : 0;
  static constexpr int kXSlotBytes = kXTma ? kXChunkBytes : 0;  // X by TMA: each stage's X slice
  // k-steps of a chunk per warp: all of them (kChunked), else w, w + warps, ...
  static constexpr int kStepsPerWarp = kChunked || kGmma ? kChunkSteps : kChunkSteps / kConsumerWarps;
  static_assert(kGmma || kChunked || kChunkSteps % kConsumerWarps == 0, "whole k-steps per consumer warp");
  // A slot's empty barrier completes when every lane of its consumer warps has arrived: each lane's arrive
  // (.release) orders its own shared loads of the slot before the producer's next bulk copy into it. (One arrive
  // per warp after __syncwarp reads the same on the GPU, but racecheck reports every wrapped slot as a race, and
  // the PTX model is plainer this way; the 32 arrives cost nothing measurable.)
  static constexpr int kEmptyArrivals = kGmma ? 128 : 32 * (kChunked ? 1 : kConsumerWarps);
  // X fragments in registers per chunk: 2 x kStepsPerWarp x kMSub (4 at M_pad 8, 32 at 64), kXAhead + 1
  // chunks of them beside the accumulators (4 x kMSub x 4): as many as fit without spilling at M_pad 32 and 64.
  static constexpr int kXAheadFit = kMPad <= 16 ? 8 : (kMPad == 32 ? 2 : 1);
  static constexpr int kXAhead = kXAheadMax < kXAheadFit ? kXAheadMax : kXAheadFit;
  static constexpr int kSlot = kTileN * kMPad;                       // floats of one partial (M_pad, 64)
  static constexpr int kScratchBytes = kParts * kSlot * 4;
  static constexpr int kRingMax = (kMaxSmem - kScratchBytes - kXBytes - 1024) / (kChunkBytes + kXSlotBytes);
  static constexpr int kStagesCap = kGmma ? CUSYNC_BULK_RING_STAGES : 12 * 8 / kChunkSteps;  // mma.sync: 192 KB
  static constexpr int kStagesMax = kRingMax < kStagesCap ? kRingMax : kStagesCap;
  static constexpr int kStages = kGmma ? kStagesMax / kWG * kWG : kStagesMax;  // wgmma: a multiple of the warpgroups
  static constexpr int kXSlotOff = kStages * kChunkBytes;                  // the stages' X slices (X by TMA)
  static constexpr int kScratchOff = kXSlotOff + kStages * kXSlotBytes;   // the partials
  static constexpr int kBarOff = kScratchOff + kScratchBytes + kXBytes;
  static constexpr int kSmemBytes = kBarOff + 2 * kStages * 8 + 16;
  static_assert(kMPad == 8 || kMPad == 16 || kMPad == 32 || kMPad == 64, "M_pad 8..64");
  static_assert(kSmemBytes <= kMaxSmem && (kXTma ? kStages >= 4 : kStages * kChunkSteps >= 64), "shared memory");
  static_assert(!kChunked || kStages % kConsumerWarps == 0, "a chunk per warp: the warps must divide the stages");
  static_assert(!kGmma || kStages % kWG == 0, "a chunk per warpgroup: the warpgroups must divide the stages");
};

namespace detail {

__device__ __forceinline__ void stamp(BulkParams const& p, int at) {
  if (p.trace != nullptr) p.trace[int64_t(blockIdx.x) * kTraceWords + at] = ptx::globaltimer_ns();
}
template <int kConsumerThreads>
__device__ __forceinline__ void consumer_bar() {
  asm volatile("bar.sync %0, %1;" ::"n"(kNamedBar), "n"(kConsumerThreads) : "memory");
}
__device__ __forceinline__ void bulk_load(uint32_t dst, void const* src, uint32_t bytes, uint32_t bar, uint64_t policy) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1], %2, [%3], %4;" ::"r"(dst),
      "l"(src), "r"(bytes), "r"(bar), "l"(policy)
      : "memory");
}
__device__ __forceinline__ uint4 lds_16(uint32_t addr) {
  uint4 v;
  asm volatile("ld.shared.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "r"(addr) : "memory");
  return v;
}
// 4 bytes from L2 where `ok`, else 0: one predicated load into the destination register, so that no select
// between the loaded value and 0 makes the warp wait for the load where it is issued.
__device__ __forceinline__ uint32_t ld_cg_32_if(void const* p, bool ok) {
  uint32_t v = 0;
  asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %2, 0;\n @q ld.global.cg.u32 %0, [%1];\n}" : "+r"(v) : "l"(p), "r"(int(ok)));
  return v;
}
__device__ __forceinline__ void griddep_wait() { asm volatile("griddepcontrol.wait;" ::: "memory"); }
// 16 bytes from L2 where `ok`, else zeros (one predicated load, as ld_cg_32_if).
__device__ __forceinline__ uint4 ld_cg_128_if(void const* p, bool ok) {
  uint4 v = make_uint4(0, 0, 0, 0);
  asm volatile("{\n .reg .pred q;\n setp.ne.b32 q, %4, 0;\n @q ld.global.cg.v4.u32 {%0,%1,%2,%3}, [%5];\n}"
               : "+r"(v.x), "+r"(v.y), "+r"(v.z), "+r"(v.w)
               : "r"(int(ok)), "l"(p));
  return v;
}
__device__ __forceinline__ void sts_16(uint32_t addr, uint4 v) {
  asm volatile("st.shared.v4.u32 [%0], {%1,%2,%3,%4};" ::"r"(addr), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w) : "memory");
}
// The 128 threads of warpgroup g (named barrier 2 + g; 1 is all the consumers'). Each number an immediate: with
// a register operand ptxas reserves all 16 hardware barriers for the kernel, with these 8.
__device__ __forceinline__ void warpgroup_bar(int g) {
  static_assert(kNamedBar == 1, "warpgroup barriers are numbered 2 to 7");
  switch (g) {
    case 0: asm volatile("bar.sync 2, 128;" ::: "memory"); break;
    case 1: asm volatile("bar.sync 3, 128;" ::: "memory"); break;
    case 2: asm volatile("bar.sync 4, 128;" ::: "memory"); break;
    case 3: asm volatile("bar.sync 5, 128;" ::: "memory"); break;
    case 4: asm volatile("bar.sync 6, 128;" ::: "memory"); break;
    default: asm volatile("bar.sync 7, 128;" ::: "memory"); break;
  }
}

// One k-step of a warp: w[j], the lane's A fragment of mma tile j as bulk_pack stored it (no byte permutes),
// times kMSub B fragments.
template <typename T, int kMSub>
__device__ __forceinline__ void mma_frag(uint4 const (&w)[4], uint32_t const (&x)[kMSub][2], float (&acc)[4][kMSub][4]) {
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    uint32_t const af[4] = {w[j].x, w[j].y, w[j].z, w[j].w};
#pragma unroll
    for (int mb = 0; mb < kMSub; ++mb) cusync::stream::detail::Mma<T>::run(acc[j][mb], af, x[mb][0], x[mb][1]);
  }
}

// bulk_pack's layout: 16-byte chunk ((tile * ksteps + s) * 4 + j) * 32 + lane holds lane (g, t)'s A fragment
// of mma tile j at k-step s, the pairs (rows r, r + 1; column c), (r, r + 1; c + 1), (r + 8, r + 9; c),
// (r + 8, r + 9; c + 1) with r = 16 s + 2 t and c = tile * 64 + 8 g + 2 j (each pair's first row in its low half);
// zeros past K or N. Each ld.shared.v4 of a warp still reads 512 consecutive bytes, and the words are the mma's
// operands as they are (reg_pack_kernel's rows needed 4 byte permutes per mma tile).
//
// With wgmma (kGmma) a k-step is instead the A operand of one m64nNk16 in the no-swizzle K-major layout
// (cusync/sm90/gmma_ss.cuh): 16-byte unit (tile * ksteps + s) * 128 + (2 rg + kg) * 8 + r holds k 16 s + 8 kg ..
// + 7 of column tile * 64 + 8 rg + r (LBO 128 bytes, SBO 256), zeros past K or N.
template <typename T>
__global__ void bulk_pack_kernel(T const* w, int k, int n, int64_t ldw, uint4* out, int64_t chunks, bool halves) {
  uint16_t const* w16 = reinterpret_cast<uint16_t const*>(w);
  int64_t const ks = reg::reg_ksteps(k);
  if constexpr (kGmma) {
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
      int const r = int(c % 8), cm = int((c / 8) % 16);
      int64_t const rest = c / 128;
      int const step = int(rest % ks), tile = int(rest / ks);
      int const rg = cm >> 1, kg = cm & 1;
      int const col8 = tile * kTileN + 8 * rg;  // the row's group of 8 columns (all in N or all past it)
      int const src8 = halves ? (col8 / 16) * 8 + (col8 % 16 >= 8 ? n / 2 : 0) : col8;
      int64_t const col = src8 + r;
      uint32_t v[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        int const row = step * reg::kStepK + 8 * kg + 2 * e;
        uint32_t const lo = row < k && col8 < n ? w16[int64_t(row) * ldw + col] : 0u;
        uint32_t const hi = row + 1 < k && col8 < n ? w16[int64_t(row + 1) * ldw + col] : 0u;
        v[e] = lo | hi << 16;
      }
      out[c] = make_uint4(v[0], v[1], v[2], v[3]);
    }
  } else {
    for (int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; c < chunks; c += int64_t(gridDim.x) * blockDim.x) {
      int const lane = int(c % 32), j = int((c / 32) % 4);
      int64_t const rest = c / 128;
      int const step = int(rest % ks), tile = int(rest / ks);
      int const g = lane >> 2, t = lane & 3;
      int const col8 = tile * kTileN + 8 * g;  // the lane's group of 8 columns (all in N or all past it)
      int const src8 = halves ? (col8 / 16) * 8 + (col8 % 16 >= 8 ? n / 2 : 0) : col8;
      uint32_t v[4];
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        int const row = step * reg::kStepK + 2 * t + (r >= 2 ? 8 : 0);
        int64_t const col = src8 + 2 * j + (r & 1);
        uint32_t const lo = row < k && col8 < n ? w16[int64_t(row) * ldw + col] : 0u;
        uint32_t const hi = row + 1 < k && col8 < n ? w16[int64_t(row + 1) * ldw + col] : 0u;
        v[r] = lo | hi << 16;
      }
      out[c] = make_uint4(v[0], v[1], v[2], v[3]);
    }
  }
}

// CTA c's chunks of a GEMM: [lo, hi) (empty when c >= g).
__device__ __forceinline__ void range_of(BulkGemm const& b, int c, int64_t& lo, int64_t& hi) {
  if (c >= b.g) { lo = hi = 0; return; }
  lo = int64_t(c) * b.q / b.g;
  hi = int64_t(c + 1) * b.q / b.g;
}
// The CTA that owns chunk q: the largest c with c q_total / g <= q.
__device__ __forceinline__ int owner_of(BulkGemm const& b, int64_t q) { return int(((q + 1) * b.g - 1) / b.q); }
// The workspace slot of CTA c's piece of tile t: 2c for the CTA's first tile, 2c + 1 for its last.
__device__ __forceinline__ int64_t slot_of(BulkGemm const& b, int c, int t) {
  int64_t lo, hi;
  range_of(b, c, lo, hi);
  return 2 * int64_t(c) + (lo / b.chunks == t ? 0 : 1);
}

}  // namespace detail

template <typename T, int kMPad>
struct BulkChain {
  using C = BulkCfg<kMPad>;
  static constexpr int kMSub = C::kMSub;
  static constexpr int kConsumerWarps = C::kConsumerWarps;
  static constexpr int kConsumerThreads = C::kConsumerThreads;
  static constexpr int kStepsPerWarp = C::kStepsPerWarp;

  // Dynamic shared memory as BulkCfg lays it out: the ring (its address), the ring's barriers (kStages full, then
  // kStages empty), the consumer warps' partials, and the last arriver's flag.
  struct Smem {
    uint32_t ring, bars;
    float* scratch;
    int* flag;
    uint32_t xs;  // wgmma: the warpgroups' X chunks (kXBytes)
    explicit __device__ __forceinline__ Smem(char* smem)
        : ring(cusync::stream::detail::smem_u32(smem)),
          bars(ring + C::kBarOff),
          scratch(reinterpret_cast<float*>(smem + C::kScratchOff)),
          flag(reinterpret_cast<int*>(smem + C::kBarOff + 2 * C::kStages * 8)),
          xs(ring + C::kScratchOff + C::kScratchBytes) {}
  };

  struct XFrag { uint32_t x[kStepsPerWarp][kMSub][2]; };  // B fragments of the warp's k-steps of a chunk

  // The producer tiles a warp has seen posted in this run: [lo, hi). A wait that found a tile posted stays
  // satisfied (the epoch's posts only grow), so a warp polls each producer tile about once per pass over K,
  // not once per k-step; the walk is ascending in K within a tile and restarts at 0 with the next tile.
  struct Ready {
    int lo = 0, hi = 0;
    __device__ __forceinline__ bool has(int p) const { return p >= lo && p < hi; }
    // Tiles [p, p + r) seen posted: merged with the run where they touch it, else they replace it.
    __device__ __forceinline__ void add(int p, int r = 1) {
      if (p <= hi && p + r >= lo && hi > lo) {
        lo = p < lo ? p : lo;
        hi = p + r > hi ? p + r : hi;
      } else {
        lo = p;
        hi = p + r;
      }
    }
  };

  // How many producer tiles from p on are posted, in one round trip: lane i acquires tile p + i, and the ballot's
  // first clear bit ends the run. Each lane's acquire orders its own tile; the warp barrier after the ballot
  // orders every lane's later loads after all of them (release -> acquire by lane i -> bar.warp.sync -> lane j).
  static __device__ __forceinline__ int posted_run(StageArgs const& a, RunCtx const& ctx, int p, int lane) {
    int const q = p + lane;
    bool const ok = q < a.wait_tiles && ptx::ld_acquire_gpu(a.wait_sems + q) >= cusync::tagged(ctx.epoch, 1);
    unsigned const mask = __ballot_sync(0xffffffffu, ok);
    __syncwarp();
    return mask == 0xffffffffu ? 32 : __ffs(~mask) - 1;
  }
  // Producer tile p posted, as far as this warp is concerned: remembered in `ready`, else polled with its
  // neighbours (posted_run, or posted_run_wide for kWidePoll), else the bounded wait on p alone (a timeout names
  // consumer tile `tile`).
  template <bool kWidePoll = false>
  static __device__ __forceinline__ void ensure_posted(StageArgs const& a, RunCtx const& ctx, int p, int tile, int lane,
                                                       Ready& ready) {
    if (ready.has(p)) return;
    int r = kWidePoll ? posted_run_wide(a, ctx, p, lane) : posted_run(a, ctx, p, lane);
    if (r == 0) {  // not posted yet: the bounded wait on p alone
      StreamGemm<T, 8>::warp_wait(a, ctx, p, tile);
      r = 1;
    }
    ready.add(p, r);
  }

  // The X warp's poll: how many producer tiles from p on are posted, up to 32 x kWide, in one round trip: lane i
  // loads tiles p + i + 32 r back to back (relaxed), then one fence.acq_rel makes every load an acquire (the fence
  // after a load that reads the post's release); the ballots find the first tile not posted.
  static constexpr int kWide = 8;
  static __device__ __forceinline__ int posted_run_wide(StageArgs const& a, RunCtx const& ctx, int p, int lane) {
    uint64_t const expected = cusync::tagged(ctx.epoch, 1);
    uint64_t v[kWide];
#pragma unroll
    for (int r = 0; r < kWide; ++r) {
      int const q = p + lane + 32 * r;
      v[r] = q < a.wait_tiles ? ptx::ld_relaxed_gpu(a.wait_sems + q) : uint64_t(0);
    }
    ptx::fence_acq_rel_gpu();
    int run = 0;
#pragma unroll
    for (int r = 0; r < kWide; ++r) {
      unsigned const mask = __ballot_sync(0xffffffffu, p + lane + 32 * r < a.wait_tiles && v[r] >= expected);
      if (mask != 0xffffffffu) { run += __ffs(~mask) - 1; break; }
      run += 32;
    }
    __syncwarp();
    return run;
  }
  // A chunk position, advanced without division (the consumers' loop does no 64-bit arithmetic per chunk).
  struct Pos {
    int tile, cc;
    // Chunk q (tile-major) of GEMM b: the one division, where a CTA's range starts.
    static __device__ __forceinline__ Pos of(BulkGemm const& b, int64_t q) {
      int const tile = int(q / b.chunks);
      return Pos{tile, int(q - int64_t(tile) * b.chunks)};
    }
    __device__ __forceinline__ void next(int chunks) {
      if (++cc == chunks) { cc = 0; ++tile; }
    }
    __device__ __forceinline__ void skip(int n, int chunks) {
      cc += n;
      while (cc >= chunks) { cc -= chunks; ++tile; }
    }
  };

  // Every producer tile of chunk `at`'s k range posted, where the GEMM reads the producer (ensure_posted for each).
  template <bool kWidePoll = false>
  static __device__ __forceinline__ void ensure_chunk_posted(StageArgs const& a, RunCtx const& ctx, Pos at, int lane,
                                                             Ready& ready) {
    if (a.wait_sems == nullptr) return;
    int const k0 = at.cc * kChunkSteps * reg::kStepK;
    int const kend = a.k < k0 + kChunkSteps * reg::kStepK ? a.k : k0 + kChunkSteps * reg::kStepK;
    for (int kk = k0; kk < kend;) {
      int const pt = int(unsigned(kk) / unsigned(a.wait_tile_cols));
      ensure_posted<kWidePoll>(a, ctx, pt, at.tile, lane, ready);
      kk = (pt + 1) * a.wait_tile_cols;
    }
  }

  // What a lane needs of GEMM b to load X, read once per GEMM into registers: the loop then re-reads no kernel
  // parameter per chunk (the asm statements' memory clobbers would make the compiler reload them).
  struct XView {
    T const* base;       // x + row g * ldx + 2t: the lane's first row (batch tile 0)
    int step8;           // 8 rows, in elements (bulk_make keeps 8 x ldx in int)
    uint32_t rows_ok;    // bit mb: row mb * 8 + g < m
    int k;               // K (a multiple of 8)
    bool waits;          // the GEMM reads the producer (the semaphores themselves are read only to wait)
    __device__ __forceinline__ XView(BulkGemm const& b, int lane) {
      StageArgs const& a = b.a;
      int const g = lane >> 2, t = lane & 3;
      base = static_cast<T const*>(a.x) + int64_t(g) * a.ldx + 2 * t;
      step8 = 8 * a.ldx;
      rows_ok = 0;
#pragma unroll
      for (int mb = 0; mb < kMSub; ++mb) rows_ok |= (mb * 8 + g < a.m ? 1u : 0u) << mb;
      k = a.k;
      waits = a.wait_sems != nullptr;
    }
  };

  // B fragments of k-steps (w, w + 4) of chunk (tile, cc); waits first when the GEMM reads the producer.
  // K and k are multiples of 8 and k of 16, so columns k + 2t (+1) are in range iff k < K, and k + 2t + 8 (+1)
  // iff k + 16 <= K.
  static __device__ __forceinline__ void load_x(BulkGemm const& b, XView const& v, RunCtx const& ctx, Pos at, int w,
                                                int lane, Ready& ready, XFrag& f) {
#pragma unroll
    for (int h = 0; h < kStepsPerWarp; ++h) {
      int const s = at.cc * kChunkSteps + (C::kChunked ? h : w + kConsumerWarps * h);
      int const k = s * reg::kStepK;
      int const kk = kMPad == 64 ? b.a.k : v.k;
      bool const lo_in = k < kk, hi_in = k + 16 <= kk;
      if (lo_in && (kMPad == 64 ? b.a.wait_sems != nullptr : v.waits))
        ensure_posted(b.a, ctx, int(unsigned(k) / unsigned(b.a.wait_tile_cols)), at.tile, lane, ready);
#pragma unroll
      for (int mb = 0; mb < kMSub; ++mb) {
        // At M_pad 64 the row pointers are formed from the parameters at each load: a loop-invariant pointer
        // per batch tile would take 16 registers the accumulators need.
        T const* row = kMPad == 64 ? static_cast<T const*>(b.a.x) + int64_t(mb * 8 + (lane >> 2)) * b.a.ldx + k + 2 * (lane & 3)
                                   : v.base + int64_t(mb * v.step8) + k;
        bool const ok = kMPad == 64 ? mb * 8 + (lane >> 2) < b.a.m : ((v.rows_ok >> mb) & 1u) != 0;
        f.x[h][mb][0] = detail::ld_cg_32_if(row, ok && lo_in);
        f.x[h][mb][1] = detail::ld_cg_32_if(row + 8, ok && hi_in);
      }
    }
  }

  // The piece of tile t that this CTA (c) has just finished: warp partials in shared memory, summed in warp
  // order; then either the epilogue (one piece) or the workspace + arrival, the last arriver finishing the tile.
  static __device__ __forceinline__ void finish_piece(BulkGemm const& b, RunCtx const& ctx, int c, int t,
                                                      float (&acc)[4][kMSub][4], float* scratch, int* flag) {
    int const tid = int(threadIdx.x);
    reg::detail::store_partial(acc, scratch + (tid >> 5) * C::kSlot, kTileN, tid & 31);
    finish_stored(b, ctx, c, t, scratch, flag);
  }
  // wgmma: the warpgroup's accumulators (cusync/sm90/gmma_ss.cuh's layout; D rows are the tile's 64 columns, D
  // columns the batch rows) to its partial, [m][64] as store_partial's.
  static __device__ __forceinline__ void finish_piece(BulkGemm const& b, RunCtx const& ctx, int c, int t,
                                                      float (&acc)[kMSub * 4], float* scratch, int* flag) {
    int const tid = int(threadIdx.x), lane = tid & 31;
    float* dst = scratch + (tid >> 7) * C::kSlot;
    int const col = 16 * ((tid >> 5) & 3) + (lane >> 2);
#pragma unroll
    for (int j = 0; j < kMSub; ++j) {
      int const m = 8 * j + 2 * (lane & 3);
      dst[m * kTileN + col] = acc[4 * j + 0];
      dst[(m + 1) * kTileN + col] = acc[4 * j + 1];
      dst[m * kTileN + col + 8] = acc[4 * j + 2];
      dst[(m + 1) * kTileN + col + 8] = acc[4 * j + 3];
    }
    finish_stored(b, ctx, c, t, scratch, flag);
  }
  // The rest of a piece's finish, with every part's partial in scratch.
  static __device__ __forceinline__ void finish_stored(BulkGemm const& b, RunCtx const& ctx, int c, int t,
                                                       float* scratch, int* flag) {
    StageArgs const& a = b.a;
    int const tid = int(threadIdx.x);
    detail::consumer_bar<kConsumerThreads>();
    int const c_first = detail::owner_of(b, int64_t(t) * b.chunks);
    int const c_last = detail::owner_of(b, int64_t(t + 1) * b.chunks - 1);
    bool const single = c_first == c_last;
    float* slot = a.ws + detail::slot_of(b, c, t) * C::kSlot;
    for (int i = tid * 4; i < a.m * kTileN; i += kConsumerThreads * 4) {
      float4 s = *reinterpret_cast<float4 const*>(scratch + i);
#pragma unroll
      for (int ww = 1; ww < C::kParts; ++ww) {
        float4 const p = *reinterpret_cast<float4 const*>(scratch + ww * C::kSlot + i);
        s.x += p.x; s.y += p.y; s.z += p.z; s.w += p.w;
      }
      if (single)
        *reinterpret_cast<float4*>(scratch + i) = s;
      else
        __stcg(reinterpret_cast<float4*>(slot + i), s);
    }
    detail::consumer_bar<kConsumerThreads>();  // the slot's stores (or the sum in place) before thread 0's release
    if (!single) {
      if (tid == 0) {
        uint32_t const before = cusync::stream::detail::arrive(a.arrivals + t, ctx.epoch);
        bool const last = before == uint32_t(c_last - c_first);
        if (last) ptx::fence_acq_rel_gpu();  // acquire: the other pieces' slots
        *flag = last ? 1 : 0;
      }
      detail::consumer_bar<kConsumerThreads>();
      if (!*flag) return;
    }
    // Epilogue: the pieces in CTA order, bias, activation, 16-byte stores.
    bool const swiglu = a.act == int(Act::kSwiglu);
    reg::detail::tile_epilogue<T>(a, t * kTileN, kTileN, tid, kConsumerThreads, [&](float (&v)[8], float (&u)[8], int m, int col) {
      if (single)
        cusync::stream::detail::add_8(v, u, scratch + m * kTileN + col, swiglu, false);
      else
        for (int cc = c_first; cc <= c_last; ++cc)
          cusync::stream::detail::add_8(v, u, a.ws + detail::slot_of(b, cc, t) * C::kSlot + m * kTileN + col, swiglu,
                                        true);
    });
    detail::consumer_bar<kConsumerThreads>();  // every thread's stores of the tile, and the scratch reads, before the post
    if (a.post_sems != nullptr && tid == 0 && t != a.skip_post_tile) post_store(a.post_sems + t, ctx.epoch);
  }

  static __device__ void producer(BulkParams const& p, char* smem) {
    uint32_t const ring = cusync::stream::detail::smem_u32(smem);
    uint32_t const bars = ring + C::kBarOff;
    uint64_t const policy = cusync::stream::detail::policy_evict_first();
    int slot = 0;
    uint32_t phase = 0;
    int const c = int(blockIdx.x);
    for (int gi = 0; gi < 2; ++gi) {
      if ((gi == 0 && p.which == kOnlyGemm2) || (gi == 1 && p.which == kOnlyGemm1)) continue;
      BulkGemm const& b = p.gm[gi];
      int64_t lo, hi;
      detail::range_of(b, c, lo, hi);
      char const* w = static_cast<char const*>(b.a.w);
      Pos at = Pos::of(b, lo);
      for (int64_t q = lo; q < hi; ++q) {
        int const s0 = at.cc * kChunkSteps;
        int const steps = b.ksteps - s0 < kChunkSteps ? b.ksteps - s0 : kChunkSteps;
        uint32_t const bytes = uint32_t(steps) * kStepBytes;
        ws::dev::mbar_wait(bars + (C::kStages + slot) * 8, phase ^ 1u);  // empty
        uint32_t const full = bars + slot * 8;
        ws::dev::mbar_expect_tx(full, bytes + uint32_t(C::kXSlotBytes));  // X by TMA: the X warp's box too
        detail::bulk_load(ring + slot * kChunkBytes, w + (int64_t(at.tile) * b.ksteps + s0) * kStepBytes, bytes, full,
                          policy);
        if (++slot == C::kStages) { slot = 0; phase ^= 1u; }
        at.next(b.chunks);
      }
      detail::stamp(p, gi == 0 ? kAtIssuedGemm1 : kAtIssuedAll);
    }
  }

  // X by TMA: the X warp walks the CTA's chunks in the producer's order; per chunk it waits for the slot to be free
  // (its empty barrier, as the producer), then, for a GEMM that reads the producer, for gemm1's tiles covering the
  // chunk's k range (ensure_posted<true>: 256 tiles a round trip, remembered; a timeout is recorded and the warp
  // goes on), and lane 0 issues the chunk's two X boxes, which complete on the slot's full barrier (the producer's
  // expect_tx counted their bytes; when they land first, the phase still waits for the producer's arrival).
  // fence.proxy.async.global after the acquires: H's generic stores before the TMA reads them.
  static __device__ void x_issuer(BulkParams const& p, RunCtx const& ctx, char* smem) {
    uint32_t const ring = cusync::stream::detail::smem_u32(smem);
    uint32_t const bars = ring + C::kBarOff;
    int const lane = int(threadIdx.x) & 31;
    int const c = int(blockIdx.x);
    int slot = 0;
    uint32_t phase = 0;
    for (int gi = 0; gi < 2; ++gi) {
      if ((gi == 0 && p.which == kOnlyGemm2) || (gi == 1 && p.which == kOnlyGemm1)) continue;
      BulkGemm const& b = p.gm[gi];
      StageArgs const& a = b.a;
      int64_t lo, hi;
      detail::range_of(b, c, lo, hi);
      Ready ready;
      Pos at = Pos::of(b, lo);
      for (int64_t q = lo; q < hi; ++q) {
        ws::dev::mbar_wait(bars + (C::kStages + slot) * 8, phase ^ 1u);  // empty
        int const k0 = at.cc * kChunkSteps * reg::kStepK;
        ensure_chunk_posted<true>(a, ctx, at, lane, ready);
        if (lane == 0) {
          if (a.wait_sems != nullptr) asm volatile("fence.proxy.async.global;" ::: "memory");
          uint32_t const dst = ring + C::kXSlotOff + slot * C::kXSlotBytes;
          ws::dev::tma_load_2d(dst, &b.tmx, bars + slot * 8, k0, 0);
          ws::dev::tma_load_2d(dst + kMPad * 128, &b.tmx, bars + slot * 8, k0 + 64, 0);
        }
        __syncwarp();
        if (++slot == C::kStages) { slot = 0; phase ^= 1u; }
        at.next(b.chunks);
      }
    }
  }

  static __device__ void consumers(BulkParams const& p, RunCtx const& ctx, char* smem) {
    [[maybe_unused]] auto const [ring, bars, scratch, flag, xs_] = Smem(smem);
    int const lane = int(threadIdx.x) & 31, w = int(threadIdx.x) >> 5;
    int const c = int(blockIdx.x);
    bool const full_mode = p.mode == kModeFull;
    int slot = 0;
    uint32_t phase = 0;
    for (int gi = 0; gi < 2; ++gi) {
      if ((gi == 0 && p.which == kOnlyGemm2) || (gi == 1 && p.which == kOnlyGemm1)) continue;
      BulkGemm const& b = p.gm[gi];
      int64_t lo, hi;
      detail::range_of(b, c, lo, hi);
      if (lo >= hi) continue;
      int const n_chunks = int(hi - lo);  // <= tiles x chunks-per-tile (bulk_make keeps it in int)
      Ready ready;
      XView const xv(b, lane);
      int const chunks = b.chunks, ksteps = b.ksteps;
      float acc[4][kMSub][4];
      reg::detail::zero(acc);
      Pos at = Pos::of(b, lo);
      // X fragments in kBuf register buffers, chunk i in xs[i % kBuf]: chunk i + kXAhead's loads are issued
      // before chunk i's full-barrier wait, so each is in flight for kXAhead chunks of the ring. The loop is
      // unrolled by kBuf so that every buffer index is static: a rotation by register copies would make the
      // warp wait for the newest loads at every chunk.
      constexpr int kBuf = C::kXAhead + 1;
      XFrag xs[kBuf];
      Pos ahead = at;
      if (full_mode) {
#pragma unroll
        for (int d = 0; d < C::kXAhead; ++d)
          if (d < n_chunks) {
            load_x(b, xv, ctx, ahead, w, lane, ready, xs[d]);
            ahead.next(chunks);
          }
      }
      if (gi == 1 && threadIdx.x == 0) detail::stamp(p, kAtGemm2Ready);
      for (int i0 = 0; i0 < n_chunks; i0 += kBuf) {
#pragma unroll
        for (int d = 0; d < kBuf; ++d) {
          int const i = i0 + d;
          if (i >= n_chunks) break;
          Pos const here = at;
          at.next(chunks);
          bool const piece_end = i + 1 == n_chunks || at.cc == 0;
          if (full_mode && i + C::kXAhead < n_chunks) {
            load_x(b, xv, ctx, ahead, w, lane, ready, xs[(d + C::kXAhead) % kBuf]);
            ahead.next(chunks);
          }
          int const steps = ksteps - here.cc * kChunkSteps < kChunkSteps ? ksteps - here.cc * kChunkSteps : kChunkSteps;
          ws::dev::mbar_wait(bars + slot * 8, phase);  // full
          if (gi == 0 && i == 0 && threadIdx.x == 0) detail::stamp(p, kAtFirstData);
          if (full_mode) {
            // At M_pad <= 32 every shared-memory load of the chunk first, then the mma: one load latency per
            // chunk, not one per k-step (volatile asm: they stay in this order, after the wait). At 64 the
            // registers are not there, and 32 mma per k-step cover the next k-step's loads anyway.
            if constexpr (kMPad <= 32) {
              uint4 wv[kStepsPerWarp][4];
#pragma unroll
              for (int h = 0; h < kStepsPerWarp; ++h) {
                uint32_t const base = ring + slot * kChunkBytes + (w + kConsumerWarps * h) * kStepBytes + lane * 16;
                if (w + kConsumerWarps * h < steps) {
#pragma unroll
                  for (int j = 0; j < 4; ++j) wv[h][j] = detail::lds_16(base + j * 512);
                }
              }
#pragma unroll
              for (int h = 0; h < kStepsPerWarp; ++h)
                if (w + kConsumerWarps * h < steps) detail::mma_frag<T, kMSub>(wv[h], xs[d].x[h], acc);
            } else {
#pragma unroll
              for (int h = 0; h < kStepsPerWarp; ++h) {
                int const s = w + kConsumerWarps * h;
                if (s < steps) {
                  uint32_t const base = ring + slot * kChunkBytes + s * kStepBytes + lane * 16;
                  uint4 wv[4];
#pragma unroll
                  for (int j = 0; j < 4; ++j) wv[j] = detail::lds_16(base + j * 512);
                  detail::mma_frag<T, kMSub>(wv, xs[d].x[h], acc);
                }
              }
            }
          }
          ws::dev::mbar_arrive(bars + (C::kStages + slot) * 8);  // empty: every lane, after its last read of the slot
          if (++slot == C::kStages) { slot = 0; phase ^= 1u; }
          if (full_mode && piece_end) {
            finish_piece(b, ctx, c, here.tile, acc, scratch, flag);
            reg::detail::zero(acc);
          }
        }
      }
      if (threadIdx.x == 0) detail::stamp(p, gi == 0 ? kAtDoneGemm1 : kAtDone);
    }
  }
  // kChunked (M_pad 8): warp w takes chunks w, w + W, ... of the CTA's range of each GEMM, all 8 k-steps, so
  // W warps work on W chunks at once and a chunk's fixed work is paid once. Slot and phase of chunk j (counted
  // over both GEMMs, as the producer issues them): j % kStages and (j / kStages) & 1; a slot has one consumer,
  // whose arrival frees it. W divides kStages, so a slot's chunks (j, j + kStages, ...) all belong to one warp: a
  // warp that waits for chunk j on its parity has itself consumed chunk j - kStages, whose phase has therefore
  // completed. (With another warp owning j - kStages, a fill of j - kStages still in flight would leave the
  // barrier on the phase before it, of j's parity, and the wait for j would pass at once on stale data: the
  // bulk copies need not complete in the order they were issued.) X fragments of the warp's next chunk are loaded before this one's full-barrier wait
  // (two buffers, the loop unrolled by 2). A piece's partials are in every warp's accumulators: each warp
  // finishes every piece of the range in order, with zeros where it had none of its chunks, before its first
  // chunk of the next piece (finish_piece's barriers are all the consumer warps').
  static __device__ void consumers_chunked(BulkParams const& p, RunCtx const& ctx, char* smem) {
    constexpr int W = kConsumerWarps;
    [[maybe_unused]] auto const [ring, bars, scratch, flag, xs_] = Smem(smem);
    int const lane = int(threadIdx.x) & 31, w = int(threadIdx.x) >> 5;
    int const c = int(blockIdx.x);
    bool const full_mode = p.mode == kModeFull;
    int64_t issued = 0;  // chunks of earlier GEMMs in this CTA's ring
    for (int gi = 0; gi < 2; ++gi) {
      if ((gi == 0 && p.which == kOnlyGemm2) || (gi == 1 && p.which == kOnlyGemm1)) continue;
      BulkGemm const& b = p.gm[gi];
      int64_t lo, hi;
      detail::range_of(b, c, lo, hi);
      if (lo >= hi) continue;
      int const n_chunks = int(hi - lo);
      Ready ready;
      XView const xv(b, lane);
      int const chunks = b.chunks, ksteps = b.ksteps;
      int cur = Pos::of(b, lo).tile;               // the next piece this warp finishes
      int const last = Pos::of(b, hi - 1).tile;    // the range's last piece
      int slot = int((issued + w) % C::kStages);
      uint32_t phase = uint32_t((issued + w) / C::kStages) & 1u;
      float acc[4][kMSub][4];
      reg::detail::zero(acc);
      Pos at = Pos::of(b, lo + (w < n_chunks ? w : 0));
      XFrag xs[2];
      Pos ahead = at;
      if (full_mode && w < n_chunks) {
        load_x(b, xv, ctx, ahead, w, lane, ready, xs[0]);
        ahead.skip(W, chunks);
      }
      if (gi == 1 && threadIdx.x == 0) detail::stamp(p, kAtGemm2Ready);
      for (int i0 = w; i0 < n_chunks; i0 += 2 * W) {
#pragma unroll
        for (int d = 0; d < 2; ++d) {
          int const i = i0 + d * W;
          if (i >= n_chunks) break;
          Pos const here = at;
          at.skip(W, chunks);
          for (; cur < here.tile; ++cur) {
            if (full_mode) finish_piece(b, ctx, c, cur, acc, scratch, flag);
            reg::detail::zero(acc);
          }
          if (full_mode && i + W < n_chunks) {
            load_x(b, xv, ctx, ahead, w, lane, ready, xs[d ^ 1]);
            ahead.skip(W, chunks);
          }
          int const steps = ksteps - here.cc * kChunkSteps < kChunkSteps ? ksteps - here.cc * kChunkSteps : kChunkSteps;
          ws::dev::mbar_wait(bars + slot * 8, phase);  // full
          if (gi == 0 && i == 0 && threadIdx.x == 0) detail::stamp(p, kAtFirstData);
          if (full_mode) {
            // k-step h's shared loads two steps ahead of its mma (volatile asm: issued in this order).
            uint32_t const base = ring + slot * kChunkBytes + lane * 16;
            uint4 wv[3][4];
#pragma unroll
            for (int h = 0; h < 2; ++h)
              if (h < steps) {
#pragma unroll
                for (int j = 0; j < 4; ++j) wv[h][j] = detail::lds_16(base + h * kStepBytes + j * 512);
              }
#pragma unroll
            for (int h = 0; h < kChunkSteps; ++h) {
              if (h + 2 < kChunkSteps && h + 2 < steps) {
#pragma unroll
                for (int j = 0; j < 4; ++j) wv[(h + 2) % 3][j] = detail::lds_16(base + (h + 2) * kStepBytes + j * 512);
              }
              if (h < steps) detail::mma_frag<T, kMSub>(wv[h % 3], xs[d].x[h], acc);
            }
          }
          ws::dev::mbar_arrive(bars + (C::kStages + slot) * 8);  // empty: every lane, after its last read of the slot
          slot += W;
          if (slot >= C::kStages) { slot -= C::kStages; phase ^= 1u; }
        }
      }
      for (; cur <= last; ++cur) {
        if (full_mode) finish_piece(b, ctx, c, cur, acc, scratch, flag);
        reg::detail::zero(acc);
      }
      // The next GEMM's first chunks reuse slots of this one's last, other warps' chunks: every warp done here
      // first (in full mode finish_piece's barriers already ordered them).
      if (!full_mode) detail::consumer_bar<kConsumerThreads>();
      issued += n_chunks;
      if (threadIdx.x == 0) detail::stamp(p, gi == 0 ? kAtDoneGemm1 : kAtDone);
    }
  }

  // wgmma (kGmma): X's rows [0, M_pad) x k [k0, k0 + 128) of chunk `at`, thread wt's 16-byte units wt + 128 u
  // (batch row 8 u + wt % 8, k k0 + 8 (wt / 8)), into registers; zeros past m or K. Waits first, when the GEMM reads
  // the producer, for every producer tile of the chunk's k range (each warp for itself, as load_x).
  static __device__ __forceinline__ void load_x_gmma(BulkGemm const& b, RunCtx const& ctx, Pos at, int wt, int lane,
                                                     Ready& ready, uint4 (&xr)[kMSub]) {
    StageArgs const& a = b.a;
    int const k0 = at.cc * kChunkSteps * reg::kStepK;
    ensure_chunk_posted(a, ctx, at, lane, ready);
    int const k = k0 + 8 * (wt >> 3);
    T const* row = static_cast<T const*>(a.x) + int64_t(wt & 7) * a.ldx + k;
#pragma unroll
    for (int u = 0; u < kMSub; ++u)
      xr[u] = detail::ld_cg_128_if(row + int64_t(8 * u) * a.ldx, 8 * u + (wt & 7) < a.m && k < a.k);
  }

  // kGmma: warpgroup g of kWG takes chunks g, g + kWG, ... of the CTA's range of each GEMM, as consumers_chunked's
  // warps take theirs (the same slot ownership: kWG divides kStages, so a slot's chunks all belong to one
  // warpgroup). Per chunk its 128 threads store X's fragment (loaded one of its chunks ahead) to the warpgroup's
  // buffer in the B operand's layout (unit u at byte 16 u: batch rows 8 u / 128.. are SBO 2048 apart, k groups LBO
  // 128), then issue one m64nM_padk16 per k-step on the ring slot as bulk_pack laid it out (A: LBO 128, SBO 256),
  // wait for them, and free the slot. Each warpgroup's accumulators are its partial; pieces end as
  // consumers_chunked's do, the partials summed in warpgroup order.
  static __device__ void consumers_gmma(BulkParams const& p, RunCtx const& ctx, char* smem) {
    constexpr int W = C::kWG;
    constexpr bool kBf16 = std::is_same<T, __nv_bfloat16>::value;
    [[maybe_unused]] auto const [ring, bars, scratch, flag, xs_all] = Smem(smem);
    int const tid = int(threadIdx.x), lane = tid & 31, wg = tid >> 7, wt = tid & 127;
    uint32_t const xs = xs_all + wg * C::kXChunkBytes;
    int const c = int(blockIdx.x);
    bool const full_mode = p.mode == kModeFull;
    int64_t issued = 0;  // chunks of earlier GEMMs in this CTA's ring
    for (int gi = 0; gi < 2; ++gi) {
      if ((gi == 0 && p.which == kOnlyGemm2) || (gi == 1 && p.which == kOnlyGemm1)) continue;
      BulkGemm const& b = p.gm[gi];
      int64_t lo, hi;
      detail::range_of(b, c, lo, hi);
      if (lo >= hi) continue;
      int const n_chunks = int(hi - lo);
      Ready ready;
      int const chunks = b.chunks, ksteps = b.ksteps;
      int cur = Pos::of(b, lo).tile;             // the next piece this warpgroup finishes
      int const last = Pos::of(b, hi - 1).tile;  // the range's last piece
      int slot = int((issued + wg) % C::kStages);
      uint32_t phase = uint32_t((issued + wg) / C::kStages) & 1u;
      float acc[kMSub * 4];
#pragma unroll
      for (int i = 0; i < kMSub * 4; ++i) acc[i] = 0.f;
      // X of the warpgroup's chunks in kXA register buffers, chunk j (its j-th) in xr[j % kXA], loaded kXA of its
      // chunks ahead; the loop is unrolled by kXA so that every buffer index is static.
      constexpr int kXA = CUSYNC_BULK_GMMA_X_AHEAD;
      Pos at = Pos::of(b, lo + (wg < n_chunks ? wg : 0));
      Pos ahead = at;
      uint4 xr[kXA][kMSub];
#pragma unroll
      for (int d = 0; d < kXA; ++d)
        if (full_mode && !C::kXTma && wg + d * W < n_chunks) {
          load_x_gmma(b, ctx, ahead, wt, lane, ready, xr[d]);
          ahead.skip(W, chunks);
        }
      if (gi == 1 && threadIdx.x == 0) detail::stamp(p, kAtGemm2Ready);
      for (int i0 = wg; i0 < n_chunks; i0 += kXA * W) {
#pragma unroll
        for (int d = 0; d < kXA; ++d) {
          int const i = i0 + d * W;
          if (i >= n_chunks) break;
          Pos const here = at;
          at.skip(W, chunks);
          for (; cur < here.tile; ++cur) {
            if (full_mode) finish_piece(b, ctx, c, cur, acc, scratch, flag);
#pragma unroll
            for (int e = 0; e < kMSub * 4; ++e) acc[e] = 0.f;
          }
          int const steps = ksteps - here.cc * kChunkSteps < kChunkSteps ? ksteps - here.cc * kChunkSteps : kChunkSteps;
          if (full_mode && !C::kXTma) {
            // The buffer's last reader is this warpgroup's previous chunk's wgmma. A thread's wait<0> below covers
            // only its own warp's part of it (another warp's may still read the buffer), hence the barrier: every
            // warp past its wait before any thread stores the next X.
            detail::warpgroup_bar(wg);
#pragma unroll
            for (int u = 0; u < kMSub; ++u) detail::sts_16(xs + 16 * (wt + 128 * u), xr[d][u]);
            gmma::fence_proxy_shared();
            detail::warpgroup_bar(wg);
            if (i + kXA * W < n_chunks) {
              load_x_gmma(b, ctx, ahead, wt, lane, ready, xr[d]);
              ahead.skip(W, chunks);
            }
          }
          ws::dev::mbar_wait(bars + slot * 8, phase);  // full
          if (gi == 0 && i == 0 && threadIdx.x == 0) detail::stamp(p, kAtFirstData);
          if (full_mode) {
            uint32_t const wa = ring + slot * kChunkBytes;
            uint32_t const xa = ring + C::kXSlotOff + slot * C::kXSlotBytes;  // X by TMA: the stage's X
            if (steps < kChunkSteps) {
              // A tile's last chunk, short of k-steps: zeros past them (X is zero there too, but the slot's old
              // bytes need not be finite), so that every chunk runs all kChunkSteps wgmma without a branch.
              for (int o = steps * kStepBytes + wt * 16; o < kChunkBytes; o += 128 * 16)
                detail::sts_16(wa + o, make_uint4(0, 0, 0, 0));
              gmma::fence_proxy_shared();
              detail::warpgroup_bar(wg);
            }
            gmma::fence_regs(acc);
            gmma::fence();
#pragma unroll
            // X by TMA: k-step s is in box s / 4 (M_pad rows of 128 bytes), 32 bytes a k-step into its rows.
            for (int s = 0; s < kChunkSteps; ++s)
              gmma::mma_64xN<kMPad, kBf16>(
                  gmma::desc_k_major(wa + s * kStepBytes, 128, 256),
                  C::kXTma ? gmma::desc_k_major_sw128(xa + (s / 4) * kMPad * 128 + (s % 4) * 32, 1024)
                           : gmma::desc_k_major(xs + s * 256, 128, 2048),
                  acc);
            gmma::commit();
            gmma::wait<0>();
            gmma::fence_regs(acc);
          }
          ws::dev::mbar_arrive(bars + (C::kStages + slot) * 8);  // empty: every thread, after its wgmma completed
          slot += W;
          if (slot >= C::kStages) { slot -= C::kStages; phase ^= 1u; }
        }
      }
      for (; cur <= last; ++cur) {
        if (full_mode) finish_piece(b, ctx, c, cur, acc, scratch, flag);
#pragma unroll
        for (int e = 0; e < kMSub * 4; ++e) acc[e] = 0.f;
      }
      if (!full_mode) detail::consumer_bar<kConsumerThreads>();
      issued += n_chunks;
      if (threadIdx.x == 0) detail::stamp(p, gi == 0 ? kAtDoneGemm1 : kAtDone);
    }
  }
};

template <typename T, int kMPad, bool kPdl>
__global__ void __launch_bounds__(BulkCfg<kMPad>::kThreads, 1)
    bulk_chain_kernel(BulkParams const __grid_constant__ p, StreamState* state, SyncErrorInfo* error,
                      uint64_t timeout_ns) {
  using C = BulkCfg<kMPad>;
  extern __shared__ __align__(1024) char smem[];
  if (kPdl) cusync::stream::detail::griddep_launch_dependents();
  uint32_t const bars = cusync::stream::detail::smem_u32(smem) + C::kBarOff;
  if (threadIdx.x == 0) {
    for (int i = 0; i < C::kStages; ++i) {
      ws::dev::mbar_init(bars + i * 8, 1);                                   // full: the producer's arrive + tx
      ws::dev::mbar_init(bars + (C::kStages + i) * 8, C::kEmptyArrivals);  // empty: every lane of the slot's consumer warps
    }
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    detail::stamp(p, kAtEntry);
    if (p.trace != nullptr) {
      uint32_t sm;
      asm volatile("mov.u32 %0, %%smid;" : "=r"(sm));
      p.trace[int64_t(blockIdx.x) * kTraceWords + kSmId] = sm;
    }
  }
  __syncthreads();
  int const warp = int(threadIdx.x) >> 5;
  uint32_t epoch = 0;
  if (warp == C::kConsumerWarps) {
    if ((threadIdx.x & 31) == 0) BulkChain<T, kMPad>::producer(p, smem);
    __syncwarp();
  } else if (C::kXTma && warp == C::kConsumerWarps + 1) {
    if (kPdl) detail::griddep_wait();  // X (and H's semaphores) of this run are the previous run's to finish first
    epoch = ptx::ld_relaxed_gpu(&state->epoch);
    BulkChain<T, kMPad>::x_issuer(p, RunCtx{epoch, error, timeout_ns}, smem);
  } else {
    if (kPdl) detail::griddep_wait();  // the previous run (epoch, X, workspace) is complete and visible
    epoch = ptx::ld_relaxed_gpu(&state->epoch);
    RunCtx const ctx{epoch, error, timeout_ns};
    if constexpr (kGmma)
      BulkChain<T, kMPad>::consumers_gmma(p, ctx, smem);
    else if constexpr (C::kChunked)
      BulkChain<T, kMPad>::consumers_chunked(p, ctx, smem);
    else
      BulkChain<T, kMPad>::consumers(p, ctx, smem);
  }
  // close_run: the last CTA of the run opens the next epoch (one thread per CTA, after every warp is done).
  // Every tagged word holds (epoch << 32 | count) and only grows; the run of the last epoch zeroes them all
  // (every CTA's arrivals and posts came before its arrival on `done`, which the fence acquires) before the
  // next run starts again at epoch 0, so no word of epoch 0xFFFFFFFF ever satisfies a wait of epoch 0.
  __syncthreads();
  if (threadIdx.x == 0 && p.which != kOnlyGemm1) {
    uint32_t const before = cusync::stream::detail::arrive(&state->done, epoch);
    if (before == gridDim.x - 1) {
      if (epoch == 0xFFFFFFFFu) {
        ptx::fence_acq_rel_gpu();
        for (int g = 0; g < 2; ++g) {
          StageArgs const& a = p.gm[g].a;
          for (int t = 0; t < p.gm[g].tiles; ++t) {
            if (a.arrivals != nullptr) a.arrivals[t] = 0;
            if (a.post_sems != nullptr) a.post_sems[t] = 0;
          }
        }
        state->done = 0;
        __threadfence();
      }
      cusync::stream::detail::st_relaxed_gpu(&state->epoch, epoch + 1u);  // 0 after the last epoch
    }
  }
}

// ---- host side ----

// Bytes of the k x n weights packed for the kernel (a multiple of 16).
constexpr int64_t bulk_packed_bytes(int k, int n) { return reg::reg_packed_chunks(n, k, 1) * 16; }

// Packs row-major w [k, n] (rows ldw elements apart) into `out` (bulk_packed_bytes(k, n), 16-byte aligned) on
// `stream`: the layout of detail::bulk_pack_kernel (mma A fragments). halves: w is [gate | up] in halves of n / 2
// columns, packed interleaved in groups of 8 as the SwiGLU epilogue reads them.
template <typename T>
inline cudaError_t bulk_pack(T const* w, int k, int n, int64_t ldw, bool halves, void* out, cudaStream_t stream) {
  detail::bulk_pack_kernel<T><<<2048, 256, 0, stream>>>(w, k, n, ldw, static_cast<uint4*>(out),
                                                        bulk_packed_bytes(k, n) / 16, halves);
  return cudaGetLastError();
}

// Fills one GEMM of the chain (a.w must be the weights packed by bulk_pack); nullptr, or
// what is wrong.
inline char const* bulk_make(StageArgs const& a, int m_pad, int grid, BulkGemm* out) {
  auto misaligned = [](void const* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) != 0; };
  if (m_pad != 8 && m_pad != 16 && m_pad != 32 && m_pad != 64) return "M_pad must be 8, 16, 32 or 64";
  if (a.m < 1 || a.m > m_pad) return "m must be in 1..M_pad";
  if (a.n % 8 || a.k % 8 || a.ldx % 8 || a.ldo % 8) return "n, k, ldx and ldo must be multiples of 8";
  if (a.ldx < a.k) return "ldx >= k is required";
  if (int64_t(a.ldx) * 64 > INT32_MAX) return "ldx must stay below 2^31 / 64";
  if (a.act < 0 || a.act > int(Act::kSilu)) return "act must be identity, relu, gelu, swiglu, gelu_tanh or silu";
  if (a.act == int(Act::kSwiglu) ? (a.n % 16 != 0 || a.ldo < a.n / 2) : a.ldo < a.n)
    return "SwiGLU needs n % 16 == 0 and ldo >= n/2; other acts need ldo >= n";
  if (misaligned(a.x) || misaligned(a.w) || misaligned(a.out) || misaligned(a.bias) || misaligned(a.ws))
    return "x, w, bias, out and ws must be 16-byte aligned";
  if (a.wait_sems != nullptr) {
    if (a.wait_tile_cols % reg::kStepK != 0) return "producer tile width must be a multiple of 16";
    if (int64_t(a.wait_tiles) * a.wait_tile_cols < a.k) return "producer tiles do not cover k";
  }
  BulkGemm b{};
  b.a = a;
  b.tiles = reg::tiles_of(a.n, kTileN);
  b.ksteps = int(reg::reg_ksteps(a.k));
  b.chunks = (b.ksteps + kChunkSteps - 1) / kChunkSteps;
  b.q = int64_t(b.tiles) * b.chunks;
  if (b.q > int64_t(1) << 30) return "too many chunks (tiles x chunks per tile must stay below 2^30)";
  b.g = int(b.q < grid ? b.q : grid);
  if (a.ws == nullptr || a.arrivals == nullptr) return "workspace and arrival counters are required";
  if (x_tma_for(m_pad)) {
    auto enc = ws::tensor_map_encoder();
    if (enc == nullptr) return "cuTensorMapEncodeTiled is missing (the driver is older than CUDA 12.0)";
    if (kChunkSteps * reg::kStepK != 128) return "X by TMA needs chunks of 128 k (CUSYNC_BULK_CHUNK_STEPS 8)";
    cuuint64_t dims[2] = {cuuint64_t(a.k), cuuint64_t(a.m)};
    cuuint64_t strides[1] = {cuuint64_t(a.ldx) * 2u};
    cuuint32_t box[2] = {64u, cuuint32_t(m_pad)};
    cuuint32_t estr[2] = {1u, 1u};
    if (enc(&b.tmx, CU_TENSOR_MAP_DATA_TYPE_UINT16, 2, const_cast<void*>(a.x), dims, strides, box, estr,
            CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
      return "cuTensorMapEncodeTiled failed for X's tensor map";
  }
  if (a.ws_slots < 2 * int64_t(b.g)) return "workspace needs 2 x grid slots of 64 x M_pad floats";
  *out = b;
  return nullptr;
}

template <typename T, int kMPad, bool kPdl>
inline cudaError_t bulk_prepare() {
  return cudaFuncSetAttribute(bulk_chain_kernel<T, kMPad, kPdl>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                              BulkCfg<kMPad>::kSmemBytes);
}

// grid: at most the SM count (one CTA per SM: the kernel's shared memory allows no second one), so the grid is
// co-resident. pdl: launched as a programmatic dependent of the previous kernel in the stream.
// cooperative: a cooperative launch, which the driver schedules only with every CTA resident at once (a kernel
// of another stream holding SMs delays it rather than leaving CTAs waiting on unscheduled ones).
template <typename T, int kMPad>
inline cudaError_t bulk_launch(BulkParams const& p, bool pdl, StreamState* state, SyncErrorInfo* error,
                               uint64_t timeout_ns, cudaStream_t stream, bool cooperative = false) {
  int const grid = p.grid;
  int device = 0, sms = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device);
  if (e != cudaSuccess) return e;
  // Every chunk belongs to a CTA of p.grid, and all of them must be resident at once (one per SM).
  if (grid < 1 || grid > sms || p.gm[0].g > grid || p.gm[1].g > grid) return cudaErrorInvalidConfiguration;
  cudaLaunchAttribute attrs[2];
  cudaLaunchConfig_t cfg = launch_config(grid, BulkCfg<kMPad>::kThreads, BulkCfg<kMPad>::kSmemBytes, stream, pdl, &attrs[0]);
  if (cooperative) {
    attrs[cfg.numAttrs].id = cudaLaunchAttributeCooperative;
    attrs[cfg.numAttrs].val.cooperative = 1;
    cfg.attrs = attrs;
    cfg.numAttrs += 1;
  }
  if (pdl) return cudaLaunchKernelEx(&cfg, bulk_chain_kernel<T, kMPad, true>, p, state, error, timeout_ns);
  return cudaLaunchKernelEx(&cfg, bulk_chain_kernel<T, kMPad, false>, p, state, error, timeout_ns);
}

}  // namespace cusync::stream::bulk
