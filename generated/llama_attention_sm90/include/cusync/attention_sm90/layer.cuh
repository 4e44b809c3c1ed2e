// cusync sm90 attention: one layer, X W_qkv -> rotary + cache append -> attention -> O W_o, its stages
// launched back to back on one stream (our kernels with programmatic dependent launch, so each one's
// launch overlaps the previous kernel's tail; griddepcontrol.wait orders their reads).
//
// autotune(shape, buffers, stream) picks each cuBLASLt GEMM's algorithm (qkv, then proj) among the
// heuristic's first candidates by timing the whole layer at that shape (CUDA graphs, events, median after
// warm-up); the choice stays with the GEMM's shape (every later run at that row count uses it).
//
// Config (in the generated <name>.h): Element, kHidden, kHeads, kKvHeads, kHeadDim, kCausal,
// kRotary, kRotaryBase, kDecodeSplit (keys per tensor-core decode CTA), kDecodeMma. Shapes are run-time: `batch` sequences of `new_tokens` each, after cache_len[b]
// cached tokens (uniform for a prompt; per sequence for a generation step, new_tokens = 1).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cuda_runtime.h>

#include "cusync/attention_sm90/kernels.cuh"
#include "cusync/sm90/cublaslt.cuh"
#include "cusync/status.h"
#include "cusync/time_modes.h"

namespace cusync::attention_sm90 {

struct Shape {
  int batch = 1;
  int new_tokens = 1;  // per sequence; 1 = a generation step (split-KV decode)
  int cache_tokens = 0;  // a prompt's cached tokens (every sequence); a step reads cache_len[] instead
  // A prompt whose sequences hold different caches: `batch` host values (the same as Buffers::cache_len
  // on the device, which rope reads); nullptr: cache_tokens for every sequence. The FMHA then runs one
  // launch per sequence. A generation step always reads cache_len[].
  int const* cache_tokens_of = nullptr;
  // A prompt whose sequences bring different numbers of new tokens (varlen): `batch` host values, sequence
  // b's rows following sequence b - 1's (Buffers::seq_start holds the same offsets on the device, for rope);
  // nullptr: new_tokens for every sequence. Always a prompt (the FMHA, one launch per sequence).
  int const* new_tokens_of = nullptr;
  int tokens_of(int b) const { return new_tokens_of != nullptr ? new_tokens_of[b] : new_tokens; }
  int cache_of(int b) const { return cache_tokens_of != nullptr ? cache_tokens_of[b] : cache_tokens; }
  int rows() const {
    if (new_tokens_of == nullptr) return batch * new_tokens;
    int64_t sum = 0;
    for (int i = 0; i < batch; ++i) sum += new_tokens_of[i];
    return sum > INT32_MAX ? -1 : int(sum);
  }
  int max_cache() const {
    int most = 0;
    for (int i = 0; i < batch; ++i) most = std::max(most, cache_of(i));
    return most;
  }
  int max_new_tokens() const {
    int most = 0;
    for (int i = 0; i < batch; ++i) most = std::max(most, tokens_of(i));
    return most;
  }
};

struct Buffers {
  void const* x;        // [rows, hidden]
  void const* w_qkv;    // [hidden, (Hq + 2 Hkv) dh] row-major
  void const* w_o;      // [Hq dh, hidden] row-major
  void* qkv;            // [rows, (Hq + 2 Hkv) dh] scratch
  void* q;              // [rows, Hq dh] scratch
  void* k_cache;        // [batch, capacity, Hkv, dh]
  void* v_cache;
  void* o;              // [rows, Hq dh]
  void* y;              // [rows, hidden]
  // [batch], device: each sequence's cached tokens, 0 .. capacity - new tokens. The device cannot check it
  // without a synchronization: a value outside writes nothing to the caches and is clamped to the slot by the
  // decode kernels (never a read outside it), so only that sequence's output is meaningless.
  int const* cache_len;
  int const* seq_start = nullptr;  // [batch + 1], device: a varlen prompt's first row of each sequence (and the total)
  float* lse;           // prompt: [batch, heads, rows-per-seq x G] fp32 scratch (written by the FMHA epilogue)
  float* o_part;        // step: [batch, Hkv, max_splits, G, dh]
  float* ml_part;       // step: [batch, Hkv, max_splits, G, 2]
  int capacity;         // tokens per sequence in the caches
};

enum class StageId { kQkv = 0, kRope = 1, kAttention = 2, kProj = 3 };

// The layer's cuBLASLt GEMMs as the context's stages (LtContext::stage): autotune()'s search selects them so.
constexpr int kLtStageQkv = 0, kLtStageProj = 1;

// Layer::autotune(): rounds of the timed search (each round times every candidate once) unless told.
constexpr int kLayerTuneRounds = 20;

// What autotune() found for one GEMM: the candidate kept (0: the heuristic's first), how many were timed,
// the layer's median with the heuristic's first and with the one kept, and the kept algorithm's K splits
// (1: none) and split-K reduction scheme (cublasLtReductionScheme_t, 0: none).
struct GemmTune {
  int chosen = 0, candidates = 0;
  float first_us = 0.f, chosen_us = 0.f;
  int splitk = 1, reduction = 0;
};
struct LayerTune {
  GemmTune qkv, proj;
};

template <class Config>
struct Layer {
  using T = typename Config::Element;
  static constexpr int kHidden = Config::kHidden, kHeads = Config::kHeads, kKvHeads = Config::kKvHeads;
  static constexpr int kHeadDim = Config::kHeadDim, kGroup = kHeads / kKvHeads;
  static constexpr int kQkvCols = (kHeads + 2 * kKvHeads) * kHeadDim;
  // Preconditions (the spec's checks; repeated so that a hand edit fails to compile, not to run).
  static_assert(kHeads % kKvHeads == 0, "attention.kv_heads must divide attention.heads");
  static_assert(kHeadDim % 16 == 0 && kHeadDim >= 32 && kHeadDim <= 128,
                "attention.head_dim must be a multiple of 16 from 32 to 128 on sm90");
  // The CUDA-core decode (the comparison kernel) takes head widths dividing its 128 threads: 32, 64, 128.
  static constexpr bool kSimtDecode = kDecodeThreads % kHeadDim == 0;
  static_assert(kHidden % 8 == 0, "attention.hidden must be a multiple of 8 (16-byte TMA rows)");
  static_assert(kGroup <= 16, "attention.kv_heads: at most 16 query heads per KV head");
  // The FMHA's layout (kernels.cuh): with one KV head (or one query head per KV head) a group's query heads
  // are packed into the query rows, one launch for the batch; otherwise its (batch, head) modes are
  // (KV head, query head of the group) with K and V shared, one launch per sequence.
  static constexpr bool kPackRows = kKvHeads == 1 || kGroup == 1;
  static constexpr int kPackedGroup = kPackRows ? kGroup : 1;
  template <FmhaSchedule kSchedule>
  using PromptOn = PromptAttention<T, kHeadDim, kPackedGroup, Config::kCausal, kSchedule, !kPackRows>;
  using Prompt = PromptOn<FmhaSchedule::kCooperative>;
  using PromptPingpong = PromptOn<FmhaSchedule::kPingpong>;
  using PromptHeaviestFirst = PromptOn<FmhaSchedule::kHeaviestFirst>;
  using Gemm = cusync::sm90::LtGemm<T, cutlass::layout::RowMajor, cutlass::epilogue::thread::Identity>;

  // The plan's split (keys per tensor-core decode CTA): whole ring stages, and not below the CUDA-core
  // kernel's 128, so max_splits (the partial buffers' split stride, sized for the smaller split) covers both.
  static constexpr int kDecodeSplit = Config::kDecodeSplit;
  static_assert(kDecodeSplit % kDecodeStageKeys == 0 && kDecodeSplit >= kDecodeSimtSplit,
                "the plan's decode split must be a multiple of 64 keys and at least 128 (regenerate)");
  static int max_splits(int capacity) { return (capacity + kDecodeSimtSplit - 1) / kDecodeSimtSplit; }

  cusync::sm90::LtContext* lt = nullptr;
  typename Prompt::Operation fmha;
  typename PromptPingpong::Operation fmha_pingpong_op;
  typename PromptHeaviestFirst::Operation fmha_heaviest_first_op;
  // A prompt on the FMHA's ping-pong schedule (persistent) instead of the cooperative one (the default).
  bool fmha_pingpong = false;
  // The cooperative schedule with the longest causal tiles launched first (the default: measured faster on
  // every prompt, up to 1.46x on the attention stage); false: CUTLASS's own query-block order.
  bool fmha_heaviest_first = true;
  int sm_count_ = 0;  // the persistent grid's size (the device's SMs)

  Layer() = default;
  Layer(Layer const&) = delete;
  Layer& operator=(Layer const&) = delete;
  // A prompt's per-sequence FMHA launches go round robin over these streams (forked from and joined back to
  // the caller's stream with events, which CUDA-graph capture follows), so that short sequences' grids run
  // side by side instead of one after another, each on a fraction of the SMs.
  static constexpr int kSequenceStreams = 4;
  cudaStream_t seq_streams_[kSequenceStreams] = {};
  cudaEvent_t fork_ = nullptr;
  cudaEvent_t joins_[kSequenceStreams] = {};

  ~Layer() {
    cusync::sm90::destroy_lt_context(lt);
    for (int i = 0; i < kSequenceStreams; ++i) {
      if (seq_streams_[i] != nullptr) cudaStreamDestroy(seq_streams_[i]);
      if (joins_[i] != nullptr) cudaEventDestroy(joins_[i]);
    }
    if (fork_ != nullptr) cudaEventDestroy(fork_);
  }

  Status initialize() {
    if (lt == nullptr) {
      Status s = cusync::sm90::create_lt_context(&lt);
      if (s != Status::kSuccess) return s;
    }
    if (fork_ == nullptr && cudaEventCreateWithFlags(&fork_, cudaEventDisableTiming) != cudaSuccess) return Status::kCudaError;
    for (int i = 0; i < kSequenceStreams; ++i) {
      if (seq_streams_[i] == nullptr && cudaStreamCreateWithFlags(&seq_streams_[i], cudaStreamNonBlocking) != cudaSuccess) {
        return Status::kCudaError;
      }
      if (joins_[i] == nullptr && cudaEventCreateWithFlags(&joins_[i], cudaEventDisableTiming) != cudaSuccess) {
        return Status::kCudaError;
      }
    }
    int device = 0;
    if (cudaGetDevice(&device) != cudaSuccess ||
        cudaDeviceGetAttribute(&sm_count_, cudaDevAttrMultiProcessorCount, device) != cudaSuccess) {
      return Status::kCudaError;
    }
    auto smem_mma = DecodeMmaSmem<kHeadDim>::template bytes<T>();
    if (cudaFuncSetAttribute(decode_split_mma<T, kHeadDim, kGroup, kDecodeSplit>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             int(smem_mma)) != cudaSuccess ||
        cudaOccupancyMaxActiveBlocksPerMultiprocessor(&decode_blocks_per_sm_, decode_split_mma<T, kHeadDim, kGroup, kDecodeSplit>,
                                                      kDecodeThreads, smem_mma) != cudaSuccess) {
      return Status::kCudaError;
    }
    if constexpr (kSimtDecode) {
      auto smem = DecodeSmem<kHeadDim, kGroup>::template bytes<T>();
      if (cudaFuncSetAttribute(decode_split<T, kHeadDim, kGroup>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               int(smem)) != cudaSuccess) {
        return Status::kCudaError;
      }
    }
    return Status::kSuccess;
  }

  Status check_buffers(Shape const& s, Buffers const& b) const {
    bool const step = s.new_tokens == 1 && s.new_tokens_of == nullptr && step_mode_;
    void const* const needed[] = {b.x, b.w_qkv, b.w_o, b.qkv, b.q, b.k_cache, b.v_cache, b.o, b.y, b.cache_len};
    for (void const* p : needed) {
      if (p == nullptr) return Status::kInvalidArgument;
    }
    if (s.new_tokens_of != nullptr && b.seq_start == nullptr) return Status::kInvalidArgument;
    if (step ? (b.o_part == nullptr || b.ml_part == nullptr) : b.lse == nullptr) return Status::kInvalidArgument;
    return Status::kSuccess;
  }

  static Status check(Shape const& s, int capacity) {
    if (s.batch < 1 || s.new_tokens < 1 || s.cache_tokens < 0) return Status::kInvalidArgument;
    for (int i = 0; i < s.batch; ++i) {
      if (s.cache_of(i) < 0 || s.tokens_of(i) < 1 || int64_t(s.cache_of(i)) + s.tokens_of(i) > capacity) {
        return Status::kInvalidArgument;
      }
    }
    return s.rows() < 1 ? Status::kInvalidArgument : Status::kSuccess;
  }

  template <class Kernel, class... Args>
  static cudaError_t launch_pdl(Kernel kernel, dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = grid, cfg.blockDim = block, cfg.dynamicSmemBytes = smem, cfg.stream = stream;
    cudaLaunchAttribute attr[1];
    attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[0].val.programmaticStreamSerializationAllowed = 1;
    cfg.attrs = attr, cfg.numAttrs = 1;
    return cudaLaunchKernelEx(&cfg, kernel, args...);
  }

  Status stage(StageId id, Shape const& s, Buffers const& b, cudaStream_t stream) {
    int const rows = s.rows();
    switch (id) {
      case StageId::kQkv: {
        cusync::sm90::GemmProblem p{rows, kQkvCols, kHidden, b.x, b.w_qkv, b.qkv};
        if (lt != nullptr) lt->stage = kLtStageQkv;
        return Gemm::launch(lt, p, stream);
      }
      case StageId::kRope: {
        bool const varlen = s.new_tokens_of != nullptr;
        if (varlen && b.seq_start == nullptr) return Status::kInvalidArgument;
        int64_t const threads = int64_t(rows) * (kHeads + 2 * kKvHeads) * (kHeadDim / 2 / kRopeVector);
        cudaError_t e = launch_pdl(rope_append<T, kHeadDim>, dim3(unsigned((threads + 255) / 256)), dim3(256), 0, stream,
                                   static_cast<T const*>(b.qkv), static_cast<T*>(b.q), static_cast<T*>(b.k_cache),
                                   static_cast<T*>(b.v_cache), b.cache_len, varlen ? b.seq_start : nullptr, s.batch,
                                   rows, s.new_tokens, kHeads, kKvHeads, b.capacity, float(Config::kRotaryBase),
                                   Config::kRotary);
        return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
      }
      case StageId::kAttention:
        return s.new_tokens == 1 && s.new_tokens_of == nullptr && step_mode_ ? decode(s, b, stream) : prompt(s, b, stream);
      case StageId::kProj: {
        cusync::sm90::GemmProblem p{rows, kHidden, kHeads * kHeadDim, b.o, b.w_o, b.y};
        if (lt != nullptr) lt->stage = kLtStageProj;
        return Gemm::launch(lt, p, stream);
      }
    }
    return Status::kInvalidArgument;
  }

  // The decode split on tensor cores (decode_split_mma) or on CUDA cores (decode_split); the plan's
  // default: tensor cores when G > 1 query heads share a KV head.
  bool decode_mma = Config::kDecodeMma;
  // The tensor-core decode with one CTA per unit (the default), or as a persistent grid (true: the CTAs that
  // fit at once, each walking several units with its load ring running across them: measured 1-8% slower
  // on an H200 at batch 8-64, docs/attention.md). The results are bitwise the same either way.
  bool decode_persistent = false;
  // The tensor-core decode's unit order: the same split of every (sequence, KV head) side by side (true), or
  // each sequence's splits side by side (false). The results are bitwise the same either way.
  bool decode_split_major = false;
  int decode_blocks_per_sm_ = 0;

  // A generation step (one new token per sequence, per-sequence cache lengths) runs the split-KV decode;
  // a prompt (uniform cache) runs the FMHA. set_step_mode(false) runs a 1-token prompt through the FMHA.
  bool step_mode_ = true;

  Status prompt(Shape const& s, Buffers const& b, cudaStream_t stream) {
    if (fmha_pingpong) return prompt_on<PromptPingpong>(fmha_pingpong_op, s, b, stream);
    if (fmha_heaviest_first) return prompt_on<PromptHeaviestFirst>(fmha_heaviest_first_op, s, b, stream);
    return prompt_on<Prompt>(fmha, s, b, stream);
  }

  template <class P>
  Status prompt_on(typename P::Operation& op, Shape const& s, Buffers const& b, cudaStream_t stream) {
    using namespace cute;
    using Element = typename P::Element;
    cutlass::KernelHardwareInfo hw{};
    hw.sm_count = sm_count_;
    auto launch = [&](typename P::Operation::Arguments const& args, cudaStream_t on) {
      if (op.initialize(args, nullptr, on) != cutlass::Status::kSuccess) return Status::kCutlassError;
      return op.run(on) == cutlass::Status::kSuccess ? Status::kSuccess : Status::kCudaError;
    };
    bool const per_sequence = !kPackRows || s.cache_tokens_of != nullptr || s.new_tokens_of != nullptr;
    if constexpr (kPackRows) {
      if (!per_sequence) {  // one cache length and one prompt length: the whole batch in one launch
        int const t = s.new_tokens;
        int const h = kKvHeads == 1 ? 1 : kHeads;  // the FMHA's head mode: the one KV head, or every head (G = 1)
        int const q_rows = t * kGroup;
        // Query row r = t G + g at r x (Hkv dh): see kernels.cuh (GQA packing).
        StrideQKV const dQ = make_stride(kKvHeads * kHeadDim, _1{}, make_stride(t * kHeads * kHeadDim, kGroup * kHeadDim));
        StrideQKV const dK = make_stride(kKvHeads * kHeadDim, _1{}, make_stride(b.capacity * kKvHeads * kHeadDim, kHeadDim));
        StrideLSE const dLSE = make_stride(_1{}, make_stride(h * q_rows, q_rows));
        return launch({{s.batch, h, q_rows, s.cache_tokens + t, kHeadDim},
                       {static_cast<Element const*>(b.q), dQ, static_cast<Element const*>(b.k_cache), dK,
                        static_cast<Element const*>(b.v_cache), dK},
                       {static_cast<Element*>(b.o), dQ, b.lse, dLSE},
                       hw}, stream);
      }
    }
    // One launch per sequence (several KV heads, or sequences with their own cache or prompt lengths):
    // sequence i's rows start after sequence i - 1's, its keys at i x capacity in the caches. The launches
    // go round robin over the sequence streams, forked from `stream` here and joined back below.
    int const lanes = std::min(s.batch, fork_ != nullptr ? kSequenceStreams : 1);
    if (lanes > 1) {
      if (cudaEventRecord(fork_, stream) != cudaSuccess) return Status::kCudaError;
      for (int i = 0; i < lanes; ++i) {
        if (cudaStreamWaitEvent(seq_streams_[i], fork_, 0) != cudaSuccess) return Status::kCudaError;
      }
    }
    Status status = Status::kSuccess;
    int64_t start = 0;
    for (int seq = 0; seq < s.batch && status == Status::kSuccess; ++seq) {
      cudaStream_t const on = lanes > 1 ? seq_streams_[seq % lanes] : stream;
      int const t = s.tokens_of(seq), keys = s.cache_of(seq) + t;
      Element const* q = static_cast<Element const*>(b.q) + start * kHeads * kHeadDim;
      Element* o = static_cast<Element*>(b.o) + start * kHeads * kHeadDim;
      int64_t const kv_off = int64_t(seq) * b.capacity * kKvHeads * kHeadDim;
      Element const* k = static_cast<Element const*>(b.k_cache) + kv_off;
      Element const* v = static_cast<Element const*>(b.v_cache) + kv_off;
      float* lse = b.lse + start * kHeads;
      Status st;
      if constexpr (kPackRows) {  // one KV head (G query heads in the rows) or G = 1: (batch, head) = (1, h)
        int const h = kKvHeads == 1 ? 1 : kHeads, q_rows = t * kGroup;
        StrideQKV const dQ = make_stride(kKvHeads * kHeadDim, _1{}, make_stride(q_rows * h * kHeadDim, kGroup * kHeadDim));
        StrideQKV const dK = make_stride(kKvHeads * kHeadDim, _1{}, make_stride(b.capacity * kKvHeads * kHeadDim, kHeadDim));
        StrideLSE const dLSE = make_stride(_1{}, make_stride(h * q_rows, q_rows));
        st = launch({{1, h, q_rows, keys, kHeadDim}, {q, dQ, k, dK, v, dK}, {o, dQ, lse, dLSE}, hw}, on);
      } else {
        // (batch, head) = (KV head j, query head g of its group): query head j G + g at columns (j G + g) dh
        // of the token-major Q and O, K and V of head j for every g.
        StrideQKV const dQ = make_stride(kHeads * kHeadDim, _1{}, make_stride(kGroup * kHeadDim, kHeadDim));
        StrideKVShared const dK = make_stride(kKvHeads * kHeadDim, _1{}, make_stride(kHeadDim, _0{}));
        StrideLSE const dLSE = make_stride(_1{}, make_stride(kGroup * t, t));
        st = launch({{kKvHeads, kGroup, t, keys, kHeadDim}, {q, dQ, k, dK, v, dK}, {o, dQ, lse, dLSE}, hw}, on);
      }
      status = st;
      start += t;
    }
    for (int i = 0; i < lanes && lanes > 1; ++i) {  // joined whatever happened, so a capture is never left forked
      if (cudaEventRecord(joins_[i], seq_streams_[i]) != cudaSuccess || cudaStreamWaitEvent(stream, joins_[i], 0) != cudaSuccess) {
        if (status == Status::kSuccess) status = Status::kCudaError;
      }
    }
    return status;
  }

  Status decode(Shape const& s, Buffers const& b, cudaStream_t stream) {
    int const stride = max_splits(b.capacity);  // the partial buffers' split stride
    bool const mma = decode_mma || !kSimtDecode;  // the CUDA-core kernel only where it exists
    int const split_keys = mma ? kDecodeSplit : kDecodeSimtSplit;
    int const splits = (b.capacity + split_keys - 1) / split_keys;  // units past a sequence's keys are skipped
    float const scale_log2 = float(1.4426950408889634 / std::sqrt(double(kHeadDim)));
    cudaError_t e = cudaSuccess;
    if (mma) {
      int64_t const units = int64_t(splits) * kKvHeads * s.batch;
      if (units > INT32_MAX) return Status::kInvalidArgument;
      int64_t const resident = int64_t(decode_blocks_per_sm_ > 0 ? decode_blocks_per_sm_ : 1) * sm_count_;
      int const grid = int(decode_persistent && resident > 0 && resident < units ? resident : units);
      e = launch_pdl(decode_split_mma<T, kHeadDim, kGroup, kDecodeSplit>, dim3(unsigned(grid)), dim3(kDecodeThreads),
                     DecodeMmaSmem<kHeadDim>::template bytes<T>(), stream, static_cast<T const*>(b.q),
                     static_cast<T const*>(b.k_cache), static_cast<T const*>(b.v_cache), b.cache_len, b.o_part,
                     b.ml_part, kKvHeads, b.capacity, stride, splits, int(units), decode_split_major, scale_log2);
    } else if constexpr (kSimtDecode) {
      e = launch_pdl(decode_split<T, kHeadDim, kGroup>, dim3(splits, kKvHeads, s.batch), dim3(kDecodeThreads),
                     DecodeSmem<kHeadDim, kGroup>::template bytes<T>(), stream, static_cast<T const*>(b.q),
                     static_cast<T const*>(b.k_cache), static_cast<T const*>(b.v_cache), b.cache_len, b.o_part,
                     b.ml_part, kKvHeads, b.capacity, stride, scale_log2);
    }
    if (e != cudaSuccess) return Status::kCudaError;
    e = launch_pdl(decode_combine<T, kHeadDim, kGroup>, dim3(kHeads, s.batch), dim3(kHeadDim), 0, stream,
                   static_cast<float const*>(b.o_part), static_cast<float const*>(b.ml_part), b.cache_len,
                   static_cast<T*>(b.o), kKvHeads, b.capacity, stride, split_keys);
    return e == cudaSuccess ? Status::kSuccess : Status::kCudaError;
  }

  // kInvalidArgument (nothing launched) for a shape the buffers cannot hold (a sequence's cache plus its new
  // tokens past `capacity`, no rows) or a buffer that is null: a write past a sequence's cache slot would land
  // in the next sequence's cache.
  Status run(Shape const& s, Buffers const& b, cudaStream_t stream) {
    if (Status st = check(s, b.capacity); st != Status::kSuccess) return st;
    if (Status st = check_buffers(s, b); st != Status::kSuccess) return st;
    for (StageId id : {StageId::kQkv, StageId::kRope, StageId::kAttention, StageId::kProj}) {
      Status st = stage(id, s, b, stream);
      if (st != Status::kSuccess) return st;
    }
    return Status::kSuccess;
  }

  // Picks the algorithm of qkv, then of proj, for this shape's row count: each of the heuristic's first
  // kLtSearchAlgos candidates is run as the whole layer (the other GEMM on its current algorithm),
  // captured in a CUDA graph and timed with CUDA events round robin, `rounds` rounds after a warm-up
  // replay (and `preheat_ms` of replays before the first timed round); the median decides, the
  // heuristic's first wins ties (cusync/time_modes.h). The choice stays with the GEMM's
  // shape: every later run with this many rows, in this process, takes it (graphs captured before keep
  // what they captured). Like cuDNN's benchmark mode: opt-in, outside stream capture, and it runs the
  // layer on `b` (the caches get this shape's new tokens appended, the outputs are overwritten).
  // Without cuBLASLt it does nothing. `out` (optional): what was timed and kept.
  Status autotune(Shape const& s, Buffers const& b, cudaStream_t stream, int rounds = kLayerTuneRounds,
                  int preheat_ms = 0, LayerTune* out = nullptr) {
    using cusync::sm90::kLtSearchAlgos;
    if (!cusync::sm90::kHaveCublasLt) return Status::kSuccess;
    if (lt == nullptr) return Status::kNotInitialized;
    if (Status st = check(s, b.capacity); st != Status::kSuccess) return st;
    struct Reset {  // no selection survives the search, whatever path returns
      cusync::sm90::LtContext* lt;
      ~Reset() { lt->select_stage = -1; }
    } const reset{lt};
    lt->select_stage = -1;
    Status status = run(s, b, stream);  // makes both plans and reports their candidates
    if (status == Status::kSuccess) status = cusync::detail::from_cuda_error(cudaStreamSynchronize(stream));
    LayerTune tune{};
    for (int stage_id : {kLtStageQkv, kLtStageProj}) {
      if (status != Status::kSuccess) break;
      GemmTune& g = stage_id == kLtStageQkv ? tune.qkv : tune.proj;
      int const n = std::min(lt->stage_candidates[stage_id], kLtSearchAlgos);
      g.candidates = n;
      g.chosen = lt->stage_algorithm[stage_id];
      if (n > 1) {
        int candidates[kLtSearchAlgos];
        for (int k = 0; k < n; ++k) candidates[k] = k;
        auto run_candidate = [&](int k, cudaStream_t on) {
          lt->select_stage = stage_id, lt->select_candidate = k;
          Status const ran = run(s, b, on);
          lt->select_stage = -1;
          return ran;
        };
        float median_us[cusync::kMaxTunedModes] = {};
        int best = 0;
        status = cusync::time_modes(run_candidate, candidates, n, rounds, stream, median_us, &best, preheat_ms);
        preheat_ms = 0;  // once, before the first GEMM's candidates
        if (status == Status::kSuccess) status = run_candidate(candidates[best], stream);  // the winner stays chosen
        if (status == Status::kSuccess) status = cusync::detail::from_cuda_error(cudaStreamSynchronize(stream));
        g.chosen = best, g.first_us = median_us[0], g.chosen_us = median_us[best];
      }
      g.splitk = lt->stage_splitk[stage_id], g.reduction = lt->stage_reduction[stage_id];
    }
    if (status == Status::kSuccess && out != nullptr) *out = tune;
    return status;
  }
};

}  // namespace cusync::attention_sm90
