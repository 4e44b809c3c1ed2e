"""The sm90 attention layer's plan: every number its templates need, derived once from an AttentionSpec
with `arch: sm90` (docs/attention.md, "sm90").

The layer is four stages on one stream: qkv (X W_qkv through cuBLASLt), rope (rotary embedding and the
cache append, our kernel), attention (a prompt: CUTLASS's Hopper FMHA with our bottom-right causal mask and
GQA row packing; a generation step: our split-KV decode and its fixed-order combine), proj (O W_o through
cuBLASLt). They run back to back; our kernels launch with programmatic dependent launch. There is no tile
sync across the stages yet (docs/attention.md, "Not done").
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cusync_gen.attention_plan import AttentionShape
from cusync_gen.errors import UsageError
from cusync_gen.plan import DEFAULT_SMS, plan_head
from cusync_gen.plan_describe import json_identity
from cusync_gen.spec.rules import retarget
from cusync_gen.spec.model import Arch, AttentionSpec, Dtype

#: FMHA tile (query rows x keys) and warp groups: CUTLASS's cooperative configuration for head_dim 128.
FMHA_TILE_M = 128
FMHA_TILE_N = 128
#: Keys per ring stage of the tensor-core decode (kDecodeStageKeys in kernels.cuh): a split is whole stages.
DECODE_STAGE_KEYS = 64
#: Split sizes the plan picks from, largest first (keys per decode CTA). The split is fixed per layer, so
#: a sequence's result does not depend on the batch it runs in nor on its neighbours' cache lengths.
DECODE_SPLITS = (512, 256, 128)
#: The CUDA-core comparison kernel's split (kDecodeSimtSplit in kernels.cuh).
DECODE_SIMT_SPLIT = 128
#: Decode CTAs resident per SM (3 ring stages of 34 KB each: two CTAs in 228 KB of shared memory).
DECODE_CTAS_PER_SM = 2
#: The step the split is sized for: the smallest batch whose cache reads dominate the step (8 sequences of
#: 16384 cached tokens) must still fill every resident CTA slot.
DECODE_REF_BATCH = 8
DECODE_REF_CACHE = 16384
#: The most packed query heads per KV head (the decode kernel keeps G scores per thread in registers).
MAX_GROUP = 16
#: Most rows (batch x new tokens) and cache tokens a run may have (int32 indices in the kernels).
MAX_ROWS = 1 << 20
MAX_KEYS = 1 << 20


@dataclass(frozen=True)
class AttentionSm90Plan:
    name: str
    class_name: str
    spec_hash: str
    arch: Arch
    target: str
    cuda_arch: str
    dtype: Dtype
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    causal: bool
    rotary: bool
    rotary_base: float
    sms: int

    @property
    def backend(self) -> str:
        """The row of cusync_gen.backends.BACKENDS that emits this plan's project."""
        return "attention_sm90"

    @property
    def group(self) -> int:
        """Query heads per KV head (G): packed into the FMHA's query rows and the decode CTA."""
        return self.heads // self.kv_heads

    @property
    def packs_rows(self) -> bool:
        """One KV head (or one query head per KV head): a group's query heads are the FMHA's query rows."""
        return self.kv_heads == 1 or self.group == 1

    @property
    def fmha_heads(self) -> int:
        """The FMHA's head mode: the one KV head (its G query heads packed into rows), or every head (G = 1);
        otherwise every query head, K and V shared by its group, one launch per sequence."""
        return 1 if self.kv_heads == 1 else self.heads

    @property
    def d(self) -> int:
        return self.heads * self.head_dim

    @property
    def qkv_width(self) -> int:
        """Columns of qkv's output: Q (heads) | K (kv_heads) | V (kv_heads), head_dim each."""
        return (self.heads + 2 * self.kv_heads) * self.head_dim

    @property
    def fmha_tile(self) -> tuple[int, int, int]:
        """(query rows, keys, head_dim) of the FMHA's tile (kernels.cuh kTileDim): 64 wide up to 64, the head's
        width where it is a multiple of 32, else 128; a narrower head zero-filled past its width."""
        d = self.head_dim
        return (FMHA_TILE_M, FMHA_TILE_N, 64 if d <= 64 else d if d % 32 == 0 else 128)

    @property
    def decode_split(self) -> int:
        """Keys per decode CTA: the largest of DECODE_SPLITS that still gives DECODE_CTAS_PER_SM CTAs per SM
        at DECODE_REF_BATCH sequences of DECODE_REF_CACHE cached tokens (a longer split amortizes the ring's
        fill and the partial's write over more keys; a shorter one keeps more SMs reading at small batch).
        Fixed per layer: never a function of the run's batch (benchmarks/NOTES.md f4)."""
        slots = DECODE_CTAS_PER_SM * self.sms
        for split in DECODE_SPLITS:
            if DECODE_REF_BATCH * self.kv_heads * math.ceil(DECODE_REF_CACHE / split) >= slots:
                return split
        return DECODE_SPLITS[-1]

    @property
    def decode_mma(self) -> bool:
        """The pipelined tensor-core decode for every G (a 3-stage cp.async ring, per-warp online softmax;
        benchmarks/NOTES.md f4). The CUDA-core kernel (128-key splits, one load then compute) stays as the
        comparison (Layer::decode_mma = false, bench --decode-simt)."""
        return True

    @property
    def rotary_base_cpp(self) -> str:
        return repr(float(self.rotary_base))

    def check_shape(self, shape: AttentionShape) -> None:
        """The run-time rules of the generated layer, as a UsageError naming the argument to change."""
        if shape.batch < 1 or shape.new_tokens < 1 or shape.cache_tokens < 0:
            raise UsageError("batch and new tokens must be >= 1 and cached tokens >= 0", "e.g. --m 1024")
        if shape.rows > MAX_ROWS:
            raise UsageError(f"batch x new tokens = {shape.rows} is above {MAX_ROWS}", "use fewer new tokens or sequences")
        if shape.keys > MAX_KEYS:
            raise UsageError(f"cached + new tokens = {shape.keys} is above {MAX_KEYS}", "use fewer cached tokens (--cache)")

    def grids(self, shape: AttentionShape) -> dict[str, str]:
        """What each stage launches at this shape (for validate)."""
        rows = shape.rows
        out = {"qkv": f"cuBLASLt [{rows}, {self.qkv_width}] x K={self.hidden}",
               "rope": f"{math.ceil(rows * (self.heads + 2 * self.kv_heads) * self.head_dim / 2 / 256)} blocks of 256"}
        if self._is_step(shape):
            split = self.decode_split if self.decode_mma else DECODE_SIMT_SPLIT
            splits = math.ceil(shape.keys / split)
            kind = "tensor-core" if self.decode_mma else "CUDA-core"
            out["attention"] = (f"{kind} decode {splits} x {self.kv_heads} x {shape.batch} CTAs ({split} keys, "
                                f"{self.group} heads each) + combine {self.heads} x {shape.batch}")
        else:
            if self.packs_rows:
                q_rows = shape.new_tokens * self.group
                out["attention"] = (f"FMHA {math.ceil(q_rows / FMHA_TILE_M)} x {shape.batch} x {self.fmha_heads} "
                                    f"CTAs ({q_rows} query rows, {shape.keys} keys)")
            else:
                tiles = math.ceil(shape.new_tokens / FMHA_TILE_M)
                out["attention"] = (f"FMHA {shape.batch} launch(es) of {tiles} x {self.kv_heads} x {self.group} CTAs "
                                    f"({shape.new_tokens} query rows, {shape.keys} keys; each KV head's K and V "
                                    f"shared by its {self.group} query heads)")
        out["proj"] = f"cuBLASLt [{rows}, {self.hidden}] x K={self.d}"
        return out

    @staticmethod
    def _is_step(shape: AttentionShape) -> bool:
        """One new token per sequence is a generation step (the library's Shape.new_tokens == 1)."""
        return shape.new_tokens == 1

    def describe(self, shape: AttentionShape) -> str:
        self.check_shape(shape)
        kind = "generation step" if self._is_step(shape) else "prompt"
        lines = [f"{self.name}: sm90 attention layer, {kind}: batch {shape.batch}, {shape.new_tokens} new token(s) "
                 f"after {shape.cache_tokens} cached",
                 f"  heads {self.heads} (kv_heads {self.kv_heads}, G = {self.group}), head_dim {self.head_dim}, "
                 f"{self.dtype.value}, {'causal (bottom-right), ' if self.causal else ''}"
                 f"{'rotary base ' + format(self.rotary_base, 'g') if self.rotary else 'no rotary'}"]
        for stage, what in self.grids(shape).items():
            lines.append(f"  {stage:<10} {what}")
        lines.append("  the stages run back to back on one stream (rope, decode and combine with programmatic "
                     "dependent launch); no tile sync across stages yet")
        return "\n".join(lines)

    def describe_json(self, shape: AttentionShape) -> dict[str, Any]:
        self.check_shape(shape)
        return {"batch": shape.batch, "new_tokens": shape.new_tokens, "cache_tokens": shape.cache_tokens,
                "stages": self.grids(shape)}

    def identity_json(self) -> dict[str, Any]:
        return json_identity(self, "attention_sm90")


def make_attention_sm90_plan(spec: AttentionSpec, target: str | None = None) -> AttentionSm90Plan:
    """Derive the plan; `target` (from --target) overrides spec.target."""
    spec = retarget(spec, target)
    a = spec.attention
    return AttentionSm90Plan(
        **plan_head(spec),
        hidden=a.hidden,
        heads=a.heads,
        kv_heads=a.kv_heads if a.kv_heads is not None else a.heads,
        head_dim=a.head_dim,
        causal=a.causal,
        rotary=a.rotary,
        rotary_base=a.rotary_base,
        sms=DEFAULT_SMS[spec.target],
    )
