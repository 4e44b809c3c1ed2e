"""Limits on every number and name of a spec, and a YAML/JSON loader that no input can hang or crash
(docs/spec-format.md, "Limits"). Each bad input is one clear error naming the field or the file."""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from cusync_gen import cli, paths, spec
from cusync_gen.errors import SpecError, UsageError
from cusync_gen.spec import MAX_DIM, MAX_M, MAX_STAGES, load_spec, parse_spec, spec_hash

REPO = Path(__file__).resolve().parents[1]


def example(name: str) -> dict[str, Any]:
    return yaml.safe_load((paths.examples_dir() / f"{name}.yaml").read_text())


def expect_error(data: Any, field: str, *words: str) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    err = info.value
    assert err.field == field, err.message
    assert err.hint.strip(), f"empty hint for {err.message}"
    assert "\n" not in err.message + err.hint
    assert len(err.message) < 400, err.message
    for word in words:
        assert word in err.message + " " + err.hint, f"{word!r} not in {err.message!r} / {err.hint!r}"
    return err


def chain(stages: int) -> dict[str, Any]:
    """two_gemm with `stages` GEMMs in a line."""
    data = example("two_gemm")
    second = data["stages"][1]
    data["stages"] += [dict(second, name=f"gemm{i}", a=f"gemm{i - 1}") for i in range(3, stages + 1)]
    return data


# --------------------------------------------------------------------------------------------------
# Item 5: at most kMaxStages stages


def test_max_stages_matches_the_runtime() -> None:
    header = (REPO / "templates" / "runtime" / "include" / "cusync" / "stage.cuh").read_text()
    assert f"constexpr int kMaxStages = {MAX_STAGES};" in header


def test_sixteen_stages_are_fine() -> None:
    assert len(parse_spec(chain(MAX_STAGES)).stages) == MAX_STAGES


@pytest.mark.parametrize("count", [MAX_STAGES + 1, 2000])
def test_more_stages_than_the_runtime_holds(count: int) -> None:
    err = expect_error(chain(count), "stages", str(count), str(MAX_STAGES), "kMaxStages")
    assert "gemm" not in err.message  # the message does not print the stages


# --------------------------------------------------------------------------------------------------
# Item 6: every number has a limit that fits the C++ types


def _set(data: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    data = copy.deepcopy(data)
    node = data
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("name", "path", "value", "field", "words"),
    [
        ("two_gemm", ("stages", 1, "n"), 2**31, "stages[1].n", ["131072"]),
        ("two_gemm", ("stages", 1, "n"), 10**12, "stages[1].n", ["131072"]),
        ("two_gemm", ("stages", 0, "k"), 10**12, "stages[0].k", ["131072"]),
        ("two_gemm", ("stages", 0, "k"), MAX_DIM + 8, "stages[0].k", ["131072"]),
        ("two_gemm", ("sms",), 10**6, "sms", ["1024"]),
        ("two_gemm", ("stages", 0, "tile", "threadblock"), [512, 128, 32], "stages[0].tile.threadblock", ["256"]),
        ("two_gemm", ("stages", 0, "tile", "warp"), [64, 64, 10**9], "stages[0].tile.warp", ["256"]),
        ("two_gemm", ("stages", 0, "tile", "stages"), 10**9, "stages[0].tile.stages", ["10"]),
        ("two_gemm", ("stages", 0, "split_k"), 10**30, "stages[0].split_k", ["always 1"]),
        ("gpt3_attention", ("attention", "hidden"), 10**12, "attention.hidden", ["131072"]),
        ("gpt3_attention", ("attention", "heads"), 10**9, "attention.heads", ["131072"]),
        ("gpt3_attention", ("attention", "heads"), 2048, "attention.heads", ["131072", "head_dim"]),
        ("gpt3_attention", ("attention", "head_dim"), 512, "attention.head_dim", ["256"]),
        ("gpt3_attention", ("attention", "tiles", "qkv", "stages"), 11, "attention.tiles.qkv.stages", ["10"]),
        ("llama_mlp_sm90", ("tile_configs", 0, "m_max"), 2**31, "tile_configs[0].m_max", ["1048576"]),
        ("llama_mlp_sm90", ("tile_configs", 0, "tiles", "gemm1"), [128, 2**40, 64], "tile_configs[0].tiles.gemm1",
         ["256"]),
    ],
)
def test_numbers_above_their_limit(name: str, path: tuple[Any, ...], value: Any, field: str, words: list[str]) -> None:
    expect_error(_set(example(name), path, value), field, *words)


def test_at_most_eight_tile_configs() -> None:
    data = example("llama_mlp_sm90")
    data["tile_configs"] = [{"m_max": 64 * (c + 1), "tiles": {}} for c in range(spec.MAX_TILE_CONFIGS + 1)]
    expect_error(data, "tile_configs", "9", "8")


def test_heads_times_head_dim_bound_comes_before_the_tile_rules() -> None:
    # D = heads * head_dim feeds an internal StageSpec(k=D): above the limit it must be a SpecError
    data = _set(example("llama_attention"), ("attention", "heads"), 4096)
    expect_error(data, "attention.heads", "heads * head_dim", "131072")


@pytest.mark.parametrize(
    ("tile", "words"),
    [
        ([64, 100], ["multiple of 8"]),
        ([64, 192], ["192", "4096"]),  # 24 threads per row do not divide the 512-thread block
        ([16, 128], ["32"]),           # rows must be a multiple of 4096 / cols
        ([512, 128], ["256"]),
    ],
)
def test_swiglu_tile_is_one_the_kernel_instantiates(tile: list[int], words: list[str]) -> None:
    data = example("llama_mlp")
    data["stages"][1]["tile"] = {"threadblock": tile}
    expect_error(data, "stages[1].tile.threadblock", *words)


def test_swiglu_constants_match_the_kernel() -> None:
    header = (REPO / "templates" / "runtime" / "include" / "cusync" / "swiglu.cuh").read_text()
    assert f"static int const kThreads = {spec.SWIGLU_BLOCK_THREADS};" in header
    assert f"static int const kVector = {spec.SWIGLU_VECTOR};" in header


def test_largest_dimensions_and_real_models_are_accepted() -> None:
    big = example("two_gemm")
    for stage in big["stages"]:
        stage["n"] = stage["k"] = MAX_DIM
    parse_spec(big)
    llama405 = example("llama_mlp")  # LLaMA 3.1 405B, one GPU: hidden 16384, FFN 53248
    llama405["stages"][0].update(n=2 * 53248, k=16384)
    llama405["stages"][1]["n"] = 53248
    llama405["stages"][2].update(n=16384, k=53248)
    parse_spec(llama405)
    gpt3 = example("gpt3_attention")  # GPT-3 175B: 96 heads of 128, hidden 12288
    gpt3["attention"]["heads"] = 96
    parse_spec(gpt3)


@pytest.mark.parametrize(("value", "words"), [(1e12, ["integer"]), (True, ["integer"]), ("1024", ["integer"])])
def test_numbers_must_be_integers(value: Any, words: list[str]) -> None:
    expect_error(_set(example("two_gemm"), ("stages", 1, "n"), value), "stages[1].n", *words)


@pytest.mark.parametrize("text", ["n: 1.0e12", "n: 1e12", "n: true", "n: '1024'"])
def test_yaml_numbers_must_be_integers(tmp_path: Path, text: str) -> None:
    source = (paths.examples_dir() / "two_gemm.yaml").read_text()
    path = tmp_path / "s.yaml"
    path.write_text(source.replace("n: 1024", text, 1))
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.field == "stages[0].n"


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_integer_with_thousands_of_digits(tmp_path: Path, suffix: str) -> None:
    data = example("two_gemm")
    data["stages"][0]["n"] = 7
    text = json.dumps(data).replace('"n": 7', '"n": ' + "9" * 5000)
    path = tmp_path / f"s{suffix}"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_spec(path)
    assert str(path) in info.value.message and len(info.value.message) < 300


# --------------------------------------------------------------------------------------------------
# The run-time M (--m, and --batch/--cache which go through the same parser)


def test_parse_ms_accepts_the_limit() -> None:
    assert cli.parse_ms(f"1,{MAX_M}") == [1, MAX_M]


@pytest.mark.parametrize("text", [str(MAX_M + 1), "2147483648", "9" * 5000], ids=["2^20+1", "2^31", "5000-digits"])
def test_parse_ms_rejects_m_above_the_limit(text: str) -> None:
    with pytest.raises(UsageError) as info:
        cli.parse_ms(text)
    assert info.value.exit_code == 2
    assert str(MAX_M) in info.value.hint and len(info.value.message) < 200


@pytest.mark.parametrize("text", ["\u00b2", "\u0661", "1 2", "-1", ""])
def test_parse_ms_takes_ascii_digits_only(text: str) -> None:
    with pytest.raises(UsageError):
        cli.parse_ms(text)


def test_validate_rejects_m_above_the_limit(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        cli.main(["validate", "two_gemm", "--m", str(2**31)])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "--m" in err and str(MAX_M) in err and "Traceback" not in err


# --------------------------------------------------------------------------------------------------
# Item 7: names


@pytest.mark.parametrize(
    ("path", "value", "field", "words"),
    [
        (("name",), "two_gemm\n", "name", ["'two_gemm\\n'"]),
        (("name",), "two_gemm\r\n", "name", []),
        (("name",), "g" * 65, "name", ["64"]),
        (("name",), "tw\u00f6_gemm", "name", []),
        (("stages", 0, "name"), "gemm1\n", "stages[0].name", ["'gemm1\\n'"]),
        (("stages", 0, "name"), "g\u00e9mm", "stages[0].name", ["ASCII"]),
        (("stages", 0, "name"), "\uff47emm", "stages[0].name", ["ASCII"]),  # fullwidth g: isidentifier() is True
        (("stages", 0, "name"), "g" * 65, "stages[0].name", ["64"]),
    ],
)
def test_bad_names(path: tuple[Any, ...], value: str, field: str, words: list[str]) -> None:
    expect_error(_set(example("two_gemm"), path, value), field, *words)


def test_sixty_four_character_names_are_fine() -> None:
    data = _set(example("two_gemm"), ("name",), "n" * 64)
    data["stages"][1]["a"] = data["stages"][0]["name"] = "G" * 64
    parse_spec(data)


def test_attention_name_is_checked_the_same_way() -> None:
    expect_error(_set(example("gpt3_attention"), ("name",), "gpt3_attention\n"), "name")


# --------------------------------------------------------------------------------------------------
# Values shown in errors are cut short


@pytest.mark.parametrize(
    ("path", "value", "field"),
    [
        (("name",), list(range(100_000)), "name"),
        (("stages", 1, "a"), "x" * 100_000, "stages[1].a"),
        (("stages", 0, "epilogue"), "y" * 100_000, "stages[0].epilogue"),
        (("stages", 0, "tile", "threadblock"), list(range(100_000)), "stages[0].tile.threadblock"),
        (("stages",), ["z" * 100_000], "stages[0]"),
        (("arch",), {"k" * 1000: 1}, "arch"),
    ],
    ids=["list-name", "long-a", "long-enum", "long-triple", "long-stage", "dict-arch"],
)
def test_long_values_are_cut_short_in_errors(path: tuple[Any, ...], value: Any, field: str) -> None:
    err = expect_error(_set(example("two_gemm"), path, value), field)
    assert "..." in err.message


def test_long_unknown_key_is_cut_short() -> None:
    data = example("two_gemm")
    data["stages"][0]["q" * 100_000] = 1
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert len(info.value.message) + len(info.value.field) < 600 and "..." in info.value.message


# --------------------------------------------------------------------------------------------------
# Item 8: the loader


def _write(tmp_path: Path, text: str, suffix: str = ".yaml") -> Path:
    path = tmp_path / f"spec{suffix}"
    path.write_text(text)
    return path


def _usage_error(path: Path, *words: str) -> UsageError:
    with pytest.raises(UsageError) as info:
        load_spec(path)
    err = info.value
    assert str(path) in err.message and err.hint
    assert len(err.message) < 400 and "\n" not in err.message
    for word in words:
        assert word in err.message + " " + err.hint, f"{word!r} not in {err.message!r} / {err.hint!r}"
    return err


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("? [a, b]\n: 1\n", ["line 1", "key"]),
        ("? {a: 1}\n: 1\n", ["line 1", "key"]),
        ("name: two_gemm\nstages:\n  - ? [a]\n    : 1\n", ["line 3", "key"]),
        ("1: x\n", ["key", "1"]),
        ("null: x\n", ["key"]),
    ],
)
def test_mapping_keys_must_be_strings(tmp_path: Path, text: str, words: list[str]) -> None:
    _usage_error(_write(tmp_path, text), *words)


def test_duplicate_key_still_reported(tmp_path: Path) -> None:
    _usage_error(_write(tmp_path, "name: a\nname: b\n"), "duplicate key 'name'")


@pytest.mark.parametrize("depth", [33, 100_000])
def test_deep_yaml_nesting(tmp_path: Path, depth: int) -> None:
    _usage_error(_write(tmp_path, "name: " + "[" * depth + "]" * depth + "\n"), "32")


@pytest.mark.parametrize("depth", [33, 100_000])
def test_deep_json_nesting(tmp_path: Path, depth: int) -> None:
    _usage_error(_write(tmp_path, '{"name": ' + "[" * depth + "]" * depth + "}", ".json"), "32")


def test_nesting_of_a_real_spec_is_fine(tmp_path: Path) -> None:
    data = example("llama_mlp_sm90")
    load_spec(_write(tmp_path, json.dumps(data), ".json"))


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_file_larger_than_one_mib(tmp_path: Path, suffix: str) -> None:
    text = json.dumps({"name": "two_gemm", "comment": "x" * (spec.MAX_SPEC_BYTES + 1)})
    _usage_error(_write(tmp_path, text, suffix), "1 MiB")


@pytest.mark.parametrize("suffix", [".yaml", ".json"])
def test_too_many_values(tmp_path: Path, suffix: str) -> None:
    _usage_error(_write(tmp_path, json.dumps({"name": list(range(spec.MAX_SPEC_VALUES + 1))}), suffix),
                 str(spec.MAX_SPEC_VALUES))


def test_yaml_loader_stops_at_the_value_limit(tmp_path: Path) -> None:
    """Composing 1 MiB of YAML takes PyYAML half a minute: the loader stops at the limit, and says where."""
    path = _write(tmp_path, "name: x\nitems:\n" + "- 1\n" * 200_000)
    err = _usage_error(path, str(spec.MAX_SPEC_VALUES))
    line = int(err.message.split(":")[1])
    assert line <= spec.MAX_SPEC_VALUES + 3


BILLION_LAUGHS = "\n".join(
    ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    + ["name: *a8", ""]
)


def test_billion_laughs_is_refused_quickly(tmp_path: Path) -> None:
    path = _write(tmp_path, BILLION_LAUGHS)
    code = f"from cusync_gen.spec import load_spec\nload_spec({str(path)!r})"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)
    assert proc.returncode != 0
    assert "UsageError" in proc.stderr and str(spec.MAX_SPEC_VALUES) in proc.stderr
    assert len(proc.stderr) < 5000


def test_self_referencing_alias(tmp_path: Path) -> None:
    _usage_error(_write(tmp_path, "name: &a [*a]\n"), "32")


def test_aliases_within_the_limits_work(tmp_path: Path) -> None:
    text = (paths.examples_dir() / "two_gemm.yaml").read_text()
    tile = "tile:\n      threadblock: [128, 128, 32]"
    assert text.count(tile) == 2
    first = text.index(tile)
    aliased = text[:first] + "tile: &t\n      threadblock: [128, 128, 32]" + text[first + len(tile):]
    second = aliased.rindex(tile)
    end = aliased.index("stages: 3", second) + len("stages: 3")
    aliased = aliased[:second] + "tile: *t" + aliased[end:]
    plain = load_spec(paths.examples_dir() / "two_gemm.yaml")
    assert spec_hash(load_spec(_write(tmp_path, aliased))) == spec_hash(plain)


def test_long_yaml_tag_is_cut_short(tmp_path: Path) -> None:
    _usage_error(_write(tmp_path, f"name: !{'t' * 100_000} x\n"), "...")


# --------------------------------------------------------------------------------------------------
# The limits table and the docs


def test_every_limit_is_documented() -> None:
    docs = (REPO / "docs" / "spec-format.md").read_text()
    section = docs[docs.index("## Limits"):]
    section = section[: section.find("\n## ", 1) if "\n## " in section[1:] else len(section)]
    for limit in spec.LIMITS:
        row = next((line for line in section.splitlines() if line.startswith(f"| {limit.what} |")), None)
        assert row is not None, f"docs/spec-format.md, Limits: no row for {limit.what!r}"
        assert re.search(rf"\b{limit.maximum}\b", row), f"{limit.what}: {limit.maximum} not in {row!r}"
