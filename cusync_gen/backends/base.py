"""What every backend shares: the description of one output file, and the files every project has."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OutputFile:
    """One file of a generated project: rendered from a template or copied verbatim."""

    path: str
    source: str
    template: bool
    stage: int | None = None
    field: str | None = None  # the spec field its name comes from ("name", "stages[1].name"), if any


def config_file(name: str) -> OutputFile:
    """What CMakeLists.txt configures into <name>Config.cmake, the file find_package(<name> CONFIG) reads."""
    return OutputFile(f"cmake/{name}Config.cmake.in", "project/cmake/Config.cmake.in.j2", True, field="name")


def find_cutlass_file() -> OutputFile:
    """The CMake module that finds CUTLASS for the project (the same in every project, copied)."""
    return OutputFile("cmake/cusync_find_cutlass.cmake", "project/cmake/cusync_find_cutlass.cmake", False)


def runtime_files(headers: tuple[str, ...]) -> list[OutputFile]:
    """Headers of the backend-independent runtime (templates/runtime/include/cusync/), copied."""
    return [OutputFile(f"include/cusync/{h}", f"runtime/include/cusync/{h}", False) for h in headers]


def backend_files(folder: str, headers: tuple[str, ...]) -> list[OutputFile]:
    """Headers of one backend (templates/<folder>/include/cusync/<folder>/), copied."""
    return [OutputFile(f"include/cusync/{folder}/{h}", f"{folder}/include/cusync/{folder}/{h}", False) for h in headers]


def bench_runtime_files(headers: tuple[str, ...]) -> list[OutputFile]:
    """The runtime's bench-driver headers (templates/runtime/include/cusync/bench/), copied into bench/:
    the bench target finds them there, and the library's include folder stays library code only."""
    return [OutputFile(f"bench/cusync/bench/{h}", f"runtime/include/cusync/bench/{h}", False) for h in headers]


def bench_backend_files(folder: str) -> list[OutputFile]:
    """A backend's bench hooks (templates/<folder>/include/cusync/<folder>/bench.cuh), copied into bench/."""
    return [OutputFile(f"bench/cusync/{folder}/bench.cuh", f"{folder}/include/cusync/{folder}/bench.cuh", False)]
