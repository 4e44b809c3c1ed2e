"""Run() mode stream's slab kernel (M <= SLAB_MAX_M, templates/sm90/include/cusync/sm90/slab_chain.cuh): which
chains have it (every sm90 two-GEMM chain whose shapes it takes, with no key in the spec), run()'s default rule
for it (column-major first weights, M <= SLAB_DEFAULT_MAX_M; both GEMMs' column-major, M <= SLAB_GATHER_DEFAULT_MAX_M),
the files a project gets, and its kernel's build.
The GPU side is scripts/gpu_slab_mode.sh (benchmarks/NOTES.md d34)."""
from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from cusync_gen.plan import make_plan
from cusync_gen.spec.loading import load_spec, parse_spec
from cusync_gen.spec.model import SLAB_DEFAULT_MAX_M, SLAB_GATHER_DEFAULT_MAX_M, SLAB_MAX_M, Mode
from cusync_gen.verify_slab import verify_slab

EXAMPLES = REPO / "cusync_gen" / "examples"


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


def test_the_decode_example_takes_the_slab_kernel_by_default_up_to_its_limit() -> None:
    """Both weights column-major (torch.nn.Linear's layout): the gather variant, no partials."""
    plan = make_plan(load_spec(EXAMPLES / "gpt3_mlp_decode_sm90.yaml"))
    assert plan.slab_problem is None and plan.slab_col and plan.slab_w2_col and not plan.optimizations.stream_weights
    for m in range(1, SLAB_GATHER_DEFAULT_MAX_M + 1):
        mode, why = plan.run_mode(m)
        assert mode is Mode.STREAM and why.startswith(f"default rule: M = {m} <= {SLAB_GATHER_DEFAULT_MAX_M} and both")
    assert plan.run_mode(SLAB_GATHER_DEFAULT_MAX_M + 1)[0] is Mode.CUBLASLT
    assert "mode stream's slab kernel" in plan.describe(1)
    assert verify_slab(plan).gather and "column-major gemm2 weights" in verify_slab(plan).describe()


def test_row_major_second_weights_take_it_by_default_at_fewer_rows() -> None:
    """Row-major W2: each CTA's partial of the whole output (the partials' traffic grows with M)."""
    spec = example("gpt3_mlp_decode_sm90")
    spec["stages"][1]["b_layout"] = "row"
    plan = make_plan(parse_spec(spec))
    assert plan.slab_problem is None and plan.slab_col and not plan.slab_w2_col
    for m in range(1, SLAB_DEFAULT_MAX_M + 1):
        mode, why = plan.run_mode(m)
        assert mode is Mode.STREAM and why.startswith(f"default rule: M = {m} <= {SLAB_DEFAULT_MAX_M} and the first")
    assert plan.run_mode(SLAB_DEFAULT_MAX_M + 1)[0] is Mode.CUBLASLT
    assert not verify_slab(plan).gather and "posts its partial once" in verify_slab(plan).describe()


@pytest.mark.parametrize("name", ["gpt3_mlp_sm90", "llama_mlp_fused_sm90", "llama_mlp_sm90", "two_gemm_sm90"])
def test_row_major_first_weights_have_it_but_run_does_not_pick_it(name: str) -> None:
    """The strip of each row a CTA reads of row-major W1 streams slower than cuBLASLt (d34): available to
    set_mode and autotune, not the default."""
    spec = example(name)
    spec.pop("dispatch", None)
    plan = make_plan(parse_spec(spec))
    assert plan.slab_problem is None and not plan.slab_col
    assert all(plan.run_mode(m)[0] is not Mode.STREAM for m in range(1, SLAB_MAX_M + 1))


@pytest.mark.parametrize(("w1", "widest"), [("col", 22), ("row", 24)])
def test_slabs_are_whole_columns_of_column_major_first_weights_and_units_of_8_of_row_major_ones(
        w1: str, widest: int) -> None:
    """The fused LLaMA MLP's 2816 hidden columns on 132 SMs: column-major W1 is read a column per warp, so slabs
    are any width (the widest 22 = ceil(2816 / 132)); row-major W1 is read in 16-byte vectors of a row, so slabs
    are whole units of 8 (the widest 3 units, 24 columns)."""
    spec = example("llama_mlp_fused_sm90")
    spec.pop("dispatch", None)
    spec["stages"][0]["b_layout"] = w1
    proof = verify_slab(make_plan(parse_spec(spec)))
    assert proof.max_slab == widest and f"at most {widest})" in proof.describe()


@pytest.mark.parametrize(("base", "change", "field"), [
    ("llama_mlp_sm90", lambda s: s["stages"][0].update(bias=True), "stages[0].bias"),
    ("gpt3_mlp_decode_sm90", lambda s: s["stages"].append({**s["stages"][1], "name": "third", "a": "gemm2",
                                                              "k": 12288}), "stages"),
])
def test_chains_it_cannot_take_say_why_and_keep_the_other_modes(base: str, change: Any, field: str) -> None:
    spec = copy.deepcopy(example(base))
    spec.pop("dispatch", None)
    change(spec)
    plan = make_plan(parse_spec(spec))
    assert plan.slab_problem is not None and plan.slab_problem.startswith(field), plan.slab_problem
    assert not plan.slab_col and plan.run_mode(1)[0] is not Mode.STREAM


def test_a_project_has_the_slab_unit_exactly_where_the_kernel_takes_the_chain(tmp_path: Path) -> None:
    from cusync_gen.cli import main

    for name, has in (("gpt3_mlp_decode_sm90", True), ("gpt3_mlp_sm90", True), ("gpt3_mlp", False)):
        out = tmp_path / name
        with pytest.raises(SystemExit) as done:
            main(["generate", str(EXAMPLES / f"{name}.yaml"), "-o", str(out)])
        assert done.value.code == 0
        assert (out / "src" / f"{name}_slab.cu").is_file() is has
        assert (out / "include" / "cusync" / "sm90" / "slab_chain.cuh").is_file() is has
        if has:
            cmake = (out / "CMakeLists.txt").read_text()
            assert f"src/{name}_slab.cu" in cmake
    chain = (tmp_path / "gpt3_mlp_decode_sm90" / "src" / "gpt3_mlp_decode_sm90.cu").read_text()
    assert "&slab_kernels, true, true," in chain  # the kernel table and both weights column-major


@pytest.mark.nvcc
def test_the_slab_kernels_compile_without_spills(tmp_path: Path) -> None:
    """Each element type and row count the library instantiates, compiled for sm_90a with ptxas's report."""
    unit = tmp_path / "slab.cu"
    unit.write_text('#include "cusync/sm90/slab_chain.cuh"\n'
                    "cusync::sm90::SlabKernels const* h() { return &cusync::sm90::slab_kernels<__half>(); }\n"
                    "cusync::sm90::SlabKernels const* b() { return &cusync::sm90::slab_kernels<__nv_bfloat16>(); }\n")
    import shutil

    nvcc = shutil.which("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    templates = REPO / "templates"
    cmd = [nvcc, "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v",
           "-I", str(templates / "runtime" / "include"), "-I", str(templates / "sm90" / "include"),
           "-c", str(unit), "-o", str(tmp_path / "slab.o")]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    report = out.stderr.splitlines()
    kernels = [line for line in report if "Compiling entry function" in line and "slab_chain_kernel" in line]
    assert len(kernels) == 6, out.stderr[-4000:]
    spills = [line for line in report if "spill" in line and not line.strip().startswith("0 bytes stack frame, 0 bytes spill")]
    assert not spills, "\n".join(spills)
