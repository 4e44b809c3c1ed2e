"""Spec parsing: every rule of docs/spec-format.md has a bad-input test naming the field and a hint."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any, Callable

import pytest
from pydantic import ValidationError

from conftest import REPO
from cusync_gen.errors import CusyncError, SpecError, UsageError
from cusync_gen.spec import (
    Arch,
    BLayout,
    ChainSpec,
    Dtype,
    Epilogue,
    Op,
    Order,
    Policy,
    load_spec,
    parse_spec,
    spec_hash,
)


def gemm(name: str, a: str, n: int, k: int, tb: list[int] | None = None, **extra: Any) -> dict[str, Any]:
    stage: dict[str, Any] = {"name": name, "op": "gemm", "a": a, "n": n, "k": k}
    stage["tile"] = {"threadblock": tb or [128, 128, 32]}
    stage.update(extra)
    return stage


def two_gemm() -> dict[str, Any]:
    return {
        "name": "two_gemm",
        "dtype": "fp16",
        "stages": [
            gemm("gemm1", "input", 1024, 512),
            gemm("gemm2", "gemm1", 2048, 1024, sync="row"),
        ],
    }


def gpt3() -> dict[str, Any]:
    return {
        "name": "gpt3_mlp",
        "arch": "sm80",
        "target": "sm_80",
        "dtype": "fp16",
        "stages": [
            {
                "name": "gemm1",
                "op": "gemm",
                "a": "input",
                "n": 6144,
                "k": 12288,
                "epilogue": "gelu",
                "tile": {"threadblock": [128, 128, 32], "warp": [64, 64, 32], "instruction": [16, 8, 16], "stages": 3},
            },
            {
                "name": "gemm2",
                "op": "gemm",
                "a": "gemm1",
                "sync": "row",
                "n": 12288,
                "k": 6144,
                "tile": {"threadblock": [128, 128, 32]},
            },
        ],
    }


def llama() -> dict[str, Any]:
    return {
        "name": "llama_mlp",
        "dtype": "fp16",
        "target": "sm_90",
        "stages": [
            gemm("gemm1", "input", 5632, 8192, b_layout="col"),
            {
                "name": "glu",
                "op": "swiglu",
                "a": "gemm1",
                "n": 2816,
                "sync": "strided",
                "tile": {"threadblock": [64, 128, 1]},
            },
            gemm("gemm2", "glu", 8192, 2816, tb=[64, 128, 32], sync="row", b_layout="col"),
        ],
    }


def with_change(base: Callable[[], dict[str, Any]], change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    data = copy.deepcopy(base())
    change(data)
    return data


def expect_error(data: Any, field: str, *words: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    err = info.value
    assert err.field == field, err.message
    assert err.message.startswith(f"{field}: ")
    assert err.hint.strip(), f"empty hint for {err.message}"
    for word in words:
        assert word in err.message + " " + err.hint, (word, err.message, err.hint)
    return err


# --------------------------------------------------------------------------------------------------
# good specs


def test_two_gemm_chain_parses_with_defaults() -> None:
    spec = parse_spec(two_gemm())
    assert spec.arch is Arch.SM80 and spec.target == "sm_80" and spec.dtype is Dtype.FP16
    assert spec.sms is None
    assert not any(spec.optimizations.model_dump().values())
    s1, s2 = spec.stages
    assert s1.tile.warp == (64, 64, 32)
    assert s1.tile.instruction == (16, 8, 16)
    assert s1.tile.stages == 3
    assert (s1.b_layout, s1.epilogue, s1.order, s1.sync) == (
        BLayout.ROW,
        Epilogue.IDENTITY,
        Order.ROW_MAJOR,
        None,
    )
    assert s2.sync is Policy.ROW


def test_gpt3_mlp_parses() -> None:
    spec = parse_spec(gpt3())
    assert [s.name for s in spec.stages] == ["gemm1", "gemm2"]
    assert spec.stages[0].epilogue is Epilogue.GELU
    assert spec.stages[1].k == spec.stages[0].n == 6144
    assert spec.stages[1].tile.warp == (64, 64, 32)


def test_llama_mlp_parses() -> None:
    spec = parse_spec(llama())
    glu = spec.stages[1]
    assert glu.op is Op.SWIGLU and glu.k is None and glu.sync is Policy.STRIDED
    assert glu.tile.threadblock == (64, 128, 1)
    assert glu.tile.warp is None and glu.tile.instruction is None and glu.tile.stages is None
    assert spec.stages[2].tile.warp == (32, 64, 32)
    assert spec.stages[0].b_layout is BLayout.COL


def test_swiglu_accepts_two_value_threadblock() -> None:
    data = with_change(llama, lambda d: d["stages"][1]["tile"].update(threadblock=[64, 128]))
    assert parse_spec(data).stages[1].tile.threadblock == (64, 128, 1)


def test_sync_none_is_allowed_on_input_and_on_edges() -> None:
    def change(d: dict[str, Any]) -> None:
        d["stages"][0]["sync"] = "none"
        d["stages"][1]["sync"] = "none"

    spec = parse_spec(with_change(two_gemm, change))
    assert spec.stages[1].sync is Policy.NONE


def test_models_are_frozen() -> None:
    spec = parse_spec(two_gemm())
    with pytest.raises(ValidationError):
        spec.name = "other"  # type: ignore[misc]
    with pytest.raises(ValidationError):
        spec.stages[0].tile.stages = 4  # type: ignore[misc]


@pytest.mark.parametrize("target", ["sm_80", "sm_86", "sm_89", "sm_90"])
def test_targets(target: str) -> None:
    assert parse_spec(with_change(two_gemm, lambda d: d.update(target=target))).target == target


def test_errors_are_cusync_errors() -> None:
    with pytest.raises(CusyncError) as info:
        parse_spec(with_change(two_gemm, lambda d: d.update(name="Bad")))
    assert info.value.exit_code == 1


# --------------------------------------------------------------------------------------------------
# structural errors from pydantic, converted to one SpecError


def _set(path: list[Any], value: Any) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        target = d
        for part in path[:-1]:
            target = target[part]
        target[path[-1]] = value

    return change


def _delete(path: list[Any]) -> Callable[[dict[str, Any]], None]:
    def change(d: dict[str, Any]) -> None:
        target = d
        for part in path[:-1]:
            target = target[part]
        del target[path[-1]]

    return change


STRUCTURAL = [
    (_set(["colour"], "red"), "colour", ["unknown key 'colour'", "allowed keys are name, arch"]),
    (_set(["stages", 1, "synk"], "row"), "stages[1].synk", ["did you mean 'sync'", "allowed keys are"]),
    (_set(["stages", 0, "tile", "warps"], [64, 64, 32]), "stages[0].tile.warps", ["did you mean 'warp'"]),
    (_set(["optimizations"], {"no_atomics": True}), "optimizations.no_atomics", ["no_atomic_add"]),
    (_delete(["name"]), "name", ["required key 'name'"]),
    (_delete(["stages"]), "stages", ["required key 'stages'"]),
    (_set(["stages"], []), "stages", ["at least one stage"]),
    (_set(["stages"], "gemm1"), "stages", ["list"]),
    (_set(["stages", 0], "gemm1"), "stages[0]", ["mapping"]),
    (_delete(["stages", 1, "n"]), "stages[1].n", ["required key 'n'"]),
    (_delete(["stages", 1, "tile"]), "stages[1].tile", ["threadblock"]),
    (_delete(["stages", 1, "tile", "threadblock"]), "stages[1].tile.threadblock", ["required"]),
    (_set(["dtype"], "fp32"), "dtype", ["'fp16'", "'bf16'"]),
    (_set(["arch"], "sm70"), "arch", ["'sm80'", "'sm90'"]),
    (_set(["target"], "sm_75"), "target", ["sm_80", "sm_86", "sm_89", "sm_90"]),
    (_set(["stages", 0, "op"], "conv"), "stages[0].op", ["'gemm'", "'swiglu'"]),
    (_set(["stages", 1, "sync"], "sometimes"), "stages[1].sync", ["'tile'", "'row'", "'strided'", "'none'"]),
    (_set(["stages", 0, "epilogue"], "tanh"), "stages[0].epilogue", ["'gelu'", "'silu'"]),
    (_set(["stages", 0, "order"], "diagonal"), "stages[0].order", ["'row_major'", "'column_major'"]),
    (_set(["stages", 0, "b_layout"], "tn"), "stages[0].b_layout", ["'row'", "'col'"]),
    (_set(["sms"], 0), "sms", ["greater than 0"]),
    (_set(["sms"], "many"), "sms", ["integer"]),
    (_set(["stages", 0, "n"], -8), "stages[0].n", ["greater than 0"]),
    (_set(["stages", 0, "n"], "1024"), "stages[0].n", ["integer"]),
    (_set(["stages", 0, "n"], 1024.0), "stages[0].n", ["integer"]),
    (_set(["stages", 0, "n"], True), "stages[0].n", ["integer"]),
    (_set(["stages", 0, "tile", "threadblock"], [128, 128]), "stages[0].tile.threadblock", ["[128, 128, 32]"]),
    (_set(["stages", 0, "tile", "warp"], "64x64x32"), "stages[0].tile.warp", ["[64, 64, 32]"]),
    (_set(["stages", 0, "tile", "threadblock"], [128, "x", 32]), "stages[0].tile.threadblock[1]", ["integer"]),
    (_set(["stages", 0, "tile"], [128, 128, 32]), "stages[0].tile", ["mapping"]),
    (_set(["stages", 0, "tile", "stages"], 0), "stages[0].tile.stages", ["greater than 0"]),
    (_set(["optimizations"], {"no_atomic_add": "maybe"}), "optimizations.no_atomic_add", ["true or false"]),
    (_set(["name"], 42), "name", ["string"]),
]


@pytest.mark.parametrize(("change", "field", "words"), STRUCTURAL, ids=[f for _, f, _ in STRUCTURAL])
def test_structural_errors(change: Callable[[dict[str, Any]], None], field: str, words: list[str]) -> None:
    expect_error(with_change(two_gemm, change), field, *words)


@pytest.mark.parametrize("data", [[1, 2], "name: x", None, 3])
def test_top_level_must_be_a_mapping(data: Any) -> None:
    expect_error(data, "<root>", "mapping")


def test_spec_error_remembers_its_source() -> None:
    with pytest.raises(SpecError) as info:
        parse_spec(with_change(two_gemm, lambda d: d.update(dtype="x")), source="chain.yaml")
    assert info.value.source == "chain.yaml"


# --------------------------------------------------------------------------------------------------
# cross-field rules of docs/spec-format.md


def _stage(i: int, **updates: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["stages"][i].update(updates)


def _tile(i: int, **updates: Any) -> Callable[[dict[str, Any]], None]:
    return lambda d: d["stages"][i]["tile"].update(updates)


def _three_gemm() -> dict[str, Any]:
    d = two_gemm()
    d["stages"].append(gemm("gemm3", "gemm2", 512, 2048, sync="row"))
    return d


RULES_TWO_GEMM = [
    # names
    (lambda d: d.update(name="Gpt3Mlp"), "name", ["lower snake case"]),
    (lambda d: d.update(name="3mlp"), "name", ["lower snake case"]),
    (lambda d: d.update(name="int"), "name", ["keyword"]),
    (_stage(0, name="gemm-1"), "stages[0].name", ["C identifier"]),
    (_stage(1, name="input"), "stages[1].name", ["reserved"]),
    (_stage(1, name="class"), "stages[1].name", ["keyword"]),
    (_stage(1, name="gemm1", a="input", sync=None), "stages[1].name", ["already", "unique"]),
    # sources, order, cycles
    (_stage(0, a="gemm2"), "stages[0].a", ["producers first", "move stage 'gemm2' before 'gemm1'"]),
    (_stage(0, a="x"), "stages[0].a", ["first stage", "a: input"]),
    (_stage(1, a="gemm9"), "stages[1].a", ["unknown stage 'gemm9'", "use 'input' or one of: gemm1"]),
    (_stage(1, a="gemm2"), "stages[1].a", ["cycle"]),
    # sync presence
    (_stage(1, sync=None), "stages[1].sync", ["no sync policy", "sync: row"]),
    (_stage(0, sync="row"), "stages[0].sync", ["input", "remove sync"]),
    # widths
    (
        _stage(1, k=1000),
        "stages[1].k",
        ["1000 does not match the output width of producer 'gemm1' (n=1024)", "set k: 1024"],
    ),
    (lambda d: d["stages"][1].pop("k"), "stages[1].k", ["need k", "set k: 1024"]),
    (lambda d: d["stages"][0].pop("k"), "stages[0].k", ["need k"]),
    (_stage(1, n=2044), "stages[1].n", ["multiple of 8", "2048"]),
    (_stage(0, k=500), "stages[0].k", ["multiple of 8", "504"]),
    # tile shape
    (
        _tile(1, warp=[48, 64, 32]),
        "stages[1].tile.warp",
        ["threadblock [128,128,32] is not a multiple of warp [48,64,32] in M", "warp M that divides 128 (e.g. 64)"],
    ),
    (_tile(1, warp=[64, 96, 32]), "stages[1].tile.warp", ["in N", "warp N"]),
    (_tile(1, warp=[64, 64, 48]), "stages[1].tile.warp", ["in K", "warp K"]),
    (_tile(1, warp=[64, 64, 256]), "stages[1].tile.warp", ["in K"]),
    (
        _tile(0, threadblock=[80, 128, 32], warp=[40, 64, 32]),
        "stages[0].tile.warp",
        ["instruction", "in M", "multiple of 16"],
    ),
    (_tile(1, warp=[64, 64, 8]), "stages[1].tile.warp", ["instruction", "in K"]),
    (_tile(1, instruction=[16, 8, 8]), "stages[1].tile.instruction", ["not supported", "[16,8,16]"]),
    (_tile(1, stages=2), "stages[1].tile.stages", ["minimum of 3", "stages: 3"]),
    (_stage(0, k=520), "stages[0].tile.threadblock", ["k=520 is not a multiple of threadblock K=32"]),
    # policies vs producer tiles
    (_tile(1, threadblock=[256, 128, 32]), "stages[1].tile.threadblock", ["row", "divide", "128"]),
    (_stage(1, sync="strided"), "stages[1].sync", ["only for swiglu"]),
    # split_k
    (_stage(0, split_k=2), "stages[0].split_k", ["split_k is always 1"]),
]


@pytest.mark.parametrize(
    ("change", "field", "words"), RULES_TWO_GEMM, ids=[f"{i}-{r[1]}" for i, r in enumerate(RULES_TWO_GEMM)]
)
def test_rules_two_gemm(change: Callable[[dict[str, Any]], None], field: str, words: list[str]) -> None:
    expect_error(with_change(two_gemm, change), field, *words)


@pytest.mark.parametrize(("tile", "field", "words"), [
    # Each passed the divisibility rules and then failed to compile (CUTLASS's static assertions); the sweep
    # behind model.MIN_WARP_N found where the sm80 GEMM instantiates.
    ({"threadblock": [128, 128, 16]}, "threadblock", "K-blocks of 32 or 64"),
    ({"threadblock": [128, 128, 128], "warp": [64, 64, 128]}, "threadblock", "K-blocks of 32 or 64"),
    ({"threadblock": [64, 64, 64], "warp": [32, 32, 32]}, "warp", "M and N only"),
    ({"threadblock": [128, 64, 32], "warp": [64, 16, 32]}, "warp", "at least 32 columns"),
    ({"threadblock": [128, 256, 32], "warp": [32, 64, 32]}, "warp", "16 warps; at most 8"),
    ({"threadblock": [256, 256, 32]}, "threadblock", "e.g. [128, 256, 32]"),  # its default warps are the widest
    ({"threadblock": [256, 32, 32], "warp": [32, 32, 32]}, "threadblock", "B's tile (32 x 32) is 128 16-byte vectors"),
    ({"threadblock": [16, 256, 32], "warp": [16, 32, 32]}, "threadblock", "A's tile (16 x 32)"),
])
def test_sm80_gemm_tiles_that_cutlass_cannot_build_name_the_field(tile: dict[str, Any], field: str, words: str) -> None:
    data = {"name": "c", "arch": "sm80", "stages": [{"name": "g", "op": "gemm", "a": "input", "n": 512, "k": 512,
                                                     "tile": tile}]}
    expect_error(data, f"stages[0].tile.{field}", words)


def test_a_k_that_no_sm80_k_block_divides_asks_for_padding() -> None:
    data = {"name": "c", "stages": [{"name": "g", "op": "gemm", "a": "input", "n": 512, "k": 24,
                                     "tile": {"threadblock": [128, 128, 32]}}]}
    expect_error(data, "stages[0].tile.threadblock", "pad k to a multiple of 32 (e.g. 32)")


def test_tile_policy_needs_consumer_k_to_divide_producer_n() -> None:
    def change(d: dict[str, Any]) -> None:
        d["stages"][0]["tile"] = {"threadblock": [128, 32, 32]}
        d["stages"][1].update(sync="tile", tile={"threadblock": [128, 128, 64], "warp": [64, 64, 64]})

    expect_error(
        with_change(two_gemm, change), "stages[1].tile.threadblock", "sync: tile", "threadblock K (64)", "(32)"
    )


def test_tile_policy_needs_consumer_m_to_divide_producer_m() -> None:
    change = lambda d: d["stages"][1].update(sync="tile", tile={"threadblock": [256, 128, 32]})  # noqa: E731
    expect_error(with_change(two_gemm, change), "stages[1].tile.threadblock", "divide")


def test_smaller_consumer_m_is_fine_for_row_and_tile() -> None:
    for sync in ("row", "tile"):
        change = lambda d, s=sync: d["stages"][1].update(sync=s, tile={"threadblock": [64, 128, 32]})  # noqa: E731
        assert parse_spec(with_change(two_gemm, change)).stages[1].sync.value == sync


def test_consumers_of_one_stage_must_agree_on_policy() -> None:
    def change(d: dict[str, Any]) -> None:
        d["stages"].append(gemm("gemm3", "gemm1", 512, 1024, sync="tile"))

    expect_error(with_change(two_gemm, change), "stages[2].sync", "same policy", "set sync: row")


def test_consumers_agreeing_on_policy_is_fine() -> None:
    data = with_change(two_gemm, lambda d: d["stages"].append(gemm("gemm3", "gemm1", 512, 1024, sync="row")))
    assert len(parse_spec(data).stages) == 3


def test_forward_reference_in_a_longer_chain() -> None:
    def change(d: dict[str, Any]) -> None:
        d["stages"][1]["a"] = "gemm3"

    expect_error(with_change(_three_gemm, change), "stages[1].a", "producers first")


def test_unknown_stage_lists_earlier_stages() -> None:
    expect_error(
        with_change(_three_gemm, _stage(2, a="gemm9")), "stages[2].a", "use 'input' or one of: gemm1, gemm2"
    )


def test_no_atomic_add_rejected_with_row_policy() -> None:
    data = with_change(two_gemm, lambda d: d.update(optimizations={"no_atomic_add": True}))
    expect_error(data, "optimizations.no_atomic_add", "row", "no_atomic_add: false")


def test_no_atomic_add_rejected_with_strided_policy() -> None:
    data = with_change(llama, lambda d: d.update(optimizations={"no_atomic_add": True}))
    expect_error(data, "optimizations.no_atomic_add", "strided")


def test_no_atomic_add_accepted_with_tile_policy() -> None:
    def change(d: dict[str, Any]) -> None:
        d["optimizations"] = {"no_atomic_add": True}
        d["stages"][1]["sync"] = "tile"

    assert parse_spec(with_change(two_gemm, change)).optimizations.no_atomic_add


# swiglu rules

RULES_LLAMA = [
    (_stage(1, n=2048), "stages[1].n", ["2*n=4096", "n=5632", "set n: 2816"]),
    (_stage(1, k=5632), "stages[1].k", ["swiglu takes no k", "remove k"]),
    (_tile(1, threadblock=[64, 128, 32]), "stages[1].tile.threadblock", ["must be 1"]),
    (_tile(1, warp=[32, 64, 1]), "stages[1].tile.warp", ["remove warp"]),
    (_tile(1, instruction=[16, 8, 16]), "stages[1].tile.instruction", ["remove instruction"]),
    (_tile(1, stages=3), "stages[1].tile.stages", ["remove stages"]),
    (_stage(1, epilogue="gelu"), "stages[1].epilogue", ["remove epilogue"]),
    (_stage(1, b_layout="col"), "stages[1].b_layout", ["remove b_layout"]),
    (_tile(1, threadblock=[64, 64, 1]), "stages[1].tile.threadblock", ["strided", "cols (64)", "(128)"]),
    (_tile(1, threadblock=[256, 128, 1]), "stages[1].tile.threadblock", ["divide"]),
    (_stage(2, k=2048), "stages[2].k", ["set k: 2816"]),
    (_tile(2, threadblock=[128, 128, 32]), "stages[2].tile.threadblock", ["row", "divide", "64"]),
]


@pytest.mark.parametrize(
    ("change", "field", "words"), RULES_LLAMA, ids=[f"{i}-{r[1]}" for i, r in enumerate(RULES_LLAMA)]
)
def test_rules_llama(change: Callable[[dict[str, Any]], None], field: str, words: list[str]) -> None:
    expect_error(with_change(llama, change), field, *words)


def test_swiglu_tile_policy_needs_cols_dividing_producer_tile_n() -> None:
    def change(d: dict[str, Any]) -> None:
        d["stages"][1]["sync"] = "tile"
        d["stages"][1]["tile"] = {"threadblock": [128, 256]}

    expect_error(with_change(llama, change), "stages[1].tile.threadblock", "divide", "(128)")


def test_swiglu_tile_policy_accepted_when_tiles_line_up() -> None:
    spec = parse_spec(with_change(llama, lambda d: d["stages"][1].update(sync="tile")))
    assert spec.stages[1].sync is Policy.TILE


def _split_llama() -> dict[str, Any]:
    """Gate and up as two GEMMs reading the input, a two-producer swiglu, then the down GEMM."""
    gemm_tile = {"threadblock": [128, 128, 32], "warp": [64, 64, 32], "stages": 4}
    return {
        "name": "split",
        "stages": [
            {"name": "gate", "op": "gemm", "a": "input", "n": 2816, "k": 8192, "tile": gemm_tile},
            {"name": "up", "op": "gemm", "a": "input", "n": 2816, "k": 8192, "tile": gemm_tile},
            {"name": "glu", "op": "swiglu", "a": "gate", "b": "up", "n": 2816, "sync": "tile",
             "tile": {"threadblock": [128, 128]}},
            {"name": "down", "op": "gemm", "a": "glu", "sync": "row", "n": 8192, "k": 2816, "tile": gemm_tile},
        ],
    }


def test_two_producer_swiglu_parses() -> None:
    spec = parse_spec(_split_llama())
    assert spec.stages[2].b == "up"


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda d: d["stages"][2].update(b="gate"), "stages[2].b", ["same stage"]),
        (lambda d: d["stages"][2].update(b="nope"), "stages[2].b", ["unknown"]),
        (lambda d: d["stages"][2].update(b="down"), "stages[2].b", ["unknown or later"]),
        (lambda d: d["stages"][3].update(b="up"), "stages[3].b", ["only swiglu"]),
        (lambda d: d["stages"][2].update(sync_b="strided"), "stages[2].sync_b", ["strided is only"]),
        (lambda d: d["stages"][1].update(n=5632), "stages[2].n", ["b: 'up'", "n=5632"]),
        (lambda d: d["stages"][2].pop("b"), "stages[2].n", ["2*n"]),
    ],
)
def test_two_producer_swiglu_rules(change: Callable[[dict[str, Any]], None], field: str, words: list[str]) -> None:
    expect_error(with_change(_split_llama, change), field, *words)


def test_strided_needs_n_multiple_of_producer_tile_n() -> None:
    def change(d: dict[str, Any]) -> None:
        d["stages"][0]["n"] = 2 * 2880  # 2880 % 128 != 0
        d["stages"][1]["n"] = 2880
        d["stages"][2]["k"] = 2880

    expect_error(with_change(llama, change), "stages[1].n", "multiple of producer 'gemm1' threadblock N (128)")


@pytest.mark.parametrize("arch", ["sm80", "sm90"])
def test_a_swiglu_reads_a_gemm_not_the_chain_input(arch: str) -> None:
    # It passed validation and then broke generate (its templates name the producing stage).
    data = {
        "name": "glu_only", "arch": arch,
        "stages": [{"name": "glu", "op": "swiglu", "a": "input", "n": 256, "tile": {"threadblock": [64, 128]}}],
    }
    expect_error(data, "stages[0].a", "not the chain input", "gate | up")


# --------------------------------------------------------------------------------------------------
# loading files


YAML_TEXT = """\
name: two_gemm
dtype: fp16
stages:
  - name: gemm1
    op: gemm
    a: input
    n: 1024
    k: 512
    tile: {threadblock: [128, 128, 32]}
  - name: gemm2
    op: gemm
    a: gemm1
    sync: row
    n: 2048
    k: 1024
    tile:
      threadblock: [128, 128, 32]
"""


@pytest.mark.parametrize("suffix", [".yaml", ".yml"])
def test_load_yaml(tmp_path: Path, suffix: str) -> None:
    path = tmp_path / f"chain{suffix}"
    path.write_text(YAML_TEXT)
    assert load_spec(path) == parse_spec(two_gemm())


def test_load_json(tmp_path: Path) -> None:
    path = tmp_path / "chain.json"
    path.write_text(json.dumps(two_gemm(), indent=2))
    assert load_spec(path) == parse_spec(two_gemm())


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        load_spec(tmp_path / "nope.yaml")
    assert "nope.yaml" in info.value.message and info.value.hint
    assert info.value.exit_code == 2


def test_load_directory(tmp_path: Path) -> None:
    (tmp_path / "dir.yaml").mkdir()
    with pytest.raises(UsageError):
        load_spec(tmp_path / "dir.yaml")


def test_load_unknown_suffix(tmp_path: Path) -> None:
    path = tmp_path / "chain.toml"
    path.write_text("name = 'x'")
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert ".toml" in info.value.message and info.value.hint


def test_load_yaml_syntax_error_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: x\nstages:\n  - name: [unclosed\n")
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert str(path) in info.value.message
    assert "line 4" in info.value.message or "line 3" in info.value.message
    assert info.value.hint


def test_load_yaml_duplicate_key_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    path.write_text(YAML_TEXT.replace("    n: 2048\n", "    n: 2048\n    n: 4096\n"))
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert "duplicate key 'n'" in info.value.message and "line 15" in info.value.message


def test_load_yaml_base_60_number_is_an_error(tmp_path: Path) -> None:
    path = tmp_path / "sexagesimal.yaml"  # YAML 1.1 reads 1:08:16 as 4096
    path.write_text(YAML_TEXT.replace("    n: 2048\n", "    n: 1:08:16\n"))
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert "base-60" in info.value.message and "decimal" in info.value.hint


def test_load_json_duplicate_key_is_an_error(tmp_path: Path) -> None:
    # json.loads keeps the last value silently; a spec file's keys are unique in YAML and JSON alike.
    path = tmp_path / "dup.json"
    path.write_text('{"name": "edge_one", "stages": [{"name": "g", "op": "gemm", "a": "input", "n": 64, "k": 64,'
                    ' "n": 128}], "name": "edge_two"}')
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert "key 'n' appears twice" in info.value.message and info.value.hint


def test_load_json_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{"name": "x",\n "stages": [}\n')
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert "line 2" in info.value.message and info.value.hint


@pytest.mark.parametrize("text", ["", "- a\n- b\n", "just a string\n"])
def test_load_top_level_not_a_mapping(tmp_path: Path, text: str) -> None:
    path = tmp_path / "odd.yaml"
    path.write_text(text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.field == "<root>" and str(path) in info.value.message and info.value.hint


def test_load_spec_error_keeps_field_path(tmp_path: Path) -> None:
    path = tmp_path / "chain.yaml"
    path.write_text(YAML_TEXT.replace("k: 1024", "k: 1000"))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.field == "stages[1].k" and info.value.source == str(path)


# --------------------------------------------------------------------------------------------------
# hashing


def test_spec_hash_is_stable_and_canonical() -> None:
    spec = parse_spec(gpt3())
    h = spec_hash(spec)
    assert len(h) == 12 and all(c in "0123456789abcdef" for c in h)
    assert h == spec_hash(parse_spec(gpt3()))
    data = spec.model_dump(mode="json")
    for stage in data["stages"]:  # an absent `reads` (added later) is left out, so older hashes stand
        assert "split_k" not in stage and "cluster" not in stage["tile"]
        stage["split_k"], stage["tile"]["cluster"] = 1, None  # the one-value fields count as they were
        assert stage.pop("reads") is None
        assert stage.pop("bias") is False  # likewise no bias (issue 12)
    assert data.pop("dispatch") is None  # likewise an absent dispatch table
    expected = hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    assert h == expected


def test_spec_hash_ignores_key_order_and_explicit_defaults() -> None:
    reordered = {k: gpt3()[k] for k in reversed(list(gpt3()))}
    assert spec_hash(parse_spec(reordered)) == spec_hash(parse_spec(gpt3()))

    def explicit(d: dict[str, Any]) -> None:
        d["stages"][1]["tile"] = {
            "threadblock": [128, 128, 32],
            "warp": [64, 64, 32],
            "instruction": [16, 8, 16],
            "stages": 3,
        }
        d["stages"][1].update(b_layout="row", epilogue="identity", order="row_major", split_k=1)
        d["optimizations"] = {"no_atomic_add": False}

    assert spec_hash(parse_spec(with_change(gpt3, explicit))) == spec_hash(parse_spec(gpt3()))


def test_spec_hash_changes_with_content() -> None:
    other = with_change(gpt3, _stage(1, epilogue="relu"))
    assert spec_hash(parse_spec(other)) != spec_hash(parse_spec(gpt3()))


def test_spec_hash_same_for_yaml_and_json(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text(YAML_TEXT)
    (tmp_path / "a.json").write_text(json.dumps(two_gemm()))
    assert spec_hash(load_spec(tmp_path / "a.yaml")) == spec_hash(load_spec(tmp_path / "a.json"))


def test_chainspec_model_direct_construction() -> None:
    # the model itself accepts omitted tile fields; parse_spec is what fills them
    spec = ChainSpec.model_validate(two_gemm())
    assert spec.stages[0].tile.warp is None


def test_bias_only_on_a_gemm() -> None:
    """`bias: true` on a swiglu stage names the field and says where a bias goes."""
    import yaml

    data = yaml.safe_load((REPO / "cusync_gen" / "examples" / "llama_mlp.yaml").read_text())
    glu = next(i for i, s in enumerate(data["stages"]) if s["op"] == "swiglu")
    data["stages"][glu]["bias"] = True
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.field == f"stages[{glu}].bias" and "only a gemm stage" in info.value.message


def test_bias_false_keeps_the_spec_hash() -> None:
    """An absent `bias` and `bias: false` hash alike, so the shipped projects are unchanged."""
    import yaml

    data = yaml.safe_load((REPO / "cusync_gen" / "examples" / "two_gemm.yaml").read_text())
    plain = spec_hash(parse_spec(data))
    data["stages"][0]["bias"] = False
    assert spec_hash(parse_spec(data)) == plain
    data["stages"][0]["bias"] = True
    assert spec_hash(parse_spec(data)) != plain


@pytest.mark.parametrize("example", ["two_gemm", "two_gemm_sm90"])
def test_one_value_fields_of_old_specs_load_and_hash_as_before(example: str) -> None:
    """`split_k: 1` (every stage) and `cluster: [1, 1, 1]` (sm90 GEMM tiles) are accepted and dropped; the
    spec, and its hash (so the generated project), are those of the spec without them."""
    from cusync_gen.spec.loading import read_spec_data
    from cusync_gen.paths import example_path

    data = read_spec_data(example_path(example))
    old = copy.deepcopy(data)
    for stage in old["stages"]:
        stage["split_k"] = 1
        if old.get("arch") == "sm90" and stage["op"] == "gemm":
            stage["tile"]["cluster"] = [1, 1, 1]
    assert parse_spec(old) == parse_spec(data)
    assert spec_hash(parse_spec(old)) == spec_hash(parse_spec(data))


@pytest.mark.parametrize(("change", "field", "words"), [
    (lambda s: s.update(split_k=2), "stages[0].split_k", ["split_k=2", "remove split_k"]),
    (lambda s: s.update(split_k=True), "stages[0].split_k", ["remove split_k"]),
    (lambda s: s["tile"].update(cluster=[2, 1, 1]), "stages[0].tile.cluster", ["[2, 1, 1]", "remove cluster"]),
    (lambda s: s["tile"].update(cluster=[1, 1]), "stages[0].tile.cluster", ["remove cluster"]),
])
def test_one_value_fields_with_another_value_name_the_field_and_the_fix(change, field: str, words: list[str]) -> None:  # noqa: ANN001
    from cusync_gen.spec.loading import read_spec_data
    from cusync_gen.paths import example_path

    data = read_spec_data(example_path("two_gemm_sm90"))
    change(data["stages"][0])
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.field == field, info.value
    text = f"{info.value.message} {info.value.hint}"
    assert all(w in text for w in words), text


def test_an_sm80_or_attention_cluster_is_still_a_hopper_setting() -> None:
    from cusync_gen.spec.loading import read_spec_data
    from cusync_gen.paths import example_path

    data = read_spec_data(example_path("two_gemm"))
    data["stages"][0]["tile"]["cluster"] = [1, 1, 1]
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.field == "stages[0].tile.cluster" and "arch: sm90" in info.value.hint
    data = read_spec_data(example_path("gpt3_attention"))
    data["attention"]["tiles"]["qkv"]["cluster"] = [1, 1, 1]
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.field == "attention.tiles.qkv.cluster"
