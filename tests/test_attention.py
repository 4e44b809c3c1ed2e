"""The attention chain: spec rules, the plan's grids and split-K, the verifier (with planted bugs), and
the CLI on attention specs. Its GPU checks are in test_gpu.py; its nvcc build in test_compile.py."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import EXAMPLES_ATTENTION, REPO
from cusync_gen import verify_attention as va
from cusync_gen.attention_plan import AttentionPlan, AttentionShape, make_attention_plan, split_k_for
from cusync_gen.cli import main
from cusync_gen.errors import SpecError, UsageError
from cusync_gen.spec import AttentionSpec, load_spec, parse_spec
from exhaustive_verifiers import verify_attention_exhaustive

EXAMPLE_DIR = REPO / "cusync_gen" / "examples"


def example_data(name: str = "gpt3_attention") -> dict[str, Any]:
    return yaml.safe_load((EXAMPLE_DIR / f"{name}.yaml").read_text())


def plan_of(name: str = "gpt3_attention") -> AttentionPlan:
    spec = load_spec(EXAMPLE_DIR / f"{name}.yaml")
    assert isinstance(spec, AttentionSpec)
    return make_attention_plan(spec)


def cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    return int(info.value.code or 0)


def rejected(data: dict[str, Any]) -> SpecError:
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    return info.value


# --- spec -----------------------------------------------------------------------------------------

def test_examples_parse_and_fill_tile_defaults() -> None:
    data = example_data()
    del data["attention"]["tiles"]["scores"]["warp"]
    del data["attention"]["tiles"]["scores"]["stages"]
    spec = parse_spec(data)
    assert isinstance(spec, AttentionSpec)
    assert spec.attention.tiles.scores.warp == (64, 64, 32) and spec.attention.tiles.scores.stages == 3


@pytest.mark.parametrize(("edit", "field", "words"), [
    (lambda d: d.update(arch="sm90"), "attention.tiles", "picks its own tiles"),  # the sm90 layer has none
    (lambda d: d["attention"].update(kv_heads=4), "attention.kv_heads", "set arch: sm90"),
    (lambda d: d["attention"].update(rotary=True), "attention.rotary", "set arch: sm90"),
    (lambda d: d["attention"].pop("tiles"), "attention.tiles", "needs the tiles"),
    (lambda d: d["attention"].update(head_dim=100), "attention.head_dim", "multiple of 32"),
    (lambda d: d["attention"].update(head_dim=48), "attention.head_dim", "arch: sm90"),  # compiled: no sm80 kernel
    (lambda d: d["attention"]["tiles"]["pv"].update(threadblock=[128, 8, 32], warp=[64, 8, 32]),
     "attention.tiles.pv.warp", "at least 32 columns"),
    (lambda d: d["attention"]["tiles"]["qkv"].update(threadblock=[64, 256, 16], warp=[64, 32, 16]),
     "attention.tiles.qkv.threadblock", "K-blocks of 32 or 64"),
    (lambda d: d["attention"]["tiles"]["pv"].update(threadblock=[128, 256, 32]), "attention.tiles.pv.threadblock",
     "one head"),
    (lambda d: d["attention"]["tiles"]["proj"].update(threadblock=[64, 128, 32], warp=[32, 64, 32]),
     "attention.tiles.proj.threadblock", "must equal scores'"),
    (lambda d: d["attention"]["tiles"]["qkv"].update(threadblock=[64, 160, 32], warp=[64, 32, 32]),
     "attention.tiles.qkv.threadblock", "must divide 3 * heads * head_dim"),
    (lambda d: d["attention"]["tiles"]["qkv"].update(warp=[48, 64, 64]), "attention.tiles.qkv.warp", "multiple"),
    (lambda d: d["attention"].update(heeds=3), "attention.heeds", "did you mean 'heads'"),
    (lambda d: d["attention"]["tiles"].pop("pv"), "attention.tiles.pv", "missing"),
    (lambda d: d.update(stages=[]), "attention", "not both"),
])
def test_bad_attention_specs_name_the_field(edit: Any, field: str, words: str) -> None:
    data = example_data()
    edit(data)
    err = rejected(data)
    assert err.field == field, err
    assert words in f"{err} {err.hint}", (err, err.hint)


# --- plan -----------------------------------------------------------------------------------------

def test_a_tile_that_does_not_fit_in_shared_memory_names_the_field() -> None:
    data = example_data()
    data["attention"]["tiles"]["qkv"].update(threadblock=[128, 256, 64], stages=8)
    spec = parse_spec(data)
    assert isinstance(spec, AttentionSpec)
    with pytest.raises(SpecError) as info:
        make_attention_plan(spec)
    assert info.value.field == "attention.tiles.qkv.stages" and "shared memory" in str(info.value)


def test_split_k_fills_the_gpu_only_when_the_grid_is_small() -> None:
    assert split_k_for(36, 12288, 132) == 6       # generation: 36 qkv tiles -> 216 blocks
    assert split_k_for(288, 12288, 132) == 1      # a 1024-token prompt already fills the GPU
    assert split_k_for(36, 12288 + 32, 132) == 1  # K not a whole number of 64-element blocks


def test_grids_and_wait_values() -> None:
    plan = plan_of()
    shape = AttentionShape(1, 1024, 0)
    grid = plan.grids(shape)
    assert grid["scores"] == (12 * 8, 8) and grid["softmax"] == (96, 1) and grid["pv"] == (96, 1)
    waits = plan.wait_values(shape)
    assert waits["softmax"] == 8 and waits["pv"] == 1 and waits["proj"] == 12
    gen = AttentionShape(4, 1, 1023)
    assert plan.wait_values(gen)["proj"] == 4 * 12  # every sequence's heads write the one O tile row
    assert plan.wait_values(gen)["scores"] == grid["qkv"][1] * plan.splits(gen)["qkv"]


@pytest.mark.parametrize(("shape", "words"), [
    (AttentionShape(2, 3, 5), r"prompt \(batch 1\)"),
    (AttentionShape(200, 1, 7), "does not fit one O tile row"),
    (AttentionShape(1, 5, 0), "multiple of 8"),
])
def test_unsupported_shapes_are_usage_errors(shape: AttentionShape, words: str) -> None:
    with pytest.raises(UsageError, match=words):
        plan_of().grids(shape)


# --- verifier -------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", EXAMPLES_ATTENTION)
@pytest.mark.parametrize("shape", [AttentionShape(1, 8, 0), AttentionShape(1, 300, 4), AttentionShape(1, 1024, 0),
                                   AttentionShape(4, 1, 2047), AttentionShape(1, 1, 7)])
def test_examples_are_proved_sound(name: str, shape: AttentionShape) -> None:
    proof = va.verify_attention(plan_of(name), shape)
    assert proof.reads > proof.tiles > 0
    assert "proved" in proof.describe()


def test_a_wait_value_one_short_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    plan = plan_of()
    real = AttentionPlan.wait_values

    def short(self: AttentionPlan, shape: AttentionShape) -> dict[str, int]:
        values = real(self, shape)
        return {**values, "proj": values["proj"] - 1}

    monkeypatch.setattr(AttentionPlan, "wait_values", short)
    with pytest.raises(SpecError, match="proj tile .* waits for 11 posts on pv semaphore 0, which receives 12"):
        va.verify_attention(plan, AttentionShape(1, 256, 0))


def test_pv_without_its_v_edge_is_rejected() -> None:
    """The bug this verifier found: with causal scores tiles skipped, pv's reads of V beyond its rows'
    visible keys are covered by no wait unless pv waits for qkv itself."""
    with pytest.raises(SpecError, match="pv tile .* reads qkv tile .* without a wait that covers its post"):
        va.verify_attention(plan_of(), AttentionShape(1, 384, 0), pv_waits_for_v=False)
    va.verify_attention(plan_of(), AttentionShape(1, 384, 0))  # with the edge: proved


def test_representative_shapes_cover_both_phases() -> None:
    phases = {(s.batch > 1 or s.new_tokens == 1) for s in va.REPRESENTATIVE_SHAPES}
    assert phases == {True, False}
    proofs = va.verify_attention_plan(plan_of("llama_attention"))
    assert {p.shape for p in proofs} == set(va.REPRESENTATIVE_SHAPES)
    assert len(proofs) == len(va.REPRESENTATIVE_SHAPES) * 4  # SM counts 84, 108, 128, 132: splits differ


@dataclasses.dataclass(frozen=True)
class _Skewed(AttentionPlan):
    """A plan whose wait values are off by `skew` (stage, delta): the bugs the verifier must catch."""

    skew: tuple[tuple[str, int], ...] = ()

    def wait_values(self, shape: AttentionShape) -> dict[str, int]:
        values = super().wait_values(shape)
        for stage, delta in self.skew:
            values[stage] += delta
        return values


@st.composite
def _attention_cases(draw: st.DrawFn) -> tuple[AttentionPlan, AttentionShape, bool]:
    """Small attention chains with any tile shapes (proj's tile M too), prompt or generation shapes, and
    sometimes a wrong wait value or pv without its wait on V."""
    base = plan_of()
    tile_m = draw(st.sampled_from([16, 32, 48]))
    head_dim = draw(st.sampled_from([8, 16, 24, 32]))
    tiles = {"qkv": (draw(st.sampled_from([16, 32, 48])), draw(st.sampled_from([16, 32, 48, 64]))),
             "scores": (tile_m, draw(st.sampled_from([16, 32, 48]))),
             "pv": (tile_m, draw(st.sampled_from([8, 16, 32]))),
             "proj": (tile_m if draw(st.booleans()) else draw(st.sampled_from([16, 32, 48])), 64)}
    gemms = tuple(dataclasses.replace(g, tile=dataclasses.replace(g.tile, m=tiles[g.name][0], n=tiles[g.name][1]))
                  for g in base.gemms)
    skew = draw(st.one_of(st.just(()), st.tuples(st.tuples(st.sampled_from(["scores", "softmax", "pv", "proj"]),
                                                           st.sampled_from([-1, 1])))))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(AttentionPlan)}
    plan = _Skewed(**{**fields, "gemms": gemms, "heads": draw(st.integers(1, 4)), "head_dim": head_dim,
                      "hidden": draw(st.sampled_from([64, 128, 640])), "causal": draw(st.booleans()),
                      "sms": draw(st.sampled_from([4, 108]))}, skew=skew)
    if draw(st.booleans()):
        s, batch = draw(st.integers(1, 160)), 1
    else:
        s, batch = 1, draw(st.integers(1, tile_m))
    cache = draw(st.integers(0, 150))
    cache += -(cache + s) % 8
    return plan, AttentionShape(batch, s, cache), draw(st.booleans())


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_attention_cases())
def test_the_bounded_attention_proof_agrees_with_enumerating_every_tile(
        case: tuple[AttentionPlan, AttentionShape, bool]) -> None:
    """Same verdict, same first failing tile and the same tile and read counts as the full enumeration."""
    def outcome(check: Any) -> Any:
        try:
            return check(*case)
        except (SpecError, UsageError) as err:
            return type(err).__name__, str(err)

    fast = outcome(va.verify_attention)
    assert ((fast.tiles, fast.reads) if isinstance(fast, va.AttentionProof) else fast) == \
        outcome(verify_attention_exhaustive)


def _long_prompt(tiles: tuple[int, int, int, int], heads: int, causal: bool, s: int, cache: int,
                 proj_m: int = 16) -> tuple[AttentionPlan, AttentionShape]:
    qkv_m, qkv_n, scores_n, pv_n = tiles
    sizes = {"qkv": (qkv_m, qkv_n), "scores": (16, scores_n), "pv": (16, pv_n), "proj": (proj_m, 64)}
    base = plan_of()
    gemms = tuple(dataclasses.replace(g, tile=dataclasses.replace(g.tile, m=sizes[g.name][0], n=sizes[g.name][1]))
                  for g in base.gemms)
    plan = dataclasses.replace(base, gemms=gemms, heads=heads, head_dim=24, hidden=64, causal=causal)
    return plan, AttentionShape(1, s, cache + (-(cache + s) % 8))


@pytest.mark.parametrize("case", [
    _long_prompt((16, 16, 32, 16), 3, True, 300, 13),    # key blocks twice the row blocks, heads across qkv tiles
    _long_prompt((48, 32, 16, 16), 2, False, 250, 70),
    _long_prompt((32, 48, 48, 8), 3, True, 391, 1),
    _long_prompt((16, 16, 16, 16), 1, True, 170, 0, proj_m=32),  # proj rows of 32 over pv rows of 16: row 0 fails
    _long_prompt((16, 16, 16, 16), 1, True, 170, 0, proj_m=8),   # proj rows of 8: row 1 is the first to fail
])
def test_the_bounded_attention_proof_agrees_on_long_prompts(case: tuple[AttentionPlan, AttentionShape]) -> None:
    """Many row blocks and key blocks, so the periodic sums run over several periods, away from the ends."""
    try:
        proof = va.verify_attention(*case)
    except SpecError as err:
        with pytest.raises(SpecError, match=re.escape(str(err))):
            verify_attention_exhaustive(*case)
        return
    assert (proof.tiles, proof.reads) == verify_attention_exhaustive(*case)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiles=st.tuples(*[st.sampled_from([16, 32, 48])] * 4), heads=st.integers(1, 3), causal=st.booleans(),
       s=st.integers(1, 400), cache=st.integers(0, 200))
def test_the_read_counts_are_the_enumerated_ones_on_long_prompts(tiles: tuple[int, int, int, int], heads: int,
                                                                 causal: bool, s: int, cache: int) -> None:
    plan, shape = _long_prompt(tiles, heads, causal, s, cache)
    proof = va.verify_attention(plan, shape)
    assert (proof.tiles, proof.reads) == verify_attention_exhaustive(plan, shape)


def test_attention_at_huge_sizes_is_proved_quickly(monkeypatch: pytest.MonkeyPatch) -> None:
    """heads 10**9, a 2**20-token prompt over a 10**9-token cache: the proof checks a few tiles, and the
    counts are closed forms (they match the grids' products where those are easy to state). These grids
    are far above the 2^31 - 1 blocks the library launches (check_shape refuses them): the bound is
    lifted here, the proof's work does not depend on it."""
    monkeypatch.setattr(AttentionPlan, "check_grid_size", lambda self, shape: None)
    plan = dataclasses.replace(plan_of(), heads=10**9, hidden=2**17)
    proof = va.verify_attention(plan, AttentionShape(1, 2**20, 10**9))
    grid = plan.grids(AttentionShape(1, 2**20, 10**9))
    assert proof.tiles == sum(rows * cols for name, (rows, cols) in grid.items() if name != "qkv")
    assert proof.reads > proof.tiles
    generation = va.verify_attention(plan, AttentionShape(128, 1, 10**12 - 1))
    assert generation.tiles > 10**12


# --- CLI ------------------------------------------------------------------------------------------

def test_validate_prints_grids_and_the_proof(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["validate", "gpt3_attention", "--m", "1", "--batch", "4", "--cache", "1023"]) == 0
    out = capsys.readouterr().out
    assert "qkv      X W_qkv" in out and "K slices" in out and "proved (batch 4, 1 new + 1023 cached" in out


def test_validate_rejects_an_unsupported_shape(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["validate", "gpt3_attention", "--m", "3", "--batch", "2"]) == 2
    assert "new tokens 1 for generation" in capsys.readouterr().err


def test_generate_writes_the_attention_project(tmp_path: Path) -> None:
    assert cli(["generate", "llama_attention", "-o", str(tmp_path / "p")]) == 0
    files = {p.relative_to(tmp_path / "p").as_posix() for p in (tmp_path / "p").rglob("*") if p.is_file()}
    assert {"include/llama_attention.h", "include/cusync/attention.cuh", "include/cusync/softmax.cuh",
            "include/cusync/sm80/batched_gemm.cuh", "src/stage_scores.cu", "src/stage_softmax.cu",
            "bench/llama_attention_bench.cu", "manifest.json"} <= files
    header = (tmp_path / "p" / "include" / "llama_attention.h").read_text()
    assert "constexpr int kHeads = 8;" in header and "constexpr int kHidden = 8192;" in header


def test_run_rejects_batch_for_a_gemm_chain(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    from cusync_gen import build

    monkeypatch.setattr(build, "has_gpu", lambda: True)
    assert cli(["run", "two_gemm", "-o", str(tmp_path / "p"), "--batch", "2"]) == 2
    assert "--batch applies to attention chains only" in capsys.readouterr().err


def test_plan_is_a_pure_function_of_the_spec() -> None:
    a, b = plan_of(), plan_of()
    assert a == b and dataclasses.replace(a, heads=1) != a


# --- grid size (issue 9) --------------------------------------------------------------------------

def test_a_grid_above_2_31_blocks_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """96 heads with s = keys = 2^20: scores has 96 * 2^13 * 2^14 blocks, each option within its limit."""
    from cusync_gen.attention_plan import MAX_GRID_BLOCKS

    data = example_data()
    data["attention"]["heads"] = 96
    spec = parse_spec(data)
    assert isinstance(spec, AttentionSpec)
    plan = make_attention_plan(spec)
    with pytest.raises(UsageError) as info:
        plan.grids(AttentionShape(1, 2**20, 2**20 - 8))
    message = info.value.message
    assert "scores grid" in message and f"{MAX_GRID_BLOCKS}" in message and "2^31 - 1" in message
    assert "--m" in info.value.hint and "--cache" in info.value.hint and "attention.heads" in info.value.hint
    rows, cols = plan.grids(AttentionShape(1, 2**17, 2**17))["scores"]  # 96 * 2^10 * 2^10 blocks is fine
    assert rows * cols <= MAX_GRID_BLOCKS
    path = tmp_path / "wide.yaml"
    path.write_text(yaml.safe_dump(data))
    assert cli(["validate", str(path), "--m", str(2**20), "--cache", str(2**20 - 8)]) == 2
    err = capsys.readouterr().err
    assert err.count("error:") == 1 and "2^31 - 1" in err


@pytest.mark.nvcc
def test_the_library_refuses_a_grid_above_2_31_blocks(tmp_path: Path) -> None:
    """The generated check() (through initialize(), before any CUDA call, so no GPU is needed) refuses what
    check_shape refuses, and token counts past int, with kInvalidArgument (tests/runtime/attention_check.cu)."""
    import shutil
    import subprocess

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    project = REPO / "generated" / "gpt3_attention"
    exe = tmp_path / "attention_check"
    build = subprocess.run([nvcc, "-std=c++17", "-arch=sm_80", "-Werror=all-warnings", "-I", str(project / "include"),
                            "-I", str(project / "src"), str(project / "src" / "gpt3_attention.cu"),
                            str(REPO / "tests" / "runtime" / "attention_check.cu"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and "0 failures" in out.stdout, out.stdout[-3000:]
