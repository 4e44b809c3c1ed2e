"""Reading files we did not write (issue: safety of readers): no file can hang or crash a command.

Every reader of a spec, a manifest, a trace or a generated file found on disk goes through
`cusync_gen.userfile`: it opens without blocking, reads only regular files, caps sizes and nesting, and
turns every failure into one `error:` line naming the file. `tune --tiles` is bounded before any work, and
`trace` is bounded and draws in bulk.

FIFO tests run the CLI in a subprocess under a timeout, so a regression fails instead of hanging.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from conftest import REPO
from cusync_gen import build, cli, render
from cusync_gen.errors import UsageError

EXAMPLES_DIR = REPO / "cusync_gen" / "examples"
TIMEOUT_S = 20
ROW = {"m": 256, "mode": "sequential", "stage": "gemm1", "tile_m": 0, "tile_n": 0, "sm": 0, "taken_us": 0.0,
       "stored_us": 1.0}
NO_GPU_LAUNCHER = ("import sys; from cusync_gen import build, cli; build.has_gpu = lambda: False; "
                   "build.gpu_arch = lambda: None; build.build = lambda project, **kwargs: project; "
                   "cli.main(sys.argv[1:])")


# --------------------------------------------------------------------------------------------------
# Helpers


from test_fuzz import time_bound  # noqa: E402  (one bounded-time helper for both fuzz files)


def cli_subprocess(args: list[str], cwd: Path, no_gpu: bool = False) -> tuple[int, str, str]:
    entry = ["-c", NO_GPU_LAUNCHER] if no_gpu else ["-m", "cusync_gen.cli"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1"}
    try:
        proc = subprocess.run([sys.executable, *entry, *args], cwd=cwd, env=env, capture_output=True, text=True,
                              errors="replace", timeout=TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cusync-gen {args} still running after {TIMEOUT_S} s (a hang)")
    return proc.returncode, proc.stdout, proc.stderr


def cli_call(capsys: pytest.CaptureFixture[str], *args: str, seconds: float = 10.0) -> tuple[int, str, str]:
    with time_bound(seconds), pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def assert_one_error(code: int, out: str, err: str, allowed: tuple[int, ...] = (2,)) -> None:
    assert "Traceback" not in out + err, err
    assert code in allowed, (code, out, err)
    lines = err.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1, err
    rest = lines[errors[0] + 1:]
    assert rest == [] or (len(rest) == 1 and rest[0].startswith("hint:")), err


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


@pytest.fixture()
def project(tmp_path: Path) -> Path:
    return render.generate(EXAMPLES_DIR / "two_gemm.yaml", tmp_path / "proj")


def write_trace(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


# --------------------------------------------------------------------------------------------------
# cusync_gen.userfile


def test_userfile_refuses_a_fifo_without_blocking(tmp_path: Path) -> None:
    from cusync_gen import userfile

    pipe = fifo(tmp_path / "spec.yaml")
    for read in (lambda: userfile.read_bytes(pipe, "spec file", 100),
                 lambda: userfile.read_text(pipe, "spec file", 100),
                 lambda: userfile.read_json(pipe, "manifest", 100, 8),
                 lambda: userfile.read_head(pipe, "file", 100)):
        with time_bound(5), pytest.raises(UsageError) as info:
            read()
        assert str(pipe) in info.value.message and "FIFO" in info.value.message and info.value.hint


@pytest.mark.parametrize("where", ["/dev/null", "/dev/zero", "dir"])
def test_userfile_refuses_devices_and_folders(tmp_path: Path, where: str) -> None:
    from cusync_gen import userfile

    path = tmp_path if where == "dir" else Path(where)
    with time_bound(5), pytest.raises(UsageError) as info:
        userfile.read_bytes(path, "trace", 100)
    assert str(path) in info.value.message and "trace" in info.value.message


def test_userfile_refuses_a_socket(tmp_path: Path) -> None:
    import socket

    from cusync_gen import userfile

    path = tmp_path / "s.json"
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(path))
        with time_bound(5), pytest.raises(UsageError) as info:
            userfile.read_json(path, "manifest", 100, 8)
    assert str(path) in info.value.message


def test_userfile_missing_file_and_links(tmp_path: Path) -> None:
    from cusync_gen import userfile

    with pytest.raises(UsageError) as info:
        userfile.read_text(tmp_path / "nope.yaml", "spec file", 100)
    assert "nope.yaml" in info.value.message and "not found" in info.value.message
    (tmp_path / "real").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert userfile.read_text(tmp_path / "link", "spec file", 100) == "x"
    with pytest.raises(UsageError) as info:
        userfile.read_text(tmp_path / "link", "spec file", 100, follow_symlinks=False)
    assert "link" in info.value.message


def test_userfile_caps_the_size_before_reading(tmp_path: Path) -> None:
    from cusync_gen import userfile

    big = tmp_path / "big.json"
    with big.open("wb") as f:
        f.truncate(1 << 40)  # sparse: 1 TiB that is never read
    with time_bound(5), pytest.raises(UsageError) as info:
        userfile.read_json(big, "manifest", 4 << 20, 32)
    assert "big.json" in info.value.message and "4 MiB" in info.value.message
    assert userfile.read_head(big, "file", 10) == bytes(10)
    small = tmp_path / "small"
    small.write_bytes(b"12345")
    with pytest.raises(UsageError):
        userfile.read_bytes(small, "file", 4)
    assert userfile.read_bytes(small, "file", 5) == b"12345"


def test_userfile_bad_utf8_names_the_place(tmp_path: Path) -> None:
    from cusync_gen import userfile

    path = tmp_path / "t.jsonl"
    path.write_bytes(b"ok\nab\xffcd\n")
    with pytest.raises(UsageError) as info:
        userfile.read_text(path, "trace", 100)
    assert "t.jsonl" in info.value.message and "line 2" in info.value.message and "UTF-8" in info.value.hint


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000,
                                  "[" * 100_000, '{"x": [' + "{" * 50_000], ids=lambda t: t[:12])
def test_userfile_deep_json_is_refused_before_parsing(tmp_path: Path, text: str) -> None:
    from cusync_gen import userfile

    path = tmp_path / "deep.json"
    path.write_text(text)
    with time_bound(5), pytest.raises(UsageError) as info:
        userfile.read_json(path, "manifest", 1 << 20, 32)
    assert "deep.json" in info.value.message and "32" in info.value.message


def test_userfile_json_depth_counts_brackets_outside_strings(tmp_path: Path) -> None:
    from cusync_gen import userfile

    path = tmp_path / "ok.json"
    path.write_text(json.dumps({"a": ["[[[[{{{{\\\"[[[" * 100, {"b": 1}]}))
    assert userfile.read_json(path, "manifest", 1 << 20, 3)["a"][1] == {"b": 1}
    path.write_text(json.dumps({"a": [[[1]]]}))
    with pytest.raises(UsageError):
        userfile.read_json(path, "manifest", 1 << 20, 3)


@pytest.mark.parametrize(("text", "words"), [("{\"a\": 1,}", "line 1"), ("[" + "9" * 5000 + "]", "digits"),
                                             ("", "invalid JSON"), ("\n\n{", "line 3")])
def test_userfile_invalid_json(tmp_path: Path, text: str, words: str) -> None:
    from cusync_gen import userfile

    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        userfile.read_json(path, "manifest", 1 << 20, 32)
    assert "bad.json" in info.value.message and words in info.value.message


# --------------------------------------------------------------------------------------------------
# A: FIFOs, where a spec, a trace or a generated file goes (a subprocess each: a hang fails, not blocks)


@pytest.mark.parametrize("args", [["validate", "{fifo}"], ["generate", "{fifo}", "-o", "out"],
                                  ["validate", "{fifo_json}"], ["tune", "{fifo}", "-o", "t"],
                                  ["trace", "{fifo_trace}", "-o", "t.png"]])
def test_fifo_given_as_a_file(tmp_path: Path, args: list[str]) -> None:
    names = {"{fifo}": "spec.yaml", "{fifo_json}": "spec.json", "{fifo_trace}": "trace.jsonl"}
    args = [names.get(a, a) for a in args]
    fifo(tmp_path / args[1])
    code, out, err = cli_subprocess(args, tmp_path, no_gpu=args[0] in ("tune", "trace"))
    assert_one_error(code, out, err)
    assert args[1] in err and "FIFO" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "t").exists()


def test_check_with_a_fifo_the_stale_manifest_lists(project: Path) -> None:
    """_check_report read every file the old manifest listed: a FIFO there blocked `generate --check`."""
    manifest = json.loads((project / "manifest.json").read_text())
    manifest["files"].append("old.h")
    (project / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    fifo(project / "old.h")
    code, out, err = cli_subprocess(["generate", "two_gemm", "-o", "proj", "--check"], project.parent)
    assert code == 1 and "Traceback" not in err, err
    assert "changed: manifest.json" in err and "not generated (generate keeps it): old.h" in err
    code, out, err = cli_subprocess(["generate", "two_gemm", "-o", "proj"], project.parent)
    assert code == 0, err
    assert (project / "old.h").is_fifo()  # not ours: kept


@pytest.mark.parametrize("rel", ["CMakeLists.txt", "manifest.json"])
def test_check_with_a_fifo_where_a_generated_file_goes(project: Path, rel: str) -> None:
    (project / rel).unlink()
    fifo(project / rel)
    code, out, err = cli_subprocess(["generate", "two_gemm", "-o", "proj", "--check"], project.parent)
    assert code == 1 and "Traceback" not in err, err
    assert f"missing: {rel}" in err


def test_build_with_a_fifo_manifest(project: Path) -> None:
    (project / "manifest.json").unlink()
    fifo(project / "manifest.json")
    code, out, err = cli_subprocess(["build", "proj"], project.parent)
    assert_one_error(code, out, err, (1, 2))
    assert "manifest.json" in err


# --------------------------------------------------------------------------------------------------
# B: a deeply nested manifest.json in the target


DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize("command", ["generate", "check", "build", "run"])
def test_deep_manifest(project: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                       command: str) -> None:
    monkeypatch.chdir(project.parent)
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    (project / "manifest.json").write_text(DEEP)
    args = {"generate": ["generate", "two_gemm", "-o", "proj"], "check": ["generate", "two_gemm", "-o", "proj", "--check"],
            "build": ["build", "proj"], "run": ["run", "proj"]}[command]
    code, out, err = cli_call(capsys, *args)
    if command == "check":
        assert code == 1 and "Traceback" not in err and "changed: manifest.json" in err, err
        return
    assert_one_error(code, out, err, (1, 2))
    assert "manifest.json" in err or "-o proj" in err
    assert (project / "manifest.json").read_text() == DEEP


def test_manifest_with_bad_bytes_and_wrong_shape(project: Path, monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(project.parent)
    for text in (b'{"name": "\xff"}', b"[1]", b'{"name": 1e999}', b'{"files": "x", "generator": "cusync-gen"}'):
        (project / "manifest.json").write_bytes(text)
        code, out, err = cli_call(capsys, "build", "proj")
        assert_one_error(code, out, err, (1, 2))
        assert "manifest.json" in err


# --------------------------------------------------------------------------------------------------
# B: trace input


def trace_cli(capsys: pytest.CaptureFixture[str], path: Path, *extra: str) -> tuple[int, str, str]:
    return cli_call(capsys, "trace", str(path), "--m", "256", "-o", str(path.with_name("t.png")), *extra)


def test_trace_not_utf8(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(json.dumps(ROW).encode() + b"\n" + b'{"m": "\xff\xfe"}\n')
    code, out, err = trace_cli(capsys, path)
    assert_one_error(code, out, err)
    assert "t.jsonl" in err and "line 2" in err


@pytest.mark.parametrize("value", ["1e308", "Infinity", "-Infinity", "NaN", "1e400", "-5", "-1e308", "1e20"])
@pytest.mark.parametrize("field", ["taken_us", "stored_us"])
def test_trace_absurd_times(tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str) -> None:
    path = tmp_path / "t.jsonl"
    line = json.dumps(ROW).replace(f'"{field}": {ROW[field]}', f'"{field}": {value}')
    write_trace(path, [ROW, line])
    code, out, err = trace_cli(capsys, path)
    assert_one_error(code, out, err)
    assert "t.jsonl:2" in err and field in err


@pytest.mark.parametrize(("field", "value"), [
    ("m", "1e308"), ("m", "1.5"), ("m", '"256"'), ("m", "true"), ("m", "[256]"), ("m", str(10 ** 30)), ("m", "0"),
    ("sm", str(2 ** 70)), ("sm", "-3"), ("sm", "null"), ("tile_m", str(10 ** 20)), ("tile_n", "-1"),
    ("mode", "5"), ("mode", '{"a": 1}'), ("stage", "[]"), ("stage", '"' + "x" * 1000 + '"'),
], ids=lambda v: v[:12])
def test_trace_wrong_types_and_values(tmp_path: Path, capsys: pytest.CaptureFixture[str], field: str, value: str) -> None:
    path = tmp_path / "t.jsonl"
    line = json.dumps(ROW).replace(f'"{field}": {json.dumps(ROW[field])}', f'"{field}": {value}')
    assert line != json.dumps(ROW)
    write_trace(path, [ROW, line])
    code, out, err = trace_cli(capsys, path)
    assert_one_error(code, out, err)
    assert "t.jsonl:2" in err and field in err


@pytest.mark.parametrize("line", ["[1]", "null", '"x"', "{}", '{"m": ' + "[" * 100_000 + "]" * 100_000 + "}",
                                  "[" * 100_000, '{"m": 256,'], ids=lambda t: t[:12])
def test_trace_lines_that_are_not_records(tmp_path: Path, capsys: pytest.CaptureFixture[str], line: str) -> None:
    path = tmp_path / "t.jsonl"
    write_trace(path, [ROW, line])
    code, out, err = trace_cli(capsys, path)
    assert_one_error(code, out, err)
    assert "t.jsonl:2" in err


def test_trace_unknown_mode_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """It said "no tiles at M = 1024" and suggested [1024]."""
    path = tmp_path / "t.jsonl"
    write_trace(path, [dict(ROW, m=1024, mode="fused"), dict(ROW, m=1024, mode="fused", sm=1)])
    code, out, err = cli_call(capsys, "trace", str(path), "--m", "1024", "-o", str(tmp_path / "t.png"))
    assert_one_error(code, out, err)
    assert "'fused'" in err and "sequential" in err and "overlapped" in err
    assert "no tiles at M" not in err


def test_trace_other_m_lists_few_values(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.jsonl"
    write_trace(path, [dict(ROW, m=m) for m in range(1, 500)])
    code, out, err = cli_call(capsys, "trace", str(path), "--m", "1024", "-o", str(tmp_path / "t.png"))
    assert_one_error(code, out, err)
    assert "M = 1024" in err and len(err) < 600


def test_trace_size_is_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from cusync_gen import trace

    path = tmp_path / "t.jsonl"
    with path.open("wb") as f:
        f.truncate(trace.MAX_TRACE_BYTES + 1)  # sparse, never read
    code, out, err = trace_cli(capsys, path)
    assert_one_error(code, out, err)
    assert "t.jsonl" in err and f"{trace.MAX_TRACE_BYTES >> 20} MiB" in err


def test_trace_records_are_bounded(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from cusync_gen import trace

    monkeypatch.setattr(trace, "MAX_TRACE_RECORDS", 50)
    path = write_trace(tmp_path / "t.jsonl", [dict(ROW, sm=i) for i in range(51)])
    code, out, err = trace_cli(capsys, path)
    assert_one_error(code, out, err)
    assert "t.jsonl" in err and "50" in err
    write_trace(path, [dict(ROW, sm=i) for i in range(50)])
    code, out, err = trace_cli(capsys, path)
    assert code == 0, err


def many_tiles(count: int) -> list[dict[str, Any]]:
    rows = []
    for mode in ("sequential", "overlapped"):
        for i in range(count // 2):
            stage = "gemm1" if i % 2 else "gemm2"
            rows.append(dict(ROW, m=1024, mode=mode, stage=stage, tile_m=i // 64, tile_n=i % 64, sm=i % 132,
                             taken_us=i * 0.1, stored_us=i * 0.1 + 5.0))
    return rows


def test_trace_draws_in_bulk(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """One matplotlib call per tile took minutes for 20k tiles: now one collection per stage and panel."""
    pytest.importorskip("matplotlib")
    import matplotlib.axes

    from cusync_gen import trace

    calls: list[str] = []
    for name in ("broken_barh", "barh", "bar", "add_patch", "add_collection", "fill_between", "plot"):
        original = getattr(matplotlib.axes.Axes, name)

        def counted(self: Any, *args: Any, _name: str = name, _original: Any = original, **kwargs: Any) -> Any:
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(matplotlib.axes.Axes, name, counted)
    records = trace.load_trace(write_trace(tmp_path / "t.jsonl", many_tiles(2000)))
    with time_bound(30):
        trace.write_outputs(records, tmp_path / "t.png", 1024)
    assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    assert len(calls) <= 2 * 2, calls  # two panels, two stages


def test_a_large_trace_renders_quickly(tmp_path: Path) -> None:
    """A 2.5 MB trace (20k tiles) took about three minutes; the subprocess bound is 20 s."""
    pytest.importorskip("matplotlib")
    path = write_trace(tmp_path / "t.jsonl", many_tiles(20_000))
    assert path.stat().st_size > 2_500_000
    start = time.monotonic()
    code, out, err = cli_subprocess(["trace", "t.jsonl", "--m", "1024", "-o", "t.png"], tmp_path, no_gpu=True)
    assert code == 0, err
    assert (tmp_path / "t.png").is_file() and time.monotonic() - start < TIMEOUT_S


def test_trace_of_a_missing_jsonl_says_so(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    code, out, err = cli_call(capsys, "trace", str(tmp_path / "nope.jsonl"), "-o", str(tmp_path / "t.png"))
    assert_one_error(code, out, err)
    assert "nope.jsonl" in err and "not found" in err


# --------------------------------------------------------------------------------------------------
# A/B: tune --tiles


def tiles_arg(stage: str, count: int) -> str:
    return f"{stage}=" + ",".join(f"{16 * (1 + i % 16)}x{16 * (1 + i // 16 % 16)}x{8 * (1 + i // 256)}" for i in range(count))


@pytest.mark.parametrize(("count", "words"), [(600, "600 tiles for gemm1"), (30, "900 combinations")])
@pytest.mark.parametrize("gpu", [False, True])
def test_tune_tiles_combinations_are_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str], gpu: bool, count: int,
                                             words: str) -> None:
    """600 x 600 --tiles values ran on (parse_spec and make_plan per combination) before the GPU check."""
    from cusync_gen import tune

    monkeypatch.setattr(build, "has_gpu", lambda: gpu)
    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("built"))
    code, out, err = cli_call(capsys, "tune", "two_gemm", "--tiles", tiles_arg("gemm1", count), "--tiles",
                              tiles_arg("gemm2", count), "-o", str(tmp_path / "t"), seconds=10)
    assert_one_error(code, out, err)
    assert "--tiles" in err and f"limit of {tune.MAX_VARIANTS}" in err and words in err
    assert not (tmp_path / "t").exists()


def test_tune_tiles_one_huge_list_is_refused_while_parsing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: True)
    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("built"))
    code, out, err = cli_call(capsys, "tune", "two_gemm", "--tiles", "gemm1=" + ",".join(["128x128x32"] * 200_000),
                              "-o", str(tmp_path / "t"), seconds=10)
    assert_one_error(code, out, err)
    assert "--tiles" in err


def test_tune_checks_the_gpu_before_enumerating(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    from cusync_gen import tune

    monkeypatch.setattr(build, "has_gpu", lambda: False)
    monkeypatch.setattr(tune, "make_variants", lambda *a, **k: pytest.fail("enumerated before the GPU check"))
    code, out, err = cli_call(capsys, "tune", "two_gemm", "--tiles", "gemm1=128x128x32,128x256x32",
                              "-o", str(tmp_path / "t"))
    assert_one_error(code, out, err, (3,))
    assert "no CUDA device" in err


@pytest.mark.parametrize("value", ["gemm1=١٢٨x128x32", "gemm1=" + "9" * 5000 + "x128x32", "gemm1=+128x128x32",
                                   "gemm1=-128x128x32", "gemm1=²x128x32", "gemm1=1e3x128x32", "gemm1=0x128x32",
                                   "gemm1=128x128x" + "9" * 40, "gemm1=128x128x512", "gemm1=128x128x32,",
                                   "gemm1=128x1 28x32", "gemm1=0x80x128x32", "gemm1=128_0x1x1",
                                   "=128x128x32", "gemm1", "gemm1=", "gemm1=128x128", "gemm1=128x128x32x1"],
                         ids=lambda v: ascii(v)[:24])
def test_tune_tiles_numbers_parse_as_m_does(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                            value: str) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: False)  # a bad --tiles is exit 2, before "no GPU" (3)
    code, out, err = cli_call(capsys, "tune", "two_gemm", "--tiles", value)
    assert_one_error(code, out, err)
    assert "--tiles" in err


@pytest.mark.parametrize("number", ["128", " 128", "0128", "128 "])
def test_tune_tiles_accepts_what_m_accepts(number: str) -> None:
    assert cli.parse_ms(number) == [128]
    assert cli.parse_tiles([f"gemm1={number}x64x32"]) == {"gemm1": [(128, 64, 32)]}
