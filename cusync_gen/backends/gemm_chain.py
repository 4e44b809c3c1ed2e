"""The files of a GEMM chain project (`stages:` specs), shared by the sm80 and sm90 backends: each
backend passes its own headers, stage templates and parts; nothing here tests the architecture."""

from __future__ import annotations

from collections.abc import Callable

from cusync_gen.backends.base import (OutputFile, backend_files, bench_backend_files, bench_runtime_files, config_file,
                                      runtime_files)
from cusync_gen.plan import ChainPlan
from cusync_gen.spec.model import Op
from cusync_gen.verify import representative_ms, verify

#: The runtime every GEMM chain project includes (include/cusync/): the chain lifecycle.
CHAIN_RUNTIME = ("status.h", "ptx.cuh", "sync_error.h", "semaphore.cuh", "policy.h", "tile_order.h", "stage.cuh",
                 "chain.h", "launch.cuh", "chain.cuh")
SWIGLU_TEMPLATE = "project/src/stage_swiglu.cu.j2"


def files(plan: ChainPlan, folder: str, runtime: tuple[str, ...], headers: tuple[str, ...],
          stage_files: Callable[[ChainPlan], list[OutputFile]], bench_files: tuple[str, ...]) -> list[OutputFile]:
    """Every file of the project, in a fixed order."""
    name = plan.name
    swiglu = ("swiglu.cuh",) if any(s.op is Op.SWIGLU for s in plan.stages) else ()
    return [
        OutputFile("CMakeLists.txt", "project/CMakeLists.txt.j2", True),
        config_file(name),
        OutputFile("README.md", "project/README.md.j2", True),
        OutputFile(f"include/{name}.h", "project/include/chain.h.j2", True, field="name"),
        OutputFile(f"include/{name}_c.h", "project/include/chain_c.h.j2", True, field="name"),
        OutputFile(f"include/{name}_testing.h", "project/include/testing.h.j2", True, field="name"),
        *runtime_files(CHAIN_RUNTIME + runtime + swiglu),
        *backend_files(folder, headers),
        OutputFile(f"src/{name}_stages.h", "project/src/stages.h.j2", True, field="name"),
        OutputFile(f"src/{name}.cu", "project/src/chain.cu.j2", True, field="name"),
        OutputFile(f"src/{name}_c.cpp", "project/src/chain_c.cpp.j2", True, field="name"),
        *stage_files(plan),
        OutputFile(f"bench/{name}_bench.cu", "project/bench/bench.cu.j2", True, field="name"),
        *(OutputFile(f"bench/{b}", f"project/bench/{b}", False) for b in bench_files),
        *bench_runtime_files(("common.cuh", "chain_bench.cuh")),
        *bench_backend_files(folder),
    ]


def stage_file(plan: ChainPlan, index: int, suffix: str, template: str) -> OutputFile:
    stage = plan.stages[index]
    return OutputFile(f"src/stage_{stage.name}{suffix}.cu", template, True, index, f"stages[{index}].name")


def swiglu_or(plan: ChainPlan, index: int, gemm_template: str) -> OutputFile:
    """A stage's unit: the shared SwiGLU template, or the backend's GEMM template."""
    template = SWIGLU_TEMPLATE if plan.stages[index].op is Op.SWIGLU else gemm_template
    return stage_file(plan, index, "", template)


def context(plan: ChainPlan, f: OutputFile) -> dict:
    return {"stage": plan.stages[f.stage] if f.stage is not None else None}


def manifest_stages(plan: ChainPlan) -> list[dict]:
    return [
        {
            "name": s.name,
            "op": s.op.value,
            "n": s.n,
            "k": s.k,
            "policy": s.input.policy.value if s.input else None,
            "producer": plan.stages[s.input.producer].name if s.input else None,
            "producer_b": plan.stages[s.input_b.producer].name if s.input_b else None,
            "epilogue": s.epilogue.value,
            "b_layout": s.b_layout.value,
        }
        for s in plan.stages
    ]


def prove(plan: ChainPlan) -> None:
    """The proofs at the sizes that cover every M (verify.VerificationError on the first gap)."""
    for m in representative_ms(plan):
        verify(plan, m)
