"""Tile dependencies: what one consumer tile reads of its producer, as affine maps of tile coordinates
(issue 4, part 1). `sync: auto` enumerates its candidate policies from them, and `validate` prints them.

A consumer tile (m, n) of BM x BN (a GEMM's K-block k of BK) reads:
- rows: producer rows [m*BM - halo, (m+1)*BM + halo), clamped (halo 0: the same rows; a convolution's
  R x S window over flattened N*P*Q pixels would have halo (R/2)*Q + S/2);
- columns, one of
  - `k_range`: [k*BK, (k+1)*BK), the A operand of a GEMM, K-block by K-block;
  - `same`: [n*BN, (n+1)*BN), an elementwise stage reading one producer (or one of two) in place;
  - `strided`: [n*BN + j*stride, ... + BN) for j < count, e.g. the gate and up halves of one GEMM output.

A spec may declare a stage's dependency (`reads:`, docs/spec-format.md); today's ops read exactly what
they read, so a declaration is checked against the op and a mismatch is an error: that keeps a spec
honest when someone edits a width, and it is where ops with other access patterns will plug in.
"""

from __future__ import annotations

from dataclasses import dataclass

from cusync_gen.errors import SpecError
from cusync_gen.spec.model import ChainSpec, Op, Policy, StageSpec, producer_width, stage_index
from cusync_gen.spec.policies import POLICIES


@dataclass(frozen=True)
class Dependency:
    cols: str            # "k_range" | "same" | "strided"
    stride: int = 0      # strided: columns between the members of a group
    count: int = 1       # strided: members per group
    halo: int = 0        # rows read beyond the tile's own on each side

    def describe(self, consumer: str, producer: str) -> str:
        rows = "[m*BM, (m+1)*BM)" if not self.halo else f"[m*BM - {self.halo}, (m+1)*BM + {self.halo})"
        if self.cols == "k_range":
            return f"{consumer} tile (m, n), K-block k reads {producer} rows {rows} x cols [k*BK, (k+1)*BK)"
        if self.cols == "same":
            return f"{consumer} tile (m, n) reads {producer} rows {rows} x cols [n*BN, (n+1)*BN)"
        members = " and ".join(f"n*BN + {j * self.stride}" if j else "n*BN" for j in range(self.count))
        return f"{consumer} tile (m, n) reads {producer} rows {rows} x BN cols from each of {members}"


def derived(spec: ChainSpec, i: int) -> Dependency:
    """What stage i's kernel reads of its producer(s), from the op and the widths."""
    stage = spec.stages[i]
    if stage.op is Op.GEMM:
        return Dependency("k_range")
    if stage.b is not None:
        return Dependency("same")
    return Dependency("strided", stride=stage.n, count=2)


def declared(stage: StageSpec) -> Dependency | None:
    if stage.reads is None:
        return None
    r = stage.reads
    if isinstance(r.cols, str):
        return Dependency(r.cols, halo=r.halo)
    return Dependency("strided", stride=r.cols.strided, count=r.cols.count, halo=r.halo)


def dependency_of(spec: ChainSpec, i: int) -> Dependency:
    """The declared dependency where the spec has one (checked against the op), else the derived one."""
    stage = spec.stages[i]
    actual = derived(spec, i)
    claim = declared(stage)
    if claim is None:
        return actual
    if claim.halo:
        raise SpecError(f"stages[{i}].reads.halo", f"a {stage.op.value} stage reads only its own rows; a halo "
                        "(a convolution window) belongs to conv stages, whose window the plan derives from r, stride, padding "
                        "and dilation (docs/conv.md)", "remove halo (or make the stage op: conv in a conv chain)")
    if claim != actual:
        raise SpecError(f"stages[{i}].reads", f"declares '{claim.describe(stage.name, stage.a)}', but a "
                        f"{stage.op.value} stage reads '{actual.describe(stage.name, stage.a)}'",
                        f"remove reads, or declare {_spelling(actual)}")
    return actual


def candidates(dep: Dependency, no_atomic_add: bool = False) -> tuple[Policy, ...]:
    """The policies that can guard a dependency, most preferred first (spec.policies: each policy's
    `guards` and their ranks, measured on the H200). no_atomic_add leaves only policies with one post per
    semaphore."""
    ranked = sorted((rank, p) for p, info in POLICIES.items() if (rank := info.rank(dep.cols)) is not None
                    and (info.one_post or not no_atomic_add))
    return tuple(p for _, p in ranked)


def describe_edges(spec: ChainSpec) -> list[str]:
    """One line per edge for `validate`."""
    index = stage_index(spec)
    lines = []
    for i, stage in enumerate(spec.stages):
        for source in (stage.a, stage.b):
            if source is None or source == "input":
                continue
            dep = dependency_of(spec, i)
            width = producer_width(spec, index[source])
            lines.append(f"  {dep.describe(stage.name, source)}  (producer width {width})")
    return lines


def _spelling(dep: Dependency) -> str:
    if dep.cols == "strided":
        return f"reads: {{cols: {{strided: {dep.stride}, count: {dep.count}}}}}"
    return f"reads: {{cols: {dep.cols}}}"
