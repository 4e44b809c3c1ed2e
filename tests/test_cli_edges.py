"""Edges of the command line a user meets in ordinary use: --verbose keeps exit codes, `init -o x.json`
writes JSON, a folder named like an example does not hide it, and a moved project's CMake cache."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from cusync_gen import build, cli, options, paths
from cusync_gen.errors import ToolError, UsageError


def cli_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """Run `cusync-gen ARGS` in process through main(); returns (exit code, stdout, stderr)."""
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    captured = capsys.readouterr()
    return (0 if exc.value.code is None else int(exc.value.code)), captured.out, captured.err


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# --------------------------------------------------------------------------------------------------
# --verbose: a traceback, then the same error line and exit code


def _bad_spec(folder: Path) -> Path:
    text = (paths.examples_dir() / "two_gemm.yaml").read_text()
    path = folder / "bad.yaml"
    path.write_text(text.replace("warp: [64, 64, 32]", "warp: [48, 64, 32]", 1))
    return path


@pytest.mark.parametrize("case", ["unknown example", "spec error", "name too long"])
def test_verbose_keeps_the_exit_code(case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    spec = {"unknown example": "bert", "spec error": str(_bad_spec(tmp_path)),
            "name too long": "a" * 5000 + ".yaml"}[case]
    code, _, err = cli_run(capsys, "validate", spec)
    assert code == {"unknown example": 2, "spec error": 1, "name too long": 2}[case], err
    assert "Traceback" not in err
    for flag in ("--verbose", "-v"):
        verbose_code, _, verbose_err = cli_run(capsys, flag, "validate", spec)
        assert verbose_code == code
        assert "Traceback" in verbose_err
        assert error_lines(verbose_err) == error_lines(err)  # the one error line, after the traceback
        assert verbose_err.rstrip().endswith(err.rstrip())


# --------------------------------------------------------------------------------------------------
# init -o: the file type follows the suffix


def test_init_json_is_json_the_loader_reads(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    dest = tmp_path / "x.json"
    code, _, err = cli_run(capsys, "init", "gpt3_mlp", "-o", str(dest))
    assert code == 0, err
    text = dest.read_text()
    assert text.endswith("}\n")
    assert json.loads(text) == yaml.safe_load((paths.examples_dir() / "gpt3_mlp.yaml").read_text())
    code, out, err = cli_run(capsys, "validate", str(dest), "--m", "256")
    assert code == 0, err
    assert out.rstrip().endswith("OK")


@pytest.mark.parametrize("name", paths.example_names())
def test_init_json_keeps_every_example_as_is(name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "init", name, "-o", str(tmp_path / f"{name}.JSON"))
    assert code == 0, err
    data = json.loads((tmp_path / f"{name}.JSON").read_text())
    assert data == yaml.safe_load((paths.examples_dir() / f"{name}.yaml").read_text())


@pytest.mark.parametrize("file_name", ["x.txt", "x", "x.yaml.bak"])
def test_init_refuses_a_file_type_no_spec_has(file_name: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "init", "gpt3_mlp", "-o", str(tmp_path / file_name))
    assert code == 2
    assert len(error_lines(err)) == 1 and error_lines(err)[0].startswith("error: -o ")
    assert "*.yaml, *.yml, *.json" in err
    assert not (tmp_path / file_name).exists()


def test_init_into_a_folder_and_yml_still_write_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = (paths.examples_dir() / "two_gemm.yaml").read_text()
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", f"{tmp_path / 'specs'}/")
    assert code == 0, err
    assert (tmp_path / "specs" / "two_gemm.yaml").read_text() == example
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(tmp_path / "t.yml"))
    assert code == 0, err
    assert (tmp_path / "t.yml").read_text() == example
    code, _, err = cli_run(capsys, "init", "two_gemm", "-o", str(tmp_path / "specs"))  # a folder, no slash
    assert code == 2 and "is a folder" in err


# --------------------------------------------------------------------------------------------------
# A folder named like a shipped example


def _fake_project(folder: Path) -> Path:
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({"name": "fake", "bench": "fake_bench", "stages": []}))
    return folder


def test_a_folder_does_not_hide_the_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "two_gemm").mkdir()  # any folder
    assert options.resolve_spec("two_gemm") == paths.example_path("two_gemm")
    code, out, err = cli_run(capsys, "validate", "two_gemm", "--m", "256")
    assert code == 0, err
    code, _, err = cli_run(capsys, "generate", "gpt3_mlp", "-o", "gpt3_mlp")  # the natural command
    assert code == 0, err
    for args in (["validate", "gpt3_mlp", "--m", "256"], ["generate", "gpt3_mlp", "-o", "gpt3_mlp"],
                 ["generate", "gpt3_mlp", "-o", "gpt3_mlp", "--check"]):
        code, _, err = cli_run(capsys, *args)
        assert code == 0, (args, err)


@pytest.mark.parametrize("project", [False, True])
def test_a_folder_is_not_a_spec(project: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    _fake_project(tmp_path / "mine") if project else (tmp_path / "mine").mkdir()
    what = "a generated project folder" if project else "a folder"
    for args in (["validate", "mine"], ["generate", "mine", "-o", "out"], ["tune", "mine"]):
        code, _, err = cli_run(capsys, *args)
        assert code == 2 or (args[0] == "tune" and "matplotlib" in err), (args, err)
        if code == 2:
            assert error_lines(err) == [f"error: mine is {what}, not a spec file"], args
            assert ".yaml or .json" in err
    assert not (tmp_path / "out").exists()
    if not project:  # run and trace take a project folder as it is (below); any other folder is refused
        with pytest.raises(UsageError, match=f"mine is {what}, not a spec file"):
            options.trace_options("mine", "256", Path("t.png"), None, None, False, None, None, None)
        with pytest.raises(UsageError, match=f"mine is {what}, not a spec file"):
            options.run_options("mine", None, None, None, None, 1, 1, None, None, False, None, None, None,
                                "auto", 0, None)


def test_run_and_trace_take_a_project_folder_or_else_the_example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    _fake_project(tmp_path / "gpt3_mlp")  # what `generate gpt3_mlp -o gpt3_mlp` made: run runs it
    run = options.run_options("gpt3_mlp", None, None, None, None, 1, 1, None, None, False, None, None, None,
                              "auto", 0, None)
    assert run.subject.spec is None and run.subject.project == Path("gpt3_mlp")
    (tmp_path / "two_gemm").mkdir()  # no project: the example (and its Hopper version on an sm_90 GPU)
    _fake_project(tmp_path / "two_gemm_sm90")  # ... whatever folder has that name here
    run = options.run_options("two_gemm", None, None, None, None, 1, 1, None, None, False, None, None, None,
                              "auto", 0, "sm_90")
    assert run.subject.spec == paths.example_path("two_gemm_sm90")
    run = options.run_options("two_gemm", None, None, None, None, 1, 1, None, None, False, None, None, None,
                              "sm80", 0, "sm_90")  # --backend takes an example name; this folder is none
    assert run.subject.spec == paths.example_path("two_gemm")
    trace = options.trace_options("two_gemm", "256", Path("t.png"), None, None, False, None, None, None)
    assert trace.subject is not None and trace.subject.spec == paths.example_path("two_gemm")


def test_tune_never_writes_into_the_examples(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "gpt3_mlp").mkdir()
    opts = options.tune_options("gpt3_mlp", "256", None, None, 1, 1, 1, Path("build/tune"), None, None, None, None)
    assert opts.spec == paths.example_path("gpt3_mlp")
    assert opts.write == Path("gpt3_mlp.tuned.yaml")
    spec = tmp_path / "mine.yaml"
    spec.write_text((paths.examples_dir() / "gpt3_mlp.yaml").read_text())
    opts = options.tune_options(str(spec), "256", None, None, 1, 1, 1, Path("build/tune"), None, None, None, None)
    assert opts.write == tmp_path / "mine.tuned.yaml"  # a spec file: beside it, as before


# --------------------------------------------------------------------------------------------------
# A moved project's CMake cache


def _configured(build_dir: Path, made_in: Path, source: Path) -> None:
    """A build folder as CMake leaves it, its cache recording `made_in` (build) and `source` (project)."""
    (build_dir / "CMakeFiles" / "3.28.0").mkdir(parents=True)
    (build_dir / "CMakeFiles" / "rules.ninja").write_text("rule CUDA_COMPILER\n")
    (build_dir / "fake_bench").write_text("#!/bin/sh\n")
    (build_dir / "build.ninja").write_text("# ninja\n")
    (build_dir / "CMakeCache.txt").write_text(
        "# This is the CMakeCache file.\n//Value Computed by CMake\n"
        f"CMAKE_CACHEFILE_DIR:INTERNAL={made_in}\n//Source directory with the top level CMakeLists.txt file\n"
        f"CMAKE_HOME_DIRECTORY:INTERNAL={source}\nCMAKE_GENERATOR:INTERNAL=Ninja\n")


def test_a_cache_of_this_folder_is_kept(tmp_path: Path) -> None:
    build_dir = tmp_path / "p" / "build"
    build_dir.mkdir(parents=True)
    assert build.reset_moved_cache(build_dir, tmp_path / "p") is None  # no cache yet
    _configured(build_dir, build_dir, tmp_path / "p")
    assert build.reset_moved_cache(build_dir, tmp_path / "p") is None
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "p")  # the same folder by another path: CMake takes it too
    assert build.reset_moved_cache(link / "build", link) is None
    assert (build_dir / "CMakeCache.txt").is_file() and (build_dir / "CMakeFiles").is_dir()


@pytest.mark.parametrize("old_kept", [False, True])  # moved, or copied (the old folder is still there)
def test_a_moved_projects_cache_is_removed_and_nothing_else(old_kept: bool, tmp_path: Path) -> None:
    old = tmp_path / "old"
    if old_kept:
        (old / "build").mkdir(parents=True)
    new_build = tmp_path / "new" / "build"
    new_build.mkdir(parents=True)
    _configured(new_build, old / "build", old)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "keep").write_text("x")
    assert build.moved_cache(new_build, tmp_path / "new") == str(old / "build")
    assert build.reset_moved_cache(new_build, tmp_path / "new") == str(old / "build")
    assert sorted(p.name for p in new_build.iterdir()) == ["build.ninja", "fake_bench"]
    assert build.reset_moved_cache(new_build, tmp_path / "new") is None  # done once
    # the source folder alone differs (a cache from another project's configure): removed too
    _configured(new_build, new_build, old)
    (new_build / "CMakeFiles").rename(tmp_path / "files")
    (new_build / "CMakeFiles").symlink_to(outside)  # a link is removed, never what it points to
    assert build.reset_moved_cache(new_build, tmp_path / "new") == str(old)
    assert not (new_build / "CMakeFiles").exists() and (outside / "keep").is_file()


def test_build_reconfigures_a_moved_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    project = tmp_path / "new"
    project.mkdir()
    (project / "manifest.json").write_text(json.dumps({"name": "fake", "bench": "fake_bench"}))
    (project / "build").mkdir()
    _configured(project / "build", tmp_path / "old" / "build", tmp_path / "old")
    steps: list[list[str]] = []
    monkeypatch.setattr(build, "find_cutlass", lambda explicit=None: tmp_path)
    monkeypatch.setattr(build, "find_tool", lambda name: f"/usr/bin/{name}")
    monkeypatch.setattr(build, "_run_step", lambda step, command, *rest: steps.append(command))
    assert build.build(project, progress=False) == project.resolve() / "build"
    assert "configuring it afresh" in capsys.readouterr().err
    assert not (project / "build" / "CMakeCache.txt").exists()
    assert steps[0][:5] == ["/usr/bin/cmake", "-S", str(project.resolve()), "-B", str(project.resolve() / "build")]


def test_an_unremovable_cache_is_a_tool_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    build_dir = tmp_path / "new" / "build"
    build_dir.mkdir(parents=True)
    _configured(build_dir, tmp_path / "old" / "build", tmp_path / "old")

    def refuse(*args: object, **kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(build.shutil, "rmtree", refuse)
    with pytest.raises(ToolError) as err:
        build.reset_moved_cache(build_dir, tmp_path / "new")
    assert "Permission denied" in err.value.message and str(build_dir) in err.value.hint
