"""Proves the attention chain's synchronization for one run shape, in the generated code's own terms.

For every consumer tile: the producer tiles it reads (from the GEMM geometry and the KV layout), the
semaphores it waits on and the value it waits for (mirroring cusync/attention.cuh), and the posts each
producer tile makes. A read is covered when the tile waited on the semaphore its producer tile posts
to, for a value that counts every post to that semaphore in the run, or when it is covered through a
chain of such waits. (That model found that pv's reads of V were not covered once causal scores tiles
were skipped: pv reads V for every key, so it now waits for qkv's rows itself.) Wait values are reachable when they equal the posts a semaphore receives.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from dataclasses import dataclass

from cusync_gen.attention_plan import AttentionPlan, AttentionShape
from cusync_gen.errors import SpecError
from cusync_gen.plan import DEFAULT_SMS

Tile = tuple[str, int, int]  # (stage, row, column) in the stage's (virtual-row) grid


@dataclass(frozen=True)
class AttentionProof:
    shape: AttentionShape
    tiles: int
    reads: int

    def describe(self) -> str:
        s = self.shape
        return (f"proved (batch {s.batch}, {s.new_tokens} new + {s.cache_tokens} cached tokens): {self.reads} producer "
                f"tile reads of {self.tiles} consumer tiles are each covered by a wait (directly, or through the waits "
                "before it) whose value counts every post to its semaphore")


def _span(first: int, end: int, tile: int) -> range:
    """Tile indices covering [first, end)."""
    return range(first // tile, (end - 1) // tile + 1) if end > first else range(0)


def verify_attention(plan: AttentionPlan, shape: AttentionShape, pv_waits_for_v: bool = True) -> AttentionProof:
    """Prove one shape. pv_waits_for_v=False models the chain without pv's edge from qkv (the tests use
    it to show that edge is needed)."""
    grid = plan.grids(shape)
    waits_for = plan.wait_values(shape)
    t = {g.name: g.tile for g in plan.gemms}
    s, cache, heads, dh, d = shape.new_tokens, shape.cache_tokens, plan.heads, plan.head_dim, plan.d
    per_z = math.ceil(s / plan.tile_m)
    qkv_rows = math.ceil(shape.rows / t["qkv"].m)   # per K slice
    proj_rows = math.ceil(shape.rows / t["proj"].m)

    # Posts: tile -> semaphore index in its stage's output grid (mirrors AttentionTile::post_tile).
    def post(tile: Tile) -> int:
        stage, row, _ = tile
        if stage == "qkv":
            return row % qkv_rows  # every K slice posts to its tile row
        if stage != "pv":
            return row
        z, m = divmod(row, per_z)
        return ((z // heads) * s + m * plan.tile_m) // plan.tile_m

    posts: dict[str, Counter[int]] = {name: Counter() for name in ("qkv", "scores", "softmax", "pv")}

    def qkv_tiles(first_row: int, rows: range, col_first: int, col_end: int) -> set[Tile]:
        """Every K slice's tile: a slice's partial sum is part of the value read."""
        if not rows:
            return set()
        row_tiles = _span(first_row + rows.start, first_row + rows.stop, t["qkv"].m)
        slices = grid["qkv"][0] // qkv_rows
        return {("qkv", k * qkv_rows + r, c) for k in range(slices) for r in row_tiles
                for c in _span(col_first, col_end, t["qkv"].n)}

    reads: dict[Tile, set[Tile]] = {}
    waits: dict[Tile, list[tuple[str, int, int]]] = {}  # (producer, semaphore, value)
    for v in range(grid["scores"][0]):
        z, m = divmod(v, per_z)
        b, h = divmod(z, heads)
        q = range(m * plan.tile_m, min((m + 1) * plan.tile_m, s))
        for n in range(grid["scores"][1]):
            tile: Tile = ("scores", v, n)
            if plan.causal and n * t["scores"].n > cache + q.stop - 1:  # skipped: no reads, no waits
                reads[tile], waits[tile] = set(), []
                continue
            keys = range(n * t["scores"].n - cache, min((n + 1) * t["scores"].n, shape.keys) - cache)
            new_keys = range(max(keys.start, 0), max(keys.stop, 0))
            reads[tile] = (qkv_tiles(b * s, q, h * dh, (h + 1) * dh)
                           | qkv_tiles(b * s, new_keys, d + h * dh, d + (h + 1) * dh))
            # wait_inputs: the query rows, then the new-key rows, RowSync on qkv's tile rows
            key_rows = range(max(n * t["scores"].n - cache, 0), min((n + 1) * t["scores"].n - cache, s))
            rows = {r for rr in (q, key_rows) if rr for r in _span(b * s + rr.start, b * s + rr.stop, t["qkv"].m)}
            waits[tile] = [("qkv", r, waits_for["scores"]) for r in sorted(rows)]
    for v in range(grid["softmax"][0]):
        tile = ("softmax", v, 0)
        z, m = divmod(v, per_z)
        last_query = min((m + 1) * plan.tile_m, s) - 1
        visible = cache + last_query + 1 if plan.causal else shape.keys  # softmax reads keys [0, visible)
        reads[tile] = {("scores", v, n) for n in _span(0, min(visible, shape.keys), t["scores"].n)}
        waits[tile] = [("scores", v, waits_for["softmax"])]
    for v in range(grid["pv"][0]):
        z, m = divmod(v, per_z)
        b, h = divmod(z, heads)
        for n in range(grid["pv"][1]):
            tile = ("pv", v, n)
            v_cols = (2 * d + h * dh + n * t["pv"].n, 2 * d + h * dh + min((n + 1) * t["pv"].n, dh))
            reads[tile] = {("softmax", v, 0)} | qkv_tiles(b * s, range(0, s), *v_cols)
            v_rows = _span(b * s, b * s + s, t["qkv"].m) if pv_waits_for_v else range(0)  # V of every new key
            waits[tile] = [("softmax", v, waits_for["pv"])] + [("qkv", r, waits_for["scores"]) for r in v_rows]
    for vr in range(grid["proj"][0]):
        r = vr % proj_rows  # K slice vr // proj_rows reads the same O rows
        o_rows = range(r * t["proj"].m, min((r + 1) * t["proj"].m, shape.rows))
        writers = {("pv", v, n) for v in range(grid["pv"][0]) for n in range(grid["pv"][1])
                   if any(o in o_rows for o in _o_rows(v, per_z, heads, s, plan.tile_m))}
        for c in range(grid["proj"][1]):
            reads[("proj", vr, c)] = writers
            waits[("proj", vr, c)] = [("pv", r, waits_for["proj"])]

    posters: dict[tuple[str, int], list[Tile]] = {}
    for name in posts:
        rows, cols = grid[name]
        for r in range(rows):
            for c in range(cols):
                posters.setdefault((name, post((name, r, c))), []).append((name, r, c))
                posts[name][post((name, r, c))] += 1
    covered: dict[Tile, frozenset[Tile]] = {}

    def cover(tile: Tile) -> frozenset[Tile]:
        if tile in covered:
            return covered[tile]
        done: set[Tile] = set()
        for producer, sem, value in waits.get(tile, []):
            if value != posts[producer][sem]:
                raise SpecError("attention", f"{tile[0]} tile {tile[1:]} waits for {value} posts on {producer} semaphore "
                                f"{sem}, which receives {posts[producer][sem]} in a run",
                                "this is a bug in the attention plan: please report it with the spec")
            for p in posters[(producer, sem)]:
                done.add(p)
                done |= cover(p)
        covered[tile] = frozenset(done)
        return covered[tile]

    count = 0
    for tile, needed in reads.items():
        missing = needed - cover(tile)
        if missing:
            first = sorted(missing)[0]
            raise SpecError("attention", f"{tile[0]} tile {tile[1:]} reads {first[0]} tile {first[1:]} without a wait "
                            "that covers its post", "this is a bug in the attention plan: please report it with the spec")
        count += len(needed)
    return AttentionProof(shape, len(reads), count)


def _o_rows(v: int, per_z: int, heads: int, s: int, tile_m: int) -> range:
    z, m = divmod(v, per_z)
    first = (z // heads) * s + m * tile_m
    return range(first, first + min(tile_m, s - m * tile_m))


#: Shapes `generate` proves before writing a project: prompt and generation, aligned and ragged tiles.
REPRESENTATIVE_SHAPES: tuple[AttentionShape, ...] = (
    AttentionShape(1, 200, 8),     # prompt with a short cache; the last tile rows are partial
    AttentionShape(1, 384, 0),     # prompt, several tile rows
    AttentionShape(3, 1, 263),     # generation: three sequences, one new token each
)


def verify_attention_plan(plan: AttentionPlan) -> list[AttentionProof]:
    """Every representative shape, with the split-K the library would pick on each SM count we know of:
    the library counts the GPU's SMs at run time, so the target's count alone would prove one grid."""
    counts = sorted({plan.sms, *DEFAULT_SMS.values()})
    return [verify_attention(dataclasses.replace(plan, sms=sms), shape)
            for shape in REPRESENTATIVE_SHAPES for sms in counts]
