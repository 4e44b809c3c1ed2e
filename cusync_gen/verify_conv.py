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

    def describe(self) -> str:
        lines = [f"proof at batch {self.batch}:"]
        for name, tiles in self.tiles_checked.items():
            lines.append(f"  {name}: all {tiles} tile rows: the {self.reads_checked[name]} runs of pixels their windows read "
                         f"(output row x filter tap; borders, stride and dilation included) lie in waited tile rows; "
                         f"{self.first_wait[name]}")
        if not self.tiles_checked:
            lines.append("  no stage reads another stage's output: nothing to wait for")
        lines.append("  progress: each stage launches once all its producer's blocks have started; row-major tile order")
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {"batch": self.batch, "tiles_checked": self.tiles_checked, "reads_checked": self.reads_checked}


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


def _check_stage(plan: ConvPlan, st: ConvStagePlan, batch: int, proof: ConvProof) -> None:
    producer = plan.stages[st.producer]
    reads = 0
    for tm in range(st.tiles_m(batch)):
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
    proof.tiles_checked[st.name] = st.tiles_m(batch)
    proof.reads_checked[st.name] = reads
    first = st.waited_rows(0, producer, batch)
    proof.first_wait[st.name] = (f"tile row 0 needs {producer.name} tile rows {first.start}..{first.stop - 1} "
                                 f"of {producer.tiles_m(batch)} (it can start early)")


def verify_conv(plan: ConvPlan, batch: int) -> ConvProof:
    """Prove the plan's waits sound at one batch, or raise VerificationError on the first uncovered read."""
    plan.check_batch(batch)
    proof = ConvProof(batch)
    for st in plan.stages:
        if st.producer != INPUT:
            _check_stage(plan, st, batch, proof)
    return proof


def representative_batches(plan: ConvPlan) -> list[int]:
    """The batches `generate` proves: 1, 2, 3 (tiles across image boundaries at small sizes) and the largest."""
    return sorted({b for b in (1, 2, 3, plan.max_batch) if b <= plan.max_batch})


def verify_conv_plan(plan: ConvPlan) -> None:
    for batch in representative_batches(plan):
        verify_conv(plan, batch)


def validate_conv_json(plan: ConvPlan, batches: Sequence[int]) -> dict[str, Any]:
    runs = []
    for batch in batches:
        proof = verify_conv(plan, batch)
        runs.append({"batch": batch, "stages": conv_json_stages(plan, batch), "proof": proof.as_json()})
    return {**json_identity(plan, "conv"), "runs": runs}
