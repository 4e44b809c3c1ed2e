"""The sm90 backend: GEMM chains of CUTLASS 3.x kernels (templates/sm90/), run on the caller's stream
with programmatic dependent launch, in one of seven modes per M (include/cusync/sm90/chain.h)."""

from __future__ import annotations

from cusync_gen.backends import gemm_chain
from cusync_gen.backends.base import OutputFile, backend_files
from cusync_gen.backends.protocol import Support, TorchRoles
from cusync_gen.spec.archs import SM90 as FACTS
from cusync_gen.plan import ChainPlan
from cusync_gen.spec.model import Mode, Op

NAME = "sm90"
RUNTIME: tuple[str, ...] = ("time_modes.h",)
#: include/cusync/sm90/: the CUTLASS 3.x pieces, cuBLASLt, the run() modes and this backend's run().
HEADERS = ("dispatch.h", "autotune.h", "ticket_scheduler.cuh", "collective_hooks.cuh", "waiting_mainloop.cuh", "gated_epilogue.cuh", "posting_epilogue.cuh", "gemm.cuh",
           "cublaslt_context.h", "cublaslt.cuh", "stream_mode.h", "chain.h", "chain.cuh")
#: Run() mode stream's kernel (a spec with optimizations.stream_weights): include/cusync/sm90/ and its unit.
STREAM_HEADERS = ("stream_gemm.cuh", "reg_stream.cuh", "stream_chain_ws.cuh", "gmma_ss.cuh", "bulk_chain.cuh", "stream_mode.cuh")
#: Run() mode stream's slab kernel (every chain spec.rules.slab_problem accepts): its headers and its unit.
SLAB_HEADERS = ("stream_gemm.cuh", "slab_chain.cuh")
PARTS = {
    "api": "sm90/include/chain_api.h.j2",        # project/include/chain.h.j2: run() and the rest of the API
    "chain": "sm90/src/chain.cu.j2",             # project/src/chain.cu.j2: the runtime class and its tables
    "stages": "sm90/src/stages_extra.h.j2",      # project/src/stages.h.j2
    "cmake": "sm90/cmake/parts.cmake.j2",        # project/CMakeLists.txt.j2 and project/cmake/*.j2
    "project": "sm90/project_parts.j2",          # project/README.md.j2, the C ABI
    "bench": "sm90/bench/bench_parts.cu.j2",     # project/bench/bench.cu.j2
    "torch": "sm90/torch_parts.j2",               # torch/ (generate --torch): the op's run() cases, its README
}


def _stage_files(plan: ChainPlan) -> list[OutputFile]:
    """One unit per stage; a GEMM also gets its stock CUTLASS twin (the baselines), compiled apart."""
    files: list[OutputFile] = []
    for stage in plan.stages:
        files.append(gemm_chain.swiglu_or(plan, stage.index, "sm90/stage_gemm.cu.j2"))
        if stage.op is Op.GEMM:
            files.append(gemm_chain.stage_file(plan, stage.index, "_stock", "sm90/stage_gemm_stock.cu.j2"))
    return files


def _stage_and_stream_files(plan: ChainPlan) -> list[OutputFile]:
    """The stage units; mode stream's slab unit where its kernel takes the chain, and its bulk unit where the spec
    asks for it (their headers come with them)."""
    files = _stage_files(plan)
    headers = [*(SLAB_HEADERS if plan.slab_problem is None else ()),
               *(STREAM_HEADERS if plan.optimizations.stream_weights else ())]
    files += backend_files(NAME, tuple(dict.fromkeys(headers)))
    if plan.slab_problem is None:
        files.append(OutputFile(f"src/{plan.name}_slab.cu", "sm90/src/slab.cu.j2", True, field="name"))
    if plan.optimizations.stream_weights:
        files.append(OutputFile(f"src/{plan.name}_stream.cu", "sm90/src/stream.cu.j2", True, field="name"))
    return files


def files(plan: ChainPlan) -> list[OutputFile]:
    return gemm_chain.files(plan, NAME, RUNTIME, HEADERS, _stage_and_stream_files, ("reference.cuh", "baselines.cuh"))


def context(plan: ChainPlan, f: OutputFile) -> dict:
    return {**gemm_chain.context(plan, f), "parts": PARTS}


manifest_stages = gemm_chain.manifest_stages
prove = gemm_chain.prove
MANIFEST: dict = {}


def supports(spec: object) -> Support:
    return gemm_chain.supports(spec, FACTS)


#: tune: every GEMM stage gets the same tile (a Cartesian product over stages grows fast).
TUNE_TILES = ((128, 128, 64), (128, 256, 64), (256, 128, 64))
#: tune's tile orders: the spec's and the ticket queue's four.
TUNE_ORDERS = ("spec", "row_major", "column_major", "banded", "column_banded")
#: The op exposes run()'s modes, links cuBLASLt, compiles the stock units with device-side PDL (see
#: sm90/cmake/parts.cmake.j2) and is built for sm_90a only.
TORCH = TorchRoles(modes=tuple(m for m in Mode if m is not Mode.OVERLAP), cublaslt=True, gdc_suffix="_stock.cu",
                   arch_fixed=True)


def tune_pipeline(threadblock: tuple[int, int, int]) -> int | None:
    """CUTLASS sizes the pipeline to fill shared memory."""
    return None
