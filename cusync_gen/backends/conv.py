"""The conv backend: chains of implicit-GEMM convolutions (`op: conv` stages) on CUTLASS 2.x sm80 kernels,
from templates/conv/ (docs/conv.md). Its sm90 twin (backends/conv_sm90.py) shares the chain runtime and
the project's files but the stage units and their kernel header."""

from __future__ import annotations

from cusync_gen.backends.base import (OutputFile, bench_runtime_files, config_file, find_cutlass_file,
                                      runtime_files)
from cusync_gen.backends.protocol import Support, TorchRoles
from cusync_gen.conv_plan import ConvPlan
from cusync_gen.spec.archs import SM80 as FACTS
from cusync_gen.spec.archs import ArchFacts
from cusync_gen.spec.model import ConvChainSpec
from cusync_gen.verify_conv import verify_conv_plan

NAME = "conv"
RUNTIME = ("status.h", "ptx.cuh", "sync_error.h", "semaphore.cuh", "policy.h", "tile_order.h", "stage.cuh",
           "chain_kernels.cuh", "time_modes.h")
#: What manifest.json says of the project's kind.
MANIFEST = {"kind": "conv"}
HEADERS = ("window.cuh", "conv.cuh", "chain.h", "chain.cuh", "launch.cuh")
#: The template of a stage's translation unit.
STAGE_TEMPLATE = "conv/src/stage_conv.cu.j2"


def files(plan: ConvPlan) -> list[OutputFile]:
    """Every file of an sm80 conv project."""
    return project_files(plan, HEADERS, STAGE_TEMPLATE)


def project_files(plan: ConvPlan, headers: tuple[str, ...], stage_template: str,
                  extra: tuple[OutputFile, ...] = ()) -> list[OutputFile]:
    """Every file of a conv project, in a fixed order (stage = index into plan.stages): `headers` of
    include/cusync/conv/, each stage's unit from `stage_template`, and the backend's `extra` runtime files."""
    name = plan.name
    return [
        OutputFile("CMakeLists.txt", "conv/CMakeLists.txt.j2", True),
        config_file(name),
        find_cutlass_file(),
        OutputFile("README.md", "conv/README.md.j2", True),
        OutputFile(f"include/{name}.h", "conv/include/chain.h.j2", True, field="name"),
        *runtime_files(RUNTIME),
        *extra,
        *(OutputFile(f"include/cusync/conv/{h}", f"conv/include/cusync/conv/{h}", False) for h in headers),
        OutputFile(f"src/{name}_stages.h", "conv/src/stages.h.j2", True, field="name"),
        OutputFile(f"src/{name}.cu", "conv/src/chain.cu.j2", True, field="name"),
        *(OutputFile(f"src/stage_{s.name}.cu", stage_template, True, i, field=f"stages[{i}].name")
          for i, s in enumerate(plan.stages)),
        OutputFile(f"bench/{name}_bench.cu", "conv/bench/bench.cu.j2", True, field="name"),
        OutputFile("bench/conv_bench.cuh", "conv/bench/conv_bench.cuh", False),
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


#: Conv chains of arch: sm80 run CUTLASS's sm80 implicit-GEMM kernels (on Ampere and on Hopper): the sm80 facts
#: (imported above as FACTS).
#: tune and the torch op work on GEMM chains only.
TUNE_TILES: tuple[tuple[int, int, int], ...] = ()
TUNE_ORDERS: tuple[str, ...] = ()
TORCH = TorchRoles()


def supports(spec: object) -> Support:
    return supports_arch(spec, FACTS)


def supports_arch(spec: object, facts: ArchFacts) -> Support:
    """Whether a conv backend for `facts`' kernels emits `spec`."""
    if not isinstance(spec, ConvChainSpec):
        return Support(False, "the conv backends emit chains of op: conv stages; a GEMM chain has the sm80 or sm90 "
                       "backend")
    if spec.arch is not facts.arch:
        return Support(False, f"this conv backend builds arch: {facts.arch.value} kernels; the spec has arch: "
                       f"{spec.arch.value}")
    return Support(True, f"a chain of {len(spec.stages)} {facts.arch.value} implicit-GEMM convolutions for {spec.target}")


def tune_pipeline(threadblock: tuple[int, int, int]) -> int | None:
    return None
