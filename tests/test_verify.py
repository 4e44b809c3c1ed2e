"""The verifier: it proves the shipped examples sound and rejects planted policy bugs with the read named."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES_GEMM as EXAMPLES, REPO
from cusync_gen.plan import ChainPlan, EdgePlan, make_plan
from cusync_gen.spec import Policy, load_spec, parse_spec
from cusync_gen.verify import VerificationError, verify


def example(name: str) -> ChainPlan:
    return make_plan(load_spec(REPO / "cusync_gen" / "examples" / f"{name}.yaml"))


def with_edge(plan: ChainPlan, stage: int, **change: Any) -> ChainPlan:
    """The plan with one stage's input edge altered (a hand-written policy the spec cannot express)."""
    stages = list(plan.stages)
    s = stages[stage]
    stages[stage] = dataclasses.replace(s, input=dataclasses.replace(s.input, **change))
    configs = tuple(dataclasses.replace(c, stages=tuple(stages)) if c.m_max is None else c for c in plan.configs)
    return dataclasses.replace(plan, stages=tuple(stages), configs=configs)


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("m", [1, 300, 1024])
def test_shipped_examples_are_proved_sound(name: str, m: int) -> None:
    proof = verify(example(name), m)
    assert proof.edges and all(e.reads > 0 for e in proof.edges)
    assert "verified at M = " in proof.describe()


def test_a_row_wait_value_one_short_is_rejected() -> None:
    plan = example("gpt3_mlp")
    bad = with_edge(plan, 1, wait_value=plan.stages[1].input.wait_value - 1)
    with pytest.raises(VerificationError) as info:
        verify(bad, 1024)
    message = info.value.message
    assert "waits for 47 of the 48 posts of semaphore 0" in message  # 6144 / 128 = 48 tiles per row
    assert "tile (0, 0) K-block 0 reads gemm1 tile (0, 0)" in message
    assert info.value.field == "gemm2.sync"


def test_a_wait_value_no_run_reaches_is_rejected() -> None:
    plan = example("two_gemm")
    with pytest.raises(VerificationError) as info:
        verify(with_edge(plan, 1, wait_value=9), 256)
    assert "gets 8 posts per run but waits ask for 9" in info.value.message


def test_a_tile_policy_whose_tiles_do_not_match_is_rejected() -> None:
    # TileSync needs each consumer K-block inside one producer tile column: K-blocks of 96 over producer
    # tiles of 128 columns straddle two producer tiles but wait for the first only.
    plan = example("two_gemm")
    tile = dataclasses.replace(plan.stages[1].tile, k=96)
    stages = list(plan.stages)
    stages[1] = dataclasses.replace(stages[1], tile=tile, input=dataclasses.replace(stages[1].input, policy=Policy.TILE, wait_value=1))
    stages[0] = dataclasses.replace(stages[0], out_policy=Policy.TILE)
    bad = dataclasses.replace(plan, stages=tuple(stages), configs=(dataclasses.replace(plan.configs[-1], stages=tuple(stages)),))
    with pytest.raises(VerificationError) as info:
        verify(bad, 256)
    assert "K-block 1 reads gemm1 tile (0, 1) (rows 0..127, columns 96..191) but waits only on semaphores" in info.value.message


def test_a_strided_group_off_by_one_is_rejected() -> None:
    plan = example("llama_mlp")
    bad = with_edge(plan, 1, stride_tiles=plan.stages[1].input.stride_tiles + 1)
    with pytest.raises(VerificationError) as info:
        verify(bad, 128)
    # the groups no longer pair gate tile j with up tile j + stride: some get one post, and waits for two
    assert "stage 'glu' reading 'gemm1' (strided sync)" in info.value.message
    assert "gets 1 posts per run but waits ask for 2" in info.value.message


def test_avoid_wait_kernel_keeps_the_wait_kernel_where_blocks_do_not_fit() -> None:
    text = (REPO / "cusync_gen" / "examples" / "two_gemm.yaml").read_text().replace(
        "optimizations:\n", "optimizations:\n  avoid_wait_kernel: true\n")
    plan = make_plan(parse_spec(__import__("yaml").safe_load(text)))
    assert "fits on the GPU at once" in verify(plan, 256).progress
    assert "run() keeps the wait kernel" in verify(plan, 8192).progress  # as chain.cu's coresident() does


def _chain(n1: int, k1: int, n2: int, tb1: list[int], tb2: list[int], policy: str) -> dict[str, Any]:
    def gemm(name: str, a: str, n: int, k: int, tb: list[int], **extra: Any) -> dict[str, Any]:
        return {"name": name, "op": "gemm", "a": a, "n": n, "k": k, "tile": {"threadblock": tb}, **extra}

    return {"name": "prop", "dtype": "fp16", "stages": [gemm("g1", "input", n1, k1, tb1),
                                                         gemm("g2", "g1", n2, n1, tb2, sync=policy)]}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    tiles_n1=st.integers(1, 6), tn1=st.sampled_from([64, 128]), tm1=st.sampled_from([64, 128]),
    tm2_div=st.sampled_from([1, 2]), tk2=st.sampled_from([32, 64]), tn2=st.sampled_from([64, 128]),
    tiles_n2=st.integers(1, 3), m=st.integers(1, 700), policy=st.sampled_from(["row", "tile"]),
)
def test_every_valid_random_chain_is_proved_and_a_short_wait_is_caught(
        tiles_n1: int, tn1: int, tm1: int, tm2_div: int, tk2: int, tn2: int, tiles_n2: int, m: int,
        policy: str) -> None:
    n1 = tiles_n1 * tn1
    data = _chain(n1, 64, tiles_n2 * tn2, [tm1, tn1, 32], [tm1 // tm2_div, tn2, tk2], policy)
    plan = make_plan(parse_spec(data))  # the spec rules admit only shapes where the policy lines up
    verify(plan, m)
    edge: EdgePlan = plan.stages[1].input
    if edge.wait_value > 1:
        with pytest.raises(VerificationError):
            verify(with_edge(plan, 1, wait_value=edge.wait_value - 1), m)


def test_generate_refuses_a_plan_the_verifier_rejects(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from cusync_gen import render

    real = render.make_plan

    def short_wait(spec, target=None):  # type: ignore[no-untyped-def]
        plan = real(spec, target)
        return with_edge(plan, 1, wait_value=plan.stages[1].input.wait_value - 1)

    monkeypatch.setattr(render, "make_plan", short_wait)
    with pytest.raises(VerificationError):
        render.generate(REPO / "cusync_gen" / "examples" / "two_gemm.yaml", tmp_path / "out")
    assert not (tmp_path / "out").exists()  # nothing written


def test_representative_sizes_cover_configurations() -> None:
    from cusync_gen.verify import representative_ms

    assert representative_ms(example("gpt3_mlp_sm90")) == [1, 385, 768, 769]
