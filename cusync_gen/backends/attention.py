"""The attention backend: the fixed five-stage attention chain (`attention:` specs) on the sm80
kernels, from templates/attention/."""

from __future__ import annotations

from cusync_gen.attention_plan import AttentionPlan
from cusync_gen.backends.protocol import Support, TorchRoles
from cusync_gen.spec.archs import ARCHS
from cusync_gen.spec.model import AttentionSpec
from cusync_gen.verify_attention import verify_attention_plan
from cusync_gen.backends.base import (OutputFile, backend_files, bench_runtime_files, config_file, find_cutlass_file,
                                      runtime_files)

NAME = "attention"
RUNTIME = ("status.h", "ptx.cuh", "sync_error.h", "semaphore.cuh", "policy.h", "tile_order.h", "stage.cuh",
           "chain.h", "chain.cuh", "launch.cuh", "chain_kernels.cuh", "attention.cuh", "softmax.cuh",
           "attention_chain.h", "attention_launch.cuh", "attention_chain.cuh")
#: What manifest.json says of the project's kind ("build" and "run" read it).
MANIFEST = {"kind": "attention"}
HEADERS = ("waiting_iterator.cuh", "gemm.cuh", "batched_gemm.cuh")


def files(plan: AttentionPlan) -> list[OutputFile]:
    """Every file of an attention project, in a fixed order (stage = index into plan.gemms)."""
    name = plan.name
    return [
        OutputFile("CMakeLists.txt", "attention/CMakeLists.txt.j2", True),
        config_file(name),
        find_cutlass_file(),
        OutputFile("README.md", "attention/README.md.j2", True),
        OutputFile(f"include/{name}.h", "attention/include/attention.h.j2", True, field="name"),
        OutputFile(f"include/{name}_c.h", "attention/include/attention_c.h.j2", True, field="name"),
        OutputFile(f"include/{name}_testing.h", "attention/include/testing.h.j2", True, field="name"),
        *runtime_files(RUNTIME),
        *backend_files("sm80", HEADERS),
        OutputFile(f"src/{name}_stages.h", "attention/src/stages.h.j2", True, field="name"),
        OutputFile(f"src/{name}.cu", "attention/src/attention.cu.j2", True, field="name"),
        OutputFile(f"src/{name}_c.cpp", "attention/src/attention_c.cpp.j2", True, field="name"),
        *(OutputFile(f"src/stage_{g.name}.cu", "attention/src/stage_gemm.cu.j2", True, i) for i, g in enumerate(plan.gemms)),
        OutputFile("src/stage_softmax.cu", "attention/src/stage_softmax.cu.j2", True),
        OutputFile(f"bench/{name}_bench.cu", "attention/bench/bench.cu.j2", True, field="name"),
        OutputFile("bench/reference.cuh", "project/bench/reference.cuh", False),
        OutputFile("bench/attention_reference.cuh", "attention/bench/attention_reference.cuh", False),
        *bench_runtime_files(("common.cuh", "attention_bench.cuh")),
    ]


#: The templates of other folders that shared templates include by name: the sm80 kernels' CMake pieces.
PARTS = {"cmake": "sm80/cmake/parts.cmake.j2"}


def context(plan: AttentionPlan, f: OutputFile) -> dict:
    return {"gemm": plan.gemms[f.stage] if f.stage is not None else None, "parts": PARTS}


def manifest_stages(plan: AttentionPlan) -> list[dict]:
    return [{"name": row.name, "op": "softmax" if row.name == "softmax" else "gemm"} for row in plan.table]


def prove(plan: AttentionPlan) -> None:
    verify_attention_plan(plan)


#: The sm80 kernels' facts (archs.ArchFacts.hosts_attention says which arch carries the chain).
FACTS = next(f for f in ARCHS.values() if f.hosts_attention)
#: tune and the torch op work on GEMM chains only.
TUNE_TILES: tuple[tuple[int, int, int], ...] = ()
TUNE_ORDERS: tuple[str, ...] = ()
TORCH = TorchRoles()


def supports(spec: object) -> Support:
    if not isinstance(spec, AttentionSpec):
        return Support(False, "the attention backend emits attention: specs; a GEMM chain has the sm80 or sm90 backend")
    if spec.arch is not FACTS.arch:
        return Support(False, f"the attention chain runs on {FACTS.arch.value} kernels, not {spec.arch.value}")
    return Support(True, f"the five-stage attention chain for {spec.target}")


def tune_pipeline(threadblock: tuple[int, int, int]) -> int | None:
    return None
