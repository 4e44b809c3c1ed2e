"""Fuzzing the command line (the second half of the fuzzer; tests/test_fuzz.py holds the harness and the
spec fuzzing): hostile arguments for validate, generate, run, trace, init and fetch-cutlass, in process and
as a subprocess under a hard timeout; trace input, tune --tiles strings and init arguments; one focused test
per bug the fuzzer found; option bounds. Every input gives exit 0 or one clean `error:` line, never a
traceback, a hang, or a write outside the target.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
from hypothesis import given, note
from hypothesis import strategies as st

from conftest import REPO
from test_write_safety import snapshot
from cusync_gen import build, cli, render
from cusync_gen.errors import CusyncError
from cusync_gen.spec.model import canonical_target
from cusync_gen.spec import MAX_M, load_spec
# The harness, the input strategies and the bounds are test_fuzz.py's (one home for both fuzz files).
from test_fuzz import (EXAMPLES, EXAMPLES_DIR, SUBPROCESS_BOUND_S, TEXTS, assert_clean_error,  # noqa: E402
                       assert_unchanged_outside, assert_valid_project, assert_writes_inside, dump, fuzz, mutated_data,
                       mutated_text, scratch, time_bound, watched_writes)


# --------------------------------------------------------------------------------------------------
# The command line, in process (fast) and as a subprocess (the real entry point, a hard timeout)

M_VALUES = ["1", "0", "-1", "", " ", ",", "1,,2", "256,1024", "1,256,1024", "512", "1023", str(MAX_M), str(MAX_M + 1),
            str(1 << 31), "9" * 5000, "١٢٣", "²", "1e3", "0x10", " 8", "+8", "1_000", "nan", "1.5", "00000001",
            "8\n", "8\x00", "--force", "-o"]
PATHS = ["out", "out/sub", "new", "sentinel.txt", "sentinel.txt/x", ".", "..", "", "sibling", "sibling/keep.txt",
         "../sibling", "../out2", "out\nx", "out\x01", "ü/out", "x" * 300, "out/" + "y" * 300, "-x", "~", "./",
         "../sentinel.txt", "generated", "proj"]
SPEC_ARGS = ["two_gemm", "gpt3_attention", "llama_mlp_split", "two_gemm_sm90", "spec.yaml", "nope.yaml", "nope",
             "sibling", "", "-", "sentinel.txt", "spec\n.yaml", "../spec.yaml", "proj", "trace.jsonl", "bad.jsonl"]
TARGET_ARGS = ["sm_80", "sm_90", "sm_100", "", "sm_9\n0", "\x1b[31m", "x" * 200, "sm80"]
TRACE_ROW = {"m": 256, "mode": "sequential", "stage": "gemm1", "tile_m": 0, "tile_n": 0, "sm": 0, "taken_us": 0.0,
             "stored_us": 1.0}
FAKE_ROW = {"m": 256, "policy": "row", "sequential_us": 130.5, "overlapped_us": 110.25, "speedup": 1.18,
            "bitwise_equal": True, "ref_rel_err": 1.5e-4, "sync_error": None, "graph_ok": True}

text_args = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)


@st.composite
def command_lines(draw: st.DrawFn) -> list[str]:
    """One command line of validate, generate, run, trace, init or fetch-cutlass, with hostile values."""
    def pick(values: list[str]) -> str:
        return draw(st.sampled_from(values) | text_args) if draw(st.integers(0, 9)) == 0 else draw(st.sampled_from(values))

    def maybe(*option: str, values: list[str]) -> list[str]:
        return [*option, pick(values)] if draw(st.booleans()) else []

    command = draw(st.sampled_from(["validate", "generate", "run", "trace", "init", "fetch-cutlass"]))
    args = [command]
    if command == "validate":
        args += [pick(SPEC_ARGS), *maybe("--m", values=M_VALUES), *maybe("--batch", values=M_VALUES),
                 *maybe("--cache", values=M_VALUES), *maybe("--target", values=TARGET_ARGS)]
    elif command == "generate":
        args += [pick(SPEC_ARGS), "-o", pick(PATHS), *maybe("--target", values=TARGET_ARGS)]
        args += draw(st.sampled_from([[], [], ["--force"], ["--check"]]))
    elif command in ("run", "trace"):
        args += [pick(SPEC_ARGS), *maybe("--m", values=M_VALUES), *maybe("--arch", values=TARGET_ARGS),
                 *maybe("--jobs", values=M_VALUES), *maybe("--cutlass-dir", values=PATHS)]
        if command == "run":
            args += [*maybe("--batch", values=M_VALUES), *maybe("--cache", values=M_VALUES),
                     *maybe("--repeats", values=M_VALUES), *maybe("--warmup", values=M_VALUES),
                     *maybe("--policies", values=["row", "row,tile", "", ",", "a b", "ü"]),
                     *maybe("-o", values=PATHS), *maybe("--out", values=PATHS)]
        else:
            args += [*maybe("-o", values=PATHS + ["t.png", "sub/t.png", "t"]), *maybe("--project", values=PATHS)]
        args += draw(st.sampled_from([[], ["--force"]]))
    elif command == "init":
        args += draw(st.sampled_from([[pick(SPEC_ARGS)], [pick(SPEC_ARGS)], ["--list"], []]))
        args += [*maybe("-o", values=PATHS + ["x.yaml", "sub/x.yaml"])] + draw(st.sampled_from([[], ["--force"]]))
    else:  # never a download: always a (fake) wheel, and a --dest in the tmp folder
        args += ["--wheel", draw(st.sampled_from(["fake.whl", "nope.whl", "sibling", "sentinel.txt"])),
                 "--dest", pick(PATHS)] + draw(st.sampled_from([[], ["--force"]]))
    return args


def _option(args: list[str], *names: str) -> str | None:
    """The value of the last of `names` in `args` (None when absent)."""
    value = None
    for i, arg in enumerate(args[:-1]):
        if arg in names:
            value = args[i + 1]
    return value


def cli_targets(args: list[str], cwd: Path) -> list[Path]:
    """Where the command may write, by what its options say."""
    command = args[0]
    if command == "generate":
        return [cwd / (_option(args, "-o", "--output") or "")]
    if command == "run":
        return [cwd / (_option(args, "-o", "--output") or "generated"), *[cwd / p for p in [_option(args, "--out")] if p]]
    if command == "trace":
        png = cwd / (_option(args, "-o", "--png") or "trace.png")
        outputs = [png, png.with_name(png.name + ".png")]
        with contextlib.suppress(ValueError):
            outputs += [png.with_suffix(".json"), png.with_suffix(".jsonl")]
        return [cwd / (_option(args, "--project") or "generated"), *outputs]
    if command == "init":
        name = next((a for a in args[1:2] if not a.startswith("-")), "x")
        return [cwd / (_option(args, "-o", "--output") or f"{name}.yaml")]
    if command == "fetch-cutlass":
        return [cwd / (_option(args, "--dest") or "")]
    return []


def prepare_cli_root(root: Path, spec_text: str, project: Path) -> Path:
    """root/{sentinel.txt, sibling/, spec.yaml, cwd/{sentinel.txt, sibling/, spec.yaml, fake.whl, trace.jsonl,
    proj/ (a generated project)}}; returns root/cwd."""
    cwd = root / "cwd"
    for folder in (root, cwd):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sentinel.txt").write_text("sentinel")
        (folder / "sibling").mkdir()
        (folder / "sibling" / "keep.txt").write_text("sibling sentinel")
        (folder / "spec.yaml").write_text(spec_text)
    (cwd / "fake.whl").write_bytes(b"PK\x05\x06" + bytes(18))  # an empty zip: fails the sha256 check
    (cwd / "trace.jsonl").write_text(json.dumps(TRACE_ROW) + "\n" + json.dumps({**TRACE_ROW, "mode": "overlapped"}))
    (cwd / "bad.jsonl").write_text('{"m": Infinity}\n[1]\n')
    shutil.copytree(project, cwd / "proj")
    return cwd


def fake_bench_run(project: Path, ms: list[int], policies: object = None, repeats: int = 50, warmup: int = 10,
                   extra_args: list[str] = ()) -> list[dict[str, Any]]:
    """build.run without a GPU: a trace for `trace`, one row for `run`."""
    if "--trace" in extra_args:
        Path(extra_args[extra_args.index("--trace") + 1]).write_text(json.dumps({**TRACE_ROW, "m": ms[0]}) + "\n")
    return [dict(FAKE_ROW, m=m) for m in ms]


def run_cli_in_process(args: list[str], cwd: Path, gpu: bool) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    fakes = [mock.patch.object(build, "has_gpu", lambda: gpu), mock.patch.object(build, "gpu_arch", lambda: "sm_90"),
             mock.patch.object(build, "build", lambda project, **kwargs: Path(project) / "build"),
             mock.patch.object(build, "run", fake_bench_run)]
    with contextlib.ExitStack() as stack:
        for fake in fakes:
            stack.enter_context(fake)
        stack.enter_context(contextlib.chdir(cwd))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            cli.main(args)
            code = 0
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
    return code, out.getvalue(), err.getvalue()


def assert_one_error_line(code: int, out: str, err: str, allowed: tuple[int, ...] = (1, 2)) -> None:
    assert "Traceback" not in out + err, err
    assert code in allowed, (code, out, err)
    lines = err.rstrip("\n").splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1, err
    rest = lines[errors[0] + 1:]
    assert rest == [] or (len(rest) == 1 and rest[0].startswith("hint:")), f"not one error line and a hint: {err!r}"


def check_cli_outcome(args: list[str], cwd: Path, code: int, out: str, err: str) -> None:
    command = args[0]
    if code == 1 and command == "generate" and "--check" in args and "differs from what" in err:
        assert "Traceback" not in out + err  # the --check report: one line per difference
        return
    if code != 0:
        assert_one_error_line(code, out, err, (1, 2, 3, 6) if command in ("run", "trace") else (1, 2))
        return
    assert command != "fetch-cutlass", "a fake wheel was accepted"
    assert "Traceback" not in out + err
    if command == "validate":
        assert out.rstrip().endswith("OK"), out
    elif command == "generate" and "--check" not in args:
        spec = args[1]
        spec_path = cwd / spec if (cwd / spec).is_file() else EXAMPLES_DIR / f"{spec}.yaml"
        target = _option(args, "--target")  # the CLI takes any spelling (sm80, sm_80, 80); the planner TARGETS'
        assert_valid_project(spec_path, cwd / _option(args, "-o"), canonical_target(target) if target else None)


@pytest.fixture(scope="module")
def small_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """two_gemm, generated: the `proj` a command line may name (run and trace take it as it is)."""
    return render.generate(EXAMPLES_DIR / "two_gemm.yaml", tmp_path_factory.mktemp("proj") / "proj")


@fuzz(120)
@given(args=command_lines(), spec=mutated_data(), gpu=st.booleans())
def test_command_lines_in_process(args: list[str], spec: Any, gpu: bool, small_project: Path) -> None:
    with scratch() as root:
        cwd = prepare_cli_root(root, dump(spec, "yaml"), small_project)
        before = snapshot(root)
        with time_bound(), watched_writes() as writes:
            code, out, err = run_cli_in_process(args, cwd, gpu)
        note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        targets = cli_targets(args, cwd)
        assert_writes_inside(writes, targets)
        assert_unchanged_outside(before, snapshot(root), root, targets)
        check_cli_outcome(args, cwd, code, out, err)


# The real entry point in a subprocess, under a hard timeout. `run` and `trace` go through a launcher that
# reports no GPU and builds nothing (on a GPU machine they would build for minutes, and `run` builds without
# a GPU too); everything else is `python3 -m`.
NO_GPU_LAUNCHER = ("import sys; from cusync_gen import build, cli; build.has_gpu = lambda: False; "
                   "build.gpu_arch = lambda: None; build.build = lambda project, **kwargs: project; "
                   "cli.main(sys.argv[1:])")


def run_cli_subprocess(args: list[str], cwd: Path) -> tuple[int, str, str]:
    entry = ["-c", NO_GPU_LAUNCHER] if args[0] in ("run", "trace") else ["-m", "cusync_gen.cli"]
    env = {**os.environ, "PYTHONPATH": str(REPO), "COLUMNS": "200", "NO_COLOR": "1"}
    try:
        proc = subprocess.run([sys.executable, *entry, *args], cwd=cwd, env=env, capture_output=True, text=True,
                              errors="replace", timeout=SUBPROCESS_BOUND_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"cusync-gen {args} still running after {SUBPROCESS_BOUND_S} s")
    return proc.returncode, proc.stdout, proc.stderr


def check_cli_subprocess(args: list[str], spec_text: str, project: Path) -> None:
    with scratch() as root:
        cwd = prepare_cli_root(root, spec_text, project)
        before = snapshot(root)
        code, out, err = run_cli_subprocess(args, cwd)
        with contextlib.suppress(Exception):  # (outside a Hypothesis test there is nowhere to note)
            note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        targets = cli_targets(args, cwd)
        assert_unchanged_outside(before, snapshot(root), root, targets)
        check_cli_outcome(args, cwd, code, out, err)


HOSTILE_COMMAND_LINES = [
    ["validate", "spec.yaml", "--m", "9" * 5000],
    ["validate", "gpt3_attention", "--m", str(MAX_M), "--cache", str(MAX_M)],
    ["validate", "two_gemm", "--target", "sm_9\n0", "--batch", "²"],
    ["validate", "spec\n.yaml"],
    ["generate", "two_gemm", "-o", "sentinel.txt/x"],
    ["generate", "two_gemm", "-o", ".."],
    ["generate", "llama_mlp_split", "-o", "sibling"],
    ["generate", "two_gemm_sm90", "-o", "out\x01"],
    ["init", "two_gemm", "-o", "sibling", "--force"],
    ["trace", "bad.jsonl", "-o", "t.yaml"],
    ["run", "two_gemm", "--m", "²", "--out", "sentinel.txt/r.json"],
    ["fetch-cutlass", "--wheel", "fake.whl", "--dest", "sibling"],
    ["fetch-cutlass", "--wheel", "fake.whl", "--dest", "x" * 300],
    ["nosuchcommand"],
    ["generate", "two_gemm"],
]


@pytest.mark.parametrize("args", HOSTILE_COMMAND_LINES, ids=lambda a: " ".join(a)[:40].encode("unicode_escape").decode())
def test_hostile_command_lines_in_a_subprocess(args: list[str], small_project: Path) -> None:
    check_cli_subprocess(args, TEXTS["two_gemm"], small_project)


@fuzz(6)
@given(spec=mutated_data() | mutated_text().map(lambda b: b.decode("utf-8", "replace")),
       command=st.sampled_from([["validate", "spec.yaml", "--m", "1,1023,4096"], ["generate", "spec.yaml", "-o", "out"],
                                ["generate", "spec.yaml", "-o", "sibling", "--force"]]))
def test_mutated_specs_in_a_subprocess(spec: Any, command: list[str], small_project: Path) -> None:
    check_cli_subprocess(command, spec if isinstance(spec, str) else dump(spec, "yaml"), small_project)


# --------------------------------------------------------------------------------------------------
# Trace input, tune --tiles strings and init arguments (tests/test_safety_readers.py has one test per case
# these found): exit 0 or one `error:` line, never a traceback, within the time bound

TRACE_VALUES: list[Any] = [0, 1, -1, -1.0, 0.5, 7, 256, 1024, 131, 4096, 1e9, 1e308, -1e308, float("inf"),
                           float("-inf"), float("nan"), 10 ** 30, 2 ** 31, 2 ** 64, -(2 ** 63), True, False, None,
                           "256", "", "x" * 100, "\x00", "é", [], {}, [[[[1]]]], {"a": 1}, "sequential", "overlapped",
                           "fused", "gemm1", "gemm2"]


@st.composite
def trace_text(draw: st.DrawFn) -> bytes:
    """A few lines of a bench trace, with values replaced, keys dropped, lines cut or nested, bytes inserted."""
    lines: list[bytes] = []
    for _ in range(draw(st.integers(0, 6))):
        row: dict[str, Any] = dict(TRACE_ROW, mode=draw(st.sampled_from(["sequential", "overlapped"])),
                                   stage=draw(st.sampled_from(["gemm1", "gemm2"])), sm=draw(st.integers(0, 131)))
        row["stored_us"] = row["taken_us"] + draw(st.sampled_from([0.0, 1.0, 150.5]))
        op = draw(st.sampled_from(["keep"] * 3 + ["replace"] * 4 + ["delete", "add", "list", "nest", "cut"]))
        key = draw(st.sampled_from([*sorted(row), "taken_us", "stored_us", "stored_us", "sm", "m"]))
        if op == "replace":
            row[key] = draw(st.sampled_from(TRACE_VALUES))
        elif op == "delete":
            del row[key]
        elif op == "add":
            row[draw(text_args)] = draw(st.sampled_from(TRACE_VALUES))
        line = json.dumps(row).encode()
        if op == "list":
            line = json.dumps(list(row.values())).encode()
        elif op == "nest":
            depth = draw(st.sampled_from([3, 5, 100, 20_000]))
            line = line[:-1] + b', "x": ' + b"[" * depth + b"]" * depth + b"}"
        elif op == "cut":
            line = line[:draw(st.integers(0, len(line)))]
        lines.append(line)
        if draw(st.integers(0, 4)) == 0:
            lines.append(draw(st.sampled_from([b"", b"   ", b"\r", b"null", b"[", b"\xff\xfe", b"\x00"])))
    text = b"\n".join(lines)
    if draw(st.integers(0, 5)) == 0:
        at = draw(st.integers(0, len(text)))
        text = text[:at] + draw(st.binary(min_size=1, max_size=4)) + text[at:]
    return text


@fuzz(40)
@given(text=trace_text(), m=st.sampled_from(["256"] * 6 + ["1024", "1", str(MAX_M)]) | st.sampled_from(M_VALUES))
def test_trace_input(text: bytes, m: str) -> None:
    with scratch() as root:
        (root / "t.jsonl").write_bytes(text)
        with time_bound(), watched_writes() as writes:
            code, out, err = run_cli_in_process(["trace", "t.jsonl", "--m", m, "-o", "t.png"], root, False)
        note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        assert_writes_inside(writes, [root / "t.png", root / "t.json"])
        if code == 0:
            assert (root / "t.png").is_file() and (root / "t.json").is_file() and "Traceback" not in out + err
        else:
            assert_one_error_line(code, out, err, (2,))


TILE_NUMBERS = ["128", "64", "32", "256", "16", "0", "-1", "+8", "١٢٨", "²", "9" * 5000, "1e3", " 128", "128 ", "",
                "00128", "512", "0x10", "1_0", "nan", str(MAX_M + 1)]


@st.composite
def tiles_values(draw: st.DrawFn) -> list[str]:
    """--tiles values: well-formed STAGE=MxNxK[,...] lists (up to more combinations than tune takes) with at
    most one hostile piece each: a number, a stage name, a separator or a shape."""
    values = []
    for stage in ["gemm1", "gemm2"][:draw(st.sampled_from([1, 2, 2]))]:
        count = draw(st.sampled_from([1, 3, 9, 65, 600]))
        shapes = [[draw(st.sampled_from(["64", "128", "256"])), draw(st.sampled_from(["64", "128", "256"])),
                   draw(st.sampled_from(["32", "64"]))] for _ in range(count)]
        hostile = draw(st.sampled_from(["none", "none", "number", "number", "number", "stage", "shape", "sep"]))
        if hostile == "number":
            shapes[draw(st.integers(0, count - 1))][draw(st.integers(0, 2))] = draw(st.sampled_from(TILE_NUMBERS) |
                                                                                     text_args)
        elif hostile == "stage":
            stage = draw(st.sampled_from(["glu", "", " gemm1 ", "nope", "gemm1=gemm2"]) | text_args)
        elif hostile == "shape":
            shapes[draw(st.integers(0, count - 1))] = draw(st.sampled_from([["128"], ["128", "128"], [""] * 3,
                                                                            ["1"] * 4]))
        text = ",".join("x".join(shape) for shape in shapes)
        values.append(f"{stage}{draw(st.sampled_from(['=', ':', '', '=='])) if hostile == 'sep' else '='}{text}")
    return values


@fuzz(60)
@given(values=tiles_values())
def test_tune_tiles_strings(values: list[str]) -> None:
    with scratch() as root:
        args = ["tune", "two_gemm", *[a for v in values for a in ("--tiles", v)], "-o", "t"]
        with time_bound(3.0), watched_writes() as writes:  # no GPU: nothing is built or enumerated (~0.1 s)
            code, out, err = run_cli_in_process(args, root, False)
        note(f"exit {code}\nstderr: {err[-2000:]}")
        assert not writes and not (root / "t").exists()
        assert_one_error_line(code, out, err, (2, 3))


init_paths = text_args.filter(lambda p: ".." not in p.split("/") and not p.startswith("/")) | st.sampled_from(
    ["x.yaml", "sub/x.yaml", "sentinel.txt", "sentinel.txt/x", "sibling", "", ".", "x" * 300, "a\nb", "-x"])


@fuzz(60)
@given(name=st.sampled_from(EXAMPLES + ["nope", "", "--list", "../two_gemm", "two_gemm.yaml"]) | text_args,
       output=st.none() | init_paths, force=st.booleans())
def test_init_arguments(name: str, output: str | None, force: bool) -> None:
    with scratch() as root:
        cwd = root / "cwd"
        cwd.mkdir()
        (cwd / "sentinel.txt").write_text("sentinel")
        (cwd / "sibling").mkdir()
        before = snapshot(root)
        args = ["init", name, *(["-o", output] if output is not None else []), *(["--force"] if force else [])]
        with time_bound(), watched_writes() as writes:
            code, out, err = run_cli_in_process(args, cwd, False)
        note(f"exit {code}\nstdout: {out[-2000:]}\nstderr: {err[-2000:]}")
        assert_writes_inside(writes, [cwd])
        assert_unchanged_outside(before, snapshot(root), root, [cwd])
        if code == 0:
            assert "Traceback" not in out + err
        else:
            assert_one_error_line(code, out, err, (2,))


# --------------------------------------------------------------------------------------------------
# What the fuzzer found, one focused test each (each failed before its fix)


def cli_call(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """`cusync-gen ARGS` in process, with its output checked for a traceback."""
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    return int(exc.value.code or 0), out, err



@pytest.mark.parametrize("character", ["\x00", "\x07", "\x1b", "\ufffe"])
def test_control_character_in_a_yaml_spec(tmp_path: Path, character: str) -> None:
    """yaml's ReaderError was a traceback (raised by the loader's constructor) with a two-line message."""
    path = tmp_path / "spec.yaml"
    path.write_text(TEXTS["two_gemm"].replace("name: gemm2", f"name: gemm{character}2"))
    with pytest.raises(CusyncError) as info:
        load_spec(path)
    assert_clean_error(info.value)
    line = TEXTS["two_gemm"].splitlines().index("  - name: gemm2") + 1
    assert f"spec.yaml:{line}:" in info.value.message and f"U+{ord(character):04X}" in info.value.message
    assert f"column {len('  - name: gemm') + 1}" in info.value.message


@pytest.mark.parametrize(("args", "words"), [
    (["validate"], "Missing argument"),
    (["validate", "two_gemm", "--bogus"], "No such option: --bogus"),
    (["run", "two_gemm", "--jobs", "0"], "--jobs"),
    (["validate", "two_gemm", "--m"], "--m"),
    (["generate", "two_gemm"], "-o"),
])
def test_click_usage_errors_are_one_error_line(capsys: pytest.CaptureFixture[str], args: list[str], words: str) -> None:
    """click's own parsing errors were a boxed usage message, not our `error:` line and hint."""
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert words in err and "--help" in err


def test_control_characters_in_paths_stay_on_the_error_line(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_call(capsys, "validate", "spec\n\x1b[2J.yaml")
    assert_one_error_line(code, out, err, (2,))
    assert "spec\\n\\x1b[2J.yaml" in err


@pytest.mark.parametrize(("args", "option"), [(["validate", "two_gemm", "--target", "sm_9\n0"], "--target"),
                                              (["generate", "two_gemm", "-o", "out", "--target", "sm_100"], "--target"),
                                              (["run", "two_gemm", "--arch", "sm_9\n0", "--force"], "--arch")])
def test_unknown_target_names_the_option(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                         capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    """`unknown target 'sm_9<newline>0'` was two lines, and did not say which option."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(build, "has_gpu", lambda: True)
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert f"error: {option} " in err and "sm_80, sm_86, sm_89, sm_90" in err
    assert not (tmp_path / "out").exists() and not (tmp_path / "generated").exists()


@pytest.mark.parametrize(("args", "option"), [
    (["init", "two_gemm", "-o", "file.txt/x.yaml"], "-o"),
    (["init", "two_gemm", "-o", "folder", "--force"], "-o"),
    (["trace", "trace.jsonl", "-o", "folder"], "-o"),
    (["trace", "trace.jsonl", "-o", "file.txt/t.png"], "-o"),
    (["trace", "trace.jsonl", "-o", "t.yaml"], "-o"),
    (["trace", "two_gemm", "-o", "t.txt"], "-o"),  # before the GPU check: exit 2, not 3
    (["run", "two_gemm", "--results", "file.txt/r.json"], "--results"),  # before the GPU check
    (["run", "two_gemm", "--out", "folder"], "--results"),
])
def test_output_files_are_checked_first(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    """init -o under a file or onto a folder, trace -o (a folder, under a file, a suffix matplotlib does not
    write) and run --out under a file were tracebacks (the last two after the whole run)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    (tmp_path / "file.txt").write_text("a file")
    (tmp_path / "folder").mkdir()
    (tmp_path / "trace.jsonl").write_text(json.dumps(TRACE_ROW) + "\n")
    before = snapshot(tmp_path)
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert f"error: {option} " in err
    assert snapshot(tmp_path) == before


def test_trace_line_with_infinity(tmp_path: Path) -> None:
    """int(float('inf')) is an OverflowError, which load_trace did not catch."""
    from cusync_gen.trace import load_trace

    path = tmp_path / "t.jsonl"
    path.write_text(json.dumps({**TRACE_ROW, "m": float("inf")}) + "\n")
    with pytest.raises(CusyncError) as info:
        load_trace(path)
    assert_clean_error(info.value)
    assert "t.jsonl:1" in info.value.message


@pytest.mark.parametrize("args", [["validate", "{long}"], ["validate", "{long}.yaml"], ["init", "two_gemm", "-o", "{long}"],
                                  ["build", "{long}"], ["fetch-cutlass", "--wheel", "w.whl", "--dest", "{long}"]])
def test_file_name_too_long(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
                            args: list[str]) -> None:
    """ENAMETOOLONG from a stat() (pathlib lets it through) was a traceback."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "w.whl").write_bytes(b"not a wheel")
    code, out, err = cli_call(capsys, *[a.replace("{long}", "x" * 300) for a in args])
    assert_one_error_line(code, out, err, (2,))
    assert "too long" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.whl"]


# --------------------------------------------------------------------------------------------------
# Option bounds and run/trace --force (issue 9)


@pytest.mark.parametrize(("args", "option"), [
    (["validate", "gpt3_attention", "--batch", str(MAX_M + 1)], "--batch"),
    (["validate", "gpt3_attention", "--cache", str(10 ** 30)], "--cache"),
    (["validate", "gpt3_attention", "--batch", "1,2"], "--batch"),
    (["validate", "gpt3_attention", "--cache", "١٢"], "--cache"),  # int() takes Arabic-Indic digits
    (["trace", "two_gemm", "--m", str(MAX_M + 1)], "--m"),
    (["run", "two_gemm", "--repeats", str(cli.MAX_COUNT + 1)], "--repeats"),
    (["run", "two_gemm", "--warmup", str(10 ** 20)], "--warmup"),
    (["run", "two_gemm", "--jobs", str(cli.MAX_JOBS + 1)], "--jobs"),
    (["tune", "two_gemm", "--rounds", str(cli.MAX_COUNT + 1)], "--rounds"),
])
def test_numeric_options_are_bounded(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
                                     args: list[str], option: str) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: True)  # the bound comes first, not "no GPU"
    monkeypatch.setattr(build, "build", lambda *a, **k: pytest.fail("built"))
    code, out, err = cli_call(capsys, *args)
    assert_one_error_line(code, out, err, (2,))
    assert option in err.splitlines()[-2]


def test_bounded_options_accept_their_limit(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.parse_count(str(MAX_M), "--cache", 0) == MAX_M and cli.parse_count("0", "--cache", 0) == 0
    code, out, err = cli_call(capsys, "validate", "gpt3_attention", "--m", "1", "--batch", "4", "--cache", str(MAX_M - 1))
    assert code == 0 and out.rstrip().endswith("OK"), err


@pytest.mark.parametrize("command", ["run", "trace"])
def test_run_and_trace_force_into_a_foreign_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                   capsys: pytest.CaptureFixture[str], command: str) -> None:
    """run and trace generate into ./generated/NAME (or -o / --project), which now refuses a folder that is
    not our project; --force (passed to generate) writes into it and keeps the user's files."""
    monkeypatch.chdir(tmp_path)
    for name, fake in (("has_gpu", lambda: True), ("gpu_arch", lambda: "sm_80"),  # sm_90: run takes two_gemm_sm90
                       ("build", lambda project, **kwargs: Path(project) / "build"), ("run", fake_bench_run)):
        monkeypatch.setattr(build, name, fake)
    folder = tmp_path / "generated" / "two_gemm"
    folder.mkdir(parents=True)
    (folder / "mine.txt").write_text("mine")
    extra = ["--m", "256", "-o", str(tmp_path / "t.png")] if command == "trace" else ["--m", "256"]
    code, out, err = cli_call(capsys, command, "two_gemm", *extra)
    assert_one_error_line(code, out, err, (2,))
    assert "--force" in err and sorted(p.name for p in folder.iterdir()) == ["mine.txt"]
    code, out, err = cli_call(capsys, command, "two_gemm", *extra, "--force")
    assert code == 0, err
    assert_valid_project(EXAMPLES_DIR / "two_gemm.yaml", folder, None)
    assert (folder / "mine.txt").read_text() == "mine"


@pytest.mark.parametrize("value", ["!!int abc", "!!int 0x", "!!float abc", "!!bool maybe", "!!timestamp 2001-13-45",
                                   "!!timestamp tomorrow"])
def test_explicit_yaml_tag_that_does_not_fit_its_value(tmp_path: Path, value: str) -> None:
    """PyYAML's constructors raise ValueError, KeyError or AttributeError for these: tracebacks."""
    path = tmp_path / "spec.yaml"
    path.write_text(TEXTS["two_gemm"].replace("    n: 1024", f"    n: {value}", 1))
    with pytest.raises(CusyncError) as info:
        load_spec(path)
    assert_clean_error(info.value)
    line = TEXTS["two_gemm"].splitlines().index("    n: 1024") + 1
    assert f"spec.yaml:{line}: cannot read" in info.value.message and value.split()[0] in info.value.message
