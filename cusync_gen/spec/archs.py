"""What each architecture is, as facts: the `Arch` enum and `ARCHS`, the one table from an architecture to
what the spec rules, the plan, its describe text and the proofs need to know of it (tile limits, the
settings its GEMM tiles take, which spec features it has, how consumers are launched).

This is the lowest layer that may hold them: the spec rules read them, and the spec package imports
nothing above it. The backend objects (cusync_gen/backends/) reference these facts (`Backend.facts`) and
add what only the layers above the plan know (files, templates, tune space, the torch op). Nothing outside
this module and the backends tests an architecture by name: the rest asks `ARCHS[arch]`, or the backend.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum


class Arch(str, Enum):
    SM80 = "sm80"
    SM90 = "sm90"


class Schedule(str, Enum):
    """The kernel schedule of a synced sm90 GEMM (spec `tile.schedule`; C++ spelling: cpp.SCHEDULE)."""

    COOPERATIVE = "cooperative"  # both math warp groups on each tile (the default)
    PINGPONG = "pingpong"        # the groups on alternate tiles, one's epilogue under the other's MMAs


#: Every build target a spec may name (spec `target:`, CLI --target).
TARGETS: tuple[str, ...] = ("sm_80", "sm_86", "sm_89", "sm_90")
#: Targets whose kernels can trigger a programmatic dependent launch (`griddepcontrol`, sm_90 on): conv
#: chains built for them overlap on one stream where the device has it too (docs/conv.md).
DEPENDENT_LAUNCH_TARGETS: tuple[str, ...] = ("sm_90",)

#: The optimizations only the wait-kernel launch has, and why each does not apply to dependent launches.
_WAIT_KERNEL_ONLY: tuple[tuple[str, str], ...] = (
    ("avoid_wait_kernel", "sm90 launches each consumer with programmatic dependent launch, not a wait kernel"),
    ("avoid_custom_order", "sm90 kernels are persistent and always take tiles from the ordered ticket queue"),
    ("reorder_tile_loads", "the sm90 load warp already runs ahead of the math by the whole pipeline"),
)


@dataclass(frozen=True)
class ConvOverlapRule:
    """When run()'s rule takes a conv chain's overlap (cusync::conv::ConvOverlapRule, default_conv_mode): every
    stage's tiles at least min_k_steps main-loop iterations long, and the widest producer's last wave leaving at
    least min_idle_percent of its SM time idle (its waves rounded up, against its tiles)."""

    min_k_steps: int
    min_idle_percent: int
    cpp: str  # the C++ constant


#: The sm80 kernels: a synced tile pays a few microseconds per wave (its first poll, the close of the run), which
#: tiles of 16 iterations win back wherever a producer runs more than one wave.
OVERLAP_RULE_SM80 = ConvOverlapRule(16, 0, "cusync::conv::kOverlapRuleSm80")
#: The sm90 kernels (persistent beyond a wave) pay the overlap's waits and post on every tile's path: slower than
#: back to back wherever the last wave is nearly full or the tiles short (benchmarks/results/2026-12-04-h200-conv.md,
#: 2026-12-05-h200-conv.md); 1.15x at 1.48 waves of 72-iteration tiles, 1.03x at 36, slower at 18 and below
#: (2026-12-06-h100-conv-waves.md, NOTES c14).
OVERLAP_RULE_SM90 = ConvOverlapRule(32, 20, "cusync::conv::kOverlapRuleSm90")


@dataclass(frozen=True)
class ConvKernels:
    """What an arch's conv kernels are to the plan, its describe text and the project (cusync_gen/conv_plan.py)."""

    backend: str               # the backend module (backends/conv.py, backends/conv_sm90.py)
    kernels: str               # as validate names them
    readme: str                # what each conv is, as the project's README says it
    overlap_rule: ConvOverlapRule   # run()'s rule (ConvTables::overlap_rule)
    #: K-blocks never span filter taps (sm90: each TMA im2col load takes tile.k channels of one tap, the last
    #: block of a tap zero-filled past c); sm80's iterators walk r * s * c as one K.
    per_tap_k: bool
    #: Threads of a block where the kernel fixes them (sm90: one producer and one consumer warp group), with the
    #: pipeline filling shared memory; None: from the sm80 tile's warps and stages.
    threads: int | None
    #: Persistent kernels as well (ConvTables::persistent): one wave of CTAs, each walking tiles from a queue (sm90:
    #: CUTLASS's ping-pong GEMM kernel over its conv mainloop, PersistentConvSm90), for stages with more tiles
    #: than one wave; else always a block per tile.
    persistent: bool = False


@dataclass(frozen=True)
class ArchFacts:
    """What one architecture's GEMM kernels are and what a spec of that arch may use."""

    arch: Arch
    #: Build targets its kernels run on (sm80's CUTLASS 2.x kernels run on Hopper too).
    targets: tuple[str, ...]
    #: Appended to the target's number for nvcc (wgmma and setmaxnreg exist only in sm_90a).
    cuda_arch_suffix: str
    #: GEMMs are CUTLASS 3.x warp-specialized persistent kernels (TMA + wgmma; a load warp group and two
    #: math warp groups, pipeline sized by CUTLASS to fill shared memory); else CUTLASS 2.x multistage
    #: kernels whose warp tile, instruction and pipeline depth the spec sets.
    warp_specialized: bool
    #: Threads of a warp-specialized GEMM block (0: derived from the warp tile).
    gemm_threads: int
    #: Allowed threadblock M, N, K of a GEMM (empty: any the warp rules allow).
    tile_m: tuple[int, ...]
    tile_n: tuple[int, ...]
    tile_k: tuple[int, ...]
    #: The kernel schedules (spec `tile.schedule`), the default first; empty: the spec may not set one.
    schedules: tuple[str, ...]
    pingpong_tile_m: tuple[int, ...]
    pingpong_tile_n: tuple[int, ...]
    #: Most outputs (M x N) of a cooperative tile: its two math warp groups' fp32 accumulators, at most 128 a
    #: thread beside the rest of the 168 registers (0: no such limit, the warp tile rules apply).
    cooperative_tile_mn: int
    #: Consumers start by programmatic dependent launch (else the wait kernel on a second stream).
    dependent_launch: bool
    #: run() picks how to compute the chain by M (dispatch.h's modes: stock kernels, stream-K, cuBLASLt...).
    run_modes: bool
    #: Spec features this arch has.
    tile_configs: bool
    dispatch: bool
    gated_epilogue: bool
    column_banded: bool
    hosts_attention: bool
    #: The fused attention layer (CUTLASS's Hopper FMHA, split-KV decode) runs on this arch (backends/attention_sm90.py).
    hosts_fused_attention: bool
    #: Conv chains (op: conv) on this arch's kernels (sm80: CUTLASS 2.x implicit GEMM; sm90: CUTLASS 3.x
    #: implicit GEMM with TMA im2col loads and wgmma, cusync/conv/conv_sm90.cuh); None: none.
    conv: ConvKernels | None
    #: Optimizations that do not apply, with why.
    inapplicable_optimizations: tuple[tuple[str, str], ...]

    @property
    def hosts_conv(self) -> bool:
        return self.conv is not None

    @property
    def wait_kernel(self) -> bool:
        return not self.dependent_launch

    def cuda_arch(self, target: str) -> str:
        """"sm_90" -> "90a" (sm90), "sm_86" -> "86" (sm80)."""
        return target.removeprefix("sm_") + self.cuda_arch_suffix


SM80 = ArchFacts(
    arch=Arch.SM80, targets=TARGETS, cuda_arch_suffix="", warp_specialized=False, gemm_threads=0,
    tile_m=(), tile_n=(), tile_k=(), schedules=(), pingpong_tile_m=(), pingpong_tile_n=(), cooperative_tile_mn=0,
    dependent_launch=False, run_modes=False, tile_configs=False, dispatch=False, gated_epilogue=False,
    column_banded=False, hosts_attention=True, hosts_fused_attention=False, inapplicable_optimizations=(),
    conv=ConvKernels("conv", "sm80 implicit-GEMM kernels",
        "a CUTLASS 2.x implicit-GEMM kernel (sm80 `mma.sync`,\nalso on Hopper)",
        OVERLAP_RULE_SM80, per_tap_k=False, threads=None),
)
#: sm90 (CUTLASS 3.x, warp-specialized cooperative): two math warp groups split BLK_M, so M is 128 or 256;
#: wgmma N is a multiple of 8 up to 256 (these are the widths CUTLASS's builder tiles well); BLK_K of 64
#: fp16/bf16 elements is one 128-byte swizzle atom. Ping-pong tiles: one warp group holds a whole tile's
#: fp32 accumulators, so BLK_M is 128 and BLK_N at most 128 (128 registers a thread; CUTLASS's own
#: ping-pong configurations stop there too). A cooperative tile holds at most 128 x 256 outputs for the same
#: reason (256 x 256 compiled to a 2 KB stack of spills a thread, 256 x 192 spilled too).
SM90 = ArchFacts(
    arch=Arch.SM90, targets=("sm_90",), cuda_arch_suffix="a", warp_specialized=True, gemm_threads=384,
    tile_m=(128, 256), tile_n=(64, 128, 192, 256), tile_k=(64,), schedules=tuple(s.value for s in Schedule),
    pingpong_tile_m=(128,), pingpong_tile_n=(64, 128), cooperative_tile_mn=128 * 256,
    dependent_launch=True, run_modes=True, tile_configs=True, dispatch=True, gated_epilogue=True,
    column_banded=True, hosts_attention=False, hosts_fused_attention=True, inapplicable_optimizations=_WAIT_KERNEL_ONLY,
    conv=ConvKernels("conv_sm90", "sm90 implicit-GEMM kernels (CUTLASS 3.x: TMA im2col loads, wgmma)",
        "a CUTLASS 3.x implicit-GEMM kernel (sm90: TMA im2col loads,\n"
        "`wgmma`, a producer and a consumer warp group; beyond one wave of tiles a persistent\n"
        "kernel: a producer and two math warp groups on alternate tiles)",
        OVERLAP_RULE_SM90, per_tap_k=True, threads=256, persistent=True),
)

#: The one table from an architecture to its facts.
ARCHS: dict[Arch, ArchFacts] = {f.arch: f for f in (SM80, SM90)}
#: A spec without `arch:`.
DEFAULT_ARCH: Arch = SM80.arch


def facts_of(arch: Arch | str) -> ArchFacts:
    """The facts of an architecture, from the enum or its spelling ("sm90")."""
    return ARCHS[Arch(arch)]


def facts_named(name: object) -> ArchFacts | None:
    """The facts of an architecture by its spelling in a manifest ("sm90"); None for anything else."""
    return next((f for a, f in ARCHS.items() if a.value == name), None)
