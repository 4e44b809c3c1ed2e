"""The verifier: proves, for one M, that the synchronization the plan will generate is sound.

It models what the generated code does, in the code's own terms (policy.h's semaphore_of, the waits of
the sm80 A iterator, of the sm90 load warp and of the SwiGLU stage), and checks three things per edge:

1. coverage: every element a consumer tile reads was written by a producer tile whose semaphore the
   consumer waited on, before the read, with a wait value that counts that tile's post;
2. reachability: every wait value is at most the posts its semaphore receives in one run (a larger one
   would spin until the timeout);
3. progress: no consumer can hold the SMs an unstarted producer tile needs (the launch discipline; with
   avoid_wait_kernel the generated run() itself keeps the wait kernel at an M where blocks do not fit).

Posts of earlier runs never count: semaphores are (epoch << 32) | posts and a wait asks for this run's
epoch, so "counts" means "posted in this run" and the check is per run.
The plan computes the policies; this module re-derives the reads from GEMM geometry, so a policy whose
wait value or tiles do not match the data it guards is caught before any code is generated.

Why a few tiles prove them all (the work does not grow with M, N or K)
----------------------------------------------------------------------
Posts are counted in closed form (`_Posts`): every producer tile (pm, pn) of the tiles_m x tiles_n grid
posts once to semaphore_of(pm, pn) = pm * A + f(pn), with (A, f) = (tiles_n, pn) for tile, (1, 0) for row,
(stride, pn % stride) for strided. For a tile inside the grid f(pn) < A, so the semaphore of an in-grid
tile names its row pm and its column class f(pn); the posts of a semaphore are the in-grid tiles of its
row with that class: 1 (tile), tiles_n (row), len(range(r, tiles_n, stride)) (strided class r).

Reachability (`_Posts.first_short`): all rows post alike, and within a row a strided class r gets
ceil((tiles_n - r) / stride) posts, which falls once, at r = tiles_n % stride; so the first semaphore short
of the wait value is that of class 0 or of that class, in row 0.

Coverage is checked for a representative set of consumer tiles and K-blocks, each exactly as the generated
code does it (the waits before each read, the producer tiles under it). The set is enough because of
these facts, where "in grid" means every producer tile the read covers lies inside the producer's grid:

(a) A read of a producer tile outside the grid is uncovered (it never posts). A tile inside the grid is
    covered iff some waited semaphore equals its own and its post count equals the wait value. Reads never
    leave the grid in M (rows are clamped to M), and the waits name in-grid tiles until the first read
    that leaves it in N, so up to that read, "equals its semaphore" means: same row pm, same class f(pn).
(b) Counts: once reachability holds, the wait value is at most every count, so a read fails on its count
    only where a count exceeds it; class 0 has the largest count, and the first read of consumer tile
    (0, 0) is producer tile (0, 0). A count failure anywhere is therefore a failure of tile (0, 0).
(c) A GEMM tile waits, before K-block kb, on the very producer tile rows it reads (both are the rows of its
    M range), at the columns c_j = (j * BK) // BN of the K-blocks j <= kb. So whether K-block kb is
    covered depends on the column pattern alone, not on (cm, cn): every consumer tile behaves like (0, 0).
    With (a), K-block kb (in grid) is covered iff each column it reads has the class of a waited column:
    always for row; for tile iff the block lies in one producer column, i.e. (kb * BK) % BN + its length
    <= BN. That depends only on kb modulo BN / gcd(BK, BN), and on whether kb is the (partial) last block.
    The first K-block that leaves the grid and every one after it fail. So the K-blocks of the first
    period, the first one out of the grid and the last one contain the first failing K-block, if any.
    (Strided waits on a GEMM edge are not modelled: the spec allows strided only for swiglu.)
(d) A swiglu tile (cm, cn) waits on one producer row, pm0 = row0 // BM_p, at the columns of its gate (and
    up) chunk, and reads its rows at its columns. By (a) it passes iff its rows lie in producer row pm0
    (rows_ok(cm)) and its columns are in grid with classes among the waited ones (cols_ok(cn)). For full
    tiles rows_ok depends only on (cm * BM) % BM_p, so on cm modulo BM_p / gcd(BM, BM_p); cols_ok, for
    columns in grid, only on (cn * BN) % BN_p (the offsets between the columns read and waited on, and
    n itself, are fixed), so on cn modulo BN_p / gcd(BN, BN_p); the last tile row and column may be
    partial; columns leave the grid from one tile column on. Since pass = rows_ok(cm) and cols_ok(cn),
    the first failing tile in (cm, cn) order is (first failing cm, 0) or (0, first failing cn), and the
    first period, the last index and the first column out of the grid contain both.
So the first uncovered read among the representatives is the first one of all, in the order the code
runs them, and the error names the same tile and read the full enumeration would.
The counts printed (tiles, reads, semaphores) are closed forms of the same grids.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from cusync_gen.errors import SpecError
from cusync_gen.plan import ChainPlan, EdgePlan, StagePlan
from cusync_gen.spec.model import SLAB_MAX_M, STREAM_MAX_M, Op, Policy
from cusync_gen.spec.policies import POLICIES
from cusync_gen.verify_slab import SlabProof, verify_slab
from cusync_gen.verify_stream import StreamProof, verify_stream


class VerificationError(SpecError):
    """A read the waits do not cover, a wait value no run reaches, or a launch that can deadlock."""


@dataclass(frozen=True)
class EdgeProof:
    """What was proved for one edge at one M (printed by `cusync-gen validate`)."""

    producer: str
    consumer: str
    policy: Policy
    consumer_tiles: int
    reads: int          # (consumer tile, read chunk) pairs proved
    semaphores: int     # semaphores that receive posts
    wait_value: int

    def as_json(self) -> dict[str, Any]:
        return {"producer": self.producer, "consumer": self.consumer, "policy": self.policy.value,
                "consumer_tiles": self.consumer_tiles, "reads": self.reads, "semaphores": self.semaphores,
                "wait_value": self.wait_value}

    def describe(self) -> str:
        return (
            f"{self.producer} -> {self.consumer} ({self.policy.value}): {self.consumer_tiles} consumer tiles, "
            f"{self.reads} reads, each after a wait on every producer tile it reads "
            f"({self.semaphores} semaphores, wait value {self.wait_value} = posts per run)"
        )


@dataclass(frozen=True)
class Proof:
    m: int
    config: int
    edges: tuple[EdgeProof, ...]
    progress: str
    stream: StreamProof | None = None  # run() mode stream's K-range sync, where it can run at this M
    slab: SlabProof | None = None      # run() mode stream's slab kernel, where it can run at this M

    def as_json(self) -> dict[str, Any]:
        return {"tile_config": self.config, "edges": [e.as_json() for e in self.edges], "progress": self.progress,
                "stream": None if self.stream is None else self.stream.as_json(),
                "slab": None if self.slab is None else self.slab.as_json()}

    def describe(self) -> str:
        lines = [f"verified at M = {self.m} (tile configuration {self.config}):"]
        lines += [f"  {e.describe()}" for e in self.edges]
        lines.append(f"  progress: {self.progress}")
        if self.stream is not None:
            lines.append(f"  {self.stream.describe()}")
        if self.slab is not None:
            lines.append(f"  {self.slab.describe()}")
        lines.append("  earlier runs: posts carry their run's epoch, so none of them satisfies a wait of this run")
        return "\n".join(lines)


def representative_ms(plan: ChainPlan) -> list[int]:
    """Sizes whose proofs cover every M. Within one tile configuration the verdict does not depend on M:
    a GEMM consumer's verdict is that of its tile (0, 0) (module docstring, (c)), and a swiglu's depends on
    M only through its last tile row, which stays in one producer tile row whenever its tile M divides the
    producer's (a spec rule for every policy). So one M per configuration would do; these also take a
    partial last tile (M = 1, and 3 rows of the largest tile plus one) and each side of each m_max."""
    tallest = max(s.tile.m for c in plan.configs for s in c.stages)
    ms = {1, 3 * tallest + 1}
    for c in plan.configs:
        if c.m_max is not None:
            ms |= {c.m_max, c.m_max + 1}
    return sorted(ms)


def verify(plan: ChainPlan, m: int) -> Proof:
    """Prove the plan's synchronization sound at M rows, or raise VerificationError on the first gap."""
    config = plan.config_for(m)
    stages = config.stages
    proofs = []
    for stage in stages:
        for edge in stage.input_edges():
            if edge.policy is Policy.NONE:
                continue
            proofs.append(_verify_edge(stages[edge.producer], stage, edge, m))
    stream = None
    if plan.optimizations.stream_weights and plan.stream_problem is None and m <= STREAM_MAX_M:
        stream = verify_stream(plan)
    slab = verify_slab(plan) if plan.slab_problem is None and m <= SLAB_MAX_M else None
    return Proof(m, config.index, tuple(proofs), _progress(plan, m), stream, slab)


def validate_json(plan: ChainPlan, ms: Sequence[int]) -> dict[str, Any]:
    """`cusync-gen validate --json`: the plan at each M with its proof (docs/validate-json.md). Raises on
    the first M whose proof fails, like the text, so a document printed is a plan proved at every M."""
    sizes = [{**plan.json_at(m), "proof": verify(plan, m).as_json()} for m in ms]
    return {**plan.json_header(), "sizes": sizes}


# ---------------------------------------------------------------------------------------------------
# The model of the generated code


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def semaphore_of(edge: EdgePlan, producer: StagePlan, pm: int, pn: int) -> int:
    """policy.h's SyncPolicy::semaphore_of for this edge's policy and producer geometry."""
    tiles_n = _ceil_div(producer.n, producer.tile.n)
    return POLICIES[edge.policy].semaphore_of(pm, pn, tiles_n, edge.stride_tiles)


@dataclass(frozen=True)
class _Posts:
    """The producer's posts in one run, in closed form: every tile of its grid posts once, after its store."""

    edge: EdgePlan
    producer: StagePlan
    tiles_m: int
    tiles_n: int

    def semaphore(self, pm: int, pn: int) -> int:
        return semaphore_of(self.edge, self.producer, pm, pn)

    def posts(self, pm: int, pn: int) -> bool:
        """Whether producer tile (pm, pn) exists, i.e. posts (to its semaphore) in a run."""
        return 0 <= pm < self.tiles_m and 0 <= pn < self.tiles_n

    def count(self, sem: int) -> int:
        """Posts semaphore `sem` receives in one run."""
        if sem < 0:
            return 0
        return POLICIES[self.edge.policy].posts_to(sem, self.tiles_m, self.tiles_n, self.edge.stride_tiles)

    @property
    def semaphores(self) -> int:
        """Semaphores that receive at least one post."""
        return POLICIES[self.edge.policy].semaphores_posted(self.tiles_m, self.tiles_n, self.edge.stride_tiles)

    def first_short(self, wait_value: int) -> int | None:
        """The first semaphore, in producer tile order, with fewer posts than `wait_value` (docstring)."""
        groups = [0]
        if self.edge.policy is Policy.STRIDED and 0 < self.tiles_n % self.edge.stride_tiles < self.tiles_n:
            groups.append(self.tiles_n % self.edge.stride_tiles)  # where the group counts drop by one
        return next((self.semaphore(0, g) for g in groups if self.count(self.semaphore(0, g)) < wait_value), None)


class _GemmWaits:
    """The semaphores a GEMM tile has waited on before K-block `kb`: those of producer tile rows `rows` at the
    column of every K-block j <= kb (the A iterator / load warp waits per K-block, RowSync per row)."""

    def __init__(self, posts: _Posts, rows: range, kb: int, block_k: int) -> None:
        self.posts, self.rows, self.kb, self.block_k = posts, rows, kb, block_k

    def _column(self, j: int) -> int:
        return j * self.block_k // self.posts.producer.tile.n

    def __contains__(self, sem: object) -> bool:
        if not isinstance(sem, int):
            return False
        if POLICIES[self.posts.edge.policy].whole_row:  # semaphore pm covers all of producer row pm
            return sem in self.rows
        # tile (strided GEMM edges are refused before): sem = pm * tiles_n + column for a waited row pm and a
        # waited column. The columns floor(j * BK / BN) do not decrease with j, so column c is waited on by
        # K-block kb iff the first j reaching c, ceil(c * BN / BK), is at most kb and lands exactly on c.
        for pm in self.rows:
            column = sem - pm * self.posts.tiles_n
            j = _ceil_div(column * self.posts.producer.tile.n, self.block_k)
            if column >= 0 and j <= self.kb and self._column(j) == column:
                return True
        return False

    def listing(self) -> list[int] | None:
        """The semaphores, sorted, where there are few enough to print."""
        if len(self.rows) * (self.kb + 1) > 16:
            return None
        return sorted({self.posts.semaphore(pm, self._column(j)) for pm in self.rows for j in range(self.kb + 1)})


class _SetWaits(frozenset):  # type: ignore[type-arg]
    """A few semaphores waited on at once (the swiglu's gate and up tiles)."""

    def listing(self) -> list[int] | None:
        return sorted(self)


@dataclass(frozen=True)
class _Read:
    rows: tuple[int, int]      # [begin, end) of the producer's output
    cols: tuple[int, int]
    waited: _GemmWaits | _SetWaits  # semaphores waited on before this read
    what: str


def _row_tiles(row_begin: int, row_end: int, producer: StagePlan, m: int) -> range:
    """InputWait::wait_for_rows: the producer tile rows covering [row_begin, row_end), clamped to M."""
    last = min((row_end - 1) // producer.tile.m, _ceil_div(m, producer.tile.m) - 1)
    return range(row_begin // producer.tile.m, last + 1)


def _reads(stage: StagePlan, edge: EdgePlan, posts: _Posts, cm: int, cn: int, m: int) -> Iterator[_Read]:
    """The chunks of producer output one consumer tile reads, in order, each with the waits before it
    (for a GEMM, only the representative K-blocks: docstring (c))."""
    producer = posts.producer
    row0 = cm * stage.tile.m
    rows = (row0, min(row0 + stage.tile.m, m))
    if stage.op is Op.GEMM:
        # The A operand, K-block by K-block; before each, the A iterator (sm80) or the load warp (sm90) waits
        # on the rows' producer tiles at that column (RowSync: the row semaphore, whatever the column).
        for kb in _k_blocks(stage, posts):
            col = kb * stage.tile.k
            waited = _GemmWaits(posts, _row_tiles(*rows, producer, m), kb, stage.tile.k)
            yield _Read(rows, (col, min(col + stage.tile.k, stage.k)), waited, f"K-block {kb}")
        return
    # SwiGLU: thread 0 waits for the tile at (row0, col0) of gate and of up (col0 + n, or the second
    # producer's (row0, col0)), then the whole block reads BLK_M rows x BLK_N columns of each.
    col0 = cn * stage.tile.n
    width = min(stage.tile.n, stage.n - col0)
    pm0 = row0 // producer.tile.m
    if stage.input_b is not None:  # two producers: this edge is one of them, read at the same columns
        waited_one = _SetWaits({posts.semaphore(pm0, col0 // producer.tile.n)})
        yield _Read(rows, (col0, col0 + width), waited_one, "gate" if edge.operand == "a" else "up")
        return
    both = _SetWaits({posts.semaphore(pm0, col0 // producer.tile.n),
                      posts.semaphore(pm0, (stage.n + col0) // producer.tile.n)})
    yield _Read(rows, (col0, col0 + width), both, "gate")
    yield _Read(rows, (stage.n + col0, stage.n + col0 + width), both, "up")


# ---------------------------------------------------------------------------------------------------
# The representatives (module docstring: why they are enough)


def _periodic(period: int, count: int, *extra: int | None) -> list[int]:
    """The first period of indices 0..count-1, and `extra` ones (None or out of range: skipped), sorted."""
    return sorted(set(range(min(period, count))) | {i for i in extra if i is not None and 0 <= i < count})


def _row_representatives(stage: StagePlan, producer: StagePlan, m: int) -> list[int]:
    """Consumer tile rows: one period of the row alignment with the producer's tiles, and the last."""
    tiles = _ceil_div(m, stage.tile.m)
    return _periodic(producer.tile.m // math.gcd(stage.tile.m, producer.tile.m), tiles, tiles - 1)


def _column_representatives(stage: StagePlan, posts: _Posts) -> list[int]:
    """Consumer tile columns: a GEMM tile's reads do not depend on its column (docstring (c)); a swiglu's
    repeat with its column alignment to the producer's tiles until they leave the producer's grid."""
    if stage.op is Op.GEMM:
        return [0]
    tiles = _ceil_div(stage.n, stage.tile.n)
    producer_n = posts.producer.tile.n
    offset = stage.n if stage.input_b is None else 0  # the up half sits n columns after gate
    outside = posts.tiles_n * producer_n - offset  # first column c whose (up) read leaves the grid
    first_outside = max(0, _ceil_div(outside + 1, stage.tile.n) - 1) if stage.n >= outside + 1 else None
    return _periodic(producer_n // math.gcd(stage.tile.n, producer_n), tiles, tiles - 1, first_outside)


def _k_blocks(stage: StagePlan, posts: _Posts) -> list[int]:
    """A GEMM tile's K-blocks to check: one period of their alignment with the producer's tile columns,
    the first block that reads past the producer's columns (if K is wider), and the last (docstring (c))."""
    blocks = _ceil_div(stage.k, stage.tile.k)
    outside = posts.tiles_n * posts.producer.tile.n  # first column no producer tile writes
    first_outside = outside // stage.tile.k if stage.k > outside else None
    period = posts.producer.tile.n // math.gcd(stage.tile.k, posts.producer.tile.n)
    return _periodic(period, blocks, blocks - 1, first_outside)


# ---------------------------------------------------------------------------------------------------
# The checks


def _verify_edge(producer: StagePlan, stage: StagePlan, edge: EdgePlan, m: int) -> EdgeProof:
    where = f"stage '{stage.name}' reading '{producer.name}' ({edge.policy.value} sync) at M = {m}"
    if edge.policy is Policy.STRIDED and (stage.op is Op.GEMM or edge.stride_tiles < 1):
        raise VerificationError(f"{stage.name}.sync", f"{where}: strided sync needs a swiglu consumer and a stride of "
                                f"at least one tile (got {stage.op.value}, stride {edge.stride_tiles})",
                                "use sync: row or tile")
    posts = _Posts(edge, producer, *producer.grid(m))
    short = posts.first_short(edge.wait_value)
    if short is not None:
        raise VerificationError(
            f"{stage.name}.sync",
            f"{where}: semaphore {short} gets {posts.count(short)} posts per run but waits ask for "
            f"{edge.wait_value}, so they would spin until the timeout",
            f"the wait value must be at most {posts.count(short)}",
        )
    for cm in _row_representatives(stage, producer, m):
        for cn in _column_representatives(stage, posts):
            for read in _reads(stage, edge, posts, cm, cn, m):
                _check_read(posts, stage, edge, cm, cn, read, where)
    tiles = stage.num_tiles(m)
    per_tile = _ceil_div(stage.k, stage.tile.k) if stage.op is Op.GEMM else (1 if stage.input_b is not None else 2)
    return EdgeProof(producer.name, stage.name, edge.policy, tiles, tiles * per_tile, posts.semaphores, edge.wait_value)


def _check_read(posts: _Posts, stage: StagePlan, edge: EdgePlan, cm: int, cn: int, read: _Read, where: str) -> None:
    """Every producer tile under the read must be counted by a semaphore waited on before it."""
    producer = posts.producer
    for pm in range(read.rows[0] // producer.tile.m, (read.rows[1] - 1) // producer.tile.m + 1):
        for pn in range(read.cols[0] // producer.tile.n, (read.cols[1] - 1) // producer.tile.n + 1):
            sem = posts.semaphore(pm, pn)
            count = posts.count(sem)
            # A wait for `wait_value` posts proves that tile (pm, pn) posted only if no other set of
            # wait_value posts can reach the semaphore without it: wait_value == all of its posts.
            if sem in read.waited and edge.wait_value == count and posts.posts(pm, pn):
                continue
            listing = read.waited.listing()
            reason = (
                (f"waits only on semaphores {listing}" if listing is not None else f"never waits on semaphore {sem}")
                if sem not in read.waited
                else f"waits for {edge.wait_value} of the {count} posts of semaphore {sem}, "
                "so it can pass before this tile posts"
            )
            raise uncovered(stage, producer, where, (cm, cn), read, (pm, pn), reason)


def uncovered(stage: StagePlan, producer: StagePlan, where: str, tile: tuple[int, int], read: _Read,
              producer_tile: tuple[int, int], reason: str) -> VerificationError:
    """The error for a read of `producer_tile` by consumer `tile` that its waits do not cover."""
    return VerificationError(
        f"{stage.name}.sync",
        f"{where}: tile {tile} {read.what} reads {producer.name} tile {producer_tile} "
        f"(rows {read.rows[0]}..{read.rows[1] - 1}, columns {read.cols[0]}..{read.cols[1] - 1}) but {reason}",
        "use a policy whose tiles line up with the producer's (validate prints which ones do), or sync: row",
    )


def _progress(plan: ChainPlan, m: int) -> str:
    """Why no consumer tile can take the SM an unstarted producer tile needs (or raise if one can)."""
    if plan.facts.dependent_launch:
        return ("each consumer kernel is a programmatic dependent launch triggered when every CTA of the "
                "kernel before it has started; producers never wait on consumers (stages are in producer order)")
    if plan.optimizations.avoid_wait_kernel:
        ok, why = plan.coresident(m)
        if ok:
            return f"avoid_wait_kernel: every producer and consumer block fits on the GPU at once ({why})"
        # run() checks the same condition (coresident) and keeps the wait kernel where it fails.
        return (f"avoid_wait_kernel does not apply at this M ({why}), so run() keeps the wait kernel: it "
                "returns only once every producer block has started")
    return ("before each consumer, the wait kernel returns only once every producer block has started; "
            "producers never wait on consumers (stages are in producer order)")
