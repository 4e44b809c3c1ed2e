"""The generated sm90 library's host code against misuse, on a machine without a GPU: the two_gemm_sm90 golden's
library compiled unchanged, its stage kernels replaced by launch counters (tests/host_api/stubs.cpp) and the CUDA
runtime by a simulated device (fake_cudart.cpp); misuse.cpp checks that overlapping buffers, an oversized leading
dimension, a run on another device and autotune() under stream capture are refused before anything launches,
and that the right uses next to them are accepted."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from sass import find_tool

pytestmark = pytest.mark.nvcc


def test_misuse_of_a_generated_library_is_refused_before_launch(tmp_path: Path) -> None:
    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    golden, here = REPO / "generated" / "two_gemm_sm90", REPO / "tests" / "host_api"
    inc = ["-std=c++17", "-I", str(golden / "include"), "-I", str(golden / "src")]
    steps = [
        [nvcc, *inc, "-x", "cu", "-c", str(golden / "src" / "two_gemm_sm90.cu"), "-o", str(tmp_path / "chain.o")],
        [nvcc, *inc, "-x", "cu", "-c", str(here / "stubs.cpp"), "-o", str(tmp_path / "stubs.o")],
        [nvcc, *inc, "-x", "cu", "-c", str(here / "misuse.cpp"), "-o", str(tmp_path / "misuse.o")],
        [nvcc, "-std=c++17", "-c", str(here / "fake_cudart.cpp"), "-o", str(tmp_path / "fake.o")],  # host code
        [nvcc, "-o", str(tmp_path / "misuse"), *(str(tmp_path / f) for f in ("misuse.o", "chain.o", "stubs.o", "fake.o")),
         "-cudart", "shared"],
    ]
    for cmd in steps:
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, " ".join(cmd) + "\n" + out.stdout[-3000:] + out.stderr[-3000:]
    run = subprocess.run([str(tmp_path / "misuse")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "0 failure(s)" in run.stdout, run.stdout + run.stderr
