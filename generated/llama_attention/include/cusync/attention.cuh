// cusync runtime: how the tiles of the attention chain wait for and post to each other's semaphores.
//
// One layer's attention on one GPU (`heads` heads of width dh; D = heads * dh; z = b * heads + h is one
// (sequence, head) pair; each sequence b has L cached tokens and s new ones):
//   qkv      [b*s, 3D] = X W_qkv, stored in place as rows [L, L + s) of each sequence's KV buffer
//   scores   S_z [s, L + s] = Q_z K_z^T / sqrt(dh)      (batched over z, reads Q and K from the buffer)
//   softmax  P_z = softmax(S_z) row by row (causal)
//   pv       O[:, h*dh:(h+1)*dh] of sequence b = P_z V_z
//   proj     Y [b*s, hidden] = O W_o
// A batched stage numbers its tile rows "virtually": row v = z * tiles_m + m, so one ticket counter,
// tile order and semaphore grid cover every z. The edges:
//   qkv -> scores    RowSync on qkv's tile rows (each row's post count covers all 3D columns, so Q, K
//                    and V of those tokens, and every K slice). A scores tile waits for the rows of its
//                    queries and of its new keys; cached keys are input and need no wait.
//   scores -> softmax  RowSync on scores' virtual rows: a softmax tile needs every visible key of its rows.
//   softmax -> pv      one semaphore per virtual row, one post.
//   qkv -> pv          pv's K loop runs over every key of its sequence (masked probabilities are zeros,
//                      but 0 * a stale NaN is NaN), so it also waits for qkv's rows of all the new keys.
//                      Causal scores tiles above the diagonal are skipped without waiting, so this edge
//                      cannot be left to the waits before it. By the time pv runs these waits pass at once.
//   pv -> proj         RowSync on O's tile rows; every head's pv tiles write into one O row, so a
//                      semaphore counts heads * tiles_n posts (times the sequences in the row when s = 1).
#pragma once

#include <cstdint>

#include "cusync/stage.cuh"

namespace cusync {

enum class AttentionStage : int32_t { kQkv = 0, kScores = 1, kSoftmax = 2, kPv = 3, kProj = 4 };

// What the waits and posts of one attention stage need to know about the run's shape.
struct AttentionTile {
  AttentionStage stage = AttentionStage::kQkv;
  int32_t heads = 1;
  int32_t new_tokens = 1;     // s: new tokens per sequence
  int32_t cache_tokens = 0;   // L: tokens already in each sequence's KV buffer
  int32_t tiles_m = 1;        // tile rows per z: per (sequence, head) for the batched stages, per K slice
                              // for qkv and proj (z is the slice of a serial split-K GEMM; 1 slice: all rows)
  int32_t tile_m = 0;         // this stage's tile rows
  int32_t tile_n = 0;         // this stage's tile columns
  int32_t qkv_tiles_m = 0;    // qkv's tile rows (one K slice's), for clamping waits on its rows
  bool causal = false;

  // A scores tile whose every key comes after every query in it (causal): its S values are never read,
  // so it neither waits nor computes; it still posts, so softmax's count does not depend on masking.
  // This is also what lets scores start early: tile (m, n <= m) needs only qkv rows up to m.
  __device__ __forceinline__ bool skipped(TileCoord v) const {
    if (stage != AttentionStage::kScores || !causal) return false;
    int32_t const m = m_of(v);
    int32_t const last_query = ((m + 1) * tile_m < new_tokens ? (m + 1) * tile_m : new_tokens) - 1;
    return v.n * tile_n > cache_tokens + last_query;
  }

  __device__ __forceinline__ int32_t z_of(TileCoord v) const { return v.m / tiles_m; }
  __device__ __forceinline__ int32_t m_of(TileCoord v) const { return v.m % tiles_m; }

  // Thread 0 of the block calls this before any load of producer data; the caller's __syncthreads
  // then orders every thread's loads after the acquires. `in` is the edge from the stage before this
  // one; `qkv` the edge from qkv (pv's second edge).
  __device__ __forceinline__ void wait_inputs(InputWait const& in, InputWait const& qkv, TileCoord v,
                                              uint32_t epoch) const {
    int32_t const first_row = (z_of(v) / heads) * new_tokens;  // this sequence's first row of qkv
    switch (stage) {
      case AttentionStage::kScores: {
        int32_t const m = m_of(v);
        int32_t const q0 = m * tile_m;
        int32_t const q1 = q0 + tile_m < new_tokens ? q0 + tile_m : new_tokens;
        in.wait_for_rows(first_row + q0, first_row + q1, 0, qkv_tiles_m, epoch, v);  // queries
        // Keys [n * tile_n, (n + 1) * tile_n) of the sequence; the new ones are qkv rows key - L.
        int32_t const k0 = v.n * tile_n - cache_tokens > 0 ? v.n * tile_n - cache_tokens : 0;
        int32_t const k_end = (v.n + 1) * tile_n - cache_tokens;
        int32_t const k1 = k_end < new_tokens ? k_end : new_tokens;
        if (k1 > k0) in.wait_for_rows(first_row + k0, first_row + k1, 0, qkv_tiles_m, epoch, v);
        break;
      }
      case AttentionStage::kSoftmax:
        // One semaphore per virtual row of the producer's grid, the same (z, m) as this tile's.
        in.wait_for(v.m * in.policy.tile_m, 0, epoch, v);
        break;
      case AttentionStage::kPv:
        in.wait_for(v.m * in.policy.tile_m, 0, epoch, v);                                   // P's rows
        if (qkv.enabled) qkv.wait_for_rows(first_row, first_row + new_tokens, 0, qkv_tiles_m, epoch, v);  // V
        break;
      case AttentionStage::kProj:
        // One semaphore per O tile row (m_of: with split-K, z is the K slice, and every slice reads the row).
        in.wait_for(m_of(v) * in.policy.tile_m, 0, epoch, v);
        break;
      default:
        break;
    }
  }

  // The tile whose semaphore this tile posts to, in the producer-side grid its consumer waits on.
  __device__ __forceinline__ TileCoord post_tile(TileCoord v) const {
    if (stage == AttentionStage::kQkv) return TileCoord{m_of(v), v.n};  // every K slice posts to its row
    if (stage != AttentionStage::kPv) return v;
    // O rows of sequence b start at b * s; a pv tile row maps onto the O tile row holding its first row
    // (the plan keeps pv's tile M equal to proj's, and the chain allows s = 1 or one sequence, so the
    // rows of one pv tile never straddle two O tile rows).
    int32_t const first_o_row = (z_of(v) / heads) * new_tokens + m_of(v) * tile_m;
    return TileCoord{first_o_row / tile_m, 0};
  }
};

}  // namespace cusync
