"""`cusync-gen run` on the chains that run through their own bench, the sm90 attention layer and conv chains:
the shapes or batches it asks for, the bench protocol (a stand-in bench), the tables, and what trace still
refuses. The benches' own GPU checks are in test_attention_sm90.py and the conv tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_build import make_bench

from cusync_gen import build, options
from cusync_gen.bench_protocol import format_table, layer_bench_command
from cusync_gen.cli import main
from cusync_gen.errors import CheckFailedError, SyncTimeoutError, ToolError, UsageError

ROW = {"shape": "g:4+511", "decode": "mma", "mode": "generation", "batch": 4, "tokens": 1, "cache": 511,
       "attn_err": 1.2e-3, "layer_err": 4.5e-3, "unwritten": 0, "bitwise": True, "graph": True, "ok": True,
       "qkv_us": 10.1, "rope_us": 4.4, "attention_us": 10.2, "proj_us": 7.7, "layer_us": 25.1}


def layer_project(root: Path, kind: str = "attention_sm90") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    manifest = {"name": "fake", "class_name": "Fake", "spec_hash": "0" * 12, "target": "sm_90", "arch": "sm90",
                "kind": kind, "bench": "fake_bench", "stages": []}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


def test_shapes_cover_every_m_batch_and_cache() -> None:
    assert options.layer_shapes([1, 512], "1,4", "0,511") == [
        "g:1+0", "g:1+511", "g:4+0", "g:4+511", "p:1x512+0", "p:1x512+511", "p:4x512+0", "p:4x512+511"]
    assert options.layer_shapes([1024], None, None) == ["p:1x1024+0"]  # batch 1, no cache


@pytest.mark.parametrize(("ms", "batch", "cache", "words"), [
    ([1, 2, 3, 4, 5, 6, 7, 8, 9], "1,2,3,4", "0,1", ["72 shapes", "64"]),
    ([1 << 20], "2", None, ["--batch 2", "--m 1048576", "rows"]),
    ([1], "64", "1048576", ["--cache 1048576", "tokens"]),
])
def test_shapes_are_bounded(ms: list[int], batch: str, cache: str | None, words: list[str]) -> None:
    with pytest.raises(UsageError) as info:
        options.layer_shapes(ms, batch, cache)
    assert all(w in info.value.message for w in words), info.value.message


def test_bad_batch_and_cache_name_the_option() -> None:
    with pytest.raises(UsageError) as info:
        options.layer_shapes([1], "0", None)
    assert "--batch" in info.value.message
    with pytest.raises(UsageError) as info:
        options.layer_shapes([1], "1", "-3")
    assert "--cache" in info.value.message


def test_run_options_take_the_layer(tmp_path: Path) -> None:
    opts = options.run_options("llama_attention_sm90", "1,512", None, "2", "127", 5, 1, None, tmp_path / "p",
                               False, None, None, None, "auto", 0, None)
    assert opts.subject.kind == "attention_sm90" and opts.policies is None
    assert opts.extra == ("g:2+127", "p:2x512+127")
    with pytest.raises(UsageError) as info:
        options.run_options("llama_attention_sm90", None, "row", None, None, 5, 1, None, tmp_path / "p",
                            False, None, None, None, "auto", 0, None)
    assert "--policies" in info.value.message and "drop --policies" in info.value.hint
    with pytest.raises(UsageError) as info:
        options.run_options("llama_attention_sm90", None, None, None, None, 5, 1, None, tmp_path / "p",
                            False, None, None, None, "auto", 3, None)
    assert "--autotune" in info.value.message


def test_run_takes_ragged_and_varlen_layer_shapes(tmp_path: Path) -> None:
    """--shapes: the bench's own syntax, per-sequence prompt lengths and caches joined by '/', bounded."""
    shapes = "p:3x7/200/1000+0/511/4097, g:4+0/9/511/4097,p:1x1024+0"
    opts = options.run_options("llama3_attention_sm90", None, None, None, None, 5, 1, None, tmp_path / "p",
                               False, None, None, None, "auto", 0, None, shapes=shapes)
    assert opts.extra == ("p:3x7/200/1000+0/511/4097", "g:4+0/9/511/4097", "p:1x1024+0")
    for bad, words in (("p:3x7/200+0", "2 new-token counts for 3 sequences"), ("p:2x1+0/1/2", "3 cache lengths"),
                       ("q:1+0", "is not p:BxT+L"), ("p:2x0/5+0", "0 new tokens"), ("", "empty"),
                       ("p:2x600000+0", "rows, more than"), ("g:64+300000", "tokens of KV cache"),
                       (",".join(["g:1+0"] * 65), "more than 64")):
        with pytest.raises(UsageError) as info:
            options.layer_shape_list(bad)
        assert "--shapes" in info.value.message and words in info.value.message, (bad, info.value.message)
    with pytest.raises(UsageError) as info:  # --shapes gives the shapes: no --m/--batch/--cache beside it
        options.run_options("llama3_attention_sm90", "1", None, None, "5", 5, 1, None, tmp_path / "p",
                            False, None, None, None, "auto", 0, None, shapes="g:1+0")
    assert "--m, --cache" in info.value.message
    with pytest.raises(UsageError) as info:  # and only the sm90 layer takes them
        options.run_options("gpt3_mlp", None, None, None, None, 5, 1, None, tmp_path / "q",
                            False, None, None, None, "auto", 0, None, shapes="g:1+0")
    assert "sm90 attention layer only" in info.value.message


def test_trace_still_refuses_the_layer(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["trace", "llama_attention_sm90", "--m", "1"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert "sm90 attention layer" in err and "_bench" in err


def test_command_checks_and_times_every_shape(tmp_path: Path) -> None:
    bench = tmp_path / "b"
    assert layer_bench_command(bench, ["g:1+0", "p:2x7+1"], 9) == [
        str(bench), "--check", "--time", "--repeats", "9", "g:1+0", "p:2x7+1"]
    for bad in ([], ["--m"], ["p:1x2"], ["g:1+0; rm -rf x"], ["p:2x7/+1"], ["g:2+1//2"]):
        with pytest.raises(UsageError):
            layer_bench_command(bench, bad, 9)
    # per-sequence prompt lengths and caches (run --shapes)
    assert layer_bench_command(bench, ["p:3x7/200/1000+0/511/4097", "g:2+7/4097"], 9)[-2:] == [
        "p:3x7/200/1000+0/511/4097", "g:2+7/4097"]


def test_every_kind_of_project_has_one_bench_protocol() -> None:
    """build.run asks the project's protocol (cusync_gen/bench_protocol.py) for its command, rows, failures and
    table: every backend's manifest kind has one, and a kind this cusync-gen does not know is refused."""
    from cusync_gen import bench_protocol
    from cusync_gen.backends import BACKENDS
    from cusync_gen.errors import ToolError

    kinds = {str(b.MANIFEST.get("kind", "chain")) for b in BACKENDS.values()}
    assert kinds <= set(bench_protocol.PROTOCOLS), kinds - set(bench_protocol.PROTOCOLS)
    assert bench_protocol.protocol_of({}) is bench_protocol.GEMM_BENCH
    assert bench_protocol.protocol_of({"kind": "conv"}) is bench_protocol.CONV_BENCH
    with pytest.raises(ToolError) as info:
        bench_protocol.protocol_of({"kind": "warp_drive"})
    assert "warp_drive" in info.value.message and "regenerate" in info.value.hint
    # the conv bench's result lines carry a prefix; its failures are told in text, else the common codes
    conv = bench_protocol.CONV_BENCH
    assert conv.row('RESULT {"batch": 1}') == {"batch": 1} and conv.row("batch 1: 12 us") is None
    err = conv.failure(4, [], ["sync timeout: stage 1 tile 3 waited on row 2"], [], ["b"], "b")
    assert type(err).__name__ == "SyncTimeoutError" and "tile 3" in err.message
    assert type(conv.failure(3, [], [], ["error: no CUDA device"], ["b"], "b")).__name__ == "NoGpuError"


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: True)


def test_run_parses_the_layer_rows(tmp_path: Path, gpu: None) -> None:
    project = layer_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n")
    rows = build.run(project, [1], None, repeats=11, extra_args=["g:4+511"])
    assert rows == [ROW]
    assert (project / "build" / "argv.json").read_text() == repr(["--check", "--time", "--repeats", "11", "g:4+511"])
    table = format_table(rows)
    assert [c.header for c in table.columns][:3] == ["shape", "mode", "qkv us"]
    assert "25.1" in list(table.columns[6].cells)


def test_a_failed_check_is_reported(tmp_path: Path, gpu: None) -> None:
    project = layer_project(tmp_path / "p")
    bad = dict(ROW, shape="p:1x7+1", bitwise=False, ok=False)
    make_bench(project, json.dumps(ROW) + "\n" + json.dumps(bad) + "\n", rc=1)
    with pytest.raises(CheckFailedError) as info:
        build.run(project, [1], None, extra_args=["g:4+511", "p:1x7+1"])
    assert "p:1x7+1" in info.value.message and "bitwise=False" in info.value.message
    assert getattr(info.value, "rows") == [ROW, bad]


def test_a_crash_is_a_tool_error(tmp_path: Path, gpu: None) -> None:
    project = layer_project(tmp_path / "p")
    make_bench(project, "", rc=2, stderr="initialize failed\n")
    with pytest.raises(ToolError) as info:
        build.run(project, [1], None, extra_args=["g:1+0"])
    assert "exit 2" in info.value.message and "initialize failed" in getattr(info.value, "stderr_tail", "")


# --------------------------------------------------------------------------------------------------
# conv chains

CONV = {"chain": "resnet_block", "batch": 8, "sequential_us": 60.0, "overlap_us": 70.0, "run_us": 58.5,
        "run_mode": "chained", "two_stream_us": 71.0, "chained_us": 58.4, "block_order_us": 69.0,
        "programmatic": True, "bitwise": True, "ref_err": 0.0009, "wait_kernels": False, "stages_us": [29.0, 31.5]}


def conv_opts(tmp_path: Path, m: str | None = None, policies: str | None = None, batch: str | None = "1,8",
              cache: str | None = None, autotune: int = 0) -> options.RunOptions:
    return options.run_options("resnet_block", m, policies, batch, cache, 5, 1, None, tmp_path / "p", False, None,
                               None, None, "auto", autotune, None)


def test_run_options_take_a_conv_chain(tmp_path: Path) -> None:
    opts = conv_opts(tmp_path)
    assert opts.subject.kind == "conv" and opts.ms == () and opts.policies is None
    assert opts.extra == ("--preheat", options.CONV_RUN_PREHEAT_S, "--batch", "1,8")
    assert conv_opts(tmp_path, batch=None).extra == ("--preheat", options.CONV_RUN_PREHEAT_S)  # the bench's batches


@pytest.mark.parametrize(("kwargs", "flag"), [({"m": "256"}, "--m"), ({"cache": "7"}, "--cache"),
                                               ({"policies": "row"}, "--policies"), ({"autotune": 2}, "--autotune")])
def test_conv_refuses_what_does_not_apply(tmp_path: Path, kwargs: dict[str, object], flag: str) -> None:
    with pytest.raises(UsageError) as info:
        conv_opts(tmp_path, **kwargs)  # type: ignore[arg-type]
    assert info.value.message.startswith(f"{flag} does not apply to a conv chain") and flag in info.value.hint


def test_conv_batch_is_checked(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as info:
        conv_opts(tmp_path, batch="1,x")
    assert "--batch" in info.value.message


def test_trace_takes_a_conv_chain_by_its_batch(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    opts = options.trace_options("resnet_block_sm90", None, Path("t.png"), None, None, False, None, None, None,
                                 batch="3")
    assert opts.subject is not None and opts.subject.kind == "conv" and opts.m == 3
    opts = options.trace_options("resnet_block", None, Path("t.png"), None, None, False, None, None, None)
    assert opts.m == 8  # a conv chain's default batch; a GEMM chain's M is 1024
    assert options.trace_options("two_gemm", None, Path("t.png"), None, None, False, None, None, None).m == 1024
    assert options.trace_options("t.jsonl", None, Path("t.png"), None, None, False, None, None, None).m is None
    for args, words in ((["trace", "resnet_block", "--m", "8"], ["--m does not apply to a conv chain", "--batch"]),
                        (["trace", "two_gemm", "--batch", "8"], ["--batch applies to conv chains", "--m"]),
                        (["trace", "t.jsonl", "--m", "8", "--batch", "8"], ["--m and --batch: give one"]),
                        (["trace", "resnet_block", "--batch", "0"], ["--batch"])):
        with pytest.raises(SystemExit) as info:
            main(args)
        err = capsys.readouterr().err
        assert info.value.code == 2 and all(w in err for w in words) and "Traceback" not in err, (args, err)


def test_trace_of_a_conv_chain_runs_its_bench_checks_only(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    """What trace asks of a conv chain's bench: its checks at --batch, then --trace (no timing)."""
    pytest.importorskip("matplotlib")
    project = layer_project(tmp_path / "p", "conv")
    calls: list[list[str]] = []

    def fake_run(folder: Path, ms: list[int], out: object, repeats: int, warmup: int,
                 extra_args: list[str]) -> list[dict[str, object]]:
        calls.append(list(extra_args))
        jsonl = Path(extra_args[-1])
        line = {"chain": "c", "m": 5, "size": "batch", "stage": "conv1", "tile_m": 0, "tile_n": 0, "sm": 3,
                "taken_us": 0.0, "stored_us": 4.0}
        jsonl.write_text("".join(json.dumps({**line, "mode": mode}) + "\n"
                                 for mode in ("sequential", "chained", "overlapped")))
        return []

    monkeypatch.setattr(build, "has_gpu", lambda: True)
    monkeypatch.setattr(build, "gpu_arch", lambda: None)
    monkeypatch.setattr(build, "build", lambda *a, **k: None)
    monkeypatch.setattr(build, "run", fake_run)
    with pytest.raises(SystemExit) as info:
        main(["trace", str(project), "--batch", "5", "-o", str(tmp_path / "g.png")])
    assert info.value.code in (None, 0), capsys.readouterr().err
    assert calls == [["--batch", "5", "--check-only", "--trace", str((tmp_path / "g.jsonl").resolve())]]
    chrome = json.loads((tmp_path / "g.json").read_text())
    names = {e["args"]["name"] for e in chrome["traceEvents"] if e["ph"] == "M"}
    assert names == {"batch=5 sequential", "batch=5 chained", "batch=5 overlapped"}


def test_run_parses_the_conv_result_lines(tmp_path: Path, gpu: None) -> None:
    project = layer_project(tmp_path / "p", "conv")
    make_bench(project, "batch 8: bitwise yes, max |error| 0.0009\nRESULT " + json.dumps(CONV) + "\nall checks passed\n")
    rows = build.run(project, [], None, repeats=7, warmup=3, extra_args=["--preheat", "0.5", "--batch", "8"])
    assert rows == [CONV]
    assert (project / "build" / "argv.json").read_text() == repr(
        ["--repeats", "7", "--warmup", "3", "--preheat", "0.5", "--batch", "8"])
    table = format_table(rows)
    assert [c.header for c in table.columns][:3] == ["batch", "run() us", "run() mode"]
    assert list(table.columns[2].cells) == ["chained"] and list(table.columns[7].cells) == ["29.0 + 31.5"]


@pytest.mark.parametrize(("stdout", "rc", "error", "words"), [
    ("batch 3: conv2 differs from the reference conv: max |error| 0.5\nCHECKS FAILED\n", 5, CheckFailedError,
     "batch 3: conv2 differs"),
    ("batch 1: sync timeout: conv2 tile 12 waited for conv1 row 3\n", 1, SyncTimeoutError, "tile 12"),
])
def test_a_conv_failure_names_the_batch_and_tile(tmp_path: Path, gpu: None, stdout: str, rc: int,
                                                 error: type[Exception], words: str) -> None:
    project = layer_project(tmp_path / "p", "conv")
    make_bench(project, stdout, rc=rc)
    with pytest.raises(error) as info:
        build.run(project, [], None, extra_args=["--batch", "1"])
    assert words in getattr(info.value, "message")
