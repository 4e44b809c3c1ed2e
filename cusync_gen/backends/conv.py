"""The conv backend: chains of implicit-GEMM convolutions (`op: conv` stages) on CUTLASS 2.x sm80 kernels,
from templates/conv/ (docs/conv.md)."""

from __future__ import annotations

from cusync_gen.backends.base import (OutputFile, bench_runtime_files, config_file, find_cutlass_file,
                                      runtime_files)
from cusync_gen.backends.protocol import Support, TorchRoles
from cusync_gen.conv_plan import ConvPlan
from cusync_gen.spec.archs import ARCHS
from cusync_gen.spec.model import ConvChainSpec
from cusync_gen.verify_conv import verify_conv_plan

NAME = "conv"
RUNTIME = ("status.h", "ptx.cuh", "sync_error.h", "semaphore.cuh", "policy.h", "tile_order.h", "stage.cuh",
           "chain_kernels.cuh")
#: What manifest.json says of the project's kind.
MANIFEST = {"kind": "conv"}
HEADERS = ("conv.cuh", "chain.h", "chain.cuh", "launch.cuh")


def files(plan: ConvPlan) -> list[OutputFile]:
    """Every file of a conv project, in a fixed order (stage = index into plan.stages)."""
    name = plan.name
    return [
        OutputFile("CMakeLists.txt", "conv/CMakeLists.txt.j2", True),
        config_file(name),
        find_cutlass_file(),
        OutputFile("README.md", "conv/README.md.j2", True),
        OutputFile(f"include/{name}.h", "conv/include/chain.h.j2", True, field="name"),
        *runtime_files(RUNTIME),
        *(OutputFile(f"include/cusync/conv/{h}", f"conv/include/cusync/conv/{h}", False) for h in HEADERS),
        OutputFile(f"src/{name}_stages.h", "conv/src/stages.h.j2", True, field="name"),
        OutputFile(f"src/{name}.cu", "conv/src/chain.cu.j2", True, field="name"),
        *(OutputFile(f"src/stage_{s.name}.cu", "conv/src/stage_conv.cu.j2", True, i, field=f"stages[{i}].name")
          for i, s in enumerate(plan.stages)),
        OutputFile(f"bench/{name}_bench.cu", "conv/bench/bench.cu.j2", True, field="name"),
        OutputFile("bench/conv_reference.cuh", "conv/bench/conv_reference.cuh", False),
        *bench_runtime_files(("common.cuh",)),
    ]


#: The sm80 kernels' CMake pieces, which the shared CMake templates include by name.
PARTS = {"cmake": "sm80/cmake/parts.cmake.j2"}


def context(plan: ConvPlan, f: OutputFile) -> dict:
    return {"stage": plan.stages[f.stage] if f.stage is not None else None, "parts": PARTS}


def manifest_stages(plan: ConvPlan) -> list[dict]:
    return [{"name": s.name, "op": "conv"} for s in plan.stages]


def prove(plan: ConvPlan) -> None:
    verify_conv_plan(plan)


#: Conv chains run CUTLASS's sm80 implicit-GEMM kernels (on Ampere and on Hopper): the sm80 facts.
FACTS = next(f for f in ARCHS.values() if f.hosts_conv)
#: tune and the torch op work on GEMM chains only.
TUNE_TILES: tuple[tuple[int, int, int], ...] = ()
TUNE_ORDERS: tuple[str, ...] = ()
TORCH = TorchRoles()


def supports(spec: object) -> Support:
    if not isinstance(spec, ConvChainSpec):
        return Support(False, "the conv backend emits chains of op: conv stages; a GEMM chain has the sm80 or sm90 "
                       "backend")
    return Support(True, f"a chain of {len(spec.stages)} implicit-GEMM convolutions for {spec.target}")


def tune_pipeline(threadblock: tuple[int, int, int]) -> int | None:
    return None
