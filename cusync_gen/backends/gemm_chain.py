"""The files of a GEMM chain project (`stages:` specs), shared by the sm80 and sm90 backends: each
backend passes its own headers, stage templates and parts; nothing here tests the architecture."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cusync_gen.backends.base import (OutputFile, backend_files, bench_backend_files, bench_runtime_files, config_file,
                                      find_cutlass_file, runtime_files)
from cusync_gen.backends.protocol import Support
from cusync_gen.plan import ChainPlan
from cusync_gen.spec.archs import ArchFacts
from cusync_gen.spec.model import ChainSpec, Op
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
        find_cutlass_file(),
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


@dataclass(frozen=True)
class Buffer:
    """One pointer of the generated Arguments: its field, its dense row width (elements) and whether it is
    read only (the chain input and the weights)."""

    field: str
    cols: int
    const: bool


@dataclass(frozen=True)
class StageOperands:
    """Where a stage's operands come from in the generated Arguments (field names) and their dense row
    widths: a (the chain input or a producer's output), b (a GEMM's weights, a two-producer swiglu's up
    input, or none) and d (the output). A GEMM's K is `a.cols`; its N is `d.cols`."""

    a: Buffer
    b: Buffer | None
    d: Buffer
    gemm: bool
    bias: str | None = None  # a GEMM's bias vector [n] (the Arguments field), if the spec asks for one
    b_rows: int = 0          # a GEMM's weight rows: K (row-major K x N) or N (column-major), for the overlap check


def stage_operands(plan: ChainPlan) -> tuple[StageOperands, ...]:
    """Each stage's operands, for the Arguments fields, the pointer table and the run-time checks of the
    leading dimensions (a dense row is `cols` elements)."""
    outs = [Buffer(f"{s.name}_out", s.n, False) for s in plan.stages]
    result = []
    for s in plan.stages:
        a = outs[s.input.producer] if s.input else Buffer("input", s.k, True)
        if s.op is Op.GEMM:
            # a gated GEMM's weights hold gate | up: 2n columns (StagePlan.gemm_n)
            row = s.b_layout.value == "row"
            b: Buffer | None = Buffer(f"{s.name}_weight", s.gemm_n if row else s.k, True)
            b_rows = s.k if row else s.gemm_n
        else:
            b = outs[s.input_b.producer] if s.input_b else None
            b_rows = 0
        result.append(StageOperands(a, b, outs[s.index], s.op is Op.GEMM, f"{s.name}_bias" if s.bias else None,
                                    b_rows))
    return tuple(result)


def buffers(plan: ChainPlan) -> tuple[Buffer, ...]:
    """The pointers of the generated Arguments in their order: the input, then per stage its weights (GEMMs)
    and its output."""
    ops = stage_operands(plan)
    found = [ops[0].a] if plan.stages[0].input is None else []
    for o in ops:
        found += [o.b] if o.gemm and o.b is not None else []
        found.append(o.d)
    return tuple(found)


def context(plan: ChainPlan, f: OutputFile) -> dict:
    return {"stage": plan.stages[f.stage] if f.stage is not None else None, "operands": stage_operands(plan),
            "buffers": buffers(plan)}


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
            **({"bias": True} if s.bias else {}),
        }
        for s in plan.stages
    ]


def prove(plan: ChainPlan) -> None:
    """The proofs at the sizes that cover every M (verify.VerificationError on the first gap)."""
    for m in representative_ms(plan):
        verify(plan, m)


def supports(spec: object, facts: ArchFacts) -> Support:
    """A GEMM chain (`stages:`) of this arch, for one of its targets."""
    name = facts.arch.value
    if not isinstance(spec, ChainSpec):
        return Support(False, f"the {name} backend emits GEMM chains (stages:); an attention: spec has its own backend")
    if spec.arch is not facts.arch:
        return Support(False, f"the spec has arch: {spec.arch.value}; this is the {name} backend")
    if spec.target not in facts.targets:
        return Support(False, f"{name} kernels run on {', '.join(facts.targets)}, not {spec.target}")
    return Support(True, f"a GEMM chain of {len(spec.stages)} stages for {spec.target}")
