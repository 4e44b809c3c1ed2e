"""The generated project as a CMake package (issue 12, item 1), and the repository's superbuild.

Fast: what the rendered CMakeLists.txt says for every shipped example (alias target, usage requirements,
install and export, options); the installed headers are exactly the public C++ and C headers and what
they include (never <name>_testing.h), and compile with a plain host compiler (the C one as C89 and C99); the architecture check, run in cmake's script mode; configure-only
runs (cmake and nvcc, nothing compiled) of a parent project that takes two_gemm by FetchContent after
setting 75 and then 80, and of the top-level superbuild.
`nvcc` tier: two_gemm built, installed, and used by a host-only C++ and C project through find_package.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, REPO
from cusync_gen import __version__
from cusync_gen.build import find_tool, read_manifest
from cusync_gen.errors import ToolError
from cusync_gen.render import generate, output_files, plan_of_spec, render_project
from cusync_gen.spec import load_spec

SPECS = REPO / "cusync_gen" / "examples"
HOPPER = {"90a"}  # the cuda_arch of the sm90 backend


@functools.lru_cache(maxsize=None)
def rendered(name: str) -> dict[str, str]:
    return render_project(plan_of_spec(load_spec(SPECS / f"{name}.yaml")))


def tool(name: str) -> str:
    try:
        return find_tool(name)
    except ToolError:
        pytest.skip(f"{name} not found")


def run(command: list[str], cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd)


def configure(source: Path, build: Path, *definitions: str) -> subprocess.CompletedProcess[str]:
    """cmake's configure step (Ninja where there is one), nothing compiled."""
    command = [tool("cmake"), "-S", str(source), "-B", str(build), f"-DCMAKE_CUDA_COMPILER={tool('nvcc')}",
               *(f"-D{d}" for d in definitions)]
    if shutil.which("ninja") and not (build / "CMakeCache.txt").exists():
        command += ["-G", "Ninja"]
    return run(command)


def block(text: str, opener: str) -> list[str]:
    """The lines of the if/elseif block that starts with the line `opener`, up to its closing `endif()`."""
    lines = text.splitlines()
    start = lines.index(opener)
    end = next(i for i in range(start, len(lines)) if lines[i] == "endif()")
    return lines[start:end + 1]


def install_files(cmake: str) -> dict[str, str]:
    """install(FILES a b DESTINATION "d") statements: file -> destination."""
    found: dict[str, str] = {}
    for files, destination in re.findall(r'install\(FILES\s+(.*?)\s+DESTINATION\s+"([^"]*)"\)', cmake, re.DOTALL):
        for f in files.split():
            found[f.strip('"')] = destination
    return found


def header_closure(files: dict[str, str], header: str) -> set[str]:
    """`header` (a path under include/) and every project header it includes, transitively."""
    seen: set[str] = set()
    todo = [header]
    while todo:
        current = todo.pop()
        if current in seen:
            continue
        seen.add(current)
        for included in re.findall(r'^#include "([^"]+)"', files[f"include/{current}"], re.MULTILINE):
            sibling = str(Path(current).parent / included) if "/" in current else included
            todo.append(sibling if f"include/{sibling}" in files else included)
    return seen


# --------------------------------------------------------------------------------------------------
# What the rendered CMakeLists.txt says


@pytest.mark.parametrize("name", EXAMPLES)
def test_library_target_carries_its_usage_requirements(name: str) -> None:
    cmake = rendered(name)["CMakeLists.txt"]
    assert f"add_library({name}::{name} ALIAS {name})" in cmake
    assert "find_package(CUDAToolkit REQUIRED)" in cmake
    assert f"target_link_libraries({name} PUBLIC CUDA::cudart)" in cmake
    assert (f"PUBLIC  $<BUILD_INTERFACE:${{CMAKE_CURRENT_SOURCE_DIR}}/include> "
            f"$<INSTALL_INTERFACE:${{CMAKE_INSTALL_INCLUDEDIR}}/{name}>") in cmake
    cutlass = [line for line in cmake.splitlines() if "${CUTLASS_DIR}/" in line and line.startswith("target_")]
    assert cutlass and all(f"target_include_directories({name} SYSTEM PRIVATE " in line for line in cutlass)


@pytest.mark.parametrize("name", EXAMPLES)
def test_install_export_and_config_files(name: str) -> None:
    files = rendered(name)
    cmake = files["CMakeLists.txt"]
    assert f"project({name} VERSION {__version__} LANGUAGES CXX CUDA)" in cmake
    for line in (f"install(TARGETS {name} EXPORT {name}Targets",
                 f"install(EXPORT {name}Targets NAMESPACE {name}:: DESTINATION",
                 f"export(EXPORT {name}Targets NAMESPACE {name}:: FILE",
                 f"configure_package_config_file(cmake/{name}Config.cmake.in",
                 f'write_basic_package_version_file("${{CMAKE_CURRENT_BINARY_DIR}}/{name}ConfigVersion.cmake"'):
        assert line in cmake
    assert f"cmake/{name}Config.cmake.in" in {f.path for f in output_files(plan_of_spec(load_spec(SPECS / f"{name}.yaml")))}
    config = files[f"cmake/{name}Config.cmake.in"]
    for line in ("@PACKAGE_INIT@", "find_dependency(CUDAToolkit)", f'include("${{CMAKE_CURRENT_LIST_DIR}}/{name}Targets.cmake")',
                 f"check_required_components({name})"):
        assert line in config


@pytest.mark.parametrize("name", EXAMPLES)
def test_bench_and_checks_only_under_their_options(name: str) -> None:
    cmake = rendered(name)["CMakeLists.txt"]
    upper = name.upper()
    for option in ("BUILD_BENCH", "BUILD_TESTS"):
        assert re.search(rf'^option\({upper}_{option} ".*" \$\{{PROJECT_IS_TOP_LEVEL\}}\)$', cmake, re.MULTILINE)
    bench = block(cmake, f"if({upper}_BUILD_BENCH)")
    checks = block(cmake, f"elseif({upper}_BUILD_TESTS)")
    for call, where in (("add_executable(", bench), ("add_test(", checks), ("enable_testing(", checks)):
        assert [line for line in cmake.splitlines() if call in line] == [line for line in where if call in line] != []
    assert f"if({upper}_BUILD_TESTS AND NOT TARGET {name}_bench)" in cmake  # tests without the bench: a note


@pytest.mark.parametrize("name", EXAMPLES)
def test_installed_headers_are_the_public_header_and_what_it_includes(name: str, tmp_path: Path) -> None:
    """Exactly those headers are installed, each where the header's #include finds it; none is a kernel
    header or touches CUTLASS; from that installed tree alone, a host C++ compiler compiles the header and a C
    compiler (C89 and C99, pedantic) the C ABI's."""
    files = rendered(name)
    installed = {f: d for f, d in install_files(files["CMakeLists.txt"]).items() if f.startswith("include/")}
    closure = header_closure(files, f"{name}.h") | header_closure(files, f"{name}_c.h")
    assert {f.removeprefix("include/") for f in installed} == closure
    assert f"{name}_testing.h" not in closure and f"include/{name}_testing.h" in files
    for header in closure:
        assert header.endswith(".h") and not re.search(r'#include\s*[<"](cutlass|cute)/', files[f"include/{header}"]), header
        folder = str(Path(header).parent)
        assert installed[f"include/{header}"] == f"${{CMAKE_INSTALL_INCLUDEDIR}}/{name}" + ("" if folder == "." else f"/{folder}")
    cxx = shutil.which("c++") or shutil.which("g++")
    cuda_include = next((p for p in _cuda_include_candidates() if (p / "cuda_runtime.h").is_file()), None)
    if cxx is None or cuda_include is None:
        pytest.skip("no host C++ compiler or CUDA headers")
    prefix = tmp_path / "include" / name
    for header in closure:
        (prefix / header).parent.mkdir(parents=True, exist_ok=True)
        (prefix / header).write_text(files[f"include/{header}"])
    main = tmp_path / "main.cpp"
    main.write_text(f'#include "{name}.h"\nint main() {{ return 0; }}\n')
    out = run([cxx, "-std=c++17", "-Wall", "-Wextra", "-Werror", "-fsyntax-only", f"-I{prefix}", f"-I{cuda_include}", str(main)])
    assert out.returncode == 0, out.stderr[-3000:]
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no host C compiler")
    main_c = tmp_path / "main.c"
    main_c.write_text(f'#include "{name}_c.h"\nint main(void) {{ return 0; }}\n')
    for std in ("c89", "c99"):  # CUDA's own headers are not pedantic-clean: -isystem
        out = run([cc, f"-std={std}", "-Wall", "-Wextra", "-Werror", "-pedantic", "-fsyntax-only", f"-I{prefix}",
                   "-isystem", str(cuda_include), str(main_c)])
        assert out.returncode == 0, (std, out.stderr[-3000:])


def _cuda_include_candidates() -> list[Path]:
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        roots.append(str(Path(nvcc).resolve().parent.parent))
    return [Path(r) / "include" for r in roots if r]


# --------------------------------------------------------------------------------------------------
# The architecture check, in cmake's script mode

ARCH_CASES = [
    # (example, CMAKE_CUDA_ARCHITECTURES, accepted)
    *(("two_gemm", archs, True) for archs in ("80", "86", "90", "90a", "100a", "80-real", "80-virtual", "75;80-real", "all-major")),
    *(("two_gemm", archs, False) for archs in ("75", "70;75-real", "OFF", "", "native")),
    *(("gpt3_attention", archs, ok) for archs, ok in (("80", True), ("75", False))),
    *(("two_gemm_sm90", archs, True) for archs in ("90a", "90a-real", "80;90a-virtual")),
    *(("two_gemm_sm90", archs, False) for archs in ("90", "80", "100a", "75", "all-major", "native")),
]


@pytest.mark.parametrize(("name", "archs", "accepted"), ARCH_CASES)
def test_architecture_check(name: str, archs: str, accepted: bool, tmp_path: Path) -> None:
    """The check's lines, run as a script with what CMake resolves native/all-major to on a T4 machine."""
    cmake = tool("cmake")
    lines = rendered(name)["CMakeLists.txt"].splitlines()
    first = lines.index('set(_cusync_archs "${CMAKE_CUDA_ARCHITECTURES}")')
    last = next(i for i in range(first, len(lines)) if "message(FATAL_ERROR" in lines[i])
    last = lines.index("endif()", last)
    script = tmp_path / "check.cmake"
    script.write_text('set(CMAKE_CUDA_ARCHITECTURES_NATIVE "75-real")\n'
                      'set(CMAKE_CUDA_ARCHITECTURES_ALL_MAJOR "75-real;80-real;90-real;100-real")\n'
                      + "\n".join(lines[first:last + 1]) + '\nmessage(STATUS "accepted")\n')
    out = run([cmake, f"-DCMAKE_CUDA_ARCHITECTURES={archs}", "-P", str(script)])
    if accepted:
        assert out.returncode == 0 and "accepted" in out.stdout, out.stderr
        return
    message = " ".join(out.stderr.split())
    assert out.returncode != 0 and "accepted" not in out.stdout
    assert f'{name}: CMAKE_CUDA_ARCHITECTURES is "{archs}"' in message, message
    need = "need 90a" if name.endswith("_sm90") else "need 80 or newer"
    fix = "-DCMAKE_CUDA_ARCHITECTURES=90a" if name.endswith("_sm90") else "-DCMAKE_CUDA_ARCHITECTURES=80"
    assert need in message and fix in message, message


# --------------------------------------------------------------------------------------------------
# Configure-only runs: a parent project, and the superbuild

PARENT = """\
cmake_minimum_required(VERSION 3.24)
project(parent LANGUAGES CXX CUDA)
include(FetchContent)
FetchContent_Declare(two_gemm SOURCE_DIR "${TWO_GEMM_SOURCE}")
FetchContent_MakeAvailable(two_gemm)
if(TARGET two_gemm_bench)
  message(FATAL_ERROR "the bench is built under a parent project")
endif()
add_executable(app main.cpp)
target_link_libraries(app PRIVATE two_gemm::two_gemm)
"""


def test_parent_project_takes_it_by_fetchcontent_and_must_build_for_80(tmp_path: Path, cutlass_dir: Path) -> None:
    """A parent that set 75 stops at configure with the message; with 80 it configures, without the
    bench or its checks."""
    parent = tmp_path / "parent"
    parent.mkdir()
    (parent / "CMakeLists.txt").write_text(PARENT)
    (parent / "main.cpp").write_text('#include "two_gemm.h"\nint main() { return 0; }\n')
    build = tmp_path / "build"
    common = (f"TWO_GEMM_SOURCE={REPO / 'generated' / 'two_gemm'}", f"CUTLASS_DIR={cutlass_dir}")
    out = configure(parent, build, "CMAKE_CUDA_ARCHITECTURES=75", *common)
    message = " ".join(out.stderr.split())
    assert out.returncode != 0
    assert 'two_gemm: CMAKE_CUDA_ARCHITECTURES is "75" (set by a parent project or on the command line), but the ' \
           "kernels of this sm80 chain need 80 or newer" in message, out.stderr[-3000:]
    out = configure(parent, build, "CMAKE_CUDA_ARCHITECTURES=80", *common)
    assert out.returncode == 0, out.stderr[-3000:]
    listed = run([tool("ctest"), "--test-dir", str(build), "-N"])
    assert "Total Tests: 0" in listed.stdout, listed.stdout


def _checks(name: str) -> set[str]:
    return set(re.findall(r"add_test\(NAME (\S+)", (REPO / "generated" / name / "CMakeLists.txt").read_text()))


def test_superbuild_configures_every_generated_project(tmp_path: Path, cutlass_dir: Path) -> None:
    projects = sorted(p.name for p in (REPO / "generated").iterdir() if (p / "manifest.json").is_file())
    build = tmp_path / "build"
    out = configure(REPO, build, f"CUTLASS_DIR={cutlass_dir}", "CMAKE_CUDA_ARCHITECTURES=90")
    assert out.returncode == 0, out.stderr[-3000:]
    for name in projects:  # the sm80 backend takes the architecture given, sm90 keeps 90a
        manifest = read_manifest(REPO / "generated" / name)
        archs = manifest["cuda_arch"] if manifest["cuda_arch"] in HOPPER else "90"
        assert f"-- {name}: {manifest['arch']} backend, CUDA architectures {archs}\n" in out.stdout
    listed = run([tool("ctest"), "--test-dir", str(build), "-N"])
    found = set(re.findall(r"Test +#\d+: (\S+)", listed.stdout))
    assert found == set().union(*map(_checks, projects)) and len(found) >= len(projects)
    out = configure(REPO, build, "CUSYNC_PROJECTS=two_gemm;no_such_project")
    assert out.returncode != 0
    assert "CUSYNC_PROJECTS names no_such_project, but generated/ has no such project" in " ".join(out.stderr.split())


# --------------------------------------------------------------------------------------------------
# nvcc tier: build, install, find_package from a host-only project

CONSUMER = """\
cmake_minimum_required(VERSION 3.24)
project(consumer LANGUAGES C CXX)
find_package(two_gemm 0.1 CONFIG REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE two_gemm::two_gemm)
add_executable(consumer_c main.c)
set_target_properties(consumer_c PROPERTIES C_STANDARD 99 C_STANDARD_REQUIRED ON)
target_link_libraries(consumer_c PRIVATE two_gemm::two_gemm)
"""

CONSUMER_MAIN = """\
#include <cstdio>

#include "two_gemm.h"

// Links every entry point it names; calls into CUDA only with an argument (there may be no GPU).
int main(int argc, char**) {
  two_gemm::TwoGemm chain;
  if (argc > 1) {
    two_gemm::Arguments args;
    args.m = 1;
    if (chain.initialize(args) != cusync::Status::kSuccess || chain.run(nullptr) != cusync::Status::kSuccess) return 1;
    if (chain.check_sync_error() != cusync::Status::kSuccess) return 1;
  }
  std::printf("%s\\n", two_gemm::TwoGemm::stage_name(0));
  return 0;
}
"""


CONSUMER_C = """\
#include <stdio.h>

#include "two_gemm_c.h"

/* Links every C entry point; calls into CUDA only with an argument (there may be no GPU). */
int main(int argc, char** argv) {
  two_gemm_chain* chain = NULL;
  two_gemm_arguments args = {0};
  int status;
  (void)argv;
  if (two_gemm_create(&chain) != TWO_GEMM_SUCCESS) return 1;
  status = two_gemm_run(chain, 0);  /* before initialize */
  printf("%s\\n", two_gemm_status_string(status));
  if (two_gemm_initialize(chain, NULL, 0, 0) != TWO_GEMM_INVALID_ARGUMENT) return 1;
  if (two_gemm_run(NULL, 0) != TWO_GEMM_INVALID_ARGUMENT) return 1;
  if (argc > 1) {
    args.m = 1;
    if (two_gemm_initialize(chain, &args, 0, 0) != TWO_GEMM_SUCCESS || two_gemm_update(chain, &args) != TWO_GEMM_SUCCESS ||
        two_gemm_run(chain, 0) != TWO_GEMM_SUCCESS || two_gemm_run_sequential(chain, 0) != TWO_GEMM_SUCCESS ||
        two_gemm_check_sync_error(chain, 0) != TWO_GEMM_SUCCESS)
      return 1;
  }
  return two_gemm_destroy(chain);
}
"""


@pytest.mark.nvcc
def test_installed_package_is_found_by_a_host_only_project(tmp_path: Path, cutlass_dir: Path) -> None:
    project = generate(SPECS / "two_gemm.yaml", tmp_path / "two_gemm")
    build, prefix = tmp_path / "build", tmp_path / "prefix"
    cmake = tool("cmake")
    jobs = str(os.cpu_count() or 2)
    out = configure(project, build, "CMAKE_CUDA_ARCHITECTURES=80", "TWO_GEMM_BUILD_BENCH=OFF",
                    f"CUTLASS_DIR={cutlass_dir}", f"CMAKE_INSTALL_PREFIX={prefix}")
    assert out.returncode == 0, out.stderr[-3000:]
    for step in ([cmake, "--build", str(build), "-j", jobs], [cmake, "--install", str(build)]):
        out = run(step)
        assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert not (build / "two_gemm_bench").exists()
    installed = {p.relative_to(prefix).as_posix() for p in prefix.rglob("*") if p.is_file()}
    headers = {p for p in installed if p.startswith("include/")}
    assert headers == {"include/two_gemm/two_gemm.h", "include/two_gemm/two_gemm_c.h",
                       *(f"include/two_gemm/cusync/{h}" for h in ("policy.h", "status.h", "sync_error.h", "tile_order.h",
                                                                  "chain.h", "sm80/chain.h"))}
    names = {Path(p).name for p in installed - headers}
    assert names == {"libtwo_gemm.a", "two_gemmConfig.cmake", "two_gemmConfigVersion.cmake", "two_gemmTargets.cmake",
                     "two_gemmTargets-release.cmake"}, installed

    consumer = tmp_path / "consumer"
    consumer.mkdir()
    (consumer / "CMakeLists.txt").write_text(CONSUMER)
    (consumer / "main.cpp").write_text(CONSUMER_MAIN)
    (consumer / "main.c").write_text(CONSUMER_C)
    consumer_build = tmp_path / "consumer_build"
    command = [cmake, "-S", str(consumer), "-B", str(consumer_build), f"-DCMAKE_PREFIX_PATH={prefix}"]
    for step in (command, [cmake, "--build", str(consumer_build)]):
        out = run(step)
        assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    out = run([str(consumer_build / "consumer")])  # host code only: no GPU needed
    assert out.returncode == 0 and out.stdout == "gemm1\n", out.stdout + out.stderr
    out = run([str(consumer_build / "consumer_c")])  # the C ABI, no GPU needed either
    assert out.returncode == 0 and out.stdout == "not initialized\n", out.stdout + out.stderr


EMBED = REPO / "examples" / "embed"


def build_embed_app(tmp_path: Path, cutlass_dir: Path, arch: str) -> dict[str, Path]:
    """examples/embed built by both routes: add_subdirectory of generated/two_gemm (the library compiled
    with the app), then find_package against that library installed from the same build (`cmake --install`
    of its subfolder). Returns each route's embed_app."""
    cmake = tool("cmake")
    jobs = str(os.cpu_count() or 2)
    apps: dict[str, Path] = {}
    source_build = tmp_path / "embed_subdirectory"
    out = configure(EMBED, source_build, f"EMBED_CHAIN_DIR={REPO / 'generated' / 'two_gemm'}",
                    f"CUTLASS_DIR={cutlass_dir}", f"CMAKE_CUDA_ARCHITECTURES={arch}")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = run([cmake, "--build", str(source_build), "-j", jobs])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert not (source_build / "two_gemm" / "two_gemm_bench").exists()  # a parent project gets the library only
    apps["add_subdirectory"] = source_build / "embed_app"

    prefix = tmp_path / "prefix"
    out = run([cmake, "--install", str(source_build / "two_gemm"), "--prefix", str(prefix)])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    package_build = tmp_path / "embed_find_package"
    out = run([cmake, "-S", str(EMBED), "-B", str(package_build), f"-DCMAKE_PREFIX_PATH={prefix}"])
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = run([cmake, "--build", str(package_build)])
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    apps["find_package"] = package_build / "embed_app"
    return apps


@pytest.mark.nvcc
def test_embed_example_builds_by_both_routes(tmp_path: Path, cutlass_dir: Path) -> None:
    """examples/embed (issue 12 item 5), as CI builds it without a GPU: the host-only C++ app links
    two_gemm::two_gemm through add_subdirectory and through find_package; with no GPU it says so (exit 2).
    tests/test_gpu.py builds and runs both on the GPU."""
    apps = build_embed_app(tmp_path, cutlass_dir, "80")
    from conftest import gpu_present

    if not gpu_present():
        for app in apps.values():
            out = run([str(app)])
            assert out.returncode == 2 and "no CUDA device" in out.stdout, out.stdout + out.stderr
