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
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from cusync_gen.errors import SpecError
from cusync_gen.plan import ChainPlan, EdgePlan, StagePlan
from cusync_gen.spec import Arch, Op, Policy


class VerificationError(SpecError):
    """A read the waits do not cover, a wait value no run reaches, or a launch that can deadlock."""


@dataclass(frozen=True)
class EdgeProof:
    """What was proved for one edge at one M (printed by `cusync-gen validate`)."""

    producer: str
    consumer: str
    policy: Policy
    consumer_tiles: int
    reads: int          # (consumer tile, read chunk) pairs checked
    semaphores: int     # semaphores that receive posts
    wait_value: int

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

    def describe(self) -> str:
        lines = [f"verified at M = {self.m} (tile configuration {self.config}):"]
        lines += [f"  {e.describe()}" for e in self.edges]
        lines.append(f"  progress: {self.progress}")
        lines.append("  earlier runs: posts carry their run's epoch, so none of them satisfies a wait of this run")
        return "\n".join(lines)


def representative_ms(plan: ChainPlan) -> list[int]:
    """Sizes whose proofs cover every M: the per-row logic repeats, so what varies is a partial last tile
    (M = 1, and 3 rows of the largest tile plus one) and the tile configuration (each side of each m_max)."""
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
    return Proof(m, config.index, tuple(proofs), _progress(plan, m))


# ---------------------------------------------------------------------------------------------------
# The model of the generated code


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def semaphore_of(edge: EdgePlan, producer: StagePlan, pm: int, pn: int) -> int:
    """policy.h's SyncPolicy::semaphore_of for this edge's policy and producer geometry."""
    tiles_n = _ceil_div(producer.n, producer.tile.n)
    if edge.policy is Policy.TILE:
        return pm * tiles_n + pn
    if edge.policy is Policy.ROW:
        return pm
    if edge.policy is Policy.STRIDED:
        return pm * edge.stride_tiles + pn % edge.stride_tiles
    raise ValueError(f"no semaphores for policy {edge.policy}")


def _posts(edge: EdgePlan, producer: StagePlan, m: int) -> dict[int, list[tuple[int, int]]]:
    """Semaphore -> the producer tiles that post to it in one run (every tile posts once, after its store)."""
    posts: dict[int, list[tuple[int, int]]] = {}
    for pm in range(_ceil_div(m, producer.tile.m)):
        for pn in range(_ceil_div(producer.n, producer.tile.n)):
            posts.setdefault(semaphore_of(edge, producer, pm, pn), []).append((pm, pn))
    return posts


@dataclass(frozen=True)
class _Read:
    rows: tuple[int, int]      # [begin, end) of the producer's output
    cols: tuple[int, int]
    waited: frozenset[int] | set[int]  # semaphores waited on before this read (a live set for GEMM K-loops)
    what: str


def _row_tiles(row_begin: int, row_end: int, producer: StagePlan, m: int) -> range:
    """InputWait::wait_for_rows: the producer tile rows covering [row_begin, row_end), clamped to M."""
    last = min((row_end - 1) // producer.tile.m, _ceil_div(m, producer.tile.m) - 1)
    return range(row_begin // producer.tile.m, last + 1)


def _reads(stage: StagePlan, edge: EdgePlan, producer: StagePlan, cm: int, cn: int, m: int) -> Iterator[_Read]:
    """The chunks of producer output one consumer tile reads, in order, each with the waits before it."""
    row0 = cm * stage.tile.m
    rows = (row0, min(row0 + stage.tile.m, m))
    if stage.op is Op.GEMM:
        # The A operand, K-block by K-block; before each, the A iterator (sm80) or the load warp (sm90) waits
        # on the rows' producer tiles at that column (RowSync: the row semaphore, whatever the column).
        waited: set[int] = set()
        for kb in range(_ceil_div(stage.k, stage.tile.k)):
            col = kb * stage.tile.k
            for pm in _row_tiles(*rows, producer, m):
                waited.add(semaphore_of(edge, producer, pm, col // producer.tile.n))
            yield _Read(rows, (col, min(col + stage.tile.k, stage.k)), waited, f"K-block {kb}")
        return
    # SwiGLU: thread 0 waits for the tile at (row0, col0) of gate and of up (col0 + n, or the second
    # producer's (row0, col0)), then the whole block reads BLK_M rows x BLK_N columns of each.
    col0 = cn * stage.tile.n
    width = min(stage.tile.n, stage.n - col0)
    pm0 = row0 // producer.tile.m
    if stage.input_b is not None:  # two producers: this edge is one of them, read at the same columns
        waited_one = frozenset({semaphore_of(edge, producer, pm0, col0 // producer.tile.n)})
        yield _Read(rows, (col0, col0 + width), waited_one, "gate" if edge.operand == "a" else "up")
        return
    both = frozenset({semaphore_of(edge, producer, pm0, col0 // producer.tile.n),
                      semaphore_of(edge, producer, pm0, (stage.n + col0) // producer.tile.n)})
    yield _Read(rows, (col0, col0 + width), both, "gate")
    yield _Read(rows, (stage.n + col0, stage.n + col0 + width), both, "up")


def _verify_edge(producer: StagePlan, stage: StagePlan, edge: EdgePlan, m: int) -> EdgeProof:
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
    """Every producer tile under the read must be counted by a semaphore waited on before it."""
    for pm in range(read.rows[0] // producer.tile.m, (read.rows[1] - 1) // producer.tile.m + 1):
        for pn in range(read.cols[0] // producer.tile.n, (read.cols[1] - 1) // producer.tile.n + 1):
            sem = semaphore_of(edge, producer, pm, pn)
            posters = posts.get(sem, [])
            # A wait for `wait_value` posts proves that tile (pm, pn) posted only if no other set of
            # wait_value posts can reach the semaphore without it: wait_value == all of its posts.
            if sem in read.waited and edge.wait_value == len(posters) and (pm, pn) in posters:
                continue
            reason = (
                f"waits only on semaphores {sorted(read.waited)}" if sem not in read.waited
                else f"waits for {edge.wait_value} of the {len(posters)} posts of semaphore {sem}, "
                "so it can pass before this tile posts"
            )
            raise VerificationError(
                f"{stage.name}.sync",
                f"{where}: tile ({cm}, {cn}) {read.what} reads {producer.name} tile ({pm}, {pn}) "
                f"(rows {read.rows[0]}..{read.rows[1] - 1}, columns {read.cols[0]}..{read.cols[1] - 1}) but {reason}",
                "use a policy whose tiles line up with the producer's (validate prints which ones do), "
                "or sync: row",
            )


def _progress(plan: ChainPlan, m: int) -> str:
    """Why no consumer tile can take the SM an unstarted producer tile needs (or raise if one can)."""
    if plan.arch is Arch.SM90:
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
