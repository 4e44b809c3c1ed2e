"""The sm80 backend: GEMM chains of CUTLASS 2.x kernels (templates/sm80/), run on two streams with
the wait kernel (include/cusync/sm80/chain.h)."""

from __future__ import annotations

from cusync_gen.backends import gemm_chain
from cusync_gen.backends.base import OutputFile
from cusync_gen.backends.protocol import Support, TorchRoles
from cusync_gen.spec.archs import SM80 as FACTS
from cusync_gen.plan import ChainPlan

NAME = "sm80"
#: Runtime headers beyond gemm_chain.CHAIN_RUNTIME: the wait kernel.
RUNTIME = ("chain_kernels.cuh",)
#: include/cusync/sm80/: the CUTLASS 2.x hooks and this backend's run().
HEADERS = ("waiting_iterator.cuh", "gemm.cuh", "chain.h", "chain.cuh")
#: The templates of this folder that shared templates include by name.
PARTS = {
    "api": "sm80/include/chain_api.h.j2",        # project/include/chain.h.j2: run() and the rest of the API
    "chain": "sm80/src/chain.cu.j2",             # project/src/chain.cu.j2: the runtime class and its tables
    "stages": "sm80/src/stages_extra.h.j2",      # project/src/stages.h.j2
    "cmake": "sm80/cmake/parts.cmake.j2",        # project/CMakeLists.txt.j2 and project/cmake/*.j2
    "project": "sm80/project_parts.j2",          # project/README.md.j2, the C ABI
    "bench": "sm80/bench/bench_parts.cu.j2",     # project/bench/bench.cu.j2
    "torch": "sm80/torch_parts.j2",               # torch/ (generate --torch): the op's run() cases, its README
}


def _stage_files(plan: ChainPlan) -> list[OutputFile]:
    return [gemm_chain.swiglu_or(plan, s.index, "sm80/stage_gemm.cu.j2") for s in plan.stages]


def files(plan: ChainPlan) -> list[OutputFile]:
    return gemm_chain.files(plan, NAME, RUNTIME, HEADERS, _stage_files, ("reference.cuh",))


def context(plan: ChainPlan, f: OutputFile) -> dict:
    return {**gemm_chain.context(plan, f), "parts": PARTS}


manifest_stages = gemm_chain.manifest_stages
prove = gemm_chain.prove
MANIFEST: dict = {}


def supports(spec: object) -> Support:
    return gemm_chain.supports(spec, FACTS)


#: tune: every GEMM stage gets the same tile (a Cartesian product over stages grows fast).
TUNE_TILES = ((128, 128, 32), (128, 256, 32), (256, 128, 32), (128, 128, 64))
#: tune's tile orders: the spec's, the ticket counter's row-major order, and the hardware block order.
TUNE_ORDERS = ("spec", "ticket", "hw")
#: The op has the common modes only.
TORCH = TorchRoles()


def tune_pipeline(threadblock: tuple[int, int, int]) -> int | None:
    """4 stages for a 128-wide tile of K 32 (measured), else 3."""
    return 4 if threadblock[2] == 32 and max(threadblock[:2]) == 128 else 3
