"""The proof of run() mode stream's K-range synchronization (optimizations.stream_weights, M <= STREAM_MAX_M).

Mode stream runs both GEMMs of the chain in one cooperative kernel (templates/sm90/include/cusync/sm90/
bulk_chain.cuh, launched by stream_mode.cuh with one CTA per SM). Each GEMM's work is its (output tile, K chunk)
pairs in tile-major order, q = tiles x chunks of them, cut into `grid` contiguous ranges (range_of: CTA c takes
[c q / g, (c + 1) q / g), g = min(grid, q)). A CTA whose range covers only part of a tile sums its part into a
workspace slot (slot_of: 2c for its first tile, 2c + 1 for its last) and arrives on the tile's counter; the
last of the tile's CTAs (owner_of of its first and last chunk) adds the slots in CTA order, runs the epilogue
and, for gemm1, posts the tile's semaphore once. gemm2 reads H = gemm1's output as its X: before a chunk's
columns [128 cc, 128 cc + 128) it waits (acquire, epoch-tagged value 1) on every gemm1 tile that wrote them
(tile t writes H's columns [t w, t w + w), w = 64, or 32 where gemm1's epilogue is the SwiGLU of interleaved
gate | up). Every tile holds all M <= 64 rows, so nothing here depends on M.

verify_stream checks, for every grid from 1 to max(the plan's SMs, 160) (the library launches one CTA per SM of
the device it runs on, which need not be the plan's target):
1. work: the ranges partition each GEMM's chunks, and owner_of agrees with range_of at every range's ends, so
   each (tile, chunk) is computed once and a tile's CTAs are exactly owner_of(first) .. owner_of(last);
2. reduction: the workspace slots of the pieces that go through it are distinct and inside the 2 x grid
   slots the library allots, and the arrivals a tile receives are the count its last arriver tests for;
3. coverage: every column of H a gemm2 chunk reads is written by a gemm1 tile it waited on first, and only
   columns gemm1 writes are read;
4. reachability: the wait value (1) is each gemm1 tile's posts per run (one: its last arriver's);
5. progress: all CTAs are resident (a cooperative launch of at most one per SM), gemm1 waits on nothing, and
   every CTA finishes its gemm1 pieces before its first gemm2 wait, so every gemm1 tile is posted.
These are closed forms in the chunks and grids (O(grid) per grid, O(chunks per tile) for coverage).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from cusync_gen.errors import SpecError
from cusync_gen.plan import ChainPlan
from cusync_gen.spec.model import Epilogue, Op

# bulk_chain.cuh / stream_mode.h: output columns per tile, K per k-step, k-steps per chunk.
TILE_N = 64
STEP_K = 16
CHUNK_STEPS = 8
CHUNK_K = STEP_K * CHUNK_STEPS
#: The largest grid proved besides the plan's SM count (GPUs with more SMs than this and the plan's target
#: run the same arithmetic on ranges of other sizes; 160 covers every Hopper part).
GRIDS_UP_TO = 160


class StreamVerificationError(SpecError):
    """A read of H that no wait covers, a tile computed twice or not at all, or a workspace slot shared."""


@dataclass(frozen=True)
class StreamGemm:
    """One GEMM as the kernel sees it (the generated kStreamK / kStreamN / kStreamAct)."""

    name: str
    k: int
    n: int            # the GEMM's N (gate | up for the SwiGLU epilogue)
    swiglu: bool

    @property
    def tiles(self) -> int:
        return -(-self.n // TILE_N)

    @property
    def chunks(self) -> int:  # per tile
        return -(-(-(-self.k // STEP_K)) // CHUNK_STEPS)

    @property
    def out_cols(self) -> int:  # columns of its output (H for gemm1)
        return self.n // 2 if self.swiglu else self.n

    @property
    def tile_out_cols(self) -> int:  # reg::out_tile_cols
        return TILE_N // 2 if self.swiglu else TILE_N


@dataclass(frozen=True)
class StreamProof:
    """What verify_stream proved (printed by `validate` under the M's proof)."""

    gemm1: str
    gemm2: str
    grids: tuple[int, int]        # the range of grids proved
    producer_tiles: int           # gemm1 tiles, one post each per run
    tile_cols: int                # H columns per gemm1 tile
    waits_per_tile: int           # gemm2's waits over one output tile's K: (chunk, producer tile) pairs
    max_waits: int                # producer tiles one chunk waits on, at most
    shared_tiles: int             # at the plan's grid: tiles summed through the workspace, both GEMMs

    def as_json(self) -> dict[str, Any]:
        return {"producer": self.gemm1, "consumer": self.gemm2, "policy": "k_range", "grids": list(self.grids),
                "producer_tiles": self.producer_tiles, "tile_cols": self.tile_cols, "waits_per_tile": self.waits_per_tile,
                "max_waits_per_chunk": self.max_waits, "workspace_tiles": self.shared_tiles, "wait_value": 1}

    def describe(self) -> str:
        return (f"mode stream ({self.gemm1} -> {self.gemm2}, k_range): each {CHUNK_K}-column chunk of "
                f"{self.gemm2} waits on the {self.gemm1} tiles ({self.tile_cols} columns of H each, "
                f"{self.producer_tiles} tiles, one post per run) that wrote its columns, at most {self.max_waits} "
                f"per chunk; work partitioned once, workspace slots distinct, arrivals as counted, for every grid "
                f"of {self.grids[0]}..{self.grids[1]} CTAs; gemm1 waits on nothing and every CTA finishes it before "
                f"its first gemm2 wait (a cooperative launch, one CTA per SM)")


def stream_gemms(plan: ChainPlan) -> tuple[StreamGemm, StreamGemm]:
    """The two GEMMs mode stream runs, with the numbers the generated code passes (templates/sm90/src/chain.cu.j2)."""
    first, last = plan.stages[0], plan.stages[-1]
    halves = len(plan.stages) == 3
    return (StreamGemm(first.name, first.k, first.gemm_n, halves or first.epilogue is Epilogue.SWIGLU),
            StreamGemm(last.name, last.k, last.gemm_n, last.epilogue is Epilogue.SWIGLU))


def verify_stream(plan: ChainPlan) -> StreamProof:
    """Prove mode stream's synchronization for this chain (raises StreamVerificationError on the first gap)."""
    if len(plan.stages) not in (2, 3) or plan.stages[0].op is not Op.GEMM or plan.stages[-1].op is not Op.GEMM:
        raise StreamVerificationError("optimizations.stream_weights", "mode stream needs two GEMMs (gemm -> gemm, "
                                      "or gemm -> swiglu -> gemm)", "remove optimizations.stream_weights")
    g1, g2 = stream_gemms(plan)
    top = max(plan.sms, GRIDS_UP_TO)
    return _prove(g1, g2, top, plan.sms)


@lru_cache(maxsize=64)
def _prove(g1: StreamGemm, g2: StreamGemm, top: int, sms: int) -> StreamProof:
    waits, max_waits = _coverage(g1, g2)
    shared = 0
    for grid in range(1, top + 1):
        count = sum(_reduction(g, grid) for g in (g1, g2))
        if grid == sms:
            shared = count
    return StreamProof(g1.name, g2.name, (1, top), g1.tiles, g1.tile_out_cols, waits, max_waits, shared)


def _fail(what: str, fix: str) -> StreamVerificationError:
    return StreamVerificationError("optimizations.stream_weights", what, fix)


def _reduction(g: StreamGemm, grid: int) -> int:
    """Checks 1 and 2 for one GEMM on `grid` CTAs; returns how many tiles go through the workspace."""
    q = g.tiles * g.chunks
    used = min(grid, q)
    lo = [c * q // used for c in range(used)]
    hi = [(c + 1) * q // used for c in range(used)]

    def owner(x: int) -> int:  # detail::owner_of
        return ((x + 1) * used - 1) // q

    if lo[0] != 0 or hi[-1] != q or any(hi[c] != lo[c + 1] for c in range(used - 1)):
        raise _fail(f"{g.name} on {grid} CTAs: the chunk ranges do not partition its {q} chunks",
                    "report this: range_of's arithmetic changed")
    for c in range(used):
        if hi[c] > lo[c] and (owner(lo[c]) != c or owner(hi[c] - 1) != c):
            raise _fail(f"{g.name} on {grid} CTAs: owner_of names another CTA than range_of for CTA {c}'s chunks",
                        "report this: owner_of and range_of disagree")
    slots: dict[int, tuple[int, int]] = {}
    shared = 0
    for t in range(g.tiles):
        first, last = owner(t * g.chunks), owner((t + 1) * g.chunks - 1)
        holders = [c for c in range(first, last + 1) if lo[c] < (t + 1) * g.chunks and hi[c] > t * g.chunks]
        if holders != list(range(first, last + 1)):
            raise _fail(f"{g.name} tile {t} on {grid} CTAs: its chunks are held by CTAs {holders}, but its last "
                        f"arriver counts {last - first + 1} arrivals from {first}..{last}",
                        "report this: the arrival count does not match the ranges")
        if first == last:
            continue
        shared += 1
        for c in holders:
            slot = _slot_of(c, t, lo[c], g.chunks)
            if slot in slots or slot >= 2 * grid:
                raise _fail(f"{g.name} tile {t} on {grid} CTAs: CTA {c}'s partial goes to workspace slot {slot}, "
                            f"{'also tile %d of CTA %d' % slots[slot][::-1] if slot in slots else 'past the 2 x grid allotted'}",
                            "report this: slot_of's slots collide")
            slots[slot] = (t, c)
    return shared


def _slot_of(c: int, t: int, lo: int, chunks: int) -> int:
    """detail::slot_of: CTA c's partial of tile t goes to slot 2c (its first tile) or 2c + 1 (its last)."""
    return 2 * c + (0 if lo // chunks == t else 1)


def _waits(k0: int, kend: int, w: int) -> set[int]:
    """BulkChain::load_x_gmma's walk: the producer tiles waited on before reading columns [k0, kend)."""
    waited = set()
    kk = k0
    while kk < kend:
        pt = kk // w
        waited.add(pt)
        kk = (pt + 1) * w
    return waited


def _coverage(g1: StreamGemm, g2: StreamGemm) -> tuple[int, int]:
    """Checks 3 and 4: gemm2's reads of H against gemm1's tiles, per chunk position (every output tile of gemm2
    reads the same columns at the same chunk). Returns (waits per output tile, most waits of one chunk)."""
    w = g1.tile_out_cols
    if w % STEP_K:
        raise _fail(f"{g1.name}'s tiles hold {w} columns of H, not a multiple of a k-step ({STEP_K})",
                    "report this: the tile width changed")
    if g2.k > g1.out_cols:
        raise _fail(f"{g2.name} reads K = {g2.k} columns of {g1.name}'s output, which has {g1.out_cols}: columns "
                    f"{g1.out_cols}..{g2.k - 1} are never written", f"set {g2.name}'s k to {g1.out_cols}")
    waits = 0
    most = 0
    for cc in range(g2.chunks):
        k0, kend = cc * CHUNK_K, min(cc * CHUNK_K + CHUNK_K, g2.k)
        waited = _waits(k0, kend, w)
        if max(waited) >= g1.tiles:
            raise _fail(f"{g2.name} chunk {cc} waits on {g1.name} tile {max(waited)}, which does not exist "
                        f"({g1.tiles} tiles): the wait would never pass", "report this: wait_tiles is short")
        for c in range(k0, kend):
            if c // w not in waited:
                raise _fail(f"{g2.name} chunk {cc} reads column {c} of H, written by {g1.name} tile {c // w}, "
                            "without waiting on it", "report this: the K-range waits miss a tile")
        waits += len(waited)
        most = max(most, len(waited))
    return waits, most
