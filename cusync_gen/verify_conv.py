"""The conv chain's proof: every pixel each consumer tile's R x S windows read is covered by its waits.

Independent of how the plan computes the waits (ConvStagePlan.waited_rows, one contiguous pixel range):
here each tile's reads are enumerated output row by output row and filter tap by filter tap, with the image
borders (padding: no read) and the stride and dilation, and every producer tile row holding a read pixel
must be among the waited ones. A RowSync semaphore counts the posts of all of the producer row's channel
tiles, and a window reads all channels, so a waited row is complete in every channel. The residual edge
reads the tile's own output pixels of an earlier stage. Progress: a stage is launched only once every block
of its producer has started (the wait kernel), and tiles start in row-major order, so a waiting tile never
holds an SM slot that an unstarted producer tile needs.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

from cusync_gen.conv_plan import INPUT, ConvPlan, ConvStagePlan, conv_json_stages
from cusync_gen.plan_describe import json_identity
from cusync_gen.verify import VerificationError


@dataclass
class ConvProof:
    batch: int
    tiles_checked: dict[str, int] = field(default_factory=dict)
    reads_checked: dict[str, int] = field(default_factory=dict)
    first_wait: dict[str, str] = field(default_factory=dict)
    sampled: dict[str, bool] = field(default_factory=dict)

    def describe(self) -> str:
        lines = [f"proof at batch {self.batch}:"]
        for name, tiles in self.tiles_checked.items():
            which = f"a sample of {tiles} tile rows (ends, image boundaries, seeded)" if self.sampled[name] else \
                f"all {tiles} tile rows"
            lines.append(f"  {name}: {which}: the {self.reads_checked[name]} runs of pixels their windows read "
                         f"(output row x filter tap; borders, stride and dilation included) lie in waited tile rows; "
                         f"{self.first_wait[name]}; every {name} tile row waits up to the next one's first")
        if not self.tiles_checked:
            lines.append("  no stage reads another stage's output: nothing to wait for")
        lines.append("  progress: each stage launches once all its producer's blocks have started; row-major tile order")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "tiles_checked": self.tiles_checked, "reads_checked": self.reads_checked,
                "sampled": self.sampled}


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def _reads(st: ConvStagePlan, m0: int, m1: int) -> Iterator[tuple[int, int]]:
    """(first, last) producer pixels of each (output row, filter row, filter column) run the pixels [m0, m1)
    read: enumerated, not derived from the plan's window formula."""
    pq = st.p * st.q
    m = m0
    while m < m1:
        n, p, q0 = m // pq, (m % pq) // st.q, m % st.q
        q1 = min(st.q - 1, q0 + (m1 - 1 - m))  # last output column of this output row inside the tile
        for r in range(st.r):
            h = p * st.stride - st.pad + r * st.dilation
            if not 0 <= h < st.h:
                continue  # padding: nothing read
            for s in range(st.s):
                off = s * st.dilation - st.pad
                lo = max(q0, _ceil_div(-off, st.stride))              # first column whose tap lands in the image
                hi = min(q1, (st.w - 1 - off) // st.stride)            # last one
                if lo <= hi:
                    base = (n * st.h + h) * st.w
                    yield base + lo * st.stride + off, base + hi * st.stride + off
        m += q1 - q0 + 1


#: Exhaustive below this many (tile row x output row x filter tap) runs per stage; above it, a sample.
EXHAUSTIVE_RUNS = 400_000
SAMPLE_EDGE = 64     # tile rows checked at each end of the grid
SAMPLE_IMAGES = 8    # images whose boundaries' tile rows are checked
SAMPLE_RANDOM = 256  # further tile rows, drawn with a fixed seed


def _tile_rows(st: ConvStagePlan, batch: int) -> tuple[list[int], bool]:
    """The consumer tile rows to check: all of them where that is cheap, else the first and last ones, those
    at the first images' boundaries and a seeded sample (returned sorted, and whether it is all of them)."""
    tiles = st.tiles_m(batch)
    per_tile = (_ceil_div(st.tile.m, st.q) + 1) * st.r * st.s
    if tiles * per_tile <= EXHAUSTIVE_RUNS:
        return list(range(tiles)), True
    import random

    budget = max(16, EXHAUSTIVE_RUNS // per_tile)  # tile rows the sample may hold
    edge = min(SAMPLE_EDGE, budget // 4)
    picked = set(range(min(edge, tiles))) | set(range(max(0, tiles - edge), tiles))
    for n in range(1, min(batch, SAMPLE_IMAGES + 1)):
        t = n * st.p * st.q // st.tile.m
        picked |= {x for x in (t - 1, t, t + 1) if 0 <= x < tiles}
    rng = random.Random(tiles * 1_000_003 + st.index)
    picked |= {rng.randrange(tiles) for _ in range(min(SAMPLE_RANDOM, budget // 2))}
    return sorted(picked), False


def _check_stage(plan: ConvPlan, st: ConvStagePlan, batch: int, proof: ConvProof) -> None:
    producer = plan.stages[st.producer]
    reads = 0
    tiles = st.tiles_m(batch)
    ptiles = producer.tiles_m(batch)
    checked, exhaustive = _tile_rows(st, batch)
    for tm in checked:
        m0, m1 = st.tile_pixels(tm, batch)
        waited = st.waited_rows(tm, producer, batch)
        for first, last in _reads(st, m0, m1):
            reads += 1
            for row in (first // producer.tile.m, last // producer.tile.m):
                if row not in waited:
                    raise VerificationError(
                        f"stages[{st.index}].sync",
                        f"at batch {batch}, {st.name} tile row {tm} (output pixels {m0}..{m1 - 1}) reads "
                        f"{producer.name} pixels {first}..{last} in tile row {row}, but waits only for tile rows "
                        f"{waited.start}..{waited.stop - 1}")
        # Every producer tile row is waited for by some consumer tile (the waits of consecutive tile rows
        # leave no gap, and run from the producer's first row to its last): when the run's last tile closes
        # it (bumps the epoch), no producer tile can still be about to post under the new epoch.
        nxt = st.waited_rows(tm + 1, producer, batch) if tm + 1 < tiles else range(ptiles, ptiles)
        if (tm == 0 and waited.start != 0) or waited.stop < nxt.start or (tm + 1 == tiles and waited.stop != ptiles):
            row = 0 if tm == 0 and waited.start != 0 else waited.stop
            raise VerificationError(f"stages[{st.index}].sync", f"at batch {batch}, no {st.name} tile waits for "
                                    f"{producer.name} tile row {row}: the run could close while it is still running")
        if st.residual is not None and st.residual != INPUT:
            source = plan.stages[st.residual]
            rows = st.residual_rows(tm, source, batch)
            for row in (m0 // source.tile.m, (m1 - 1) // source.tile.m):
                if row not in rows:
                    raise VerificationError(f"stages[{st.index}].residual",
                                            f"at batch {batch}, {st.name} tile row {tm} adds {source.name} tile row {row}"
                                            f" without waiting for it")
    # A RowSync semaphore is complete when every channel tile of the row posted: the wait value is tiles_n.
    if producer.k != st.c:
        raise VerificationError(f"stages[{st.index}].c", f"{st.name} reads {st.c} channels, {producer.name} writes {producer.k}")
    proof.tiles_checked[st.name] = len(checked)
    proof.reads_checked[st.name] = reads
    proof.sampled[st.name] = not exhaustive
    first = st.waited_rows(0, producer, batch)
    proof.first_wait[st.name] = (f"tile row 0 needs {producer.name} tile rows {first.start}..{first.stop - 1} "
                                 f"of {ptiles} (it can start early)")


def verify_conv(plan: ConvPlan, batch: int) -> ConvProof:
    """Prove the plan's waits sound at one batch, or raise VerificationError on the first uncovered read."""
    plan.check_batch(batch)
    plan = plan.at(batch)  # the tiles that run this batch
    proof = ConvProof(batch)
    for st in plan.stages:
        if st.producer != INPUT:
            _check_stage(plan, st, batch, proof)
    return proof


def representative_batches(plan: ConvPlan) -> list[int]:
    """The batches `generate` proves: 1, 2, 3 (tiles across image boundaries at small sizes), the largest, and
    each tile configuration's largest batch and the one above it (its tiles and the next ones)."""
    edges = {b for c in plan.configs for b in (c.batch_max, c.batch_max + 1)}
    return sorted({b for b in {1, 2, 3, plan.max_batch} | edges if b <= plan.max_batch})


def verify_conv_plan(plan: ConvPlan) -> None:
    for batch in representative_batches(plan):
        verify_conv(plan, batch)


def validate_conv_json(plan: ConvPlan, batches: Sequence[int]) -> dict[str, Any]:
    runs = []
    for batch in batches:
        proof = verify_conv(plan, batch)
        mode, why = plan.run_mode(batch)
        runs.append({"batch": batch, "stages": conv_json_stages(plan, batch), "run_mode": mode, "run_mode_reason": why,
                     "proof": proof.as_json()})
    return {**json_identity(plan, "conv"), "runs": runs}
