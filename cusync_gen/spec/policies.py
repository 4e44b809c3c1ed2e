"""One home per sync policy: `POLICIES`, the table from the `Policy` enum to what the policy means.

For each policy: its C++ names (policy.h's `PolicyKind` member and value, the factory that builds its
`SyncPolicy`), its semaphore layout (which semaphore a producer tile posts to, how many semaphores a
tile row has, how many posts one receives: the wait value), which tile dependencies it can guard and how
much it is preferred there (`sync: auto`), whether each semaphore gets one post only (`no_atomic_add`)
and the sentence `validate` says of an edge guarded by it. dependency.py, plan.py, verify.py, cpp.py,
plan_describe.py and the spec rules read this table; tests/test_policies.py checks policy.h against it.

It sits in the spec package (after `model`, whose enum it keys) because the spec rules read it, and the
spec package imports nothing above it. What a policy needs of the tiles to line up is here too
(`check_shape`, `check_columns`); spec/rules.py's `_check_policy` calls them around the rule every policy
shares (whole producer rows), each message naming the field to change.
"""

from __future__ import annotations

from dataclasses import dataclass

from cusync_gen.errors import SpecError
from cusync_gen.spec.model import Op, Policy, StageSpec


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


@dataclass(frozen=True)
class SyncPolicy:
    """What one policy means. Geometry arguments: the producer's grid (`tiles_m` x `tiles_n` tiles of
    `tile_n` columns, `n` columns in all) and, for strided, `stride` (producer tiles between the members
    of a group)."""

    policy: Policy
    #: policy.h: the PolicyKind member, its value, and the factory that builds its SyncPolicy (None: NoSync()).
    cpp_kind: str
    cpp_value: int
    cpp_factory: str
    #: Tile dependencies (dependency.Dependency.cols) it can guard, each with its rank (0 first): the order
    #: measured on the H200 (a row semaphore beats per-tile ones for K ranges, a strided group beats two
    #: tile waits).
    guards: tuple[tuple[str, int], ...]
    #: Every semaphore receives exactly one post per run, so a release store can replace the atomic add.
    one_post: bool
    #: One line: what a tile posts to and what a wait covers.
    meaning: str
    #: A semaphore stands for a whole producer tile row (semaphore_of(pm, pn) == pm): one wait covers every
    #: column of the row (verify.py's model of a GEMM's waits).
    whole_row: bool = False

    @property
    def cpp(self) -> str:
        """The C++ spelling of its kind (cpp.POLICY)."""
        return f"cusync::PolicyKind::{self.cpp_kind}"

    def rank(self, cols: str) -> int | None:
        """Its preference for a dependency of this kind, or None where it cannot guard it."""
        return dict(self.guards).get(cols)

    def wait_value(self, n: int, tile_n: int) -> int:
        """Posts one semaphore receives per run: what a consumer waits for (EdgePlan.wait_value)."""
        raise NotImplementedError

    def describe_wait(self, wait_value: int, tile_m: int, tile_n: int, stride: int, k_chunks: bool) -> str:
        """What `validate` says a consumer tile waits for (producer tiles of tile_m x tile_n); `k_chunks`:
        the consumer is a GEMM, which waits K-block by K-block."""
        return self.meaning

    def semaphores_per_row(self, n: int, tile_n: int, stride: int) -> int:
        """Semaphores per producer tile row (StagePlan.semaphores_per_row; SyncPolicy.sems_per_row)."""
        raise NotImplementedError

    def stride_tiles(self, n: int, tile_n: int) -> int:
        """Producer tiles between the members of a group, for a consumer of width n (EdgePlan.stride_tiles;
        0: no groups)."""
        return 0

    def check_shape(self, i: int, stage: StageSpec, prod: StageSpec, key: str) -> None:
        """The spec rule (spec/rules.py, _check_policy) checked before the rows: which stages may use this
        policy, and what it needs of their columns. A SpecError names the field to change."""

    def check_columns(self, i: int, stage: StageSpec, prod: StageSpec) -> None:
        """The spec rule checked after the rows: how a consumer's columns line up with the producer's."""

    def semaphore_of(self, pm: int, pn: int, tiles_n: int, stride: int) -> int:
        """policy.h's SyncPolicy::semaphore_of: the semaphore producer tile (pm, pn) posts to."""
        raise ValueError(f"no semaphores for policy {self.policy}")

    def posts_to(self, sem: int, tiles_m: int, tiles_n: int, stride: int) -> int:
        """Posts semaphore `sem` receives in one run (every producer tile posts once)."""
        raise ValueError(f"no semaphores for policy {self.policy}")

    def semaphores_posted(self, tiles_m: int, tiles_n: int, stride: int) -> int:
        """Semaphores that receive at least one post in a run."""
        raise ValueError(f"no semaphores for policy {self.policy}")


class _NoSync(SyncPolicy):
    def wait_value(self, n: int, tile_n: int) -> int:
        return 0

    def semaphores_per_row(self, n: int, tile_n: int, stride: int) -> int:
        return 0


class _TileSync(SyncPolicy):
    def check_shape(self, i: int, stage: StageSpec, prod: StageSpec, key: str) -> None:
        if stage.op is not Op.SWIGLU:
            return
        ptb, ctb = prod.tile.threadblock, stage.tile.threadblock
        if ptb[1] % ctb[1]:
            raise SpecError(
                f"stages[{i}].tile.threadblock",
                f"sync: tile needs the swiglu tile cols ({ctb[1]}) to divide producer '{prod.name}' threadblock N "
                f"({ptb[1]}), so each tile waits on one producer tile",
                f"set threadblock: [{ctb[0]}, {ptb[1]}]",
            )
        if stage.b is None and stage.n % ptb[1]:
            raise SpecError(
                f"stages[{i}].n",
                f"sync: tile needs n={stage.n} to be a multiple of producer '{prod.name}' threadblock N ({ptb[1]}), "
                "so the up columns j + n line up with producer tiles",
                "use sync: strided or row",
            )

    def check_columns(self, i: int, stage: StageSpec, prod: StageSpec) -> None:
        ptb, ctb = prod.tile.threadblock, stage.tile.threadblock
        if stage.op is Op.GEMM and ptb[1] % ctb[2]:
            raise SpecError(
                f"stages[{i}].tile.threadblock",
                f"sync: tile needs the threadblock K ({ctb[2]}) to divide producer '{prod.name}' threadblock N "
                f"({ptb[1]})",
                f"use a threadblock K that divides {ptb[1]} (e.g. 32), or use sync: row",
            )

    def describe_wait(self, wait_value: int, tile_m: int, tile_n: int, stride: int, k_chunks: bool) -> str:
        if k_chunks:
            return (f"each tile waits, per {tile_n}-column K chunk, for the one {tile_m}x{tile_n} producer tile "
                    "that wrote it")
        return f"each tile waits for the {tile_m}x{tile_n} producer tile(s) holding its columns"

    def wait_value(self, n: int, tile_n: int) -> int:
        return 1

    def semaphores_per_row(self, n: int, tile_n: int, stride: int) -> int:
        return _ceil_div(n, tile_n)

    def semaphore_of(self, pm: int, pn: int, tiles_n: int, stride: int) -> int:
        return pm * tiles_n + pn

    def posts_to(self, sem: int, tiles_m: int, tiles_n: int, stride: int) -> int:
        return int(0 <= sem < tiles_m * tiles_n)

    def semaphores_posted(self, tiles_m: int, tiles_n: int, stride: int) -> int:
        return tiles_m * tiles_n


class _RowSync(SyncPolicy):
    def describe_wait(self, wait_value: int, tile_m: int, tile_n: int, stride: int, k_chunks: bool) -> str:
        return f"each tile waits until all {wait_value} tiles of its {tile_m}-row producer block have posted"

    def wait_value(self, n: int, tile_n: int) -> int:
        return _ceil_div(n, tile_n)  # every tile of the producer's row posts once

    def semaphores_per_row(self, n: int, tile_n: int, stride: int) -> int:
        return 1

    def semaphore_of(self, pm: int, pn: int, tiles_n: int, stride: int) -> int:
        return pm

    def posts_to(self, sem: int, tiles_m: int, tiles_n: int, stride: int) -> int:
        return tiles_n if 0 <= sem < tiles_m else 0

    def semaphores_posted(self, tiles_m: int, tiles_n: int, stride: int) -> int:
        return tiles_m


class _StridedSync(SyncPolicy):
    def stride_tiles(self, n: int, tile_n: int) -> int:
        return n // tile_n  # gate tile j and up tile j + n / BN

    def check_shape(self, i: int, stage: StageSpec, prod: StageSpec, key: str) -> None:
        if stage.op is not Op.SWIGLU or stage.b is not None:
            raise SpecError(
                f"stages[{i}].{key}",
                "sync: strided is only for swiglu stages reading the gate and up halves of one producer",
                "use sync: row or tile",
            )

    def check_columns(self, i: int, stage: StageSpec, prod: StageSpec) -> None:
        ptb, ctb = prod.tile.threadblock, stage.tile.threadblock
        if ctb[1] != ptb[1]:
            raise SpecError(
                f"stages[{i}].tile.threadblock",
                f"sync: strided needs tile cols ({ctb[1]}) equal to producer '{prod.name}' threadblock N ({ptb[1]})",
                f"set threadblock: [{ctb[0]}, {ptb[1]}, 1]",
            )
        if stage.n % ptb[1]:
            raise SpecError(
                f"stages[{i}].n",
                f"sync: strided needs n={stage.n} to be a multiple of producer '{prod.name}' threadblock N "
                f"({ptb[1]}), so gate tile j and up tile j + n/N line up",
                f"use a producer threadblock N that divides {stage.n}, or use sync: row",
            )

    def describe_wait(self, wait_value: int, tile_m: int, tile_n: int, stride: int, k_chunks: bool) -> str:
        return f"each tile j waits for gate tile j and up tile j + {stride} of its {tile_m}-row producer block"

    def wait_value(self, n: int, tile_n: int) -> int:
        return 2  # the gate tile and the up tile

    def semaphores_per_row(self, n: int, tile_n: int, stride: int) -> int:
        return stride

    def semaphore_of(self, pm: int, pn: int, tiles_n: int, stride: int) -> int:
        return pm * stride + pn % stride

    def posts_to(self, sem: int, tiles_m: int, tiles_n: int, stride: int) -> int:
        if sem < 0:
            return 0
        row, group = divmod(sem, stride)  # the row's tiles pn with pn % stride == group
        return len(range(group, tiles_n, stride)) if row < tiles_m else 0

    def semaphores_posted(self, tiles_m: int, tiles_n: int, stride: int) -> int:
        return tiles_m * min(stride, tiles_n)  # the groups a row's tiles fill


#: The table. `auto` is no policy of its own: the plan replaces it by one of these (plan.resolve_auto_policies).
POLICIES: dict[Policy, SyncPolicy] = {p.policy: p for p in (
    _NoSync(Policy.NONE, "kNone", 0, "NoSync", (), True,
            "no tile waits; the stage runs after the whole producer kernel (stream order)"),
    _TileSync(Policy.TILE, "kTile", 1, "TileSync", (("k_range", 1), ("same", 0), ("strided", 1)), True,
              "one semaphore per producer tile, one post each; a consumer waits for each producer tile it reads"),
    _RowSync(Policy.ROW, "kRow", 2, "RowSync", (("k_range", 0), ("same", 1), ("strided", 2)), False,
             "one semaphore per producer tile row, posted by each of its tiles; a consumer waits for whole rows",
             whole_row=True),
    _StridedSync(Policy.STRIDED, "kStrided", 3, "StridedSync", (("strided", 0),), False,
                 "one semaphore per row and strided group {pn, pn + stride, ...}; a consumer waits for its group"),
)}
#: policy.h's kinds that no spec policy reaches yet, and why (tests/test_policies.py keeps them listed).
CPP_ONLY_KINDS: dict[str, str] = {
    "kConv2DTile": "Conv2DTileSync, TileSync widened by a convolution window's halo rows: for convolution stages",
}


def one_post(policy: Policy | None) -> bool:
    """Whether every semaphore of this output policy receives one post (no output: True; auto: decided
    later, so not refused here)."""
    return policy is None or policy is Policy.AUTO or POLICIES[policy].one_post
