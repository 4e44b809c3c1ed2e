"""Tile traces: the H200 trace committed with the results renders to a Gantt PNG and a Chrome trace."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import REPO
from cusync_gen import cli
from cusync_gen.errors import UsageError
from cusync_gen.trace import chrome_trace, load_trace, summary, write_outputs

TRACE = REPO / "benchmarks" / "results" / "2026-11-30-h200-sm90" / "trace-gpt3_mlp_sm90-s4.jsonl"


def test_the_h200_trace_loads() -> None:
    records = load_trace(TRACE)
    at_1024 = [r for r in records if r.m == 1024]
    assert {r.mode for r in at_1024} == {"sequential", "overlapped"}
    assert len([r for r in at_1024 if r.mode == "overlapped"]) == 192 + 384  # 8x24 gemm1 + 8x48 gemm2 tiles
    assert all(0 <= r.sm < 132 for r in records)
    # what the chart shows: in the overlapped run gemm2 tiles start before gemm1's last tile is stored
    overlapped = [r for r in at_1024 if r.mode == "overlapped"]
    gemm1_end = max(r.stored_us for r in overlapped if r.stage == "gemm1")
    assert min(r.taken_us for r in overlapped if r.stage == "gemm2") < gemm1_end


def test_chrome_trace_has_a_slice_per_tile() -> None:
    records = [r for r in load_trace(TRACE) if r.m == 1024]
    trace = chrome_trace(records)
    slices = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == len(records)
    assert all(e["dur"] >= 0 and e["tid"] == e["tid"] for e in slices)
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert names == {"M=1024 sequential", "M=1024 overlapped"}


def test_summary_says_when_each_stage_ran() -> None:
    lines = summary(load_trace(TRACE), 1024)
    assert lines[0].startswith("sequential: 576 tiles, the last stored at ")
    assert lines[1].startswith("  gemm1: 192 tiles on 132 SMs, taken 0.0-")
    assert [line.split(":")[0] for line in lines] == ["sequential", "  gemm1", "  gemm2", "overlapped", "  gemm1",
                                                      "  gemm2"]


def test_a_conv_trace_names_its_batch_and_the_chained_mode(tmp_path: Path) -> None:
    line = {"chain": "vgg", "m": 8, "size": "batch", "stage": "conv1", "tile_m": 1, "tile_n": 0, "sm": 5,
            "taken_us": 1.0, "stored_us": 3.0}
    path = tmp_path / "c.jsonl"
    path.write_text("".join(json.dumps({**line, "mode": mode}) + "\n" for mode in ("sequential", "chained")))
    records = load_trace(path)
    assert [(r.mode, r.size) for r in records] == [("sequential", "batch"), ("chained", "batch")]
    assert summary(records)[2] == "chained: 1 tiles, the last stored at 3.0 us"
    path.write_text(json.dumps({**line, "mode": "chained", "size": "rows"}) + "\n")
    with pytest.raises(UsageError, match="size is"):
        load_trace(path)


CONV_TRACE = REPO / "benchmarks" / "results" / "2026-12-06-h100-conv-trace" / "call2" / \
    "trace-vgg19_14x14x512-b20-base-r1.jsonl"


def test_the_h100_conv_trace_loads() -> None:
    """A conv chain's trace from the GPU: three modes, the batch as its size, one wave of 124 tiles a stage."""
    records = load_trace(CONV_TRACE)
    assert {r.mode for r in records} == {"sequential", "chained", "overlapped"}
    assert {r.size for r in records} == {"batch"} and {r.m for r in records} == {20}
    for mode in ("sequential", "chained", "overlapped"):
        assert sorted({r.stage for r in records if r.mode == mode}) == ["conv1", "conv2"]
        assert len([r for r in records if r.mode == mode and r.stage == "conv2"]) == 124
    assert summary(records)[0].startswith("sequential: 248 tiles")


def test_gantt_and_chrome_files(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    png, chrome = write_outputs(load_trace(TRACE), tmp_path / "t.png", 1024)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(chrome.read_text())["traceEvents"]


def test_bad_trace_is_a_usage_error(tmp_path: Path) -> None:
    bad = tmp_path / "x.jsonl"
    bad.write_text('{"m": 1}\n')
    with pytest.raises(UsageError) as info:
        load_trace(bad)
    assert "x.jsonl:1" in info.value.message and "--trace" in info.value.hint


def test_cli_renders_a_recorded_trace(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    with pytest.raises(SystemExit) as exc:
        cli.main(["trace", str(TRACE), "--m", "4096", "-o", str(tmp_path / "g.png")])
    assert exc.value.code in (None, 0)
    assert (tmp_path / "g.png").is_file() and (tmp_path / "g.json").is_file()
    assert "chrome://tracing" in capsys.readouterr().out


def test_cli_trace_without_a_gpu_says_so(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from cusync_gen import build

    monkeypatch.setattr(build, "has_gpu", lambda: False)
    with pytest.raises(SystemExit) as exc:
        cli.main(["trace", "gpt3_mlp_sm90"])
    err = capsys.readouterr().err
    assert exc.value.code == 3 and "no CUDA device" in err and "Traceback" not in err
