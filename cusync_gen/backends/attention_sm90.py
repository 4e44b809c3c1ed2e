"""The sm90 attention backend: one layer (qkv -> rotary + cache append -> fused attention -> proj) for
`attention:` specs with `arch: sm90`, from templates/attention_sm90/ (docs/attention.md, "sm90").

The attention stage derives from CUTLASS's Hopper FMHA (CUTLASS_DIR/examples/88_hopper_fmha, which
`cusync-gen fetch-cutlass` copies): our mask (bottom-right causal over a KV cache, GQA heads packed into
query rows) and our strides; generation steps run our split-KV decode kernel. qkv and proj run through
the sm90 backend's cuBLASLt GEMM (cusync/sm90/cublaslt.cuh); Layer::autotune() times their algorithms with
the runtime's time_modes() (cusync/time_modes.h), as every backend's autotune does.
"""

from __future__ import annotations

from cusync_gen.attention_sm90_plan import AttentionSm90Plan
from cusync_gen.backends.base import OutputFile, backend_files, find_cutlass_file, runtime_files
from cusync_gen.backends.protocol import Support, TorchRoles
from cusync_gen.spec.archs import ARCHS
from cusync_gen.spec.model import AttentionSpec

NAME = "attention_sm90"
#: What the sm90 cuBLASLt GEMM needs of the runtime and of the sm90 backend's headers.
RUNTIME = ("status.h", "ptx.cuh", "sync_error.h", "semaphore.cuh", "policy.h", "tile_order.h", "stage.cuh",
           "time_modes.h")
SM90_HEADERS = ("dispatch.h", "ticket_scheduler.cuh", "collective_hooks.cuh", "waiting_mainloop.cuh", "gated_epilogue.cuh",
                "posting_epilogue.cuh", "gemm.cuh", "cublaslt_context.h", "cublaslt.cuh")
#: What manifest.json says of the project's kind ("build" and "run" read it).
MANIFEST = {"kind": "attention_sm90"}
STAGES = ("qkv", "rope", "attention", "proj")


def files(plan: AttentionSm90Plan) -> list[OutputFile]:
    """Every file of an sm90 attention project, in a fixed order."""
    name = plan.name
    return [
        OutputFile("CMakeLists.txt", "attention_sm90/CMakeLists.txt.j2", True),
        find_cutlass_file(),
        OutputFile("README.md", "attention_sm90/README.md.j2", True),
        OutputFile(f"include/{name}.h", "attention_sm90/include/layer.h.j2", True, field="name"),
        OutputFile("include/cusync/attention_sm90/kernels.cuh",
                   "attention_sm90/include/cusync/attention_sm90/kernels.cuh", False),
        OutputFile("include/cusync/attention_sm90/layer.cuh", "attention_sm90/include/cusync/attention_sm90/layer.cuh", False),
        *runtime_files(RUNTIME),
        *backend_files("sm90", SM90_HEADERS),
        OutputFile(f"bench/{name}_bench.cu", "attention_sm90/bench/bench.cu.j2", True, field="name"),
        OutputFile("bench/attention_sm90_bench.cuh", "attention_sm90/bench/attention_sm90_bench.cuh", False),
    ]


#: Shared templates included by name: none (the project's CMake and README are this folder's own).
PARTS: dict[str, str] = {}


def context(plan: AttentionSm90Plan, f: OutputFile) -> dict:
    return {}


def manifest_stages(plan: AttentionSm90Plan) -> list[dict]:
    return [{"name": name, "op": "gemm" if name in ("qkv", "proj") else name} for name in STAGES]


def prove(plan: AttentionSm90Plan) -> None:
    """The stages run back to back in stream order: nothing to prove beyond the spec rules."""


#: The sm90 facts (archs.ArchFacts.hosts_fused_attention says which arch carries the layer).
FACTS = next(f for f in ARCHS.values() if f.hosts_fused_attention)
TUNE_TILES: tuple[tuple[int, int, int], ...] = ()
TUNE_ORDERS: tuple[str, ...] = ()
TORCH = TorchRoles()


def supports(spec: object) -> Support:
    if not isinstance(spec, AttentionSpec):
        return Support(False, "the sm90 attention backend emits attention: specs; a GEMM chain has the sm80 or sm90 backend")
    if spec.arch is not FACTS.arch:
        return Support(False, f"the fused attention layer runs on {FACTS.arch.value} kernels, not {spec.arch.value}")
    return Support(True, f"the fused attention layer (FMHA + split-KV decode) for {spec.target}")


def tune_pipeline(threadblock: tuple[int, int, int]) -> int | None:
    return None
