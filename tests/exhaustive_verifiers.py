"""The verifiers as they were before they were bounded: every producer tile, consumer tile and K-block
enumerated. Test oracles only (their time grows with the problem): the property tests check that the
bounded verifiers in cusync_gen agree with them on small shapes, including broken policies."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from cusync_gen.attention_plan import AttentionPlan, AttentionShape
from cusync_gen.errors import SpecError
from cusync_gen.plan import EdgePlan, StagePlan
from cusync_gen.spec import Op
from cusync_gen.verify import EdgeProof, VerificationError, semaphore_of, uncovered


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


# --- GEMM chains (cusync_gen/verify.py) ------------------------------------------------------------

def _posts(edge: EdgePlan, producer: StagePlan, m: int) -> dict[int, list[tuple[int, int]]]:
    posts: dict[int, list[tuple[int, int]]] = {}
    for pm in range(_ceil_div(m, producer.tile.m)):
        for pn in range(_ceil_div(producer.n, producer.tile.n)):
            posts.setdefault(semaphore_of(edge, producer, pm, pn), []).append((pm, pn))
    return posts


@dataclass(frozen=True)
class _Read:
    rows: tuple[int, int]
    cols: tuple[int, int]
    waited: frozenset[int] | set[int]
    what: str


def _row_tiles(row_begin: int, row_end: int, producer: StagePlan, m: int) -> range:
    last = min((row_end - 1) // producer.tile.m, _ceil_div(m, producer.tile.m) - 1)
    return range(row_begin // producer.tile.m, last + 1)


def _reads(stage: StagePlan, edge: EdgePlan, producer: StagePlan, cm: int, cn: int, m: int) -> Iterator[_Read]:
    row0 = cm * stage.tile.m
    rows = (row0, min(row0 + stage.tile.m, m))
    if stage.op is Op.GEMM:
        waited: set[int] = set()
        for kb in range(_ceil_div(stage.k, stage.tile.k)):
            col = kb * stage.tile.k
            for pm in _row_tiles(*rows, producer, m):
                waited.add(semaphore_of(edge, producer, pm, col // producer.tile.n))
            yield _Read(rows, (col, min(col + stage.tile.k, stage.k)), waited, f"K-block {kb}")
        return
    col0 = cn * stage.tile.n
    width = min(stage.tile.n, stage.n - col0)
    pm0 = row0 // producer.tile.m
    if stage.input_b is not None:
        waited_one = frozenset({semaphore_of(edge, producer, pm0, col0 // producer.tile.n)})
        yield _Read(rows, (col0, col0 + width), waited_one, "gate" if edge.operand == "a" else "up")
        return
    both = frozenset({semaphore_of(edge, producer, pm0, col0 // producer.tile.n),
                      semaphore_of(edge, producer, pm0, (stage.n + col0) // producer.tile.n)})
    yield _Read(rows, (col0, col0 + width), both, "gate")
    yield _Read(rows, (stage.n + col0, stage.n + col0 + width), both, "up")


def verify_edge_exhaustive(producer: StagePlan, stage: StagePlan, edge: EdgePlan, m: int) -> EdgeProof:
    posts = _posts(edge, producer, m)
    where = f"stage '{stage.name}' reading '{producer.name}' ({edge.policy.value} sync) at M = {m}"
    for sem, posters in posts.items():
        if edge.wait_value > len(posters):
            raise VerificationError(
                f"{stage.name}.sync",
                f"{where}: semaphore {sem} gets {len(posters)} posts per run but waits ask for {edge.wait_value}, "
                "so they would spin until the timeout",
                f"the wait value must be at most {len(posters)}",
            )
    tiles_m, tiles_n = _ceil_div(m, stage.tile.m), _ceil_div(stage.n, stage.tile.n)
    reads = 0
    for cm in range(tiles_m):
        for cn in range(tiles_n):
            for read in _reads(stage, edge, producer, cm, cn, m):
                reads += 1
                _check_read(producer, stage, edge, posts, cm, cn, read, where)
    return EdgeProof(producer.name, stage.name, edge.policy, tiles_m * tiles_n, reads, len(posts), edge.wait_value)


def _check_read(producer: StagePlan, stage: StagePlan, edge: EdgePlan, posts: dict[int, list[tuple[int, int]]],
                cm: int, cn: int, read: _Read, where: str) -> None:
    for pm in range(read.rows[0] // producer.tile.m, (read.rows[1] - 1) // producer.tile.m + 1):
        for pn in range(read.cols[0] // producer.tile.n, (read.cols[1] - 1) // producer.tile.n + 1):
            sem = semaphore_of(edge, producer, pm, pn)
            posters = posts.get(sem, [])
            if sem in read.waited and edge.wait_value == len(posters) and (pm, pn) in posters:
                continue
            reason = (
                f"waits only on semaphores {sorted(read.waited)}" if sem not in read.waited
                else f"waits for {edge.wait_value} of the {len(posters)} posts of semaphore {sem}, "
                "so it can pass before this tile posts"
            )
            raise uncovered(stage, producer, where, (cm, cn), read, (pm, pn), reason)  # type: ignore[arg-type]


# --- the attention chain (cusync_gen/verify_attention.py) -------------------------------------------

Tile = tuple[str, int, int]


def _span(first: int, end: int, tile: int) -> range:
    """Tile indices covering [first, end)."""
    return range(first // tile, (end - 1) // tile + 1) if end > first else range(0)


def verify_attention_exhaustive(plan: AttentionPlan, shape: AttentionShape,
                                pv_waits_for_v: bool = True) -> tuple[int, int]:
    """(consumer tiles, producer tile reads) proved, or SpecError on the first gap."""
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
    return len(reads), count


def _o_rows(v: int, per_z: int, heads: int, s: int, tile_m: int) -> range:
    z, m = divmod(v, per_z)
    first = (z // heads) * s + m * tile_m
    return range(first, first + min(tile_m, s - m * tile_m))
