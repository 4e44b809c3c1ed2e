"""Top-level defaults of the command line (issue 12, item 4): `--version`, `validate --json`, the backend
`run` picks for the local GPU, `run` without a GPU (generate and build, then exit 6), and the tests'
CUTLASS lookup."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from conftest import REPO, cutlass_for_tests
from test_cli import cli_run, error_lines

from cusync_gen import __version__, build, paths, render
from cusync_gen.errors import UsageError
from cusync_gen.spec.loading import load_spec
from cusync_gen.spec.model import Arch

ROW = {"m": 256, "policy": "row", "sequential_us": 130.5, "overlapped_us": 110.25, "speedup": 1.18,
       "bitwise_equal": True, "ref_rel_err": 1.5e-4, "sync_error": None, "graph_ok": True}


# --------------------------------------------------------------------------------------------------
# --version


def test_version_prints_one_line_and_exits_0(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "--version")
    assert code == 0 and err == ""
    assert out == f"cusync-gen {__version__}\n"
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.search(r'^version = "([^"]+)"', pyproject, re.M).group(1) == __version__  # type: ignore[union-attr]


def test_version_from_the_entry_point() -> None:
    proc = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "--version"], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(REPO)}, timeout=60)
    assert proc.returncode == 0 and proc.stdout == f"cusync-gen {__version__}\n"


# --------------------------------------------------------------------------------------------------
# validate --json

CHAIN_KEYS = {"schema", "kind", "name", "class_name", "spec_hash", "arch", "target", "dtype", "sms", "dependencies",
              "auto_policies", "tile_configs", "sizes"}
SIZE_KEYS = {"m", "tile_config", "stages", "optimizations", "run_mode", "warnings", "proof"}
STAGE_KEYS = {"index", "name", "op", "epilogue", "b_layout", "order", "problem", "tile", "occupancy", "grid", "inputs",
              "output"}
ATTENTION_KEYS = {"schema", "kind", "name", "class_name", "spec_hash", "arch", "target", "dtype", "sms", "attention",
                  "stages", "sizes"}
ATTENTION_SIZE_KEYS = {"batch", "new_tokens", "cache_tokens", "rows", "keys", "pairs", "stages", "warnings", "proof"}


def keys_of(value: Any) -> set[str]:
    """Every object key in a JSON value, at any depth (not the stage names of `threadblocks`)."""
    if isinstance(value, list):
        return set().union(*map(keys_of, value)) if value else set()
    if not isinstance(value, dict):
        return set()
    return set(value) | set().union(*(keys_of(v) for k, v in value.items() if k != "threadblocks"))


def validate_json(capsys: pytest.CaptureFixture[str], *args: str) -> dict[str, Any]:
    code, out, err = cli_run(capsys, "validate", *args, "--json")
    assert code == 0, err
    return json.loads(out)


@pytest.mark.parametrize("name", ["two_gemm", "gpt3_mlp", "llama_mlp_split", "gpt3_mlp_sm90", "llama_mlp_sm90"])
def test_validate_json_says_what_the_text_says(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    doc = validate_json(capsys, name, "--m", "1,1024,4096")
    code, text, _ = cli_run(capsys, "validate", name, "--m", "1,1024,4096")
    assert code == 0
    assert set(doc) == CHAIN_KEYS and doc["schema"] == 1 and doc["kind"] == "chain" and doc["name"] == name
    assert f"spec hash {doc['spec_hash']}" in text and doc["arch"] == load_spec(paths.example_path(name)).arch.value
    assert [size["m"] for size in doc["sizes"]] == [1, 1024, 4096]
    for size in doc["sizes"]:
        assert set(size) == SIZE_KEYS
        for stage in size["stages"]:
            assert set(stage) == STAGE_KEYS
            grid = stage["grid"]
            assert f"grid       {grid['tiles_m']} x {grid['tiles_n']} = {grid['tiles']} tiles, {grid['waves']:.2f} waves" in text
            for edge in stage["inputs"]:
                if edge["producer"] is not None:
                    assert f"from {edge['producer']} (stage " in text and f"sync {edge['policy']}, wait value {edge['wait_value']}" in text
        for edge in size["proof"]["edges"]:
            assert (f"{edge['producer']} -> {edge['consumer']} ({edge['policy']}): {edge['consumer_tiles']} consumer "
                    f"tiles, {edge['reads']} reads") in text
        assert size["proof"]["progress"] in text
        for opt, verdict in size["optimizations"].items():
            assert set(verdict) == {"on", "legal", "reason"}
            if verdict["legal"] is not None:  # None: does not apply (sm90), said once in the text
                assert f"{opt:<19} {'on' if verdict['on'] else 'off'}: " in text and verdict["reason"] in text
        if doc["arch"] == "sm90":  # run()'s mode and why, at this M
            mode = size["run_mode"]
            assert f"run() mode   {mode['mode']} on a GPU with {mode['sms']} SMs: {mode['reason']}" in text
        else:
            assert size["run_mode"] is None
        assert size["warnings"] == []


def test_validate_json_warnings_match_the_text(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "two.yaml"
    spec.write_text((paths.examples_dir() / "two_gemm.yaml").read_text().replace(
        "optimizations:\n", "optimizations:\n  avoid_wait_kernel: true\n"))
    doc = validate_json(capsys, str(spec), "--m", "256,8192")
    _, text, _ = cli_run(capsys, "validate", str(spec), "--m", "256,8192")
    small, large = doc["sizes"]
    assert small["warnings"] == [] and small["optimizations"]["avoid_wait_kernel"]["legal"] is True
    assert large["optimizations"]["avoid_wait_kernel"] == {"on": True, "legal": False,
                                                           "reason": large["optimizations"]["avoid_wait_kernel"]["reason"]}
    (warning,) = large["warnings"]
    assert "avoid_wait_kernel is on but not legal at M=8192" in warning and f"WARNING: {warning}" in text


def test_validate_json_of_an_attention_chain(capsys: pytest.CaptureFixture[str]) -> None:
    doc = validate_json(capsys, "gpt3_attention", "--m", "1", "--batch", "4", "--cache", "1023")
    _, text, _ = cli_run(capsys, "validate", "gpt3_attention", "--m", "1", "--batch", "4", "--cache", "1023")
    assert set(doc) == ATTENTION_KEYS and doc["kind"] == "attention"
    assert [s["name"] for s in doc["stages"]] == ["qkv", "scores", "softmax", "pv", "proj"]
    (size,) = doc["sizes"]
    assert set(size) == ATTENTION_SIZE_KEYS
    assert (size["batch"], size["new_tokens"], size["cache_tokens"], size["keys"]) == (4, 1, 1023, 1024)
    for stage in size["stages"]:
        grid = stage["grid"]
        assert re.search(rf"{stage['name']} .* grid {grid['tiles_m']} x {grid['tiles_n']} = {grid['tiles']} blocks", text)
    assert f"{size['proof']['reads']} producer tile reads of {size['proof']['consumer_tiles']} consumer tiles" in text


def test_every_json_key_is_documented(capsys: pytest.CaptureFixture[str]) -> None:
    doc = (REPO / "docs" / "validate-json.md").read_text()
    documented = set(re.findall(r"\b([a-z][a-z0-9_]*)\b", doc))
    for args in (["llama_mlp_sm90", "--m", "256,4096"], ["llama_mlp_split"], ["gpt3_attention", "--m", "512"]):
        missing = keys_of(validate_json(capsys, *args)) - documented
        assert not missing, f"keys missing from docs/validate-json.md: {sorted(missing)}"


@pytest.mark.parametrize(("args", "code", "message"), [
    (["no_such_example"], 2, "error: unknown example 'no_such_example'"),
    (["two_gemm", "--m", "0"], 2, "error: --m: '0' is not a positive integer"),
    (["two_gemm", "--target", "sm_70"], 2, "error: --target 'sm_70' is not a target"),
    (["gpt3_attention", "--m", "2", "--batch", "2"], 2, "error: 2 sequences of 2 new tokens each"),
])
def test_validate_json_errors_are_one_line(capsys: pytest.CaptureFixture[str], args: list[str], code: int,
                                           message: str) -> None:
    got, out, err = cli_run(capsys, "validate", *args, "--json")
    assert got == code and out == ""
    (line,) = error_lines(err)
    assert line.startswith(message)


def test_validate_json_bad_spec(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text((paths.examples_dir() / "two_gemm.yaml").read_text().replace("warp: [64, 64, 32]", "warp: [48, 64, 32]", 1))
    code, out, err = cli_run(capsys, "validate", str(bad), "--json")
    assert code == 1 and out == ""
    (line,) = error_lines(err)
    assert line.startswith("error: stages[0].tile.warp")


def test_validate_json_prints_nothing_when_a_later_m_fails(monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture[str]) -> None:
    """The text shows the plans before the failing M; the JSON document is all or nothing."""
    from cusync_gen import verify

    real = verify.verify

    def failing(plan: Any, m: int) -> Any:
        if m == 1024:
            raise verify.VerificationError("stages[1].sync", "gemm2 tile (0, 0) reads rows nobody waited for", "fix it")
        return real(plan, m)

    monkeypatch.setattr(verify, "verify", failing)
    code, out, err = cli_run(capsys, "validate", "two_gemm", "--m", "256,1024", "--json")
    assert code == 1 and out == ""
    assert error_lines(err) == ["error: stages[1].sync: gemm2 tile (0, 0) reads rows nobody waited for"]


# --------------------------------------------------------------------------------------------------
# run: the backend for the local GPU


def test_sm90_examples_are_the_sm80_examples_hopper_versions() -> None:
    """The naming pick_example relies on: X_sm90 has arch sm90, and X (where it exists) arch sm80."""
    names = paths.example_names()
    hopper = [n for n in names if n.endswith(build.SM90_SUFFIX)]
    assert hopper, names
    for name in hopper:
        assert load_spec(paths.example_path(name)).arch is Arch.SM90
        base = name.removesuffix(build.SM90_SUFFIX)
        if base in names:
            assert load_spec(paths.example_path(base)).arch is Arch.SM80
    assert "gpt3_mlp_sm90" in hopper


@pytest.mark.parametrize("target", ["sm_90", "sm_90a", "90", "sm_9"])
def test_is_hopper(target: str) -> None:
    assert build.is_hopper(target) == (target != "sm_9")


@pytest.mark.parametrize("target", [None, "", "sm_80", "sm_89", "sm_100", "sm_120", "bogus"])
def test_is_not_hopper(target: str | None) -> None:
    assert not build.is_hopper(target)


@pytest.mark.parametrize(("name", "backend", "gpu", "arch", "chosen", "words"), [
    ("gpt3_mlp", "auto", "sm_90", None, "gpt3_mlp_sm90", "the local GPU is sm_90 (Hopper); --backend sm80 keeps gpt3_mlp"),
    ("llama_mlp", "auto", "sm_90", None, "llama_mlp_sm90", "(Hopper)"),
    ("gpt3_mlp", "auto", "sm_80", None, "gpt3_mlp", "the local GPU is sm_80, not Hopper; its Hopper version is gpt3_mlp_sm90"),
    ("gpt3_mlp", "auto", None, None, "gpt3_mlp", "nvidia-smi found no GPU"),
    ("gpt3_mlp", "auto", None, "sm_90", "gpt3_mlp_sm90", "--arch sm_90 (Hopper)"),
    ("gpt3_mlp", "auto", "sm_90", "sm_80", "gpt3_mlp", "--arch sm_80, not Hopper"),
    ("gpt3_mlp_sm90", "auto", "sm_80", None, "gpt3_mlp_sm90", "named so"),
    ("gpt3_attention", "auto", "sm_90", None, "gpt3_attention", "it has no sm90 version"),
    ("llama_mlp_split", "auto", "sm_90", None, "llama_mlp_split", "it has no sm90 version"),
    ("gpt3_mlp", "sm80", "sm_90", None, "gpt3_mlp", "--backend sm80"),
    ("gpt3_mlp_sm90", "sm80", "sm_90", None, "gpt3_mlp", "--backend sm80"),
    ("two_gemm", "sm90", None, None, "two_gemm_sm90", "--backend sm90"),
])
def test_pick_example(name: str, backend: str, gpu: str | None, arch: str | None, chosen: str, words: str) -> None:
    got, why = build.pick_example(name, backend, gpu, arch)
    assert got == chosen and words in why
    assert why.startswith(f"example {chosen} (") and "\n" not in why


@pytest.mark.parametrize(("name", "backend", "words"), [
    ("gpt3_attention", "sm90", "--backend sm90: example 'gpt3_attention' has no sm90 version"),
    ("gpt3_mlp", "sm100", "--backend 'sm100' is not a backend"),
])
def test_pick_example_refuses(name: str, backend: str, words: str) -> None:
    with pytest.raises(UsageError) as info:
        build.pick_example(name, backend, "sm_90")
    assert info.value.message == words and info.value.hint


@pytest.fixture
def fake_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, list]:
    """In tmp_path: render.generate writes a manifest only, build.build and build.run are recorded (rows
    from the run). The GPU is a Hopper one unless a test says otherwise."""
    monkeypatch.chdir(tmp_path)
    calls: dict[str, list] = {"generate": [], "build": [], "run": [], "run_kwargs": []}

    def fake_generate(spec_path: Path, out_dir: Path, target: str | None = None, check: bool = False,
                      force: bool = False, **kwargs: object) -> Path:
        calls["generate"].append(Path(spec_path).stem)
        Path(out_dir).mkdir(parents=True, exist_ok=True)
        name = Path(spec_path).stem
        arch = "sm90" if name.endswith("_sm90") else "sm80"
        (Path(out_dir) / "manifest.json").write_text(json.dumps({"name": name, "arch": arch, "stages": []}))
        return Path(out_dir)

    def fake_run(project: Path, ms: list[int], *args: object, **kwargs: object) -> list[dict[str, Any]]:
        calls["run"].append(Path(project))
        calls["run_kwargs"].append(kwargs)
        return [ROW]

    monkeypatch.setattr(render, "generate", fake_generate)
    monkeypatch.setattr(build, "build", lambda project, **kwargs: calls["build"].append((Path(project), kwargs)))
    monkeypatch.setattr(build, "run", fake_run)
    monkeypatch.setattr(build, "has_gpu", lambda: True)
    monkeypatch.setattr(build, "gpu_arch", lambda: "sm_90")
    return calls


def test_run_example_on_hopper_takes_its_sm90_version(fake_tools: dict[str, list],
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "run", "gpt3_mlp", "--m", "1024")
    assert code == 0, err
    assert out.splitlines()[0] == ("example gpt3_mlp_sm90 (sm90 backend) for gpt3_mlp: the local GPU is sm_90 "
                                   "(Hopper); --backend sm80 keeps gpt3_mlp")
    assert fake_tools["generate"] == ["gpt3_mlp_sm90"]
    assert fake_tools["build"][0][0] == Path("generated/gpt3_mlp_sm90") and fake_tools["build"][0][1]["target"] == "sm_90"
    assert fake_tools["run"] == [Path("generated/gpt3_mlp_sm90")] and "1.18x" in out


def test_run_backend_sm80_opts_out(fake_tools: dict[str, list], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "run", "gpt3_mlp", "--m", "1024", "--backend", "sm80")
    assert code == 0, err
    assert out.splitlines()[0] == "example gpt3_mlp (sm80 backend): --backend sm80"
    assert fake_tools["generate"] == ["gpt3_mlp"] and fake_tools["build"][0][1]["target"] == "sm_90"


def test_run_example_elsewhere_keeps_the_sm80_version(fake_tools: dict[str, list], monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(build, "gpu_arch", lambda: "sm_80")
    code, out, err = cli_run(capsys, "run", "gpt3_mlp", "--m", "1024")
    assert code == 0, err
    assert out.splitlines()[0].startswith("example gpt3_mlp (sm80 backend): the local GPU is sm_80, not Hopper")
    assert fake_tools["generate"] == ["gpt3_mlp"]


def test_run_never_rewrites_a_spec_path(fake_tools: dict[str, list], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    spec = tmp_path / "gpt3_mlp.yaml"
    shutil.copyfile(paths.example_path("gpt3_mlp"), spec)
    for target in (str(spec), "gpt3_mlp.yaml"):
        code, out, err = cli_run(capsys, "run", target, "--m", "1024")
        assert code == 0, err
        assert "example" not in out.splitlines()[0] and "sm90" not in out
    assert fake_tools["generate"] == ["gpt3_mlp", "gpt3_mlp"]
    code, out, err = cli_run(capsys, "run", "gpt3_mlp.yaml", "--backend", "sm90")
    assert code == 2 and out == ""
    assert error_lines(err) == ["error: --backend picks among the shipped examples; 'gpt3_mlp.yaml' is a path"]


def test_run_autotune_reaches_the_bench(fake_tools: dict[str, list], capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "run", "gpt3_mlp", "--m", "256,1024", "--autotune", "5")
    assert code == 0, err
    assert fake_tools["run_kwargs"][0]["extra_args"] == ["--autotune", "5"]
    code, _, err = cli_run(capsys, "run", "gpt3_mlp", "--m", "1024")
    assert code == 0 and fake_tools["run_kwargs"][1]["extra_args"] == []
    code, _, err = cli_run(capsys, "run", "gpt3_mlp", "--backend", "sm80", "--autotune", "3")
    assert code == 2 and error_lines(err) == [
        "error: --autotune applies to sm90 GEMM chains only (it picks among run()'s modes)"]
    assert len(fake_tools["run"]) == 2  # refused before building or running


@pytest.mark.parametrize(("args", "message"), [
    (["run", "gpt3_attention", "--backend", "sm90"], "error: --backend sm90: example 'gpt3_attention' has no sm90 version"),
    (["run", "gpt3_mlp", "--backend", "hopper"], "error: --backend 'hopper' is not a backend"),
])
def test_run_backend_usage_errors(fake_tools: dict[str, list], capsys: pytest.CaptureFixture[str], args: list[str],
                                  message: str) -> None:
    code, _, err = cli_run(capsys, *args)
    assert code == 2 and error_lines(err) == [message]
    assert fake_tools["generate"] == [] and fake_tools["build"] == []


# --------------------------------------------------------------------------------------------------
# run without a GPU: generate and build, then exit 6


def test_the_main_job_without_a_gpu_generates_and_builds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    """README's main job on a machine without a GPU: the real generate, a recorded build, then exit 6."""
    monkeypatch.chdir(tmp_path)
    built: list[tuple[Path, dict]] = []

    def fake_build(project: Path, **kwargs: object) -> Path:
        built.append((Path(project), kwargs))
        bench = Path(project) / "build" / "gpt3_mlp_bench"
        bench.parent.mkdir(parents=True)
        bench.write_text("#!/bin/sh\necho started > started.txt\n")
        bench.chmod(0o755)
        return bench.parent

    monkeypatch.setattr(build, "build", fake_build)
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    monkeypatch.setattr(build, "gpu_arch", lambda: None)
    code, out, err = cli_run(capsys, "run", "gpt3_mlp", "--m", "256,1024")
    assert code == 6
    assert out.splitlines() == ["example gpt3_mlp (sm80 backend): nvidia-smi found no GPU; its Hopper version is "
                                "gpt3_mlp_sm90 (--backend sm90)"]
    assert error_lines(err) == ["error: generated/gpt3_mlp is built; running it needs a CUDA GPU, and none was found"]
    assert (tmp_path / "generated" / "gpt3_mlp" / "manifest.json").is_file()
    assert built == [(Path("generated/gpt3_mlp"), {"target": None, "jobs": None, "cutlass_dir": None,
                                                    "progress": False})]
    assert not list(tmp_path.rglob("started.txt"))


needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")


@needs_cmake
def test_run_without_a_gpu_builds_with_cmake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    """The real build.build (cmake on a C++ stand-in for a generated project), then exit 6 before the bench."""
    cutlass = tmp_path / "cutlass" / "include" / "cutlass"
    cutlass.mkdir(parents=True)
    (cutlass / "cutlass.h").write_text("#pragma once\n")
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "cutlass"))
    monkeypatch.setattr(build, "find_tool", lambda name: shutil.which(name) or "/usr/bin/false")  # nvcc unused
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    monkeypatch.setattr(build, "gpu_arch", lambda: None)
    project = tmp_path / "p"
    project.mkdir()
    (project / "manifest.json").write_text(json.dumps({"name": "fake", "bench": "fake_bench", "stages": []}))
    (project / "CMakeLists.txt").write_text(textwrap.dedent("""\
        cmake_minimum_required(VERSION 3.18)
        project(fake LANGUAGES CXX)
        add_executable(fake_bench main.cpp)
        """))
    (project / "main.cpp").write_text('#include <cstdio>\nint main() { std::FILE* f = std::fopen("ran", "w"); '
                                      "return f ? 0 : 1; }\n")
    code, _, err = cli_run(capsys, "run", str(project), "--m", "256", "--jobs", "1")
    assert code == 6, err
    assert (project / "build" / "fake_bench").is_file() and not (project / "ran").exists()
    assert error_lines(err) == [f"error: {project} is built; running it needs a CUDA GPU, and none was found"]


@pytest.mark.parametrize("missing", ["nvcc", "cutlass"])
def test_run_without_a_gpu_still_needs_nvcc_and_cutlass(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                        capsys: pytest.CaptureFixture[str], missing: str) -> None:
    """Without nvcc or CUTLASS the build's own error stands (exit 1), not the no-GPU one."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    monkeypatch.setattr(build, "gpu_arch", lambda: None)

    def fake_generate(spec_path: Path, out_dir: Path, *args: object, **kwargs: object) -> Path:
        out_dir.mkdir(parents=True)
        (out_dir / "manifest.json").write_text(json.dumps({"name": "two_gemm", "stages": []}))
        return out_dir

    monkeypatch.setattr(render, "generate", fake_generate)
    if missing == "nvcc":  # a PATH with cmake only, and no CUDA install folder
        cutlass = tmp_path / "cutlass" / "include" / "cutlass"
        cutlass.mkdir(parents=True)
        (cutlass / "cutlass.h").write_text("#pragma once\n")
        monkeypatch.setenv("CUTLASS_DIR", str(tmp_path / "cutlass"))
        tools = tmp_path / "bin"
        tools.mkdir()
        (tools / "cmake").write_text("#!/bin/sh\nexit 0\n")
        (tools / "cmake").chmod(0o755)
        monkeypatch.setenv("PATH", str(tools))
        for variable in ("CUDA_HOME", "CUDA_PATH"):
            monkeypatch.delenv(variable, raising=False)
        monkeypatch.setattr(build, "CUDA_ROOTS", ())
    else:
        monkeypatch.delenv("CUTLASS_DIR", raising=False)
        monkeypatch.setattr(build, "default_cutlass_dir", lambda: tmp_path / "no_cutlass")
    code, _, err = cli_run(capsys, "run", "two_gemm")
    assert code == 1
    (line,) = error_lines(err)
    assert line == ("error: nvcc not found on PATH" if missing == "nvcc" else
                    f"error: CUTLASS not found (no CUTLASS_DIR and nothing in {tmp_path / 'no_cutlass'})")


# --------------------------------------------------------------------------------------------------
# The tests' CUTLASS: $CUTLASS_DIR like the CLI, else third_party/cutlass


def test_tests_take_cutlass_dir_from_the_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "cutlass"
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "include" / "cutlass" / "cutlass.h").write_text("#pragma once\n")
    monkeypatch.setenv("CUTLASS_DIR", str(root))
    assert cutlass_for_tests() == root.resolve()


def test_tests_fall_back_to_third_party(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    fetched = REPO / "third_party" / "cutlass"
    expected = fetched if (fetched / "include" / "cutlass" / "cutlass.h").is_file() else None
    assert cutlass_for_tests() == expected


def test_tests_refuse_a_cutlass_dir_without_headers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path))
    with pytest.raises(pytest.fail.Exception) as info:
        cutlass_for_tests()
    assert f"CUTLASS_DIR={tmp_path} has no include/cutlass/cutlass.h" in str(info.value)
