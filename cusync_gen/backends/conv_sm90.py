"""The conv backend on Hopper kernels: chains of implicit-GEMM convolutions (`op: conv` stages, `arch: sm90`)
on CUTLASS 3.x kernels (TMA im2col loads, wgmma; include/cusync/conv/conv_sm90.cuh). The chain runtime, the
bench and the project's files are the conv backend's (backends/conv.py); what differs is each stage's unit,
its kernel header and the sm90 CMake pieces (docs/conv.md, "sm90 kernels")."""

from __future__ import annotations

from cusync_gen.backends import conv
from cusync_gen.backends.base import OutputFile
from cusync_gen.backends.protocol import Support
from cusync_gen.conv_plan import ConvPlan
from cusync_gen.spec.archs import SM90 as FACTS

NAME = "conv_sm90"
RUNTIME = conv.RUNTIME
MANIFEST = conv.MANIFEST
#: include/cusync/conv/ from templates/conv/ (the chain runtime and the waits).
HEADERS = ("window.cuh", "chain.h", "chain.cuh", "launch.cuh")
#: This backend's kernel header and stage include (templates/conv_sm90/), and the sm90 GEMM backend's epilogue
#: that posts a tile once its TMA stores completed (with the hooks' carrier) and its ticket scheduler (the
#: persistent kernel's tile queue), shared as they are.
EXTRA = (
    *(OutputFile(f"include/cusync/conv/{h}", f"conv_sm90/include/cusync/conv/{h}", False)
      for h in ("conv_sm90.cuh", "launch_sm90.cuh")),
    *(OutputFile(f"include/cusync/sm90/{h}", f"sm90/include/cusync/sm90/{h}", False)
      for h in ("collective_hooks.cuh", "posting_epilogue.cuh", "ticket_scheduler.cuh")),
)
#: The sm90 pieces of the shared CMake templates (sm_90a, CUTLASS's util headers), without the GEMM chain's.
PARTS = {"cmake": "conv_sm90/cmake/parts.cmake.j2"}


def files(plan: ConvPlan) -> list[OutputFile]:
    return conv.project_files(plan, HEADERS, "conv_sm90/src/stage_conv.cu.j2", EXTRA)


def context(plan: ConvPlan, f: OutputFile) -> dict:
    return {**conv.context(plan, f), "parts": PARTS}


manifest_stages = conv.manifest_stages
prove = conv.prove
TUNE_TILES = conv.TUNE_TILES
TUNE_ORDERS = conv.TUNE_ORDERS
TORCH = conv.TORCH
tune_pipeline = conv.tune_pipeline


def supports(spec: object) -> Support:
    return conv.supports_arch(spec, FACTS)
