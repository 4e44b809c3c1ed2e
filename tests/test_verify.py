"""The verifier: it proves the shipped examples sound and rejects planted policy bugs with the read named."""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES_GEMM as EXAMPLES, REPO
from cusync_gen import verify as verify_module
from cusync_gen.plan import ChainPlan, EdgePlan, StagePlan, TilePlan, make_plan
from cusync_gen.spec import BLayout, Epilogue, Op, Order, Policy, load_spec, parse_spec
from cusync_gen.verify import VerificationError, verify
from exhaustive_verifiers import verify_edge_exhaustive


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


@pytest.mark.parametrize(("name", "partial"), [("gemm_odd", (64, 8, 64)), ("gemm_odd_sm90", (192, 8, 192))])
def test_the_residue_chains_plan_and_prove_at_odd_m(name: str, partial: tuple[int, int, int]) -> None:
    """tests/data/gemm_odd*.yaml, the GPU checks' chains with a partial tile in every dimension they may have
    (scripts/gpu_check_sm90.sh with GEN_DIR): both stages' last N tiles partial, the consumer's last K chunk a
    part of a producer tile's columns, under row and tile."""
    spec = load_spec(REPO / "tests" / "data" / f"{name}.yaml")
    up, down = make_plan(spec).stages
    assert (up.n % up.tile.n, down.n % down.tile.n, down.k % up.tile.n) == partial
    for policy in ("row", "tile"):
        data = spec.model_dump(mode="json")
        data["stages"][1]["sync"] = policy
        plan = make_plan(parse_spec(data))
        for m in (1, 3, 17, 77, 100, 127, 128, 255, 1000, 4097):
            verify(plan, m)


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


# --- the bounded proof agrees with the exhaustive one, and its work does not grow with the size ------

def _stage(index: int, name: str, op: Op, n: int, k: int, tile: tuple[int, int, int],
           edge: EdgePlan | None = None, edge_b: EdgePlan | None = None) -> StagePlan:
    return StagePlan(index=index, name=name, op=op, n=n, k=k, epilogue=Epilogue.IDENTITY, b_layout=BLayout.ROW,
                     order=Order.ROW_MAJOR, tile=TilePlan(*tile, (0, 0, 0), (0, 0, 0), 0, 128, 0), input=edge,
                     out_policy=None, posts_per_semaphore=0, semaphores_per_row=0, occupancy=1, input_b=edge_b)


def _edge(policy: Policy, wait_value: int, stride: int, producer_tile: tuple[int, int, int],
          operand: str = "a") -> EdgePlan:
    return EdgePlan(0, policy, wait_value, stride, producer_tile[0], producer_tile[1], operand=operand)


@st.composite
def _edges(draw: st.DrawFn) -> tuple[StagePlan, StagePlan, EdgePlan, int]:
    """A producer and a consumer of any shape, often misaligned, with a right or wrong policy."""
    sizes = st.sampled_from([16, 32, 48, 64])
    ptile = (draw(sizes), draw(sizes), 32)
    kind = draw(st.sampled_from(["gemm", "swiglu", "swiglu with b"]))
    operand = draw(st.sampled_from(["a", "b"])) if kind == "swiglu with b" else "a"
    if kind == "gemm":
        policy = draw(st.sampled_from([Policy.ROW, Policy.TILE]))
        pn = draw(st.integers(1, 200))
        k = draw(st.one_of(st.just(pn), st.integers(1, 220), st.integers(pn, pn + 64)))  # the producer's width, or not
        ctile = (draw(sizes), draw(st.sampled_from([16, 32])), draw(st.sampled_from([8, 16, 24, 32, 48, 64])))
        n = draw(st.integers(1, 40))
    else:
        policy = draw(st.sampled_from([Policy.ROW, Policy.TILE, Policy.STRIDED]))
        n = draw(st.integers(1, 120))
        k = n if kind == "swiglu with b" else 2 * n
        pn = draw(st.one_of(st.just(k), st.integers(1, 260), st.integers(max(1, k - 64), k)))  # or a bit narrow
        ctile = (draw(sizes), draw(sizes), 1)
    right_stride = max(1, n // ptile[1])
    stride = draw(st.one_of(st.just(right_stride), st.integers(1, 8))) if policy is Policy.STRIDED else 0
    right_wait = {Policy.ROW: -(-pn // ptile[1]), Policy.TILE: 1, Policy.STRIDED: 2}[policy]
    wait = draw(st.one_of(st.just(right_wait), st.integers(0, 5)))
    edge = _edge(policy, wait, stride, ptile, operand)
    other = _edge(Policy.TILE, 1, 0, ptile, "b" if operand == "a" else "a")
    pair = (edge, other) if operand == "a" else (other, edge)
    consumer = _stage(1, "cons", Op.GEMM if kind == "gemm" else Op.SWIGLU, n, k, ctile, pair[0],
                      pair[1] if kind == "swiglu with b" else None)
    return _stage(0, "prod", Op.GEMM, pn, 64, ptile), consumer, edge, draw(st.integers(1, 160))


def _outcome(check: Any, producer: StagePlan, consumer: StagePlan, edge: EdgePlan, m: int) -> Any:
    """The proof, or the error with the list of waited semaphores left out (it is shortened when long)."""
    try:
        return check(producer, consumer, edge, m)
    except VerificationError as err:
        return err.field, re.sub(r"waits only on semaphores \[[^]]*\]|never waits on semaphore \d+", "does not wait",
                                 err.message)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_edges())
def test_the_bounded_proof_agrees_with_enumerating_every_tile(case: tuple[StagePlan, StagePlan, EdgePlan, int]) -> None:
    """Same verdict, same first uncovered read named, same counts: on aligned and misaligned tiles, partial
    tiles, K wider than the producer, wrong wait values and wrong strides."""
    fast = _outcome(verify_module._verify_edge, *case)
    assert fast == _outcome(verify_edge_exhaustive, *case)


def _case(kind: str, ptile: tuple[int, int], pn: int, ctile: tuple[int, int, int], n: int, k: int, policy: Policy,
          wait: int, m: int, stride: int = 0) -> tuple[StagePlan, StagePlan, EdgePlan, int]:
    edge = _edge(policy, wait, stride, (*ptile, 32))
    op = Op.GEMM if kind == "gemm" else Op.SWIGLU
    return _stage(0, "prod", Op.GEMM, pn, 64, (*ptile, 32)), _stage(1, "cons", op, n, k, ctile, edge), edge, m


@pytest.mark.parametrize("case", [
    # K wider than the producer: aligned K-blocks, then the first one past its columns fails
    _case("gemm", (64, 64), 256, (64, 64, 32), 64, 640, Policy.TILE, 1, 64),
    # K-blocks of 48 over producer tiles of 64: K-block 1 is the first to straddle two producer tiles
    _case("gemm", (64, 64), 1024, (64, 64, 48), 64, 1024, Policy.TILE, 1, 64),
    # swiglu tile rows of 48 over producer rows of 64: row 1 straddles, the first and last rows do not
    _case("swiglu", (64, 64), 256, (48, 64, 1), 128, 256, Policy.ROW, 4, 400),
    # the up half runs past a narrow producer from a middle tile column on
    _case("swiglu", (16, 16), 200, (16, 16, 1), 120, 240, Policy.ROW, 13, 16),
    # strided groups of 3 and 2 posts (5 producer tiles, stride 2): the second group is short of 3
    _case("swiglu", (64, 64), 320, (64, 64, 1), 128, 256, Policy.STRIDED, 3, 64, stride=2),
])
def test_the_bounded_proof_agrees_on_the_alignments_that_matter(
        case: tuple[StagePlan, StagePlan, EdgePlan, int]) -> None:
    fast = _outcome(verify_module._verify_edge, *case)
    assert fast == _outcome(verify_edge_exhaustive, *case)
    assert isinstance(fast, tuple)  # each of these is a bug, named at the same first read


def _count_checked_reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = verify_module._check_read

    def counting(*args: Any) -> None:
        calls[0] += 1
        real(*args)

    monkeypatch.setattr(verify_module, "_check_read", counting)
    return calls


@pytest.mark.parametrize("size", [131072, 2**31, 10**12])
def test_the_work_does_not_grow_with_n_k_or_m(size: int, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_checked_reads(monkeypatch)
    ptile = (128, 128, 32)
    producer = _stage(0, "prod", Op.GEMM, size, 64, ptile)
    for policy, wait in ((Policy.ROW, size // 128), (Policy.TILE, 1)):
        edge = _edge(policy, wait, 0, ptile)
        proof = verify_module._verify_edge(producer, _stage(1, "cons", Op.GEMM, size, size, (64, 128, 32), edge), edge,
                                           size)
        assert proof.reads == (size // 64) * (size // 128) * (size // 32)  # counted in closed form
    glu_edge = _edge(Policy.STRIDED, 2, size // 256, ptile)
    glu = _stage(1, "glu", Op.SWIGLU, size // 2, size, (64, 128, 1), glu_edge)
    assert verify_module._verify_edge(producer, glu, glu_edge, size).consumer_tiles == (size // 64) * (size // 256)
    assert calls[0] < 100


def test_the_examples_at_the_size_limits_are_proved_with_little_work(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = _count_checked_reads(monkeypatch)
    for name in ("gpt3_mlp", "llama_mlp", "llama_mlp_split", "llama_mlp_sm90"):
        data = __import__("yaml").safe_load((REPO / "cusync_gen" / "examples" / f"{name}.yaml").read_text())
        width = {"input": 131072}
        for stage in data["stages"]:  # every gemm n and k at 131072, the widest the spec allows
            stage["n"] = 131072 if stage["op"] == "gemm" else width[stage["a"]] // (1 if "b" in stage else 2)
            if stage["op"] == "gemm":
                stage["k"] = width[stage["a"]]
            width[stage["name"]] = stage["n"]
        data.pop("tile_configs", None)
        proof = verify(make_plan(parse_spec(data)), 2**20)
        assert all(e.reads >= e.consumer_tiles for e in proof.edges)
    assert calls[0] < 2000


def test_validate_a_huge_m_does_not_hang() -> None:
    """`validate two_gemm --m 100000000` ran for minutes; now it is either proved or refused by a limit."""
    done = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "validate", "two_gemm", "--m", "100000000"],
                          cwd=REPO, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert done.returncode in (0, 1, 2), done.stderr
    assert "Traceback" not in done.stderr


def test_strided_sync_on_a_gemm_edge_is_refused() -> None:
    ptile = (128, 128, 32)
    edge = _edge(Policy.STRIDED, 2, 4, ptile)
    with pytest.raises(VerificationError, match="strided sync needs a swiglu consumer"):
        verify_module._verify_edge(_stage(0, "p", Op.GEMM, 1024, 64, ptile),
                                   _stage(1, "c", Op.GEMM, 256, 1024, (128, 128, 32), edge), edge, 256)


def test_a_long_list_of_waited_semaphores_is_not_printed() -> None:
    ptile = (16, 64, 32)
    edge = _edge(Policy.TILE, 1, 0, ptile)
    consumer = _stage(1, "c", Op.GEMM, 64, 4096, (256, 64, 48), edge)  # 16 producer tile rows per consumer tile
    with pytest.raises(VerificationError) as info:  # and K-blocks of 48 straddle producer tiles of 64
        verify_module._verify_edge(_stage(0, "p", Op.GEMM, 4096, 64, ptile), consumer, edge, 256)
    assert "K-block 1 reads p tile (0, 1) (rows 0..255, columns 48..95) but never waits on semaphore 1" in \
        info.value.message
