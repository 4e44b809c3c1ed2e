"""The interface every backend declares: `Backend`, what an architecture knows above the plan, and
`Support`, its answer to "can you emit this spec?".

A backend is a module of this package (`sm80`, `sm90`, `attention`) that has every member of `Backend`
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
