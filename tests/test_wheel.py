"""The wheel works on its own: built from the sources, installed into a fresh virtual environment outside the
repository, its `cusync-gen` validates, generates, checks and copies the shipped examples from a folder of
its own, importing cusync_gen from the environment and never from this checkout.

Offline: the wheel is built without build isolation (setuptools and wheel from this interpreter) and the
environment sees this interpreter's site-packages for jinja2, pydantic, typer, pyyaml and rich; the wheel
itself is installed with --no-deps. No GPU, no nvcc. About 15-30 s.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import REPO

# What the wheel is built from: the copy keeps the build's build/ and *.egg-info out of the checkout.
SOURCES = ("pyproject.toml", "README.md", "cusync_gen", "templates", "docs")


def _can_build_wheels() -> bool:
    """setuptools >= 70.1 builds wheels itself; an older one needs the `wheel` package (the test extra)."""
    try:
        import setuptools
    except ImportError:
        return False
    major, minor = (int(x) for x in setuptools.__version__.split(".")[:2])
    if (major, minor) >= (70, 1):
        return True
    try:
        import wheel  # noqa: F401
    except ImportError:
        return False
    return True


def _sources_in_checkout(folder: str, pattern: str) -> set[str]:
    root = REPO / folder
    return {p.relative_to(root).as_posix() for p in root.rglob(pattern)
            if p.is_file() and "__pycache__" not in p.parts}


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _can_build_wheels():
        pytest.skip("building a wheel offline needs setuptools >= 70.1 or the wheel package: "
                    "python3 -m pip install -e '.[test]'")
    src = tmp_path_factory.mktemp("src")
    for name in SOURCES:
        if (REPO / name).is_dir():
            shutil.copytree(REPO / name, src / name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        else:
            shutil.copy2(REPO / name, src / name)
    dist = tmp_path_factory.mktemp("dist")
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                           "-w", str(dist), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    (built,) = dist.glob("cusync_gen-*.whl")
    return built


@pytest.fixture(scope="module")
def installed(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A fresh venv (outside the repository, seeing this interpreter's packages) with the wheel in it;
    returns its bin/ folder."""
    env_dir = tmp_path_factory.mktemp("venv") / "env"
    assert REPO not in env_dir.parents
    venv.EnvBuilder(system_site_packages=True, with_pip=False, symlinks=True).create(env_dir)
    python = env_dir / "bin" / "python"
    # The venv has no pip of its own: this interpreter's, seen through --system-site-packages, installs into it.
    proc = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", "--force-reinstall", "--no-index",
                           str(wheel)], capture_output=True, text=True, timeout=300, cwd=env_dir,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return env_dir / "bin"


def _clean_env(tmp: Path) -> dict[str, str]:
    """No PYTHONPATH (this checkout), no CUTLASS_DIR, a HOME of the test's own."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "CUTLASS_DIR", "XDG_CACHE_HOME")}
    env["HOME"] = str(tmp / "home")
    return env


def _run(bindir: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(bindir / "cusync-gen"), *args], cwd=cwd, capture_output=True, text=True,
                          env=_clean_env(cwd), timeout=120)


def test_pyproject_names_every_subpackage() -> None:
    tomllib = pytest.importorskip("tomllib")
    listed = set(tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {".".join(p.parent.relative_to(REPO).parts) for p in (REPO / "cusync_gen").rglob("__init__.py")}
    assert found - listed == set(), "add these to [tool.setuptools] packages in pyproject.toml"


def test_wheel_holds_every_module_template_example_and_doc(wheel: Path) -> None:
    names = set(zipfile.ZipFile(wheel).namelist())
    expected = {f"cusync_gen/{p}" for p in _sources_in_checkout("cusync_gen", "*.py")}
    expected |= {f"cusync_gen/examples/{p}" for p in _sources_in_checkout("cusync_gen/examples", "*.yaml")}
    expected |= {f"cusync_gen/templates/{p}" for p in _sources_in_checkout("templates", "*")}
    expected |= {f"cusync_gen/docs/{p}" for p in _sources_in_checkout("docs", "*.md")}
    assert expected - names == set()


def test_installed_wheel_runs_from_a_folder_of_its_own(installed: Path, tmp_path: Path) -> None:
    work = tmp_path / "work"
    work.mkdir()
    # cusync_gen comes from the venv, not from this checkout (no editable install shadows it).
    proc = subprocess.run([str(installed / "python"), "-I", "-c", "import cusync_gen; print(cusync_gen.__file__)"],
                          cwd=work, capture_output=True, text=True, env=_clean_env(work), timeout=60)
    assert proc.returncode == 0, proc.stderr
    module = Path(proc.stdout.strip())
    assert installed.parent in module.parents and REPO not in module.parents, module

    proc = _run(installed, work, "validate", "gpt3_mlp_sm90")
    assert proc.returncode == 0 and "OK" in proc.stdout, proc.stdout + proc.stderr
    proc = _run(installed, work, "validate", "gpt3_attention", "--m", "1", "--batch", "2", "--cache", "31")
    assert proc.returncode == 0, proc.stdout + proc.stderr

    for name in ("gpt3_mlp_sm90", "llama_attention"):
        proc = _run(installed, work, "generate", name, "-o", f"out/{name}")
        assert proc.returncode == 0, proc.stdout + proc.stderr
        proc = _run(installed, work, "generate", name, "-o", f"out/{name}", "--check")
        assert proc.returncode == 0 and "up to date" in proc.stdout, proc.stdout + proc.stderr
        # What the wheel generates is what the checkout generates (the committed goldens).
        for f in (REPO / "generated" / name).rglob("*"):
            if f.is_file() and "build" not in f.relative_to(REPO / "generated" / name).parts:
                rel = f.relative_to(REPO / "generated" / name)
                assert (work / "out" / name / rel).read_bytes() == f.read_bytes(), rel

    proc = _run(installed, work, "init", "two_gemm")
    assert proc.returncode == 0 and (work / "two_gemm.yaml").is_file(), proc.stdout + proc.stderr
    proc = _run(installed, work, "generate", "two_gemm.yaml", "-o", "mine")
    assert proc.returncode == 0 and (work / "mine" / "cmake" / "cusync_find_cutlass.cmake").is_file(), proc.stderr
    proc = _run(installed, work, "init", "--list")
    assert proc.returncode == 0 and "gpt3_attention" in proc.stdout

    # The docs that the hints name ship with it.
    proc = _run(installed, work, "docs", "spec-format")
    assert proc.returncode == 0 and proc.stdout.startswith("#"), proc.stderr
    # fetch-cutlass's default folder is the user cache, and its help says so.
    proc = _run(installed, work, "fetch-cutlass", "--help")
    assert proc.returncode == 0 and ".cache/cusync-gen/cutlass" in " ".join(proc.stdout.split())
