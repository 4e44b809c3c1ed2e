"""The generated sm90 library's host code against misuse, on a machine without a GPU: the two_gemm_sm90 golden's
library compiled unchanged, its stage kernels replaced by launch counters (tests/host_api/stubs.cpp) and the CUDA
runtime by a simulated device (fake_cudart.cpp); misuse.cpp checks that overlapping buffers, an oversized leading
dimension, a run on another device and autotune() under stream capture are refused before anything launches,
and that the right uses next to them are accepted; stream_mode.cpp does the same for run() mode stream."""
from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from sass import find_tool

pytestmark = pytest.mark.nvcc


def _run_against_fakes(tmp_path: Path, project: Path, stubs: str, test: str, defines: tuple[str, ...] = ()) -> None:
    """Builds `project`'s chain unit with the stage recorders `stubs` and the test `test` (tests/host_api/) on the
    simulated device, runs it, and expects no failed check."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    here = REPO / "tests" / "host_api"
    inc = ["-std=c++17", "-I", str(project / "include"), "-I", str(project / "src"), *defines]
    steps = [
        [nvcc, *inc, "-x", "cu", "-c", str(project / "src" / f"{project.name}.cu"), "-o", str(tmp_path / "chain.o")],
        [nvcc, *inc, "-x", "cu", "-c", str(here / stubs), "-o", str(tmp_path / "stubs.o")],
        [nvcc, *inc, "-x", "cu", "-c", str(here / test), "-o", str(tmp_path / "test.o")],
        [nvcc, "-std=c++17", "-c", str(here / "fake_cudart.cpp"), "-o", str(tmp_path / "fake.o")],  # host code
        [nvcc, "-o", str(tmp_path / "test"), *(str(tmp_path / f) for f in ("test.o", "chain.o", "stubs.o", "fake.o")),
         "-cudart", "shared"],
    ]
    for cmd in steps:
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, " ".join(cmd) + "\n" + out.stdout[-3000:] + out.stderr[-3000:]
    run = subprocess.run([str(tmp_path / "test")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and "0 failure(s)" in run.stdout, run.stdout + run.stderr


def test_misuse_of_a_generated_library_is_refused_before_launch(tmp_path: Path) -> None:
    _run_against_fakes(tmp_path, REPO / "generated" / "two_gemm_sm90", "stubs.cpp", "misuse.cpp")


def test_the_stream_mode_packs_launches_and_refuses_large_m(tmp_path: Path) -> None:
    """A chain with optimizations.stream_weights (tests/data/decode_stream_sm90.yaml): what mode stream packs at
    initialize() and after update(), the run it launches, run()'s rule at M <= 64 and above (stream_mode.cpp)."""
    from cusync_gen.cli import main

    project = tmp_path / "decode_stream_sm90"
    with pytest.raises(SystemExit) as done:
        main(["generate", str(REPO / "tests" / "data" / "decode_stream_sm90.yaml"), "-o", str(project)])
    assert done.value.code == 0
    _run_against_fakes(tmp_path, project, "stream_stubs.cpp", "stream_mode.cpp")


def test_the_stream_mode_fuses_a_swiglu_stage_of_its_own(tmp_path: Path) -> None:
    """llama_mlp_sm90 (gemm1 -> glu -> gemm2) with optimizations.stream_weights: gemm1's [gate | up] halves are
    packed interleaved, and the one launch writes glu_out from gemm1's epilogue and gate | up into gemm1_out
    (stream_split.cpp)."""
    import json

    from cusync_gen.cli import main
    from cusync_gen.spec.loading import read_spec_data

    data = read_spec_data(REPO / "cusync_gen" / "examples" / "llama_mlp_sm90.yaml")
    data["name"] = "llama_mlp_sm90_stream"
    data.setdefault("optimizations", {})["stream_weights"] = True
    data.pop("dispatch", None)
    spec = tmp_path / "llama_mlp_sm90_stream.json"
    spec.write_text(json.dumps(data))
    project = tmp_path / "llama_mlp_sm90_stream"
    with pytest.raises(SystemExit) as done:
        main(["generate", str(spec), "-o", str(project)])
    assert done.value.code == 0
    _run_against_fakes(tmp_path, project, "stream_stubs.cpp", "stream_split.cpp", ("-DSTREAM_SPLIT=1",))
