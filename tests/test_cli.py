"""The `cusync-gen` command line: exit codes, one-line errors, and the thin wiring to build/run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cusync_gen import build, cli, paths
from cusync_gen.errors import ToolError

EXAMPLES = ["two_gemm", "gpt3_mlp", "llama_mlp"]

ROW = {"m": 256, "policy": "row", "sequential_us": 130.5, "overlapped_us": 110.25, "speedup": 1.18,
       "bitwise_equal": True, "ref_rel_err": 1.5e-4, "sync_error": None, "graph_ok": True}


def cli_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `cusync-gen ARGS` in process through main(); returns (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    code = exc.value.code
    captured = capsys.readouterr()
    return (0 if code is None else int(code)), captured.out, captured.err


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.fixture
def bad_spec(tmp_path: Path) -> Path:
    """two_gemm with a warp that does not divide the threadblock."""
    text = (paths.examples_dir() / "two_gemm.yaml").read_text()
    assert "warp: [64, 64, 32]" in text
    path = tmp_path / "bad.yaml"
    path.write_text(text.replace("warp: [64, 64, 32]", "warp: [48, 64, 32]", 1))
    return path


# --------------------------------------------------------------------------------------------------
# init


def test_no_args_shows_help(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys)
    assert code in (0, 2)  # click versions differ
    assert "validate" in out + err and "fetch-cutlass" in out + err


def test_init_list(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli_run(capsys, "init", "--list")
    assert code == 0
    lines = out.splitlines()
    for name in EXAMPLES:
        line = next(line for line in lines if line.startswith(name))
        assert len(line.split(None, 1)[1]) > 20  # the first comment line of the example
    assert "GPT-3" in out and "LLaMA" in out


def test_examples_start_with_a_comment() -> None:
    for name in EXAMPLES:
        first = (paths.examples_dir() / f"{name}.yaml").read_text().splitlines()[0]
        assert first.startswith("# "), name


def test_init_writes_the_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                 capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli_run(capsys, "init", "gpt3_mlp")
    assert code == 0
    written = tmp_path / "gpt3_mlp.yaml"
    assert written.read_text() == (paths.examples_dir() / "gpt3_mlp.yaml").read_text()
    assert "gpt3_mlp.yaml" in out
    # a second init does not overwrite without --force
    code, _, err = cli_run(capsys, "init", "gpt3_mlp")
    assert code == 2 and "already exists" in err
    code, _, _ = cli_run(capsys, "init", "gpt3_mlp", "--force")
    assert code == 0


def test_init_output_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "sub" / "mine.yaml"
    code, _, _ = cli_run(capsys, "init", "two_gemm", "-o", str(dest))
    assert code == 0
    assert dest.read_text().startswith("# ")


def test_init_unknown_example(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "init", "bert")
    assert code == 2
    assert error_lines(err) == ["error: unknown example 'bert'"]
    assert "two_gemm" in err and "gpt3_mlp" in err  # the hint lists the examples
    assert "Traceback" not in out + err


def test_init_needs_a_name(capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "init")
    assert code == 2 and error_lines(err)


# --------------------------------------------------------------------------------------------------
# validate


@pytest.mark.parametrize("name", EXAMPLES)
def test_validate_examples(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cusync_gen.plan")
    code, out, err = cli_run(capsys, "validate", str(paths.examples_dir() / f"{name}.yaml"), "--m", "256,1024")
    assert code == 0, err
    assert out.rstrip().endswith("OK")
    assert name in out
    assert "verified at M = 256" in out and "verified at M = 1024" in out  # the verifier's proof, per M


def test_validate_says_where_avoid_wait_kernel_falls_back(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text((paths.examples_dir() / "two_gemm.yaml").read_text().replace(
        "optimizations:\n", "optimizations:\n  avoid_wait_kernel: true\n"))
    code, out, err = cli_run(capsys, "validate", str(spec), "--m", "256,8192")
    assert code == 0, err
    assert "verified at M = 8192" in out and "run() keeps the wait kernel" in out


def test_validate_notes_a_rotary_base_without_rotary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    data = yaml.safe_load((paths.examples_dir() / "llama3_attention_sm90.yaml").read_text())
    data["attention"].update(rotary=False, rotary_base=500000.0)
    spec = tmp_path / "norope.yaml"
    spec.write_text(yaml.safe_dump(data))
    code, out, err = cli_run(capsys, "validate", str(spec))
    assert code == 0, err
    assert out.startswith("note: attention.rotary_base has no effect without attention.rotary: true")


def test_validate_names_the_one_value_settings_it_ignores(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`split_k: 1` and `cluster: [1, 1, 1]` load (old specs keep working); validate names them, and --json
    stays one JSON document."""
    data = yaml.safe_load((paths.examples_dir() / "two_gemm_sm90.yaml").read_text())
    data["stages"][0]["split_k"] = 1
    data["stages"][1]["tile"]["cluster"] = [1, 1, 1]
    spec = tmp_path / "old.yaml"
    spec.write_text(yaml.safe_dump(data))
    code, out, err = cli_run(capsys, "validate", str(spec), "--m", "256")
    assert code == 0, err
    assert out.startswith("note: stages[0].split_k, stages[1].tile.cluster: one-value settings, accepted and ignored")
    code, out, err = cli_run(capsys, "validate", str(spec), "--m", "256", "--json")
    assert code == 0, err
    assert json.loads(out)["name"] == data["name"]


def test_validate_example_by_name(capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cusync_gen.plan")
    code, out, _ = cli_run(capsys, "validate", "two_gemm", "--target", "sm_90")
    assert code == 0 and out.rstrip().endswith("OK")


def test_validate_bad_spec(bad_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "validate", str(bad_spec))
    assert code == 1
    lines = error_lines(err)
    assert len(lines) == 1
    assert lines[0].startswith("error: stages[0].tile.warp")
    assert "Traceback" not in out + err
    assert "OK" not in out


def test_validate_bad_spec_subprocess(bad_spec: Path) -> None:
    """The real entry point: one error line on stderr, exit 1, no traceback."""
    proc = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "validate", str(bad_spec)],
                          capture_output=True, text=True, env=dict(os.environ, COLUMNS="60"))
    assert proc.returncode == 1
    lines = error_lines(proc.stderr)
    assert len(lines) == 1 and "stages[0].tile.warp" in lines[0]
    assert "Traceback" not in proc.stderr + proc.stdout


def test_verbose_shows_a_traceback_and_keeps_the_exit_code(bad_spec: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "--verbose", "validate", str(bad_spec))
    assert code == 1  # as without --verbose (tests/test_cli_edges.py: every kind of error)
    assert "Traceback" in err and len(error_lines(err)) == 1


def test_validate_missing_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "validate", str(tmp_path / "missing.yaml"))
    assert code == 2
    assert len(error_lines(err)) == 1


@pytest.mark.parametrize("m", ["abc", "0", "-5", "256,,1024", "1.5", ""])
def test_bad_m_is_a_usage_error(m: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "validate", "two_gemm", "--m", m)
    assert code == 2
    assert len(error_lines(err)) == 1 and "--m" in err
    assert "Traceback" not in out + err


def test_parse_ms() -> None:
    assert cli.parse_ms("1,256, 1024") == [1, 256, 1024]
    assert cli.parse_ms("8") == [8]


def test_parse_policies(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.parse_policies("spec, row,tile") == ["spec", "row", "tile"]
    assert cli.parse_policies(None) is None
    code, _, err = cli_run(capsys, "run", "two_gemm", "--policies", "row,,tile")
    assert code == 2 and "--policies" in err and len(error_lines(err)) == 1


def test_run_policy_the_bench_rejects(tmp_path: Path, no_build: list[dict],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "p"
    make_built_project(project, "")
    (project / "build" / "fake_bench").write_text(
        "#!/bin/sh\necho 'error: --policies takes spec, row and tile' >&2\nexit 2\n")
    code, _, err = cli_run(capsys, "run", str(project), "--policies", "tile")
    assert code == 2
    # the bench's own stderr is passed through, then our one error line comes last
    assert error_lines(err)[-1] == "error: fake_bench rejected its arguments: --policies takes spec, row and tile"


# --------------------------------------------------------------------------------------------------
# build / run / fetch-cutlass wiring (the real tools are exercised in test_build.py)


def make_built_project(root: Path, stdout: str, rc: int = 0) -> Path:
    root.mkdir(parents=True)
    (root / "manifest.json").write_text(json.dumps({"name": "fake", "bench": "fake_bench", "stages": []}))
    bench = root / "build" / "fake_bench"
    bench.parent.mkdir()
    bench.write_text(f"#!/bin/sh\ncat <<'EOF'\n{stdout}EOF\nexit {rc}\n")
    bench.chmod(0o755)
    return root


@pytest.fixture
def no_build(monkeypatch: pytest.MonkeyPatch) -> list[dict]:
    """Replace build.build (cmake) with a recorder; pretend there is a GPU."""
    calls: list[dict] = []

    def fake_build(project: Path, **kwargs: object) -> Path:
        calls.append({"project": Path(project), **kwargs})
        return Path(project) / "build"

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setattr(build, "has_gpu", lambda: True)
    monkeypatch.setattr(build, "gpu_arch", lambda: "sm_90")
    return calls


def test_run_project_prints_table_and_writes_json(tmp_path: Path, no_build: list[dict],
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    rows = [ROW, dict(ROW, m=1024, policy="tile", speedup=1.05)]
    project = make_built_project(tmp_path / "p", "".join(json.dumps(r) + "\n" for r in rows))
    out_file = tmp_path / "results.json"
    code, out, err = cli_run(capsys, "run", str(project), "--m", "256,1024", "--policies", "row,tile",
                             "--arch", "sm_90", "--out", str(out_file))
    assert code == 0, err
    assert "sequential us" in out and "1.18x" in out and "1.05x" in out
    assert json.loads(out_file.read_text()) == rows
    assert no_build[0]["target"] == "sm_90"


def test_run_check_failed_exit_5(tmp_path: Path, no_build: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    bad = dict(ROW, bitwise_equal=False, ref_rel_err=0.5)
    project = make_built_project(tmp_path / "p", json.dumps(bad) + "\n", rc=5)
    out_file = tmp_path / "r.json"
    code, out, err = cli_run(capsys, "run", str(project), "--m", "256", "--out", str(out_file))
    assert code == 5
    assert "NO" in out  # the table is still printed
    assert json.loads(out_file.read_text()) == [bad]
    lines = error_lines(err)
    assert len(lines) == 1 and lines[0].startswith("error: results differ")


def test_run_sync_timeout_exit_4(tmp_path: Path, no_build: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    row = dict(ROW, sync_error="gemm2 tile (0, 5) timed out waiting for row 0")
    project = make_built_project(tmp_path / "p", json.dumps(row) + "\n", rc=4)
    code, _, err = cli_run(capsys, "run", str(project), "--m", "256")
    assert code == 4
    assert error_lines(err) == ["error: sync timeout: gemm2 tile (0, 5) timed out waiting for row 0"]


def test_run_bench_crash_shows_command(tmp_path: Path, no_build: list[dict],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    project = make_built_project(tmp_path / "p", "partial output\n", rc=9)
    code, _, err = cli_run(capsys, "run", str(project), "--m", "256")
    assert code == 1
    assert "command:" in err and "fake_bench --m 256" in err
    assert error_lines(err) == ["error: fake_bench failed (exit 9)"]


def test_run_without_gpu_builds_then_exits_6(tmp_path: Path, no_build: list[dict], monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """No GPU: the project is still built (for its own target), then one line says running needs a GPU."""
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    monkeypatch.setattr(build, "gpu_arch", lambda: None)
    project = make_built_project(tmp_path / "p", json.dumps(ROW) + "\n")
    code, out, err = cli_run(capsys, "run", str(project))
    assert code == 6
    assert error_lines(err) == [f"error: {project} is built; running it needs a CUDA GPU, and none was found"]
    assert "hint:" in err and "Traceback" not in out + err
    assert [call["target"] for call in no_build] == [None]
    assert not (project / "build" / "argv.json").exists() and "1.18x" not in out  # the bench did not run


def test_run_unknown_target_exit_2(tmp_path: Path, no_build: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "run", "no_such_example")
    assert code == 2 and "unknown example" in err


def test_run_example_generates_builds_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_build: list[dict],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """`run two_gemm` generates into ./generated/two_gemm, builds there, runs its bench."""
    render = pytest.importorskip("cusync_gen.render")
    monkeypatch.chdir(tmp_path)
    generated: list[tuple] = []

    def fake_generate(spec_path: Path, out_dir: Path, target: str | None = None, check: bool = False,
                      force: bool = False, **kwargs: object) -> Path:
        generated.append((Path(spec_path), Path(out_dir), target, check))
        make_built_project(Path(out_dir), json.dumps(ROW) + "\n")
        return Path(out_dir)

    monkeypatch.setattr(render, "generate", fake_generate)
    code, out, err = cli_run(capsys, "run", "two_gemm", "--m", "256", "--backend", "sm80")  # sm_90: two_gemm_sm90
    assert code == 0, err
    assert generated == [(paths.examples_dir() / "two_gemm.yaml", Path("generated/two_gemm"), None, False)]
    assert no_build[0]["project"] == Path("generated/two_gemm")
    assert no_build[0]["target"] == "sm_90"  # built for the GPU it runs on; the files keep the spec's target
    assert "1.18x" in out


def test_run_explicit_arch_wins_over_the_detected_gpu(tmp_path: Path, no_build: list[dict],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    project = make_built_project(tmp_path / "p", json.dumps(ROW) + "\n")
    code, _, err = cli_run(capsys, "run", str(project), "--m", "256", "--arch", "sm_80")
    assert code == 0, err
    assert no_build[0]["target"] == "sm_80"


def test_gpu_arch_parses_nvidia_smi(monkeypatch: pytest.MonkeyPatch) -> None:
    class Done:
        returncode = 0
        stdout = "9.0\n9.0\n"

    monkeypatch.setattr(build.shutil, "which", lambda name: "/usr/bin/nvidia-smi")
    monkeypatch.setattr(build.subprocess, "run", lambda *a, **k: Done())
    assert build.gpu_arch() == "sm_90"
    Done.stdout = "garbage"
    assert build.gpu_arch() is None


def test_build_command_reports_tool_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    def failing_build(project: Path, **kwargs: object) -> Path:
        raise ToolError("build failed (exit 1)", hint="the compiler failed", command=["cmake", "--build", "x"],
                        stderr_tail="x.cu(3): error: identifier \"oops\" is undefined")

    monkeypatch.setattr(build, "build", failing_build)
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "fake", "arch": "sm80"}))
    code, _, err = cli_run(capsys, "build", str(tmp_path), "--arch", "sm_80", "--jobs", "2")
    assert code == 1
    assert 'identifier "oops" is undefined' in err
    assert "command: cmake --build x" in err
    assert error_lines(err) == ["error: build failed (exit 1)"]
    assert "hint: the compiler failed" in err


def test_build_command_passes_options(tmp_path: Path, no_build: list[dict], capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"name": "fake", "arch": "sm90"}))
    code, out, _ = cli_run(capsys, "build", str(tmp_path), "--arch", "sm_90", "-j", "3",
                           "--cutlass-dir", str(tmp_path / "c"))
    assert code == 0
    call = no_build[0]
    assert call["target"] == "sm_90" and call["jobs"] == 3 and call["cutlass_dir"] == tmp_path / "c"
    assert "built" in out


def test_build_not_a_project(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "build", str(tmp_path))
    assert code == 2 and "manifest.json" in err


def test_fetch_cutlass_command(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    import zipfile

    from cusync_gen import cutlass_fetch

    monkeypatch.setattr(cutlass_fetch, "check_wheel", lambda wheel: None)  # a stand-in for the real wheel

    wheel = tmp_path / "nvidia_cutlass-4.2.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as whl:
        whl.writestr("nvidia_cutlass-4.2.0.0.dist-info/METADATA", "Name: nvidia-cutlass\n")
        whl.writestr("cutlass_library/source/include/cutlass/cutlass.h", "#pragma once\n")
        whl.writestr("cutlass_library/source/examples/88_hopper_fmha/collective/fmha_fusion.hpp", "#pragma once\n")
    dest = tmp_path / "cutlass"
    code, out, _ = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(dest))
    assert code == 0 and "fetched" in out
    code, out, _ = cli_run(capsys, "fetch-cutlass", "--dest", str(dest))
    assert code == 0 and "already there" in out


# --------------------------------------------------------------------------------------------------
# generate (needs render.py)


def test_generate_and_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cusync_gen.render")
    out_dir = tmp_path / "two_gemm"
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(out_dir))
    assert code == 0, err
    manifest = json.loads((out_dir / "manifest.json").read_text())
    assert manifest["name"] == "two_gemm"
    assert build.bench_name(manifest) == "two_gemm_bench"
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(out_dir), "--check")
    assert code == 0, err
    (out_dir / "manifest.json").write_text("{}\n")
    code, out, err = cli_run(capsys, "generate", "two_gemm", "-o", str(out_dir), "--check")
    assert code == 1
    assert "manifest.json" in out + err


def test_generate_bad_spec_writes_nothing(bad_spec: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("cusync_gen.render")
    out_dir = tmp_path / "out"
    code, _, err = cli_run(capsys, "generate", str(bad_spec), "-o", str(out_dir))
    assert code == 1 and len(error_lines(err)) == 1
    assert not out_dir.exists()


# --------------------------------------------------------------------------------------------------
# end to end on a GPU


@pytest.mark.gpu
@pytest.mark.nvcc
def test_run_two_gemm_on_gpu(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if not build.has_gpu():
        pytest.skip("no CUDA GPU")
    pytest.importorskip("cusync_gen.render")
    out_file = tmp_path / "rows.json"
    code, out, err = cli_run(capsys, "run", "two_gemm", "-o", str(tmp_path / "two_gemm"), "--m", "1,256",
                             "--repeats", "5", "--warmup", "2", "--out", str(out_file))
    assert code == 0, err
    rows = json.loads(out_file.read_text())
    assert {row["m"] for row in rows} == {1, 256}
    assert all(row["bitwise_equal"] and row["sync_error"] is None for row in rows)


# --------------------------------------------------------------------------------------------------
# matplotlib is an optional extra (`plot`): only trace and tune draw, and they say so before any work


@pytest.mark.parametrize("args", [("trace", "recorded.jsonl", "-o", "t.png"), ("tune", "two_gemm")])
def test_drawing_commands_name_the_missing_matplotlib(args: tuple[str, ...], tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str],
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "matplotlib" else real(name, *a))
    monkeypatch.chdir(tmp_path)
    (tmp_path / "recorded.jsonl").write_text("")
    code, _, err = cli_run(capsys, *args)
    assert code == 1
    assert error_lines(err)[0] == f"error: {args[0]} draws its pictures with matplotlib, which is not installed"
    assert "pip install matplotlib" in err
    assert not (tmp_path / "build").exists() and not (tmp_path / "t.png").exists()


def test_docs_lists_and_prints_the_shipped_docs(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = cli_run(capsys, "docs")
    assert code == 0 and "spec-format" in out and "torch" in out
    assert all(Path(line.split()[1]).is_file() for line in out.splitlines())
    code, out, _ = cli_run(capsys, "docs", "spec-format")
    assert code == 0 and out == (paths.docs_dir() / "spec-format.md").read_text()
    code, _, err = cli_run(capsys, "docs", "nope")
    assert code == 2 and "no doc named 'nope'" in err and "spec-format" in err


# ---- outputs that would destroy the command's own input, paths a build cannot take, manifest values ----

def test_run_results_never_overwrites_the_spec_or_a_project_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "my.yaml"
    spec.write_text((paths.examples_dir() / "two_gemm.yaml").read_text())
    before = spec.read_text()
    code, _, err = cli_run(capsys, "run", str(spec), "--project", str(tmp_path / "p"), "--results", str(spec))
    assert code == 2 and "reads or writes itself" in err and spec.read_text() == before, err
    project = tmp_path / "p1"
    assert cli_run(capsys, "generate", str(spec), "-o", str(project))[0] == 0
    manifest = (project / "manifest.json").read_text()
    for target in (project / "manifest.json", project / "CMakeLists.txt"):
        code, _, err = cli_run(capsys, "run", str(project), "--results", str(target))
        assert code == 2 and "a file of the generated project" in err, err
    assert (project / "manifest.json").read_text() == manifest


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs")
def test_results_to_a_fifo_is_refused_before_any_work(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    code, _, err = cli_run(capsys, "run", "two_gemm", "--project", str(tmp_path / "p"), "--results", str(fifo))
    assert code == 2 and "not a regular file" in err, err
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("name", ["a;b", "a$b", "a`b", 'a"b', "a'b", "a\\b", "a\nb"])
def test_a_project_path_a_build_cannot_take_is_refused(tmp_path: Path, name: str, capsys: pytest.CaptureFixture[str]) -> None:
    """`;` splits CMake lists (a project under "x;y" configured into a sibling "x"); quotes, `$`, backquotes,
    backslashes and line breaks broke nvcc and ninja after generate had succeeded."""
    target = tmp_path / name
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(target))
    assert code == 2 and "would read as syntax" in err, err
    assert not target.exists() and not (tmp_path / "a").exists()


def test_manifest_values_that_reach_cmake_or_exec_are_checked(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "p"
    assert cli_run(capsys, "generate", "two_gemm", "-o", str(project))[0] == 0
    good = json.loads((project / "manifest.json").read_text())
    for key, value in (("cuda_arch", "80;90"), ("cuda_arch", "80 -DX=1"), ("bench", "../../evil.sh"), ("bench", "/bin/sh"),
                       ("name", "../x")):
        (project / "manifest.json").write_text(json.dumps({**good, key: value}))
        with pytest.raises(Exception) as info:
            build.read_manifest(project)
        assert key in str(info.value) and "plain" in str(info.value)
    (project / "manifest.json").write_text(json.dumps(good))
    assert build.read_manifest(project)["name"] == good["name"]


def test_a_zero_terminal_width_still_prints(tmp_path: Path) -> None:
    """COLUMNS=0 made every message, errors included, vanish."""
    env = {**os.environ, "COLUMNS": "0", "PYTHONPATH": str(Path(cli.__file__).resolve().parents[1])}
    bad = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "validate", "nope"], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=120)
    assert bad.returncode == 2 and "unknown example" in bad.stderr, bad.stderr
    good = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "validate", "two_gemm"], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=120)
    assert good.returncode == 0 and "OK" in good.stdout, good.stdout + good.stderr
