"""`sync: auto`: the plan picks the first policy whose tiles line up, and the verifier proves it."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from conftest import REPO
from cusync_gen.errors import SpecError
from cusync_gen.plan import make_plan
from cusync_gen.spec import Policy, parse_spec
from cusync_gen.verify import verify


def auto(name: str, **top: Any) -> dict[str, Any]:
    data = yaml.safe_load((REPO / "cusync_gen" / "examples" / f"{name}.yaml").read_text())
    for stage in data["stages"]:
        if stage.get("sync") not in (None, "none"):
            stage["sync"] = "auto"
        if "sync_b" in stage:
            stage["sync_b"] = "auto"
    data.update(top)
    return data


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt3_mlp", ["gemm2.sync: auto -> row"]),
        ("llama_mlp", ["glu.sync: auto -> strided", "gemm2.sync: auto -> row"]),
        ("llama_mlp_split", ["glu.sync: auto -> tile", "glu.sync_b: auto -> tile", "down.sync: auto -> row"]),
        ("llama_mlp_sm90", ["glu.sync: auto -> strided", "gemm2.sync: auto -> row"]),
    ],
)
def test_auto_picks_the_shipped_policies_and_they_verify(name: str, expected: list[str]) -> None:
    plan = make_plan(parse_spec(auto(name)))
    assert list(plan.auto_policies) == expected
    for m in (1, 777, 2048):
        verify(plan, m)
    assert "sync: auto resolved" in plan.describe(256)


def test_no_atomic_add_makes_auto_pick_tile() -> None:
    data = auto("two_gemm")
    data["optimizations"] = {"no_atomic_add": True}
    plan = make_plan(parse_spec(data))
    assert plan.stages[1].input.policy is Policy.TILE
    verify(plan, 300)


def test_auto_names_the_field_when_nothing_lines_up() -> None:
    data = auto("gpt3_mlp")
    data["stages"][1]["tile"]["threadblock"] = [256, 128, 32]  # wider than gemm1's 128-row tiles
    data["stages"][1]["tile"]["warp"] = [64, 64, 32]
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    assert info.value.field == "stages[1].sync"
    assert "row:" in info.value.message and "tile:" in info.value.message and "by hand" in info.value.hint


def test_auto_on_the_input_edge_is_an_error() -> None:
    data = auto("two_gemm")
    data["stages"][0]["sync"] = "auto"
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    assert info.value.field == "stages[0].sync"
