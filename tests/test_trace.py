"""Tile traces: the H200 trace committed with the results renders to a Gantt PNG and a Chrome trace."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from conftest import REPO
from cusync_gen import cli
from cusync_gen.errors import UsageError
from cusync_gen.trace import chrome_trace, load_trace, summary, write_outputs
from sass import find_tool

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


def test_a_ready_time_splits_a_tile_into_its_wait_and_its_work(tmp_path: Path) -> None:
    """The conv bench's "ready_us": when the tile's waits ended. Summary, Chrome trace and Gantt show the split;
    a ready time outside taken..stored, or not recorded (-1), is dropped, not trusted."""
    line = {"chain": "vgg", "m": 8, "size": "batch", "mode": "overlapped", "stage": "conv2", "tile_n": 0, "sm": 5,
            "taken_us": 1.0, "stored_us": 9.0}
    path = tmp_path / "c.jsonl"
    rows = [{**line, "tile_m": 0, "ready_us": 3.0}, {**line, "tile_m": 1, "ready_us": 5.0},
            {**line, "tile_m": 2, "ready_us": 4.0}, {**line, "tile_m": 3, "ready_us": 12.0},
            {**line, "tile_m": 4, "ready_us": -1.0}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    records = load_trace(path)
    assert [r.ready_us for r in records] == [3.0, 5.0, 4.0, None, None]
    assert [r.work_us for r in records] == [6.0, 4.0, 5.0, 8.0, 8.0]
    assert summary(records)[1].endswith("a tile 8.0 us (median): waits 3.0 us, then 5.0 us of work (medians)")
    slices = [e for e in chrome_trace(records)["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 5 + 3 and sum(e["cat"] == "wait" for e in slices) == 3
    path.write_text(json.dumps({**line, "tile_m": 0, "ready_us": "soon"}) + "\n")
    with pytest.raises(UsageError, match="ready_us is"):
        load_trace(path)


_LINES_MAIN = r"""
#include <cstdio>
#include "cusync/bench/common.cuh"
int main(int argc, char** argv) {
  // two tiles of TileTrace's five words: taken, stored, SM, m << 32 | n, ready (0: not recorded)
  std::vector<uint64_t> const words = {5000, 9000, 3, (uint64_t(1) << 32) | 2, 6000,
                                       4000, 8000, 7, 0, 0};
  FILE* f = std::fopen(argv[1], "w");
  uint64_t const t0 = cusync::bench::trace_origin<5>(words);
  cusync::bench::write_tile_lines<5>(f, "\"m\": 8, \"size\": \"batch\", \"mode\": \"overlapped\", \"stage\": \"c\"",
                                     words, 0, 2, t0);
  std::fclose(f);
  return argc == 2 ? 0 : 1;
}
"""


@pytest.mark.nvcc
def test_the_benches_trace_lines_load(tmp_path: Path) -> None:
    """Both benches write their traces through cusync/bench/common.cuh's write_tile_lines: compiled and run on the
    host, its lines load (times from the earliest taken tile; "ready_us" only where recorded)."""
    nvcc = find_tool("nvcc")
    if nvcc is None:
        pytest.skip("nvcc not found")
    (tmp_path / "lines.cu").write_text(_LINES_MAIN)
    include = REPO / "templates" / "runtime" / "include"
    built = subprocess.run([nvcc, "-std=c++17", "-I", str(include), str(tmp_path / "lines.cu"), "-o",
                            str(tmp_path / "lines")], capture_output=True, text=True)
    assert built.returncode == 0, built.stderr[-3000:]
    ran = subprocess.run([str(tmp_path / "lines"), str(tmp_path / "t.jsonl")], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    records = load_trace(tmp_path / "t.jsonl")
    assert [(r.tile_m, r.tile_n, r.sm, r.taken_us, r.ready_us, r.stored_us) for r in records] == [
        (1, 2, 3, 1.0, 2.0, 5.0), (0, 0, 7, 0.0, None, 4.0)]
    assert "ready_us" not in (tmp_path / "t.jsonl").read_text().splitlines()[1]


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
