"""The interface every backend declares: `Backend`, what an architecture knows above the plan, and
`Support`, its answer to "can you emit this spec?".

A backend is a module of this package (`sm80`, `sm90`, `attention`, `conv`) that has every member of `Backend`
(tests/test_backends.py checks each with `isinstance` and the signatures). The facts the spec rules, the
plan, the describe text and the proofs need (tile limits, launch style, which spec features exist) live
one layer lower, in `cusync_gen.spec.archs`, because the spec package imports nothing above it; a backend
names its row of that table as `FACTS`. Everything else an architecture knows is here: its template folder
and the parts it provides, the tune space, the torch op's roles and the manifest's extra keys.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol, runtime_checkable

from cusync_gen.backends.base import OutputFile
from cusync_gen.spec.archs import ArchFacts
from cusync_gen.spec.model import Mode


class Support(NamedTuple):
    """Whether a backend emits a spec, and if not, why (the QuACK / cutlass_cppgen habit: say what is
    supported, never just "no")."""

    ok: bool
    reason: str


@dataclass(frozen=True)
class TorchRoles:
    """What the `generate --torch` op of a backend's project has beyond the common modes."""

    #: run()'s modes beyond overlap that the op exposes as its own `mode=` values (dispatch.h).
    modes: tuple[Mode, ...] = ()
    #: The op links cuBLASLt (a mode computes with it).
    cublaslt: bool = False
    #: Units compiled apart with the device-side PDL control (`-DCUTLASS_ENABLE_GDC_FOR_SM90`), by suffix.
    gdc_suffix: str | None = None
    #: The op's compute capability is fixed (an architecture-specific target, e.g. sm_90a).
    arch_fixed: bool = False


#: The macros a backend's part files define, by part (the `PARTS` key), each with what the shared
#: templates call it for. tests/test_backends.py renders every backend's parts and checks that each
#: defines exactly these, and that shared templates call no other macro of a part.
PART_MACROS: dict[str, dict[str, str]] = {
    "api": {  # project/include/chain.h.j2: the public header
        "doc": "the comment on how run() launches the stages",
        "owns": "what the chain object owns beyond its buffers (words after 'owns')",
        "allocates": "what initialize() allocates beyond the semaphores",
        "core": "the C++ type of the runtime object the public class forwards to",
        "core_header": "the header that declares that type",
        "workspace_note": "a note on which workspace stays the library's own",
        "workspace_buffers": "the workspaces a caller-provided allocation covers",
        "core_init": "the runtime object's constructor arguments (the tables)",
        "tables": "the declarations of the table functions src/<name>.cu defines",
        "run": "run() and the backend's other run methods, with their comments",
        "order": "the comment on set_ticket_order's effect",
        "single_stream": "words after 'run_sequential runs every stage on one stream'",
    },
    "chain": {  # project/src/chain.cu.j2: the runtime object and its tables
        "core": "the runtime class the tables are handed to",
        "impl": "the backend's includes and definitions before the tables",
        "tables": "the backend's own tables (launch functions, dispatch)",
        "accessors": "the functions that return those tables",
        "methods": "the public class's backend methods, forwarded to the runtime object",
    },
    "stages": {  # project/src/stages.h.j2: the constexpr stage tables
        "includes": "the headers the stage declarations need",
        "tables": "the backend's constexpr tables beside kStages (e.g. the dispatch table)",
        "stage": "one stage's extra prepare_/launch_ declarations",
    },
    "cmake": {  # project/CMakeLists.txt.j2, project/cmake/*.j2, project/cmake_usage.md.j2, attention/
        "arch_comment": "why the CUDA architecture is checked",
        "arch_test": "the CMake condition an accepted CMAKE_CUDA_ARCHITECTURES entry meets",
        "arch_message": "the FATAL_ERROR text for an architecture the kernels cannot build for",
        "usage_arch": "the CMAKE_CUDA_ARCHITECTURES value the usage examples pass",
        "usage_arch_text": "that value as the usage text spells it",
        "include_dirs": "CUTLASS include folders beyond include/",
        "library_extra": "the library target's extra CMake (e.g. linking cuBLASLt)",
        "stage_sources": "a stage's sources beyond src/stage_<name>.cu",
        "sources_extra": "per-source properties (e.g. device-side PDL for the stock kernels)",
        "install_headers": "the public runtime headers installed with the library",
        "bench_extra": "the bench target's extra CMake (e.g. the cuBLAS baseline)",
    },
    "project": {  # project/README.md.j2 and the C ABI (include/<name>_c.h, src/<name>_c.cpp)
        "readme_tile_stages": "the README's words on the tiles and pipeline of the GEMMs",
        "readme_c_functions": "the README's list of the backend's C functions",
        "readme_files": "the README's rows for the backend's files",
        "readme_build_arch": "the README's words on the architecture to build for",
        "readme_allocates": "the README's words on what initialize() allocates",
        "c_mode_declarations": "the C ABI's declarations of the backend's run functions",
        "c_mode_functions": "their definitions",
    },
    "bench": {  # project/bench/bench.cu.j2
        "hooks_header": "the include of the backend's bench hooks",
        "hooks": "the bench hooks object the shared driver calls",
    },
    "torch": {  # torch/ (generate --torch): op.cpp.j2 and README.md.j2
        "run_cases": "the op's run() cases for the backend's modes",
        "readme_auto": "the README's words on mode='auto'",
    },
}


@runtime_checkable
class Backend(Protocol):
    """One kind of generated project."""

    #: The row of cusync_gen.backends.BACKENDS (a plan's `backend`), also the template folder's name.
    NAME: str
    #: The architecture facts its kernels have (cusync_gen.spec.archs).
    FACTS: ArchFacts
    #: Templates of its folder (or another backend's) that shared templates include, by part (PART_MACROS).
    PARTS: Mapping[str, str]
    #: What manifest.json says of the project's kind, beyond the common keys.
    MANIFEST: Mapping[str, Any]
    #: `cusync-gen tune`: the threadblocks tried on every GEMM stage, and the tile orders timed.
    TUNE_TILES: tuple[tuple[int, int, int], ...]
    TUNE_ORDERS: tuple[str, ...]
    #: The `generate --torch` op's backend roles.
    TORCH: TorchRoles

    def supports(self, spec: Any) -> Support:
        """Whether this backend emits `spec` (a parsed spec), and why not."""
        ...

    def files(self, plan: Any) -> list[OutputFile]:
        """Every file of the project, in a fixed order, each with its template."""
        ...

    def context(self, plan: Any, f: OutputFile) -> dict:
        """What the template of `f` sees besides the plan."""
        ...

    def manifest_stages(self, plan: Any) -> list[dict]:
        """The manifest's `stages`."""
        ...

    def prove(self, plan: Any) -> None:
        """The proofs before anything is rendered (raises on the first gap)."""
        ...

    def tune_pipeline(self, threadblock: tuple[int, int, int]) -> int | None:
        """The pipeline depth `tune` gives a variant with this threadblock (None: the kernel sizes it)."""
        ...
