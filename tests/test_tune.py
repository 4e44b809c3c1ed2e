"""`cusync-gen tune` without a GPU: variants, the choice per M (ties to the simpler), the tuned spec and
the plot, with `build` and `run` replaced by fakes. Its GPU run is recorded in benchmarks/NOTES.md."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import REPO
from cusync_gen import build as builder
from cusync_gen import tune
from cusync_gen.cli import main
from cusync_gen.errors import NoGpuError, UsageError
from cusync_gen.plan import make_plan
from cusync_gen.spec import load_spec

EXAMPLES = REPO / "cusync_gen" / "examples"


def variants_of(name: str, choices: dict | None = None) -> tuple[list[tune.Variant], list[str]]:
    path = EXAMPLES / f"{name}.yaml"
    return tune.make_variants(load_spec(path), choices)


def test_parse_tiles() -> None:
    """--tiles is parsed by the CLI, each number as --m's are (tests/test_safety_readers.py has the rest)."""
    from cusync_gen.cli import parse_tiles

    assert parse_tiles(["gemm1=128x128x32,128X256x32", "gemm2=64x64x32"]) == {
        "gemm1": [(128, 128, 32), (128, 256, 32)], "gemm2": [(64, 64, 32)]}
    for bad in ("gemm1", "gemm1=128x128", "=128x128x32", "gemm1=128x0x32"):
        with pytest.raises(UsageError):
            parse_tiles([bad])


@pytest.mark.parametrize("name", ["two_gemm", "gpt3_mlp", "llama_mlp", "gpt3_mlp_sm90", "llama_mlp_sm90"])
def test_default_variants_are_valid_specs(name: str) -> None:
    variants, skipped = variants_of(name)
    assert variants[0].label == "spec" and variants[0].tiles == {}
    assert len(variants) + len(skipped) >= 3
    for v in variants:
        plan = make_plan(v.spec)
        for stage, tb in v.tiles.items():
            assert next(s for s in plan.stages if s.name == stage).tile.m == tb[0]
        assert not v.spec.tile_configs or v.index == 0  # a variant is one tile configuration
    for line in skipped:
        assert ": " in line and "(" in line  # "label: reason (field)"


def test_swiglu_tiles_follow_their_neighbours() -> None:
    variants, skipped = variants_of("llama_mlp", {"gemm1": [(256, 128, 32)], "gemm2": [(128, 128, 32), (256, 128, 32)]})
    glus = [next(s for s in v.spec.stages if s.name == "glu").tile.threadblock[:2] for v in variants[1:]]
    assert glus == [(128, 128), (256, 128)] and not skipped  # rows = gemm2's M, cols = gemm1's N
    _, skipped = variants_of("llama_mlp", {"gemm1": [(128, 256, 32)], "gemm2": [(256, 128, 32)]})
    (why,) = skipped  # glu's 256 rows would not divide gemm1's 128: the rule says so, with the field
    assert why.startswith("gemm1=128x256x32,gemm2=256x128x32: ") and "divide" in why


def test_unknown_stage_in_tiles() -> None:
    with pytest.raises(UsageError, match="not a GEMM stage"):
        variants_of("gpt3_mlp", {"glu": [(128, 128, 32)]})


def row(variant: tune.Variant, m: int, us: float, policy: str = "spec", order: str = "spec", **extra: Any) -> dict:
    return {"m": m, "policy": policy, "order": order, "overlapped_us": us, "sequential_us": us * 1.1,
            "bitwise_equal": True, "sync_error": None, "variant": variant.label, "variant_index": variant.index, **extra}


def test_medians_over_rounds() -> None:
    variants, _ = variants_of("gpt3_mlp")
    v = variants[0]
    raw = [dict(row(v, 256, us), round=i) for i, us in enumerate((100.0, 130.0, 90.0))]
    raw[1]["bitwise_equal"] = False
    (merged,) = tune.medians(raw)
    assert merged["overlapped_us"] == 100.0 and merged["rounds"] == 3 and merged["bitwise_equal"] is False


def test_choose_breaks_ties_toward_the_simpler() -> None:
    variants, _ = variants_of("gpt3_mlp")
    spec, other = variants[0], variants[1]
    rows = [row(spec, 256, 100.0), row(other, 256, 98.5, "tile"),     # within 2%: the spec wins
            row(spec, 1024, 400.0), row(other, 1024, 380.0, "row"),   # 5% faster: the variant wins
            row(spec, 4096, 900.0, bitwise_equal=False), row(other, 4096, 950.0)]  # a wrong row never counts
    best = tune.choose(rows)
    assert best[256]["variant"] == "spec"
    assert (best[1024]["variant"], best[1024]["policy"]) == (other.label, "row")
    assert best[4096]["variant"] == other.label


@pytest.fixture
def fake_gpu(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """build() does nothing; run() prints rows whose times favour wide tiles at large M."""
    calls: dict[str, Any] = {"built": [], "ran": []}

    def fake_build(project: Path, *args: Any, **kwargs: Any) -> Path:
        calls["built"].append(project)
        return project / "build"

    def fake_run(project: Path, ms: list[int], policies: list[str], repeats: int, warmup: int,
                 extra: list[str] = ()) -> list[dict]:
        calls["ran"].append((project, list(extra)))
        spec = load_spec(Path(str(project) + ".yaml")) if Path(str(project) + ".yaml").exists() else None
        wide = spec is not None and any(s.tile.threadblock[1] == 256 for s in spec.stages)
        out = []
        for m in ms:
            for p in policies:
                us = m * (0.9 if wide and m >= 1024 else 1.0) * (0.98 if p == "tile" else 1.0)
                row = {"m": m, "policy": p, "order": "spec", "overlapped_us": us, "sequential_us": us * 1.05,
                       "bitwise_equal": True, "sync_error": None, "gpu": "FakeGPU"}
                if spec is not None and spec.arch.value == "sm90":  # every run() mode is timed too
                    row.update(sms=132, stock_pdl_us=us * 1.01, stock_bitwise=True, cluster_bitwise=True,
                               streamk_us=us * (0.8 if m == 256 else 1.1), streamk_rel_diff=2e-4,
                               cluster_us=us * (0.95 if m == 4096 else 1.05))
                out.append(row)
        return out

    monkeypatch.setattr(builder, "build", fake_build)
    monkeypatch.setattr(builder, "run", fake_run)
    monkeypatch.setattr(builder, "has_gpu", lambda: True)
    monkeypatch.setattr(builder, "gpu_arch", lambda: "sm_90")
    return calls


def cli(args: list[str]) -> int:
    with pytest.raises(SystemExit) as info:
        main(args)
    return int(info.value.code or 0)


def test_tune_sm90_writes_tile_configs_by_m(tmp_path: Path, fake_gpu: dict[str, Any],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "tuned.yaml"
    code = cli(["tune", "gpt3_mlp_sm90", "--m", "256,1024,4096", "-o", str(tmp_path / "t"), "--write", str(dest),
                "--tiles", "gemm1=128x128x64,128x256x64", "--tiles", "gemm2=128x128x64,128x256x64"])
    assert code == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "fastest per M" in out and "wrote" in out
    tuned = load_spec(dest)
    assert tuned.tile_configs and tuned.tile_configs[0].m_max == 256          # small M: 128-wide tiles
    assert {s.tile.threadblock[1] for s in tuned.stages if s.op.value == "gemm"} == {256}  # large M: 256
    assert all(s.sync is None or s.sync.value in ("tile", "row") for s in tuned.stages if s.op.value == "gemm")
    assert (tmp_path / "t" / "tune-gpt3_mlp_sm90.png").stat().st_size > 10_000
    raw = (tmp_path / "t" / "tune-gpt3_mlp_sm90.jsonl").read_text().splitlines()
    assert len(raw) == 3 * 5 * 3 * 3  # rounds x variants (spec + 4) x M x policies
    assert not any("--no-baselines" in extra for _, extra in fake_gpu["ran"])  # every run() mode is timed
    assert dest.read_text().startswith("# tuned by cusync-gen tune on FakeGPU")
    # run()'s modes by M: stream-K at 256, stock at 1024 (overlap 1% faster is a tie: the simpler wins),
    # clusters at 4096; cut at the geometric mean between measured M, ending at the largest.
    assert tuned.dispatch is not None and (tuned.dispatch.gpu, tuned.dispatch.sms) == ("FakeGPU", 132)
    assert [(e.m_max, e.mode.value) for e in tuned.dispatch.modes] == [(512, "streamk"), (2048, "stock"),
                                                                       (4096, "cluster")]


def test_mode_checks_count() -> None:
    """A mode whose check failed never wins: stock or clusters not bitwise equal, stream-K off tolerance."""
    row = {"overlapped_us": 100.0, "stock_pdl_us": 90.0, "stock_bitwise": False, "cluster_us": 95.0,
           "cluster_bitwise": True, "streamk_us": 80.0, "streamk_rel_diff": 0.5}
    assert tune.best_mode(row) == ("cluster", 95.0)
    assert tune.best_mode({"overlapped_us": 100.0}) == ("overlap", 100.0)  # sm80 rows: overlap only


def test_tune_sm80_keeps_one_variant_and_reuses_projects(tmp_path: Path, fake_gpu: dict[str, Any],
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    args = ["tune", "two_gemm", "--m", "256,4096", "-o", str(tmp_path / "t"), "--write", str(tmp_path / "a.yaml")]
    assert cli(args) == 0
    tuned = load_spec(tmp_path / "a.yaml")
    assert not tuned.tile_configs
    first = sorted(p.name for p in (tmp_path / "t").iterdir() if p.is_dir())
    assert cli(args) == 0  # projects are found by spec hash, not generated again
    assert sorted(p.name for p in (tmp_path / "t").iterdir() if p.is_dir()) == first


def test_tune_rejects_attention_and_bad_orders(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["tune", "gpt3_attention", "-o", str(tmp_path)]) == 2
    assert "GEMM chains" in capsys.readouterr().err
    assert cli(["tune", "two_gemm", "--orders", "banded", "-o", str(tmp_path)]) == 2
    assert "not an order of arch sm80" in capsys.readouterr().err


def test_warp_tiles_above_64_are_rejected_and_not_the_default() -> None:
    """What the first GPU tune found: default 64x128 warps (for 128x256 tiles) computed wrong results."""
    from cusync_gen.errors import SpecError
    from cusync_gen.spec import default_warp, parse_spec

    assert default_warp((128, 256, 32)) == (64, 64, 32) and default_warp((128, 128, 32)) == (64, 64, 32)
    data = yaml.safe_load((EXAMPLES / "two_gemm.yaml").read_text())
    data["stages"][0]["tile"].update(threadblock=[128, 256, 32], warp=[64, 128, 32])
    with pytest.raises(SpecError) as info:
        parse_spec(data)
    assert info.value.field == "stages[0].tile.warp" and "at most 64" in info.value.hint


def test_pingpong_and_cublaslt_modes_count_only_when_checked() -> None:
    """The ping-pong and cuBLASLt modes win on time, but never when their relative difference from our
    back-to-back run is off tolerance; ties within MODE_TIE go to the simpler mode (ping-pong before
    cuBLASLt)."""
    row = {"overlapped_us": 100.0, "stock_pdl_us": 99.0, "pingpong_us": 90.0, "pingpong_rel_diff": 0.0,
           "cublaslt_us": 89.5, "cublaslt_rel_diff": 4e-4}
    assert tune.best_mode(row) == ("pingpong", 90.0)
    assert tune.best_mode({**row, "cublaslt_us": 80.0}) == ("cublaslt", 80.0)
    assert tune.best_mode({**row, "cublaslt_us": 80.0, "cublaslt_rel_diff": 0.5}) == ("pingpong", 90.0)
    assert tune.best_mode({**row, "pingpong_rel_diff": 0.5, "cublaslt_rel_diff": 0.5}) == ("stock", 99.0)
    assert tune.best_mode({**row, "cublaslt_us": -1.0, "pingpong_us": -1.0}) == ("stock", 99.0)  # not built in


def test_dispatch_table_script_rewrites_only_the_dispatch_block(tmp_path: Path) -> None:
    """scripts/dispatch_table.py: the spec's `dispatch:` from a bench run's rows, the rest kept as written."""
    import subprocess
    import sys

    rows = tmp_path / "bench.jsonl"
    base = {"policy": "spec", "order": "spec", "bitwise_equal": True, "sync_error": None, "gpu": "FakeGPU",
            "sms": 132, "overlapped_us": 200.0, "stock_pdl_us": 150.0, "stock_bitwise": True, "cluster_us": 160.0,
            "cluster_bitwise": True, "streamk_us": 170.0, "streamk_rel_diff": 1e-4, "pingpong_us": 140.0,
            "pingpong_rel_diff": 0.0, "cublaslt_us": 120.0, "cublaslt_rel_diff": 4e-4}
    lines = ["not json", json.dumps({**base, "m": 256}), json.dumps({**base, "m": 1024, "cublaslt_us": 145.0}),
             json.dumps({**base, "m": 4096, "cublaslt_us": 145.0})]
    rows.write_text("\n".join(lines) + "\n")
    spec = tmp_path / "s.yaml"
    spec.write_text((REPO / "cusync_gen" / "examples" / "gpt3_mlp_sm90.yaml").read_text())
    before = spec.read_text().split("dispatch:")[0]
    out = subprocess.run([sys.executable, str(REPO / "scripts" / "dispatch_table.py"), str(rows), "--spec", str(spec)],
                         capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert spec.read_text().split("dispatch:")[0] == before
    tuned = load_spec(spec)
    assert tuned.dispatch is not None
    assert [(e.m_max, e.mode.value) for e in tuned.dispatch.modes] == [(512, "cublaslt"), (4096, "pingpong")]


def test_tune_where_every_variant_fails_stops_with_a_message(tmp_path: Path, fake_gpu: dict[str, Any],
                                                              monkeypatch: pytest.MonkeyPatch,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    """A GPU that nvidia-smi lists but CUDA cannot use: every variant fails, so there is nothing to choose and
    nothing is written (it ended in a ZeroDivisionError)."""
    def no_device(*args: Any, **kwargs: Any) -> list[dict]:
        raise NoGpuError("no CUDA device found")

    monkeypatch.setattr(builder, "run", no_device)
    dest = tmp_path / "tuned.yaml"
    code = cli(["tune", "two_gemm", "--m", "256", "-o", str(tmp_path / "t"), "--write", str(dest)])
    err = capsys.readouterr().err
    assert code == 3 and "no variant produced a usable time" in err and "Traceback" not in err, err
    assert not dest.exists()


def test_tune_never_writes_over_its_spec_or_its_own_outputs(tmp_path: Path, fake_gpu: dict[str, Any],
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "my.yaml"
    spec.write_text((REPO / "cusync_gen" / "examples" / "two_gemm.yaml").read_text())
    for write in (spec, tmp_path / "t" / "tune-two_gemm.png", tmp_path / "t" / "tune-two_gemm.jsonl"):
        code = cli(["tune", str(spec), "--m", "256", "-o", str(tmp_path / "t"), "--write", str(write)])
        err = capsys.readouterr().err
        assert code == 2 and "--write" in err and "reads or writes itself" in err, err
    assert not fake_gpu["built"]  # refused before any work
