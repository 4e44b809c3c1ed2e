"""The attention chain's plan: every number its templates need, derived once from an AttentionSpec.

The chain is fixed (qkv -> scores -> softmax -> pv -> proj, docs/attention.md), so unlike a GEMM chain
there are no policies to choose: each edge's policy follows from what the consumer tile reads (RowSync
everywhere; see templates/runtime/include/cusync/attention.cuh). What varies with the run's shape
(batch, new tokens, cached tokens) is a method taking that shape.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from cusync_gen.errors import UsageError
from cusync_gen.plan import DEFAULT_SMS, TilePlan, plan_head, tile_plan
from cusync_gen.plan_describe import json_identity, tile_json
from cusync_gen.spec.rules import retarget
from cusync_gen.spec.model import (
    ATTENTION_GEMMS,
    Arch,
    AttentionSpec,
    BLayout,
    Dtype,
    Op,
    StageSpec,
    attention_gemm_shape,
)


#: The most blocks one stage's grid may have: CUDA's gridDim.x limit, and what the generated library's `int`
#: tile counts hold. The scores grid, batch * heads * ceil(s / tile M) * ceil(keys / tile N), passes it
#: within the limit of each option (e.g. 96 heads with s = keys = 2^20), so the shape is checked as a whole.
MAX_GRID_BLOCKS = (1 << 31) - 1


@dataclass(frozen=True)
class AttentionGemmPlan:
    """One GEMM stage; the notes are the comments of its generated translation unit."""

    name: str
    const_name: str            # CamelCase, for C++ constants (kQkvTileM)
    tile: TilePlan
    b_layout: BLayout
    summary: str
    wait_note: str
    post_note: str


@dataclass(frozen=True)
class AttentionRow:
    """One line of the generated README's stage table."""

    name: str
    computes: str
    output: str
    waits: str
    tile: str


@dataclass(frozen=True)
class AttentionShape:
    """One run's shape: `batch` sequences of `new_tokens` each, after `cache_tokens` cached ones."""

    batch: int
    new_tokens: int
    cache_tokens: int

    @property
    def rows(self) -> int:
        return self.batch * self.new_tokens

    @property
    def keys(self) -> int:
        return self.cache_tokens + self.new_tokens


@dataclass(frozen=True)
class AttentionPlan:
    name: str
    class_name: str
    spec_hash: str
    arch: Arch
    target: str
    cuda_arch: str
    dtype: Dtype
    hidden: int
    heads: int
    head_dim: int
    causal: bool
    gemms: tuple[AttentionGemmPlan, ...]
    sms: int  # of the target's flagship part: the library reads the real count at run time

    @property
    def backend(self) -> str:
        """The row of cusync_gen.backends.BACKENDS that emits this plan's project."""
        return "attention"

    @property
    def d(self) -> int:
        return self.heads * self.head_dim

    @property
    def tile_m(self) -> int:
        """Tile rows shared by scores, softmax, pv and proj (spec rule)."""
        return self.gemm("scores").tile.m

    @property
    def qkv_width(self) -> int:
        """Columns of qkv's output, Q | K | V, which is also one token's row of the KV cache: 3 * D."""
        return 3 * self.d

    @property
    def min_overlap_rows(self) -> int:
        """The C++ kMinOverlapRows: four tile rows (from there on run() overlaps the stages)."""
        return 4 * self.tile_m

    @property
    def softmax_rows(self) -> int:
        return self.tile_m

    def gemm(self, name: str) -> AttentionGemmPlan:
        return next(g for g in self.gemms if g.name == name)

    @property
    def table(self) -> tuple[AttentionRow, ...]:
        g = {x.name: x for x in self.gemms}
        tile = {n: f"{x.tile.m}x{x.tile.n}x{x.tile.k}, {x.tile.stages} stages" for n, x in g.items()}
        causal = "causal " if self.causal else ""
        return (
            AttentionRow("qkv", "X W_qkv", f"KV rows [L, L+s), [batch*s, {3 * self.d}]", "-", tile["qkv"]),
            AttentionRow("scores", f"Q K^T / sqrt({self.head_dim}), per z", "S [z][s, keys]",
                         "qkv rows of its queries and new keys (row)", tile["scores"]),
            AttentionRow("softmax", f"{causal}softmax by rows", "P [z][s, keys]", "its rows of S (row)",
                         f"{self.softmax_rows} rows"),
            AttentionRow("pv", "P V, per z", f"O [batch*s, {self.d}]", "its rows of P (row)", tile["pv"]),
            AttentionRow("proj", "O W_o", f"Y [batch*s, {self.hidden}]", "its O row, all heads (row)", tile["proj"]),
        )

    def check_shape(self, shape: AttentionShape) -> None:
        """The run-time rules of the generated library, as a UsageError naming the argument to change."""
        if shape.batch < 1 or shape.new_tokens < 1 or shape.cache_tokens < 0:
            raise UsageError("batch and new tokens must be >= 1 and cached tokens >= 0", "e.g. --m 1024")
        if shape.batch > 1 and shape.new_tokens > 1:
            raise UsageError(f"{shape.batch} sequences of {shape.new_tokens} new tokens each: the chain runs a prompt "
                             "(batch 1) or a generation step (1 new token per sequence)",
                             "use batch 1 for prompts, or new tokens 1 for generation")
        if shape.new_tokens == 1 and shape.batch > self.tile_m:
            raise UsageError(f"a generation batch of {shape.batch} does not fit one O tile row ({self.tile_m})",
                             f"use batch <= {self.tile_m}")
        if shape.keys % 8:
            raise UsageError(f"cached + new tokens = {shape.keys} is not a multiple of 8 (16-byte rows of S and P)",
                             f"e.g. cached tokens {shape.cache_tokens + (-shape.keys) % 8}")
        self.check_grid_size(shape)

    def check_grid_size(self, shape: AttentionShape) -> None:
        """Every stage's grid within MAX_GRID_BLOCKS (the last of check_shape's rules)."""
        for name, (rows, cols) in self._grids(shape).items():
            if rows * cols > MAX_GRID_BLOCKS:
                raise UsageError(
                    f"batch {shape.batch} with {shape.new_tokens} new and {shape.cache_tokens} cached tokens: the {name} "
                    f"grid would have {rows} x {cols} = {rows * cols} blocks, above CUDA's limit of 2^31 - 1 = "
                    f"{MAX_GRID_BLOCKS}", "use fewer new tokens (--m), cached tokens (--cache) or sequences (--batch), "
                    f"or fewer heads (attention.heads, {self.heads} now) in the spec")

    def splits(self, shape: AttentionShape) -> dict[str, int]:
        """Serial split-K slices of qkv and proj (the generated chain's split_k_for, on self.sms SMs)."""
        t = {x.name: x.tile for x in self.gemms}
        qkv_tiles = math.ceil(shape.rows / t["qkv"].m) * math.ceil(3 * self.d / t["qkv"].n)
        proj_tiles = math.ceil(shape.rows / t["proj"].m) * math.ceil(self.hidden / t["proj"].n)
        return {"qkv": split_k_for(qkv_tiles, self.hidden, self.sms), "proj": split_k_for(proj_tiles, self.d, self.sms)}

    def grids(self, shape: AttentionShape) -> dict[str, tuple[int, int]]:
        """(tile rows, tile columns) of each stage, in virtual rows z * tiles_m + m (z: the (sequence,
        head) pair of the batched stages, the K slice of qkv and proj)."""
        self.check_shape(shape)
        return self._grids(shape)

    def _grids(self, shape: AttentionShape) -> dict[str, tuple[int, int]]:
        z = shape.batch * self.heads
        t = {x.name: x.tile for x in self.gemms}
        per_z = math.ceil(shape.new_tokens / self.tile_m)
        split = self.splits(shape)
        return {
            "qkv": (split["qkv"] * math.ceil(shape.rows / t["qkv"].m), math.ceil(3 * self.d / t["qkv"].n)),
            "scores": (z * per_z, math.ceil(shape.keys / t["scores"].n)),
            "softmax": (z * per_z, 1),
            "pv": (z * per_z, math.ceil(self.head_dim / t["pv"].n)),
            "proj": (split["proj"] * math.ceil(shape.rows / t["proj"].m), math.ceil(self.hidden / t["proj"].n)),
        }

    def wait_values(self, shape: AttentionShape) -> dict[str, int]:
        """Posts each consumer waits for on one semaphore of its input edge (the producer's post count)."""
        grid = self.grids(shape)
        pv_posts = self.heads * grid["pv"][1] * (shape.batch if shape.new_tokens == 1 else 1)
        return {"scores": grid["qkv"][1] * self.splits(shape)["qkv"], "softmax": grid["scores"][1], "pv": 1,
                "proj": pv_posts}

    def json_header(self) -> dict[str, Any]:
        """The shape-independent part of `validate --json` (docs/validate-json.md)."""
        tiles = {g.name: tile_json(g.tile) for g in self.gemms}
        return {
            **json_identity(self, "attention"),
            "attention": {"hidden": self.hidden, "heads": self.heads, "head_dim": self.head_dim, "d": self.d,
                          "causal": self.causal, "softmax_rows": self.softmax_rows},
            "stages": [{"name": row.name, "computes": row.computes, "output": row.output, "waits": row.waits,
                        "tile": tiles.get(row.name)} for row in self.table],
        }

    def json_at(self, shape: AttentionShape) -> dict[str, Any]:
        """What describe(shape) says, as JSON values (one entry of `sizes` in `validate --json`)."""
        grid = self.grids(shape)
        waits = self.wait_values(shape)
        split = self.splits(shape)
        return {
            "batch": shape.batch,
            "new_tokens": shape.new_tokens,
            "cache_tokens": shape.cache_tokens,
            "rows": shape.rows,
            "keys": shape.keys,
            "pairs": shape.batch * self.heads,
            "stages": [{"name": name, "grid": {"tiles_m": rows, "tiles_n": cols, "tiles": rows * cols},
                        "k_slices": split.get(name, 1), "wait_value": waits.get(name)}
                       for name, (rows, cols) in grid.items()],
            "warnings": [],
        }

    def describe(self, shape: AttentionShape) -> str:
        """What `validate` prints for one shape."""
        grid = self.grids(shape)
        waits = self.wait_values(shape)
        lines = [
            f"attention chain {self.name} (class {self.class_name}), spec hash {self.spec_hash}",
            f"target {self.target} (arch {self.arch.value}, {self.dtype.value}); {self.heads} heads x {self.head_dim} "
            f"(D = {self.d}), hidden {self.hidden}{', causal' if self.causal else ''}",
            f"shape: batch {shape.batch}, {shape.new_tokens} new + {shape.cache_tokens} cached tokens "
            f"({shape.rows} rows, {shape.keys} keys, z = {shape.batch * self.heads} (sequence, head) pairs)",
        ]
        split = self.splits(shape)
        for row in self.table:
            rows, cols = grid[row.name]
            wait = f"; waits for {waits[row.name]} post(s) per semaphore" if row.name in waits else ""
            cut = f" ({split[row.name]} K slices)" if split.get(row.name, 1) > 1 else ""
            lines.append(f"  {row.name:<8} {row.computes:<28} grid {rows} x {cols} = {rows * cols} blocks{cut}{wait}")
        lines.append(f"  (split-K and block counts assume {self.sms} SMs; the library uses the GPU's own count)")
        return "\n".join(lines) + "\n"


def split_k_for(tiles: int, k: int, sms: int) -> int:
    """Serial split-K slices for a grid of `tiles` (the generated split_k_for): the most slices, up to 16,
    that keep the grid within two blocks per SM, each slice a whole number of 64-element K blocks."""
    best = 1
    for slices in range(2, 17):
        if tiles * slices <= 2 * sms and k % 64 == 0 and (k // 64) % slices == 0:
            best = slices
    return best


_NOTES: dict[str, tuple[str, str, str]] = {  # summary, wait note, post note
    "qkv": ("[Q | K | V] = X W_qkv, stored in place as the new tokens' rows of the KV buffer.",
            "no input waits (X is the chain input)",
            "posts its tile row's semaphore (RowSync) after the epilogue"),
    "scores": ("S_z = Q_z K_z^T / sqrt(head_dim) for every (sequence, head) z; K's rows are read as a "
               "column-major B.",
               "waits at entry for qkv's rows of its queries and of its new keys (cached keys are input)",
               "posts its virtual row's semaphore (RowSync: softmax needs whole rows)"),
    "pv": ("O_z = P_z V_z for every (sequence, head) z, written into head h's columns of O.",
           "waits at entry for softmax's post of its rows of P (V was covered by the scores waits)",
           "posts the semaphore of the O tile row it writes (every head's tiles count toward it)"),
    "proj": ("Y = O W_o.",
             "waits at entry for its O tile row (all heads)",
             "no posts (last stage; its blocks close the run's epoch)"),
}


def make_attention_plan(spec: AttentionSpec, target: str | None = None) -> AttentionPlan:
    """Derive the plan; `target` (from --target) overrides spec.target."""
    spec = retarget(spec, target)
    gemms = []
    for name in ATTENTION_GEMMS:
        tile = getattr(spec.attention.tiles, name)
        m, n, k = attention_gemm_shape(spec, name)
        summary, wait, post = _NOTES[name]
        gemms.append(AttentionGemmPlan(
            name=name,
            const_name=name.capitalize(),
            tile=tile_plan(0, StageSpec(name=name, op=Op.GEMM, a="input", n=8, tile=tile), spec.target,
                           base=f"attention.tiles.{name}"),
            b_layout=BLayout.COL if name == "scores" else BLayout.ROW,
            summary=f"{summary} [{m}, {n}] x K={k}.",
            wait_note=wait,
            post_note=post,
        ))
    return AttentionPlan(
        **plan_head(spec),
        hidden=spec.attention.hidden,
        heads=spec.attention.heads,
        head_dim=spec.attention.head_dim,
        causal=spec.attention.causal,
        gemms=tuple(gemms),
        sms=DEFAULT_SMS[spec.target],
    )
