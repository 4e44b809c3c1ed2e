"""How the sm90 library's run() computes a chain at M: the Python mirror of cusync::sm90::Chain::mode()
and cusync::default_mode (templates/sm90/include/cusync/sm90/dispatch.h).

The measured table (the spec's `dispatch:`) first, where it was measured on this many SMs and covers M;
else the default rule on each GEMM's count of 128x128 tiles. tests/test_runtime_host.py keeps
`default_mode` and its numbers equal to the C++ rule, reason text included. ChainPlan.run_mode calls
`run_mode` with the plan's table and GEMMs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from cusync_gen.spec.model import SLAB_DEFAULT_MAX_M, SLAB_GATHER_DEFAULT_MAX_M, Mode

if TYPE_CHECKING:
    from cusync_gen.plan import DispatchPlan

#: With no measured table, run() uses ping-pong where every GEMM has this many 128x128 tiles per SM, else
#: cuBLASLt (cusync::kPingpongTilesPerSm and cusync::kPingpongTile in
#: templates/sm90/include/cusync/sm90/dispatch.h; a test keeps the rule and both numbers equal).
PINGPONG_TILES_PER_SM = 2
PINGPONG_TILE = 128


def run_mode(table: DispatchPlan | None, gemms: Sequence[tuple[str, int]], m: int, sms: int,
             slab_col: bool = False, slab_w2_col: bool = False) -> tuple[Mode, str]:
    """run()'s mode at M on a GPU with `sms` SMs, and why, for GEMMs of (name, N of the GEMM): the table's
    entry where it was measured on `sms` SMs and reaches M; else `slab_default` (slab_col: the chain's slab
    kernel runs over column-major first weights; slab_w2_col: and second weights); else `default_mode` on
    their 128x128 tiles. Mode stream's bulk kernel (optimizations.stream_weights) is taken only from a measured table (autotune, tune) or
    set_mode: measured on the H200, it is still slower than cuBLASLt."""
    if table is not None and table.sms == sms and m <= table.modes[-1][0]:
        m_max, mode = next(entry for entry in table.modes if m <= entry[0])
        return mode, f"dispatch table (measured on {table.gpu}, {table.sms} SMs): M <= {m_max}"
    if (slab := slab_default(m, slab_col, slab_w2_col)) is not None:
        return slab
    tiles = [(name, -(-m // PINGPONG_TILE) * -(-n // PINGPONG_TILE)) for name, n in gemms]
    return default_mode(tiles, sms)


def slab_default(m: int, w1_col: bool, w2_col: bool = False) -> tuple[Mode, str] | None:
    """cusync::slab_default (dispatch.h): mode stream's slab kernel where it runs over column-major first weights
    and M <= SLAB_DEFAULT_MAX_M (SLAB_GATHER_DEFAULT_MAX_M where the second weights are column-major too), with
    its reason; None: default_mode decides."""
    max_m = SLAB_GATHER_DEFAULT_MAX_M if w2_col else SLAB_DEFAULT_MAX_M
    if not w1_col or m > max_m:
        return None
    if w2_col:
        return Mode.STREAM, (f"default rule: M = {m} <= {max_m} and both GEMMs' weights are column-major, so mode "
                             "stream's slab kernel (every SM streams its own slab of the first GEMM's weights, posts "
                             "it, then whole output columns of the second's once every slab is posted)")
    return Mode.STREAM, (f"default rule: M = {m} <= {max_m} and the first GEMM's weights are "
                         "column-major, so mode stream's slab kernel (every SM streams its own slab of both GEMMs' "
                         "weights, no hand-over between them)")


def default_mode(gemms: list[tuple[str, int]], sms: int, cublaslt: bool = True) -> tuple[Mode, str]:
    """cusync::default_mode (dispatch.h) for GEMMs of (name, 128x128 tiles): ping-pong where every GEMM has
    PINGPONG_TILES_PER_SM tiles per SM, else cuBLASLt (stream-K in a library built without it), naming the
    GEMM with the fewest; with its reason."""
    if not gemms:
        return Mode.STOCK, "default rule: no GEMM, so CUTLASS's kernels back to back"
    name, fewest = min(gemms, key=lambda g: g[1])
    if fewest >= PINGPONG_TILES_PER_SM * sms:
        return Mode.PINGPONG, (f"default rule: every GEMM has at least {PINGPONG_TILES_PER_SM} 128x128 tiles per "
                               f"SM ({name}: {fewest} on {sms} SMs), so CUTLASS's ping-pong kernels back to back "
                               f"with PDL")
    then = ("cuBLASLt's kernels (split K, narrow tiles)" if cublaslt
            else "stream-K (the library was built without cuBLASLt)")
    return (Mode.CUBLASLT if cublaslt else Mode.STREAMK), (
        f"default rule: {name} has fewer than {PINGPONG_TILES_PER_SM} 128x128 tiles per SM ({fewest} on {sms} SMs), "
        f"so {then}")
