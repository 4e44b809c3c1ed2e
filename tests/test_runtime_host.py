"""Host-side tests of the CuSync runtime headers: policy index math and tile orders.

The headers are host+device code, so nvcc compiles the checks; they run on the CPU (no GPU needed).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, epoch_wrap_header

pytestmark = pytest.mark.nvcc


def test_policy_math_on_host(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    exe = tmp_path / "policy_math"
    build = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "runtime" / "include"),
                            str(REPO / "tests" / "runtime" / "policy_math.cu"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "0 failures" in out.stdout


def test_epoch_wrap_driver_compiles(tmp_path: Path) -> None:
    """The GPU test's driver (tests/runtime/epoch_wrap.cu) compiles against a generated chain's public
    header, so the GPU machine never finds it broken."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    build = subprocess.run([nvcc, "-std=c++17", "-arch=sm_80", "-c", "-I", str(REPO / "generated" / "two_gemm" / "include"),
                            "-I", str(epoch_wrap_header("two_gemm", tmp_path)),
                            str(REPO / "tests" / "runtime" / "epoch_wrap.cu"), "-o", str(tmp_path / "epoch_wrap.o")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
