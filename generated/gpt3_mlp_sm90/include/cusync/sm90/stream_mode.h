// cusync sm90 backend: run() mode kStream, host side (what cusync::sm90::Chain needs to size, pack and launch
// it; no device code here: the kernels are in cusync/sm90/stream_mode.cuh, which a project's
// src/<name>_stream.cu instantiates for its element type).
//
// The mode computes a two-GEMM chain Y = act2(act1(X W1 + b1) W2 + b2) at decode sizes (M <= kStreamMaxM) in
// one persistent kernel, one CTA per SM (cusync/sm90/bulk_chain.cuh): a producer lane streams the weights,
// packed once so that every 16 KB copy reads consecutive bytes, through a ring of bulk copies, gemm1's and
// then gemm2's without a gap; four consumer warps run mma.sync. Both GEMMs are split stream-K over the SMs
// with a deterministic reduction (a workspace slot per piece, summed in CTA order by the last arriver), so a
// run is bitwise reproducible; each K range of gemm2 waits only for the gemm1 tiles it reads (bounded waits
// that record the tile in the chain's SyncErrorInfo). The packed copy costs as much memory as the weights:
// a spec asks for it with `optimizations: {stream_weights: true}`.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cuda_runtime.h>

#include "cusync/status.h"
#include "cusync/sync_error.h"

namespace cusync::sm90 {

// Mode kStream runs up to this many rows (the kernel's M_pad: 8, 16, 32 or 64).
constexpr int kStreamMaxM = 64;
// The packed weights: 64-column tiles, each a run of 16-row k-steps of 2 KB (cusync/sm90/bulk_chain.cuh).
constexpr int kStreamTileN = 64;
constexpr int kStreamStepK = 16;
constexpr int64_t kStreamStepBytes = 2048;
// One split partial at the largest M_pad (fp32); each GEMM has two per CTA.
constexpr int64_t kStreamSlotFloats = int64_t(kStreamTileN) * kStreamMaxM;
// The run state (epoch and closing count, cusync::stream::StreamState), padded.
constexpr int64_t kStreamStateBytes = 256;

constexpr int stream_tiles(int n) { return (n + kStreamTileN - 1) / kStreamTileN; }
constexpr int64_t stream_packed_bytes(int k, int n) {
  return int64_t(stream_tiles(n)) * ((k + kStreamStepK - 1) / kStreamStepK) * kStreamStepBytes;
}

// The epilogue's activation (cusync::stream::Act).
enum class StreamAct : int { kIdentity = 0, kRelu = 1, kGelu = 2, kSwiglu = 3, kGeluTanh = 4, kSilu = 5 };

// One GEMM of a kStream run: out = act(x packed + bias).
struct StreamGemmArgs {
  void const* x = nullptr;       // [m, k], rows ldx elements apart
  int64_t ldx = 0;
  void const* packed = nullptr;  // the weights as StreamKernels::pack wrote them
  void const* bias = nullptr;    // [n] or null
  void* out = nullptr;           // [m, n] ([m, n / 2] after SwiGLU), rows ldo apart
  int64_t ldo = 0;
  int n = 0, k = 0;              // n: the GEMM's columns (a gated GEMM's gate and up, interleaved in groups of 8)
  int act = 0;                   // StreamAct
  float* ws = nullptr;           // 2 x grid slots of kStreamSlotFloats
  uint64_t* arrivals = nullptr;  // stream_tiles(n) counters, zeroed once
  // SwiGLU in a stage of its own: where that chain keeps the GEMM's own output, [gate | up] halves (else null).
  void* out_raw = nullptr;
  int64_t ldo_raw = 0;
};

struct StreamRun {
  int m = 0;
  StreamGemmArgs gemm[2];
  uint64_t* sems = nullptr;      // gemm[0]'s stream_tiles(n) tile semaphores (gemm[1] waits on them), zeroed once
  void* state = nullptr;         // kStreamStateBytes, zeroed once
  SyncErrorInfo* error = nullptr;
  uint64_t timeout_ns = 0;
  int grid = 0;                  // CTAs: at most the SM count (one per SM, all resident at once)
  int stage[2] = {0, 1};         // the chain's stages, for the error record
  int skip_post_tile = -1;       // testing: this gemm1 tile never posts (-1: none)
};

// Where a chain keeps mode kStream's device memory, as byte offsets into one block: the state, gemm1's
// semaphores and both GEMMs' arrival counters first (zeroed once at initialize(); epochs keep them clean), then
// the split workspaces, then the packed weights.
struct StreamLayout {
  int64_t state = 0, sems = 0, arrivals[2] = {}, zeroed = 0;  // [0, zeroed) is cleared at initialize()
  int64_t ws[2] = {}, packed[2] = {}, total = 0;
};

// The layout for GEMMs of (k, n) each (n: a gated GEMM's 2 n) on `sms` SMs.
inline StreamLayout stream_layout(int const (&k)[2], int const (&n)[2], int sms) {
  constexpr int64_t kAlign = 256;
  auto up = [](int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  StreamLayout l;
  int64_t at = 0;
  l.state = at, at += up(kStreamStateBytes);
  l.sems = at, at += up(int64_t(stream_tiles(n[0])) * 8);
  for (int g = 0; g < 2; ++g) l.arrivals[g] = at, at += up(int64_t(stream_tiles(n[g])) * 8);
  l.zeroed = at;
  for (int g = 0; g < 2; ++g) l.ws[g] = at, at += up(2 * int64_t(sms) * kStreamSlotFloats * 4);
  for (int g = 0; g < 2; ++g) l.packed[g] = at, at += up(stream_packed_bytes(k[g], n[g]));
  l.total = at;
  return l;
}

// A project's instantiation for its element type (src/<name>_stream.cu).
struct StreamKernels {
  Status (*prepare)();  // the kernels' shared-memory attributes (once, at initialize())
  // Packs row-major w [k, n] (rows ldw elements apart) into `packed` (stream_packed_bytes(k, n)), on `stream`.
  // halves: w is [gate | up] in halves of n / 2 columns (a SwiGLU in a stage of its own), packed interleaved
  // in groups of 8 as the SwiGLU epilogue reads it (the fused gated GEMM's interleaved copy already is).
  Status (*pack)(void const* w, int64_t ldw, int k, int n, bool halves, void* packed, cudaStream_t stream);
  // kInvalidArgument for arguments the kernel cannot take (nothing launched).
  Status (*run)(StreamRun const& run, cudaStream_t stream);
};

// ---- The slab kernel: mode kStream at M <= kSlabMaxM (cusync/sm90/slab_chain.cuh) ----
// Each CTA computes a slab of gemm1's hidden columns and at once that slab's partial of gemm2 over every output
// column, from the weights as the caller laid them out (no packed copy, so every chain whose shapes it takes
// has it, optimizations.stream_weights or not); the partials are summed in a fixed order after each slab's post.
// With column-major second weights it has no partials: each CTA gathers every slab's H after its post and
// computes whole output columns. Its cost per row (partials, or the CUDA cores' dot products) stops it here.
constexpr int kSlabMaxM = 4;
// Hidden columns per unit of a slab over row-major first weights (one 16-byte vector of a row); over column-major
// ones a unit is one column.
constexpr int kSlabUnit = 8;

// How gemm1's weight columns hold the hidden columns: one column each, or gate and up (SwiGLU) interleaved in
// groups of 8 (the chain's copy for a fused gated GEMM), or in halves [gate | up] (a SwiGLU stage of its own).
enum SlabGate : int { kNoGate = 0, kInterleaved = 1, kHalves = 2 };

struct SlabArgs {
  void const* x = nullptr;    // [m, k1], rows ldx apart
  int64_t ldx = 0;
  void const* w1 = nullptr;   // [k1, n1w] row-major, rows ldw1 apart (n1w: hidden, or 2 hidden when gated),
  int64_t ldw1 = 0;           // or with w1_col [n1w, k1] (each weight column contiguous, ldw1 apart: the fast case)
  bool w1_col = false;
  void const* b1 = nullptr;   // [n1w] or null
  void* h = nullptr;          // [m, hidden], rows ldh apart: the chain's intermediate
  int64_t ldh = 0;
  void* h_raw = nullptr;      // kHalves: gemm1's own output [m, 2 hidden] (gate | up), rows ldh_raw apart; else null
  int64_t ldh_raw = 0;
  void const* w2 = nullptr;   // [hidden, n2] row-major, rows ldw2 apart, or with w2_col [n2, hidden] (each output
  int64_t ldw2 = 0;           // column's weights contiguous, ldw2 apart: then no partials, see slab_chain.cuh)
  bool w2_col = false;
  void const* b2 = nullptr;   // [n2] or null
  void* y = nullptr;          // [m, n2], rows ldy apart
  int64_t ldy = 0;
  int m = 0, k1 = 0, hidden = 0, n2 = 0;
  int act1 = 0, act2 = 0;     // StreamAct (act1 kSwiglu when gated)
  int gate = kNoGate;         // SlabGate
  float* ws = nullptr;        // grid x kSlabMaxM x n2 floats (the partials; unused with w2_col)
  uint64_t* posts = nullptr;  // grid semaphores (epoch-tagged), zeroed once
  int stage[2] = {0, 1};      // the chain's stages of the two GEMMs, for the error record
  int skip_post = -1;         // testing: this slab never posts (-1: none)
};

struct SlabRun {
  SlabArgs args;
  int grid = 0;               // CTAs: at most the SM count (one per SM, all resident at once)
  void* state = nullptr;      // kStreamStateBytes, zeroed once
  SyncErrorInfo* error = nullptr;
  uint64_t timeout_ns = 0;
};

// The slab kernel's device memory, as byte offsets into one block: the run state and the slabs' semaphores
// (zeroed once at initialize(); epochs keep them clean), then the partials (none with column-major second weights).
struct SlabLayout {
  int64_t state = 0, posts = 0, zeroed = 0, ws = 0, total = 0;
};

inline SlabLayout slab_layout(int n2, int sms, bool partials = true) {
  constexpr int64_t kAlign = 256;
  auto up = [](int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; };
  SlabLayout l;
  int64_t at = 0;
  l.state = at, at += up(kStreamStateBytes);
  l.posts = at, at += up(int64_t(sms) * 8);
  l.zeroed = at;
  l.ws = at, at += partials ? up(int64_t(sms) * kSlabMaxM * n2 * 4) : 0;
  l.total = at;
  return l;
}

// A project's instantiation for its element type (src/<name>_slab.cu).
struct SlabKernels {
  Status (*prepare)();  // the kernels' shared-memory attributes (once, at initialize())
  // kInvalidArgument for arguments the kernel cannot take (nothing launched); `why` (if not null) says what.
  Status (*run)(SlabRun const& run, cudaStream_t stream, char const** why);
};

}  // namespace cusync::sm90
