"""The proof of run() mode stream's slab kernel (M <= SLAB_MAX_M, templates/sm90/include/cusync/sm90/slab_chain.cuh).

The kernel runs the chain's two GEMMs in one cooperative launch of `grid` CTAs. CTA j owns the hidden columns
[slab_begin(j), slab_begin(j + 1)) in units of u (slab_begin(j) = u * floor(U j / grid), U = hidden / u; u = UNIT
for row-major first weights, 1 for column-major ones):
it computes them from gemm1's weights, then its partial of every output column from gemm2's rows with the same
indices, writes the partial to workspace slot j, and posts slab j's semaphore once (epoch-tagged value 1). CTA q
then owns the output float4 columns [floor(N2/4 q / grid), floor(N2/4 (q + 1) / grid)): it waits for every slab's
post and sums slots 0 .. grid - 1 in that order. With column-major second weights (the gather variant) there are
no slots: CTA j posts once its slab of H is stored, waits for every slab's post, reads all of H and computes the
output columns [floor(N2 j / grid), floor(N2 (j + 1) / grid)) whole, each from one contiguous weight column.

verify_slab checks, for every grid from 1 to max(the plan's SMs, GRIDS_UP_TO), in closed form:
1. slabs: the slabs partition the hidden units (each computed once; one CTA's slab is gemm2's K range it reads,
   so no CTA reads another's H), and none is wider than the shared memory the host sized (max_slab);
2. reduction: the output ranges partition the N2 / 4 float4 columns; slot j is written by CTA j only (the
   library allots one per SM, SLAB_MAX_M rows of N2 floats each); gather: the output ranges partition the N2
   columns, each computed by one warp of one CTA;
3. coverage: every output column sums every slot, after waiting on every slab's post, so each partial it reads was
   written before the post its wait acquired (gather: every H column it reads was stored before the post);
4. reachability: the wait value (1) is each slab's posts per run (one: every CTA posts, an empty slab its zeros);
5. progress: all CTAs are resident (a cooperative launch of at most one per SM) and every CTA posts before it
   waits, so every post happens.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cusync_gen.errors import SpecError
from cusync_gen.plan import ChainPlan
from cusync_gen.spec.model import BLayout, Epilogue

#: slab_chain.cuh / stream_mode.h: hidden columns per slab unit (kSlabUnit) with row-major first weights; one with
#: column-major ones (slab_unit).
UNIT = 8
#: The largest grid proved besides the plan's SM count (as verify_stream's).
GRIDS_UP_TO = 160


class SlabVerificationError(SpecError):
    """A hidden unit computed twice or never, an output column summed twice or never, or a slot out of place."""


@dataclass(frozen=True)
class SlabProof:
    """What verify_slab proved (printed by `validate` under the M's proof)."""

    gemm1: str
    gemm2: str
    grids: tuple[int, int]   # the range of grids proved
    hidden: int              # gemm1's output columns (after SwiGLU), gemm2's K
    n2: int
    max_slab: int            # at the plan's grid: the widest slab, hidden columns
    gather: bool = False     # column-major second weights: no partials, whole output columns after every post

    def as_json(self) -> dict[str, Any]:
        return {"producer": self.gemm1, "consumer": self.gemm2, "policy": "slab", "grids": list(self.grids),
                "hidden": self.hidden, "n": self.n2, "max_slab": self.max_slab, "wait_value": 1,
                "gather": self.gather}

    def describe(self) -> str:
        if self.gather:
            return (f"mode stream's slab kernel ({self.gemm1} -> {self.gemm2}, column-major {self.gemm2} weights): "
                    f"each CTA computes its own slab of the {self.hidden} hidden columns (at most {self.max_slab}) "
                    f"and posts it once; each CTA then waits on every slab's post and computes its range of the "
                    f"{self.n2} output columns whole from all of H; slabs and output ranges partition their columns "
                    f"for every grid of {self.grids[0]}..{self.grids[1]} CTAs (a cooperative launch, one CTA per SM, "
                    f"every CTA posting before it waits)")
        return (f"mode stream's slab kernel ({self.gemm1} -> {self.gemm2}): each CTA computes its own slab of the "
                f"{self.hidden} hidden columns (at most {self.max_slab}) and reads only it as {self.gemm2}'s K, then "
                f"posts its partial once; each output column waits on every slab's post and sums the slots in slot "
                f"order; slabs and output ranges partition their columns for every grid of {self.grids[0]}.."
                f"{self.grids[1]} CTAs (a cooperative launch, one CTA per SM, every CTA posting before it waits)")


def verify_slab(plan: ChainPlan) -> SlabProof:
    """Prove the slab kernel's synchronization for this chain (raises SlabVerificationError on the first gap)."""
    first, last = plan.stages[0], plan.stages[-1]
    halves = len(plan.stages) == 3
    hidden = first.gemm_n // 2 if halves or first.epilogue is Epilogue.SWIGLU else first.gemm_n
    if hidden != last.k:
        raise SlabVerificationError("stages", f"{last.name} reads {last.k} columns but {first.name} makes {hidden}",
                                    "this chain cannot use the slab kernel")
    top = max(plan.sms, GRIDS_UP_TO)
    unit = 1 if first.b_layout is BLayout.COL else UNIT
    return _prove(first.name, last.name, hidden, last.gemm_n, top, plan.sms, last.b_layout is BLayout.COL, unit)


def slab_begin(hidden: int, grid: int, j: int, unit: int = UNIT) -> int:
    return unit * ((hidden // unit) * j // grid)


def out_begin(n2: int, grid: int, q: int, gather: bool = False) -> int:
    return n2 * q // grid if gather else (n2 // 4) * q // grid


@lru_cache(maxsize=64)
def _prove(gemm1: str, gemm2: str, hidden: int, n2: int, top: int, sms: int, gather: bool, unit: int) -> SlabProof:
    if hidden % UNIT or n2 % 8:
        raise SlabVerificationError("stages", f"hidden {hidden} and N {n2} must be multiples of {UNIT} and 8",
                                    "this chain cannot use the slab kernel")
    widest_at_sms = 0
    for grid in range(1, top + 1):
        widest = -(-(hidden // unit) // grid) * unit  # slab_chain.cuh's max_slab: what shared memory holds
        starts = [slab_begin(hidden, grid, j, unit) for j in range(grid + 1)]
        # 1. the slabs partition [0, hidden) in order, none wider than max_slab
        if starts[0] != 0 or starts[-1] != hidden or any(b < a for a, b in zip(starts, starts[1:])):
            raise SlabVerificationError("stages", f"at {grid} CTAs the slabs do not partition the hidden columns",
                                        "slab_begin must be monotone from 0 to hidden")
        if max(b - a for a, b in zip(starts, starts[1:])) > widest:
            raise SlabVerificationError("stages", f"at {grid} CTAs a slab is wider than max_slab ({widest})",
                                        "size shared memory by the widest slab")
        # 2. the output ranges partition the float4 columns; slot j is CTA j's, inside the allotted workspace
        width = n2 if gather else n2 // 4
        outs = [out_begin(n2, grid, q, gather) for q in range(grid + 1)]
        if outs[0] != 0 or outs[-1] != width or any(b < a for a, b in zip(outs, outs[1:])):
            raise SlabVerificationError("stages", f"at {grid} CTAs the output ranges do not partition N",
                                        f"out_begin must be monotone from 0 to {'N' if gather else 'N / 4'}")
        if grid == sms:
            widest_at_sms = widest
    # 3-5 hold by construction of the kernel: every reducer waits on all `grid` posts before its first read, each
    # CTA posts exactly once (after its partial's stores and a barrier), and the launch is cooperative.
    return SlabProof(gemm1, gemm2, (1, top), hidden, n2, widest_at_sms, gather)
