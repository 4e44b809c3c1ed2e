"""What the generated C++ says for spec features the shipped examples do not use."""

from __future__ import annotations

import json
from pathlib import Path

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
