"""What the generated C++ says for spec features the shipped examples do not use."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cusync_gen.errors import SpecError
from cusync_gen.plan import make_plan
from cusync_gen.render import generate
from cusync_gen.spec import parse_spec

GEMM_TILE = {"threadblock": [128, 128, 32], "warp": [64, 64, 32], "stages": 3}


def _none_edge_spec() -> dict:
    return {
        "name": "none_edge",
        "stages": [
            {"name": "g1", "op": "gemm", "a": "input", "n": 1024, "k": 1024, "tile": GEMM_TILE},
            {"name": "g2", "op": "gemm", "a": "g1", "sync": "none", "n": 1024, "k": 1024, "tile": GEMM_TILE},
        ],
    }


def test_unsynced_edge_is_ordered_by_an_event(tmp_path: Path) -> None:
    """sync: none means "after the whole producer": across the two streams that takes an event."""
    plan = make_plan(parse_spec(_none_edge_spec()))
    assert plan.has_unsynced_edge
    spec = tmp_path / "none_edge.json"
    spec.write_text(json.dumps(_none_edge_spec()))
    project = generate(spec, tmp_path / "p")
    assert "/*has_unsynced_edge=*/true" in (project / "src" / "none_edge.cu").read_text()
    runtime = (project / "include" / "cusync" / "sm80" / "chain.cuh").read_text()  # what the flag turns on
    assert "cudaStreamWaitEvent(on, done_[p], 0)" in runtime
    assert "t_->has_unsynced_edge && (status = from_cuda(cudaEventRecord(done_[s], on)))" in runtime


def test_synced_chains_carry_no_completion_events(tmp_path: Path) -> None:
    data = _none_edge_spec()
    data["stages"][1]["sync"] = "row"
    assert not make_plan(parse_spec(data)).has_unsynced_edge
    spec = tmp_path / "row_edge.json"
    spec.write_text(json.dumps(data))
    chain = (generate(spec, tmp_path / "p") / "src" / "none_edge.cu").read_text()
    assert "/*has_unsynced_edge=*/false" in chain  # the runtime creates and records no completion events


def _column_banded_spec(arch: str = "sm90") -> dict:
    tile = {"threadblock": [128, 128, 64]} if arch == "sm90" else GEMM_TILE
    stages = [{"name": "g1", "op": "gemm", "a": "input", "n": 1024, "k": 1024, "tile": tile, "order": "column_banded"},
              {"name": "g2", "op": "gemm", "a": "g1", "sync": "tile", "n": 1024, "k": 1024, "tile": tile,
               "order": "column_banded"}]
    return {"name": "column_banded", "arch": arch, "target": "sm_90", "stages": stages}


def test_column_banded_order_reaches_the_stage_table_and_explain(tmp_path: Path) -> None:
    """order: column_banded (bands of 4 tile columns, row by row: CUTLASS's raster along M with swizzle 4)
    is planned, explained and emitted as cusync::TileOrder::kColumnBanded (tile_of: tests/runtime/policy_math.cu);
    measured for sm90 GEMMs only, so the sm80 backend refuses it, naming the field."""
    plan = make_plan(parse_spec(_column_banded_spec()))
    assert "column_banded: 4 tile columns at a time" in plan.describe(1024)
    spec = tmp_path / "column_banded.json"
    spec.write_text(json.dumps(_column_banded_spec()))
    project = generate(spec, tmp_path / "p")
    assert "cusync::TileOrder::kColumnBanded" in (project / "src" / "column_banded_stages.h").read_text()
    with pytest.raises(SpecError) as refused:
        parse_spec(_column_banded_spec("sm80"))
    assert refused.value.field == "stages[0].order" and "sm90 GEMM stages only" in str(refused.value)


def test_the_library_is_built_without_device_asserts_in_every_build_type(tmp_path: Path) -> None:
    """NDEBUG on the library's kernels whatever the build type (a parent project's default is empty, where
    CUTLASS's device asserts would make ptxas serialize the sm90 kernels' wgmma: NOTES h17); an option keeps
    them for debugging."""
    from conftest import REPO

    for name in ("two_gemm", "two_gemm_sm90", "gpt3_attention"):
        project = generate(REPO / "cusync_gen" / "examples" / f"{name}.yaml", tmp_path / name)
        text = (project / "CMakeLists.txt").read_text()
        option = f"{name.upper()}_DEVICE_ASSERTS"
        assert f"option({option} " in text and f"OFF)" in text.split(f"option({option} ", 1)[1].split("\n", 1)[0]
        assert f"if(NOT {option})\n  target_compile_definitions({name} PRIVATE NDEBUG)\nendif()" in text
