"""Tile dependencies (issue 4, part 1): derived from the ops, declared in a spec and checked, and the
source of `sync: auto`'s candidates."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from conftest import REPO
from cusync_gen import dependency
from cusync_gen.errors import SpecError
from cusync_gen.plan import make_plan
from cusync_gen.spec import Policy, parse_spec, spec_hash

EXAMPLES = REPO / "cusync_gen" / "examples"


def data_of(name: str) -> dict[str, Any]:
    return yaml.safe_load((EXAMPLES / f"{name}.yaml").read_text())


def test_derived_dependencies_of_the_examples() -> None:
    llama = parse_spec(data_of("llama_mlp"))
    assert dependency.dependency_of(llama, 1) == dependency.Dependency("strided", stride=2816, count=2)
    assert dependency.dependency_of(llama, 2) == dependency.Dependency("k_range")
    split = parse_spec(data_of("llama_mlp_split"))
    glu = next(i for i, s in enumerate(split.stages) if s.op.value == "swiglu")
    assert dependency.dependency_of(split, glu) == dependency.Dependency("same")


@pytest.mark.parametrize(("dep", "no_atomic", "policies"), [
    (dependency.Dependency("k_range"), False, (Policy.ROW, Policy.TILE)),
    (dependency.Dependency("k_range"), True, (Policy.TILE,)),
    (dependency.Dependency("same"), False, (Policy.TILE, Policy.ROW)),
    (dependency.Dependency("strided", 2816, 2), False, (Policy.STRIDED, Policy.TILE, Policy.ROW)),
])
def test_candidates_come_from_the_dependency(dep: dependency.Dependency, no_atomic: bool,
                                             policies: tuple[Policy, ...]) -> None:
    assert dependency.candidates(dep, no_atomic) == policies


def test_a_declared_dependency_that_matches_is_accepted_and_printed() -> None:
    data = data_of("llama_mlp")
    data["stages"][1]["reads"] = {"cols": {"strided": 2816}}
    data["stages"][2]["reads"] = {"cols": "k_range"}
    spec = parse_spec(data)
    plan = make_plan(spec)
    text = plan.describe(1024)
    assert "glu tile (m, n) reads gemm1 rows [m*BM, (m+1)*BM) x BN cols from each of n*BN and n*BN + 2816" in text
    assert "gemm2 tile (m, n), K-block k reads glu rows" in text
    assert spec_hash(spec) != spec_hash(parse_spec(data_of("llama_mlp")))  # a declaration is part of the spec


@pytest.mark.parametrize(("reads", "field", "words"), [
    ({"cols": {"strided": 2048}}, "stages[1].reads", "declare reads: {cols: {strided: 2816, count: 2}}"),
    ({"cols": "same"}, "stages[1].reads", "declare reads: {cols: {strided: 2816, count: 2}}"),
    ({"cols": {"strided": 2816}, "halo": 57}, "stages[1].reads.halo", "remove halo"),
])
def test_a_declared_dependency_the_op_does_not_read_is_rejected(reads: dict, field: str, words: str) -> None:
    data = data_of("llama_mlp")
    data["stages"][1]["reads"] = reads
    with pytest.raises(SpecError) as info:
        make_plan(parse_spec(data))
    assert info.value.field == field and words in info.value.hint


def test_reads_is_validated_by_the_spec_model() -> None:
    data = data_of("two_gemm")
    data["stages"][1]["reads"] = {"cols": "diagonal"}
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.field.startswith("stages[1].reads")


def test_auto_still_picks_the_examples_policies() -> None:
    for name, stage, want in (("gpt3_mlp", 1, Policy.ROW), ("llama_mlp", 1, Policy.STRIDED), ("llama_mlp", 2, Policy.ROW)):
        data = data_of(name)
        data["stages"][stage]["sync"] = "auto"
        plan = make_plan(parse_spec(data))
        assert plan.stages[stage].input is not None and plan.stages[stage].input.policy is want
