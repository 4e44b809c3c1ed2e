"""Proves the attention chain's synchronization for one run shape, in the generated code's own terms.

For every consumer tile: the producer tiles it reads (from the GEMM geometry and the KV layout), the
semaphores it waits on and the value it waits for (mirroring cusync/attention.cuh), and the posts each
producer tile makes. A read is covered when the tile waited on the semaphore its producer tile posts
to, for a value that counts every post to that semaphore in the run, or when it is covered through a
chain of such waits. (That model found that pv's reads of V were not covered once causal scores tiles
were skipped: pv reads V for every key, so it now waits for qkv's rows itself.) Wait values are reachable
when they equal the posts a semaphore receives.

Why a few tiles prove them all (the work does not grow with heads, tokens, cache or batch)
------------------------------------------------------------------------------------------
Everything is counted per semaphore, in closed form (`_Run.posts`): a qkv tile posts to its tile row
(each of the `slices` K slices and `cols` columns: slices * cols posts per row), a scores tile to its
virtual row v (cols posts), a softmax tile to v (1 post), a pv tile (sequence b, row block m) to the O
tile row (b * s) // BM + m (heads * cols posts from each (b, m) landing there). A producer tile is covered
for a consumer iff the consumer's waits (direct, or through the tiles whose semaphores it waited on)
include that tile's semaphore: all posters of a fully waited semaphore are covered, and nothing less is.
So every check is about semaphores, and the tile sets become ranges of them.

The checks, one tile at a time in the order of the full enumeration (stage, virtual row, column): first
each of the tile's own waits (value == posts of its semaphore), then its reads. What each stage's checks
depend on, and so which tiles (`_Run.representatives`) contain the first failure of all:

- values: the posts per semaphore are the same for every qkv row, scores row and softmax row, so a wrong
  scores, softmax or pv value fails at the stage's first tile; pv's per O row change only where a sequence's
  blocks start or end ((b * s) // BM and that + per-sequence blocks), so proj checks row 0 and those rows.
- scores reads: it waits on the qkv rows of its queries and of its new keys, the very rows it reads (the
  two expressions, new_keys and key_rows, are the same token range), so every scores tile is covered once
  the values are right. Skipped causal tiles read and wait on nothing.
- softmax reads: only scores tiles of its own row v, all posting to v, which it waits on.
- pv reads: its softmax tile (waited on), and V: the qkv rows of its whole sequence, read at its head's
  columns. They are covered by its own wait on those rows; without it (pv_waits_for_v=False, the test of
  why that wait exists), by what softmax waited on: the scores tiles of row v waited on the query rows and
  on the key rows of every scores column up to the last one not skipped, so on the rows of tokens
  [0, T) with T growing with the row block m, and independent of the head and pv column. So a pv tile
  fails iff the one at m = 0, head 0, column 0 of its sequence does: every sequence's is checked.
- proj reads: the pv tiles writing its O rows must all post to its row r. The chain runs either a prompt
  (batch 1) or one token per sequence for at most BM sequences (AttentionPlan.check_shape); with pv and
  proj tiles of BM rows every row is covered, and with other heights the first uncovered row is 0 or 1.
  The K slice and column of a proj tile change nothing, so the first of each row is checked.

The read count printed is a closed form too: sums over heads, row blocks and key blocks of span sizes,
each periodic in its index away from the sequence's ends, summed by `_periodic_sum` (the periods and the
ends are derived where each sum is taken).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from math import comb
from typing import Any

from cusync_gen.attention_plan import AttentionPlan, AttentionShape
from cusync_gen.errors import SpecError
from cusync_gen.plan import DEFAULT_SMS

Tile = tuple[str, int, int]  # (stage, row, column) in the stage's (virtual-row) grid


@dataclass(frozen=True)
class AttentionProof:
    shape: AttentionShape
    tiles: int
    reads: int

    def as_json(self) -> dict[str, Any]:
        return {"consumer_tiles": self.tiles, "reads": self.reads}

    def describe(self) -> str:
        s = self.shape
        return (f"proved (batch {s.batch}, {s.new_tokens} new + {s.cache_tokens} cached tokens): {self.reads} producer "
                f"tile reads of {self.tiles} consumer tiles are each covered by a wait (directly, or through the waits "
                "before it) whose value counts every post to its semaphore")


def _span(first: int, end: int, tile: int) -> range:
    """Tile indices covering [first, end)."""
    return range(first // tile, (end - 1) // tile + 1) if end > first else range(0)


def _overlap(a: range, b: range) -> int:
    return max(0, min(a.stop, b.stop) - max(a.start, b.start))


def _periodic_sum(f: Callable[[int], int], lo: int, hi: int, period: int, degree: int = 0) -> int:
    """sum(f(i) for i in range(lo, hi)), where along each class i = j, j + period, j + 2 * period, ... inside
    [lo, hi), f is a polynomial of at most `degree` in the class index (the caller's proof). Evaluates f at
    (degree + 1) points per class: Newton's forward differences give the sum of the rest."""
    total = 0
    for j in range(lo, min(lo + period, hi)):
        count = (hi - 1 - j) // period + 1
        values = [f(j + k * period) for k in range(min(count, degree + 1))]
        if count <= degree + 1:
            total += sum(values)
            continue
        for order in range(degree + 1):  # sum_{k<count} p(k) = sum_i (delta^i p)(0) * C(count, i + 1)
            total += values[0] * comb(count, order + 1)
            values = [b - a for a, b in zip(values, values[1:])]
    return total


class _Run:
    """One run shape: the grids, the posts per semaphore, each tile's waits and reads, all in closed form."""

    def __init__(self, plan: AttentionPlan, shape: AttentionShape, pv_waits_for_v: bool) -> None:
        self.plan, self.shape, self.pv_waits_for_v = plan, shape, pv_waits_for_v
        self.grid = plan.grids(shape)
        self.waits_for = plan.wait_values(shape)
        self.t = {g.name: g.tile for g in plan.gemms}
        self.s, self.cache, self.heads, self.dh, self.d = (shape.new_tokens, shape.cache_tokens, plan.heads,
                                                           plan.head_dim, plan.d)
        self.tm, self.batch = plan.tile_m, shape.batch
        self.per_z = math.ceil(self.s / self.tm)
        self.qkv_rows = math.ceil(shape.rows / self.t["qkv"].m)   # per K slice
        self.proj_rows = math.ceil(shape.rows / self.t["proj"].m)
        self.slices = self.grid["qkv"][0] // self.qkv_rows
        self.cols = self.grid["scores"][1]  # scores columns: key blocks
        self.last_key_block = self.cols - 1
        virtual_rows = self.batch * self.heads * self.per_z
        if (self.grid["qkv"][0] % self.qkv_rows or self.grid["proj"][0] % self.proj_rows
                or {self.grid[n][0] for n in ("scores", "softmax", "pv")} != {virtual_rows}):
            raise SpecError("attention", f"the grids {self.grid} are not whole K slices and (sequence, head) rows",
                            "this is a bug in the attention plan: please report it with the spec")

    # --- the model of the generated code (as cusync/attention.cuh does it) ---------------------------

    def v(self, b: int, h: int, m: int) -> int:
        return (b * self.heads + h) * self.per_z + m

    def bhm(self, v: int) -> tuple[int, int, int]:
        z, m = divmod(v, self.per_z)
        return (*divmod(z, self.heads), m)

    def queries(self, m: int) -> range:
        return range(m * self.tm, min((m + 1) * self.tm, self.s))

    def last_column(self, m: int) -> int:
        """The last scores column of row block m that is not skipped (causal: keys up to its last query)."""
        if not self.plan.causal:
            return self.last_key_block
        return min(self.last_key_block, (self.cache + self.queries(m).stop - 1) // self.t["scores"].n)

    def key_rows(self, n: int) -> range:
        """The new tokens among scores column n's keys (cached keys are input, no wait)."""
        sn = self.t["scores"].n
        return range(max(n * sn - self.cache, 0), min((n + 1) * sn - self.cache, self.s))

    def new_keys(self, n: int) -> range:
        """The same tokens, as the read's geometry computes them: keys of column n minus the cache."""
        sn = self.t["scores"].n
        keys = range(n * sn - self.cache, min((n + 1) * sn, self.shape.keys) - self.cache)
        return range(max(keys.start, 0), max(keys.stop, 0))

    def qkv_tile_rows(self, b: int, tokens: range) -> range:
        return _span(b * self.s + tokens.start, b * self.s + tokens.stop, self.t["qkv"].m)

    def qkv_cols(self, first: int, end: int) -> range:
        return _span(first, end, self.t["qkv"].n)

    def v_cols(self, h: int, n: int) -> range:
        pn = self.t["pv"].n
        first = 2 * self.d + h * self.dh
        return self.qkv_cols(first + n * pn, first + min((n + 1) * pn, self.dh))

    def o_rows(self, b: int, m: int) -> range:
        return range(b * self.s + m * self.tm, b * self.s + min((m + 1) * self.tm, self.s))

    def pv_post(self, b: int, m: int) -> int:
        """AttentionTile::post_tile of pv: the O tile row it writes (every head's tiles count toward it)."""
        return (b * self.s + m * self.tm) // self.tm

    def posts(self, stage: str, sem: int) -> int:
        """Posts semaphore `sem` of `stage` receives in one run (every tile of the stage's grid posts once)."""
        rows, cols = self.grid[stage]
        if sem < 0:
            return 0
        if stage == "qkv":
            return cols * len(range(sem, rows, self.qkv_rows)) if sem < self.qkv_rows else 0
        if stage in ("scores", "softmax"):
            return cols if sem < rows else 0
        return cols * self.heads * sum(0 <= sem - self.pv_post(b, 0) < self.per_z for b in range(self.batch))

    def waits(self, tile: Tile) -> list[tuple[str, range, int]]:
        """(producer, semaphores, value) in the order the tile waits (semaphores in increasing order)."""
        stage, v, n = tile
        b, _, m = self.bhm(v) if stage != "proj" else (0, 0, 0)
        if stage == "scores":
            if n > self.last_column(m):  # skipped: no reads, no waits
                return []
            rows = _union(self.qkv_tile_rows(b, self.queries(m)), self.qkv_tile_rows(b, self.key_rows(n)))
            return [("qkv", r, self.waits_for["scores"]) for r in rows]
        if stage == "softmax":
            return [("scores", range(v, v + 1), self.waits_for["softmax"])]
        if stage == "pv":
            v_rows = self.qkv_tile_rows(b, range(0, self.s)) if self.pv_waits_for_v else range(0)
            return [("softmax", range(v, v + 1), self.waits_for["pv"]), ("qkv", v_rows, self.waits_for["scores"])]
        r = v % self.proj_rows
        return [("pv", range(r, r + 1), self.waits_for["proj"])]

    def covered(self, tile: Tile) -> dict[str, list[range]]:
        """Semaphores whose every post the tile knows of: its own waits, and what those posters waited on."""
        stage, v, _ = tile
        own: dict[str, list[range]] = {"qkv": [], "scores": [], "softmax": [], "pv": []}
        for producer, sems, _ in self.waits(tile):
            own[producer].append(sems)
        if stage == "pv":  # through softmax v: scores row v, and the qkv rows its tiles waited on
            b, _, m = self.bhm(v)
            sn = self.t["scores"].n
            seen = range(0, min((self.last_column(m) + 1) * sn - self.cache, self.s))  # key tokens up to there
            own["scores"].append(range(v, v + 1))
            own["qkv"] += [self.qkv_tile_rows(b, self.queries(m)), self.qkv_tile_rows(b, seen)]
        return own

    def reads(self, tile: Tile) -> list[tuple[str, range, Callable[[int], Tile]]]:
        """(producer, its semaphores the tile reads tiles of, the first such tile of a semaphore)."""
        stage, v, n = tile
        if stage == "proj":
            return [("pv", range(sem, sem + 1), _always(first)) for sem, first in self.writers(v % self.proj_rows)]
        b, h, m = self.bhm(v)

        def qkv(cols: range) -> Callable[[int], Tile]:
            return lambda row: ("qkv", row, cols.start)  # K slice 0 holds the tile row's first tile

        if stage == "scores":
            if n > self.last_column(m) or self.slices == 0:
                return []
            return [("qkv", self.qkv_tile_rows(b, self.queries(m)), qkv(self.qkv_cols(h * self.dh, (h + 1) * self.dh))),
                    ("qkv", self.qkv_tile_rows(b, self.new_keys(n)),
                     qkv(self.qkv_cols(self.d + h * self.dh, self.d + (h + 1) * self.dh)))]
        if stage == "softmax":
            return [("scores", range(v, v + 1), _always(("scores", v, 0)))]
        v_rows = self.qkv_tile_rows(b, range(0, self.s)) if self.slices else range(0)
        return [("softmax", range(v, v + 1), _always(("softmax", v, 0))), ("qkv", v_rows, qkv(self.v_cols(h, n)))]

    def writers(self, r: int) -> list[tuple[int, Tile]]:
        """(semaphore, first pv tile) of the pv tiles whose O rows meet proj's row r (head 0, column 0 first)."""
        pm = self.t["proj"].m
        rows = range(r * pm, min((r + 1) * pm, self.shape.rows))
        found = []
        for b in range(self.batch):
            for m in range(max(0, (rows.start - b * self.s) // self.tm), self.per_z):
                if self.o_rows(b, m).start >= rows.stop:
                    break
                if _overlap(self.o_rows(b, m), rows):
                    found.append((self.pv_post(b, m), ("pv", self.v(b, 0, m), 0)))
        return found

    def check(self, tile: Tile) -> None:
        for producer, sems, value in self.waits(tile):
            # every semaphore of a range gets the same posts (the qkv rows: __init__ checked that every K
            # slice has every row), so the first is the first to fail
            if sems and value != self.posts(producer, sems.start):
                raise SpecError("attention", f"{tile[0]} tile {tile[1:]} waits for {value} posts on {producer} "
                                f"semaphore {sems.start}, which receives {self.posts(producer, sems.start)} in a run",
                                "this is a bug in the attention plan: please report it with the spec")
        covered = self.covered(tile)
        missing = [first(sem) for producer, sems, first in self.reads(tile)
                   if (sem := _first_outside(sems, covered[producer])) is not None]
        if missing:
            first = min(missing)
            raise SpecError("attention", f"{tile[0]} tile {tile[1:]} reads {first[0]} tile {first[1:]} without a "
                            "wait that covers its post",
                            "this is a bug in the attention plan: please report it with the spec")

    # --- the representatives (module docstring) --------------------------------------------------------

    def representatives(self) -> Iterable[Tile]:
        def pick(values: Iterable[int], limit: int) -> list[int]:
            return sorted({x for x in values if 0 <= x < limit})

        sequences = pick((0, self.batch - 1), self.batch)
        heads = pick((0, self.heads - 1), self.heads)
        blocks = pick((0, 1, self.per_z - 1), self.per_z)
        sn = self.t["scores"].n
        scores = []
        for b in sequences:
            for h in heads:
                for m in blocks:
                    last = self.last_column(m)
                    columns = (0, self.cache // sn, self.cache // sn + 1, last, last + 1, self.last_key_block)
                    scores += [("scores", self.v(b, h, m), n) for n in pick(columns, self.cols)]
        rows = sorted({v for _, v, _ in scores})
        yield from sorted(scores)
        yield from (("softmax", v, 0) for v in rows)
        pv = {("pv", self.v(b, 0, 0), 0) for b in range(self.batch)}  # every sequence's first tile
        pv |= {("pv", v, n) for v in rows for n in pick((0, self.grid["pv"][1] - 1), self.grid["pv"][1])}
        yield from sorted(pv)
        breaks = [self.pv_post(b, 0) + end for b in range(self.batch) for end in (0, self.per_z)]
        proj_rows = pick((0, 1, 2, self.proj_rows - 1, *breaks), self.proj_rows)
        yield from (("proj", r, 0) for r in proj_rows)
        yield ("proj", self.grid["proj"][0] - 1, self.grid["proj"][1] - 1)

    # --- the counts ---------------------------------------------------------------------------------------

    def tile_count(self) -> int:
        return sum(rows * cols for name, (rows, cols) in self.grid.items() if name != "qkv")

    def read_count(self) -> int:
        return self.scores_reads() + self.softmax_reads() + self.pv_reads() + self.proj_reads()

    def over_heads(self, f: Callable[[int], int]) -> int:
        """Sum over heads of f(h), f depending on h only through h * head_dim modulo qkv's tile N."""
        qn = self.t["qkv"].n
        return _periodic_sum(f, 0, self.heads, qn // math.gcd(self.dh, qn))

    def over_blocks(self, f: Callable[[int], int], period: int, degree: int) -> int:
        """Sum over row blocks m of f(m), where f is periodic (degree 0) or linear (degree 1) along the classes
        of m modulo `period` except at the last, partial block."""
        return _periodic_sum(f, 0, self.per_z - 1, period, degree) + f(self.per_z - 1)

    def key_rows_up_to(self, b: int, last: int) -> int:
        """sum(len(qkv rows of the new keys of column n) for n <= last). Columns before cache // BN hold cached
        keys only (0 rows); after that one and before the last, BN new keys each, whose row count depends only
        on where they start modulo qkv's tile M: periodic in n, period BM_qkv / gcd(BN, BM_qkv)."""
        sn, qm = self.t["scores"].n, self.t["qkv"].m
        first = self.cache // sn
        if last < first:
            return 0

        def rows(n: int) -> int:
            return len(self.qkv_tile_rows(b, self.key_rows(n)))

        total = rows(first)
        inner_end = min(last, self.last_key_block - 1) + 1
        if inner_end > first + 1:
            total += _periodic_sum(rows, first + 1, inner_end, qm // math.gcd(sn, qm))
        if last >= self.last_key_block > first:
            total += rows(self.last_key_block)
        return total

    def scores_reads(self) -> int:
        """A scores tile reads the qkv tiles of its query rows at head h's Q columns and of its new keys' rows at
        h's K columns, in every K slice: |rows_q| |cols_q| + |rows_k| |cols_k| - |both rows| |both cols|."""
        if self.slices == 0:
            return 0
        dh, d = self.dh, self.d
        q_cols = self.over_heads(lambda h: len(self.qkv_cols(h * dh, (h + 1) * dh)))
        k_cols = self.over_heads(lambda h: len(self.qkv_cols(d + h * dh, d + (h + 1) * dh)))
        both_cols = self.over_heads(lambda h: _overlap(self.qkv_cols(h * dh, (h + 1) * dh),
                                                       self.qkv_cols(d + h * dh, d + (h + 1) * dh)))
        qm, sn, tm = self.t["qkv"].m, self.t["scores"].n, self.tm
        total = 0
        for b in range(self.batch):
            def row_block(m: int, b: int = b) -> int:
                q_rows = self.qkv_tile_rows(b, self.queries(m))
                last = self.last_column(m)
                # key columns whose rows can meet the query rows (the others share none)
                lo = (self.cache + q_rows.start * qm - b * self.s) // sn
                hi = min(last, (self.cache + q_rows.stop * qm - b * self.s - 1) // sn)
                both = sum(_overlap(q_rows, self.qkv_tile_rows(b, self.key_rows(n))) for n in range(max(lo, 0), hi + 1))
                return (len(q_rows) * q_cols * (last + 1) + k_cols * self.key_rows_up_to(b, last)
                        - both_cols * both)

            # Row blocks m in [core_lo, core_hi) have whole query tiles, their query rows and the key columns
            # meeting them lie past the cached keys' column and before the last column, and so does their last
            # column: shifting m by `period` (whose rows are a multiple of qkv's tile M and of the key block)
            # shifts all of them alike, so len(q_rows) and `both` repeat and `last` and the key rows up to it
            # grow by a constant: row_block is linear along each class. The blocks outside are summed one by one
            # (fewer than (BN + BM_qkv) / BM + 3 at each end).
            core_lo = -(-(sn + qm) // tm)
            core_hi = (self.s - qm - sn + 1) // tm
            step = math.lcm(qm, sn)
            period = step // math.gcd(step, tm)
            total += sum(row_block(m) for m in range(min(core_lo, self.per_z)))
            if core_hi > core_lo:
                total += _periodic_sum(row_block, core_lo, core_hi, period, 1)
            total += sum(row_block(m) for m in range(max(core_lo, core_hi), self.per_z))
        return self.slices * total

    def softmax_reads(self) -> int:
        """Softmax row v reads its scores columns up to the last one not skipped."""
        sn = self.t["scores"].n
        per_row = self.over_blocks(lambda m: self.last_column(m) + 1, sn // math.gcd(sn, self.tm), 1)
        return self.batch * self.heads * per_row

    def pv_reads(self) -> int:
        """A pv tile reads its softmax tile and V: qkv rows of its sequence, its head's V columns, every K slice."""
        pn, qn = self.t["pv"].n, self.t["qkv"].n
        columns = self.grid["pv"][1]
        per_head = self.over_heads(lambda h: _periodic_sum(lambda n: len(self.v_cols(h, n)), 0, columns - 1,
                                                           qn // math.gcd(pn, qn)) + len(self.v_cols(h, columns - 1)))
        rows = sum(len(self.qkv_tile_rows(b, range(0, self.s))) for b in range(self.batch))
        tiles = self.grid["pv"][0] * columns
        return tiles + self.slices * self.per_z * rows * per_head

    def proj_reads(self) -> int:
        """A proj tile reads every pv tile (all heads and columns) whose O rows meet its rows."""
        pm = self.t["proj"].m
        meets = sum(self.over_blocks(lambda m, b=b: len(_span(self.o_rows(b, m).start, self.o_rows(b, m).stop, pm)),
                                     pm // math.gcd(self.tm, pm), 0) for b in range(self.batch))
        rows, cols = self.grid["proj"]
        return rows // self.proj_rows * cols * self.heads * self.grid["pv"][1] * meets


def _always(tile: Tile) -> Callable[[int], Tile]:
    return lambda _sem: tile


def _union(a: range, b: range) -> list[range]:
    """Two ranges as disjoint ranges in increasing order."""
    parts = sorted((r for r in (a, b) if r), key=lambda r: r.start)
    if len(parts) == 2 and parts[1].start <= parts[0].stop:
        return [range(parts[0].start, max(parts[0].stop, parts[1].stop))]
    return parts


def _first_outside(sems: range, covered: list[range]) -> int | None:
    """The smallest semaphore of `sems` in none of the `covered` ranges, or None."""
    candidates = [sems.start] + [c.stop for c in covered if c.stop in sems]
    return min((x for x in candidates if x in sems and not any(x in c for c in covered)), default=None)


def verify_attention(plan: AttentionPlan, shape: AttentionShape, pv_waits_for_v: bool = True) -> AttentionProof:
    """Prove one shape. pv_waits_for_v=False models the chain without pv's edge from qkv (the tests use
    it to show that edge is needed)."""
    run = _Run(plan, shape, pv_waits_for_v)
    for tile in run.representatives():
        run.check(tile)
    return AttentionProof(shape, run.tile_count(), run.read_count())


def validate_attention_json(plan: AttentionPlan, shapes: Sequence[AttentionShape]) -> dict[str, Any]:
    """`cusync-gen validate --json` of an attention chain: the plan at each shape with its proof
    (docs/validate-json.md); raises on the first shape that fails, like the text."""
    sizes = [{**plan.json_at(shape), "proof": verify_attention(plan, shape).as_json()} for shape in shapes]
    return {**plan.json_header(), "sizes": sizes}


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
