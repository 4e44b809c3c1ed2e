"""A generated project is portable: no path of the machine that generated it goes into any file, and it
finds CUTLASS where it is configured (cmake/cusync_find_cutlass.cmake: -DCUTLASS_DIR, $ENV{CUTLASS_DIR},
find_package(NvidiaCutlass), the nvidia-cutlass pip wheel, ~/.cache/cusync-gen/cutlass).

Configuring the project itself needs nvcc (LANGUAGES CUDA), so the finding logic runs here in CMake's
script mode (`cmake -P`), from the moved project's own copy of the module; no GPU, no nvcc.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import EXAMPLES, REPO
from cusync_gen.render import generate

MODULE = Path("cmake") / "cusync_find_cutlass.cmake"


def _cutlass() -> Path:
    """The CUTLASS headers (third_party/cutlass or $CUTLASS_DIR, fetched by `cusync-gen fetch-cutlass`)."""
    for root in (os.environ.get("CUTLASS_DIR"), REPO / "third_party" / "cutlass"):
        if root and (Path(root) / "include" / "cutlass" / "cutlass.h").is_file():
            return Path(root)
    pytest.skip("CUTLASS headers missing: run `cusync-gen fetch-cutlass` or set CUTLASS_DIR")


def _cmake() -> str:
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not found")
    return cmake


def _find(project: Path, tmp_path: Path, args: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """Run the project's cusync_find_cutlass.cmake in script mode from an unrelated folder; its
    CUTLASS_DIR lands in stdout as `CUTLASS_DIR=<dir>`."""
    driver = tmp_path / "driver.cmake"
    driver.write_text(f'include("{project / MODULE}")\nmessage(NOTICE "CUTLASS_DIR=${{CUTLASS_DIR}}")\n')
    base = {k: v for k, v in os.environ.items() if k not in ("CUTLASS_DIR", "XDG_CACHE_HOME")}
    # A HOME without a cache and a python3 without the nvidia-cutlass wheel: only what the test names counts.
    base.update(HOME=str(tmp_path / "home"), **env)
    args = [*args, "-DCUSYNC_CUTLASS_PYTHON=" + str(tmp_path / "no-python")] if not any(
        a.startswith("-DCUSYNC_CUTLASS_PYTHON") for a in args) else args
    return subprocess.run([_cmake(), *args, "-P", str(driver)], capture_output=True, text=True, env=base,
                          cwd=tmp_path)


def _words(text: str) -> str:
    """CMake wraps an error's lines: the text with every run of white space one blank."""
    return " ".join(text.split())


def _found(proc: subprocess.CompletedProcess[str]) -> Path:
    assert proc.returncode == 0, proc.stdout + proc.stderr
    line = next(line for line in proc.stderr.splitlines() if line.startswith("CUTLASS_DIR="))
    return Path(line.removeprefix("CUTLASS_DIR="))


@pytest.fixture
def moved(tmp_path: Path) -> Path:
    """gpt3_mlp generated into one folder, then moved to another."""
    first = generate(REPO / "cusync_gen" / "examples" / "gpt3_mlp.yaml", tmp_path / "gen" / "gpt3_mlp")
    moved = tmp_path / "elsewhere" / "deep" / "gpt3_mlp"
    moved.parent.mkdir(parents=True)
    shutil.move(str(first), str(moved))
    return moved


def test_moved_project_finds_cutlass_by_option_and_environment(moved: Path, tmp_path: Path) -> None:
    cutlass = _cutlass()
    assert _found(_find(moved, tmp_path, [f"-DCUTLASS_DIR={cutlass}"], {})) == cutlass
    assert _found(_find(moved, tmp_path, [], {"CUTLASS_DIR": str(cutlass)})) == cutlass
    # -DCUTLASS_DIR wins over the environment
    other = tmp_path / "other"
    other.mkdir()
    proc = _find(moved, tmp_path, [f"-DCUTLASS_DIR={cutlass}"], {"CUTLASS_DIR": str(other)})
    assert _found(proc) == cutlass


def test_moved_project_finds_the_fetch_cutlass_cache(moved: Path, tmp_path: Path) -> None:
    cutlass = _cutlass()
    cache = tmp_path / "home" / ".cache" / "cusync-gen"
    cache.mkdir(parents=True)
    (cache / "cutlass").symlink_to(cutlass.resolve(), target_is_directory=True)
    assert _found(_find(moved, tmp_path, [], {})) == cache / "cutlass"
    xdg = tmp_path / "xdg" / "cusync-gen"
    xdg.mkdir(parents=True)
    (xdg / "cutlass").symlink_to(cutlass.resolve(), target_is_directory=True)
    assert _found(_find(moved, tmp_path, [], {"XDG_CACHE_HOME": str(tmp_path / "xdg")})) == xdg / "cutlass"


def test_moved_project_finds_the_pip_wheel(moved: Path, tmp_path: Path) -> None:
    """A python3 whose cutlass_library package holds source/include (the nvidia-cutlass wheel's layout)."""
    cutlass = _cutlass()
    site = tmp_path / "site" / "cutlass_library"
    site.mkdir(parents=True)
    (site / "__init__.py").write_text("raise ImportError('the module finds the package without importing it')\n")
    (site / "source").symlink_to(cutlass.resolve(), target_is_directory=True)
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\nPYTHONPATH="{tmp_path / "site"}" exec "{shutil.which("python3")}" "$@"\n')
    python.chmod(0o755)
    proc = _find(moved, tmp_path, [f"-DCUSYNC_CUTLASS_PYTHON={python}"], {})
    assert _found(proc) == site / "source"
    assert "pip wheel" in proc.stdout + proc.stderr


def test_nothing_found_is_one_error_listing_every_place(moved: Path, tmp_path: Path) -> None:
    proc = _find(moved, tmp_path, [], {})
    assert proc.returncode != 0
    text = _words(proc.stderr)
    for place in ("CUTLASS_DIR", "nvidia-cutlass pip wheel", ".cache/cusync-gen/cutlass",
                  "cusync-gen fetch-cutlass"):
        assert place in text, place


def test_a_wrong_explicit_folder_never_falls_back(moved: Path, tmp_path: Path) -> None:
    cache = tmp_path / "home" / ".cache" / "cusync-gen"
    cache.mkdir(parents=True)
    (cache / "cutlass").symlink_to(_cutlass().resolve(), target_is_directory=True)
    proc = _find(moved, tmp_path, [f"-DCUTLASS_DIR={tmp_path / 'typo'}"], {})
    assert proc.returncode != 0 and "has no include/cutlass/cutlass.h" in _words(proc.stderr)
    proc = _find(moved, tmp_path, [], {"CUTLASS_DIR": str(tmp_path / "typo")})
    assert proc.returncode != 0 and "environment variable CUTLASS_DIR" in _words(proc.stderr)


@pytest.mark.parametrize("name", EXAMPLES)
def test_no_generated_file_names_a_path_of_the_generating_machine(name: str, tmp_path: Path) -> None:
    out = generate(REPO / "cusync_gen" / "examples" / f"{name}.yaml", tmp_path / "work" / name, torch="attention" not in name)
    forbidden = {str(tmp_path), str(REPO), str(REPO.resolve()), str(Path.home()), str(_cutlass_or_none())}
    forbidden.discard("None")
    for f in sorted(p for p in out.rglob("*") if p.is_file()):
        text = f.read_text()
        for path in forbidden:
            assert path not in text, f"{f.relative_to(out)} contains {path}"


def _cutlass_or_none() -> Path | None:
    root = REPO / "third_party" / "cutlass"
    return root.resolve() if root.exists() else None


def test_the_committed_projects_carry_no_checkout_path() -> None:
    """generated/ is byte-identical wherever it is generated: no absolute path, no path out of the project."""
    for name in EXAMPLES:
        for f in (REPO / "generated" / name).rglob("*"):
            if f.is_file() and "build" not in f.relative_to(REPO / "generated" / name).parts:
                text = f.read_text()
                assert "third_party" not in text and "../.." not in text and str(REPO) not in text, f


@pytest.mark.nvcc
def test_a_moved_project_configures_for_real(tmp_path: Path) -> None:
    """CMake with nvcc (configure only, no compile) of a project generated in one folder and moved to
    another, pointed at CUTLASS through $CUTLASS_DIR as documented: it configures and finds CUTLASS there."""
    from sass import find_tool  # the tests' one lookup of nvcc (PATH, /usr/local/cuda/bin, the nvidia wheels)

    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    cutlass = _cutlass()
    first = generate(REPO / "cusync_gen" / "examples" / "two_gemm.yaml", tmp_path / "here" / "two_gemm")
    moved = tmp_path / "elsewhere" / "two_gemm"
    moved.parent.mkdir()
    shutil.move(str(first), moved)
    env = {**os.environ, "CUTLASS_DIR": str(cutlass), "CUDACXX": nvcc}
    out = subprocess.run([_cmake(), "-S", str(moved), "-B", str(tmp_path / "build"), "-DCMAKE_CUDA_ARCHITECTURES=80"],
                         capture_output=True, text=True, env=env, timeout=300)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert f"CUTLASS 4.2: {cutlass} (from the environment variable CUTLASS_DIR)" in out.stdout
    assert str(tmp_path / "here") not in (tmp_path / "build" / "CMakeCache.txt").read_text()
