"""What cusync-gen writes to the user's disk: only inside the target, never a mix, never a traceback.

`generate` and `fetch-cutlass` both render into a sibling staging folder and swap it in under a lock
(cusync_gen/fsio.py). These tests plant hostile manifests, foreign folders, files where folders go,
interruptions at every rename, SIGKILLed writers and a concurrent writer, and check that nothing outside
the target changes, that the target holds its old or its complete new contents, and that every failure
is one `error:` line.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from cusync_gen import cutlass_fetch, fsio, render
from cusync_gen.errors import SpecError, ToolError, UsageError
from test_cli import cli_run, error_lines

EXAMPLES = REPO / "cusync_gen" / "examples"
TWO_GEMM = EXAMPLES / "two_gemm.yaml"
GENERATOR = "cusync-gen 0.1.0"


@pytest.fixture(scope="module")
def other(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """two_gemm under another name and with gemm2 renamed: every file name differs from two_gemm's."""
    data = yaml.safe_load(TWO_GEMM.read_text())
    data["name"] = "other_gemm"
    data["stages"][1]["name"] = "gemm3"
    path = tmp_path_factory.mktemp("specs") / "other_gemm.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file, link and folder under `root` (hidden ones too): path -> bytes, link target or "dir"."""
    out: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            out[rel] = ("-> " + os.readlink(path)) if path.is_symlink() else "dir" if path.is_dir() else path.read_bytes()
    return out


def project_with_extras(root: Path) -> Path:
    """two_gemm generated into root/proj, plus a build/ folder and a file of the user's."""
    proj = render.generate(TWO_GEMM, root / "proj")
    (proj / "build").mkdir()
    (proj / "build" / "keep.txt").write_text("build output")
    (proj / "notes.txt").write_text("my notes")
    return proj


def write_manifest(proj: Path, files: object, generator: str | None = GENERATOR) -> None:
    data: dict[str, object] = {"files": files}
    if generator is not None:
        data["generator"] = generator
    proj.mkdir(parents=True, exist_ok=True)
    (proj / "manifest.json").write_text(json.dumps(data))


def assert_is_project(proj: Path, spec: Path) -> None:
    render.generate(spec, proj, check=True)  # raises GeneratedDiffers on any missing or changed file


def assert_only_project_files(proj: Path, extra: set[str] = set()) -> None:
    """Nothing but the manifest's files (and `extra`, and build/): no orphans of another project."""
    manifest = json.loads((proj / "manifest.json").read_text())
    on_disk = {str(p.relative_to(proj)) for p in proj.rglob("*") if p.is_file() and p.parts[len(proj.parts)] != "build"}
    assert on_disk == set(manifest["files"]) | extra


# --------------------------------------------------------------------------------------------------
# 1. an old manifest is untrusted input


def test_hostile_manifest_deletes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = tmp_path / "proj"
    (tmp_path / "victim").mkdir()
    secret = tmp_path / "victim" / "secret.txt"
    secret.write_text("secret")
    absolute = tmp_path / "abs.txt"
    absolute.write_text("abs")
    write_manifest(proj, ["important.txt", "../victim/secret.txt", str(absolute)])
    (proj / "important.txt").write_text("important")
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj))
    assert code == 0, err
    assert secret.read_text() == "secret" and absolute.read_text() == "abs"
    assert (proj / "important.txt").read_text() == "important"  # listed, but not a file we wrote


def test_folder_with_a_foreign_manifest_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The exact report: no "generator", so not ours; without --force nothing changes at all."""
    proj = tmp_path / "proj"
    write_manifest(proj, ["important.txt"], generator=None)
    (proj / "important.txt").write_text("important")
    before = snapshot(tmp_path)
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj))
    assert code == 2 and len(error_lines(err)) == 1
    assert "-o" in err and "--force" in err
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("files", ["ab", ["dir"], [1], [["x"]], {"a": 1}, None, ["", ".", "a/../b", "\\b"]])
def test_malformed_manifest_files(tmp_path: Path, capsys: pytest.CaptureFixture[str], files: object) -> None:
    proj = tmp_path / "proj"
    write_manifest(proj, files)
    for name in ("a", "b", "dir/inner", "x"):
        (proj / name).parent.mkdir(parents=True, exist_ok=True)
        (proj / name).write_text(name)
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj))
    assert code == 0, err
    assert all((proj / name).read_text() == name for name in ("a", "b", "dir/inner", "x"))


@pytest.mark.parametrize("manifest", ["not json", "[1, 2]", '"cusync-gen"', '{"generator": 7}'])
def test_unreadable_manifest_is_not_ours(tmp_path: Path, capsys: pytest.CaptureFixture[str], manifest: str) -> None:
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "manifest.json").write_text(manifest)
    (proj / "mine.txt").write_text("mine")
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj))
    assert code == 2 and "--force" in err
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj), "--force")
    assert code == 0, err
    assert (proj / "mine.txt").read_text() == "mine"
    assert_is_project(proj, TWO_GEMM)


def test_regeneration_removes_only_what_it_wrote(tmp_path: Path) -> None:
    """A stage file no longer generated goes; the same file edited by hand, a link, the user's files stay."""
    proj = project_with_extras(tmp_path)
    renamed = tmp_path / "renamed.yaml"
    data = yaml.safe_load(TWO_GEMM.read_text())
    data["stages"][1]["name"] = "gemm3"
    renamed.write_text(yaml.safe_dump(data, sort_keys=False))
    outside = tmp_path / "outside.txt"
    outside.write_text("outside")
    (proj / "link.txt").symlink_to(outside)
    manifest = json.loads((proj / "manifest.json").read_text())
    manifest["files"].append("link.txt")
    manifest["sha256"]["link.txt"] = hashlib.sha256(b"outside").hexdigest()
    (proj / "manifest.json").write_text(json.dumps(manifest))

    render.generate(renamed, proj)
    assert not (proj / "src" / "stage_gemm2.cu").exists()  # ours, unchanged: removed
    assert (proj / "src" / "stage_gemm3.cu").is_file()
    assert outside.read_text() == "outside" and (proj / "link.txt").is_symlink()
    assert (proj / "build" / "keep.txt").is_file() and (proj / "notes.txt").is_file()

    (proj / "src" / "stage_gemm3.cu").write_text("// my changes\n")
    render.generate(TWO_GEMM, proj)
    assert (proj / "src" / "stage_gemm3.cu").read_text() == "// my changes\n"  # edited: kept
    assert_is_project(proj, TWO_GEMM)


def test_manifest_records_the_hash_of_every_file(tmp_path: Path) -> None:
    proj = render.generate(TWO_GEMM, tmp_path / "p")
    manifest = json.loads((proj / "manifest.json").read_text())
    assert set(manifest["sha256"]) == set(manifest["files"]) - {"manifest.json"}
    for rel, digest in manifest["sha256"].items():
        assert hashlib.sha256((proj / rel).read_bytes()).hexdigest() == digest


# --------------------------------------------------------------------------------------------------
# 3. the target: only ours is replaced; a file is never a folder


def test_foreign_folder_needs_force(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = tmp_path / "u"
    (proj / "src").mkdir(parents=True)
    for rel in ("README.md", "CMakeLists.txt", "src/x.cu"):
        (proj / rel).write_text("mine")
    before = snapshot(tmp_path)
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj))
    assert code == 2 and len(error_lines(err)) == 1 and "not empty" in err and "--force" in err
    assert snapshot(tmp_path) == before
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj), "--force")
    assert code == 0, err
    assert (proj / "src" / "x.cu").read_text() == "mine"  # not one of the project's files: kept
    assert_is_project(proj, TWO_GEMM)


def test_empty_folder_is_fine(tmp_path: Path) -> None:
    (tmp_path / "e").mkdir()
    assert_is_project(render.generate(TWO_GEMM, tmp_path / "e"), TWO_GEMM)


@pytest.mark.parametrize("sub", ["", "sub", "sub/deeper"])
def test_output_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], sub: str) -> None:
    afile = tmp_path / "afile"
    afile.write_text("f")
    for extra in ([], ["--force"], ["--check"]):
        code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(afile / sub), *extra)
        assert code == 2 and len(error_lines(err)) == 1 and "-o" in err and "is a file" in err
    assert afile.read_text() == "f"


def test_current_folder_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                   capsys: pytest.CaptureFixture[str]) -> None:
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    for out in (".", str(tmp_path)):
        code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", out, "--force")
        assert code == 2 and "current folder" in err
    assert list(here.iterdir()) == []


def test_write_errors_are_one_clean_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    long = tmp_path / ("x" * 300)
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(long))
    assert code == 2 and len(error_lines(err)) == 1 and "too long" in err and "Traceback" not in err


def test_too_long_file_names_are_one_clean_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A 300-character stage name: refused by the spec (a length limit) or, failing that, when written,
    naming the file in the project (not the staging folder), with nothing left behind."""
    data = yaml.safe_load(TWO_GEMM.read_text())
    data["stages"][1]["name"] = "g" * 300
    spec = tmp_path / "long.yaml"
    spec.write_text(yaml.safe_dump(data, sort_keys=False))
    code, _, err = cli_run(capsys, "generate", str(spec), "-o", str(tmp_path / "p"))
    assert code in (1, 2) and len(error_lines(err)) == 1
    assert "stages[1].name" in err or f"{tmp_path / 'p'}/src/stage_ggg" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["long.yaml"]


# --------------------------------------------------------------------------------------------------
# 3. interrupted, killed and concurrent writers


def failing_rename(monkeypatch: pytest.MonkeyPatch, at: int, after: bool) -> None:
    """The `at`-th rename (os.rename or os.replace) raises KeyboardInterrupt, before or after renaming."""
    calls = [0]

    def patched(real):  # type: ignore[no-untyped-def]
        def rename(src: object, dst: object, **kwargs: object) -> None:
            calls[0] += 1
            if calls[0] == at and not after:
                raise KeyboardInterrupt
            real(src, dst, **kwargs)
            if calls[0] == at:
                raise KeyboardInterrupt
        return rename

    monkeypatch.setattr(os, "rename", patched(os.rename))
    monkeypatch.setattr(os, "replace", patched(os.replace))


# renames of one swap with build/ and notes.txt kept: 2 moves, old -> aside, staging -> target
@pytest.mark.parametrize("after", [False, True])
@pytest.mark.parametrize("at", [1, 2, 3, 4])
def test_interrupt_mid_swap_keeps_the_old_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str], at: int, after: bool,
                                                  other: Path) -> None:
    proj = project_with_extras(tmp_path)
    before = snapshot(tmp_path)
    failing_rename(monkeypatch, at, after)
    code, _, err = cli_run(capsys, "generate", str(other), "-o", str(proj))
    assert code == 130
    assert error_lines(err) == [f"error: interrupted: -o {proj} holds what it held before, unchanged"]
    assert snapshot(tmp_path) == before  # old project, build/ and notes.txt; no staging, no lock file


def test_sigint_during_the_renames_waits_for_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                  capsys: pytest.CaptureFixture[str], other: Path) -> None:
    """A real SIGINT in the middle of the swap is held until the new project is complete."""
    proj = project_with_extras(tmp_path)
    real = os.rename

    def rename(src: object, dst: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        real(src, dst, **kwargs)

    monkeypatch.setattr(os, "rename", rename)
    code, _, err = cli_run(capsys, "generate", str(other), "-o", str(proj))
    monkeypatch.undo()
    assert code == 130 and "holds the complete new project" in err
    assert_is_project(proj, other)
    assert (proj / "notes.txt").is_file() and (proj / "build" / "keep.txt").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


@pytest.mark.parametrize("at", [0, 1, 2, 3, 4])
def test_killed_writer_leaves_nothing_behind(tmp_path: Path, at: int, other: Path) -> None:
    """SIGKILL while writing the staging folder (0) or after each rename of the swap (1-4): the next run
    recovers; the user's files survive and no hidden folder is left."""
    proj = project_with_extras(tmp_path)
    pid = os.fork()
    if pid == 0:  # the writer that gets killed
        try:
            calls = [0]

            def count(real):  # type: ignore[no-untyped-def]
                def wrapped(*args, **kwargs):  # type: ignore[no-untyped-def]
                    result = real(*args, **kwargs)
                    calls[0] += 1
                    if calls[0] == (at or 3):
                        os.kill(os.getpid(), signal.SIGKILL)
                    return result
                return wrapped

            if at == 0:
                fsio.write_new = count(fsio.write_new)
            else:
                os.rename = count(os.rename)
            render.generate(other, proj)
        finally:
            os._exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    render.generate(other, proj)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]
    assert_is_project(proj, other)
    assert (proj / "notes.txt").read_text() == "my notes"
    assert (proj / "build" / "keep.txt").read_text() == "build output"
    assert_only_project_files(proj, {"notes.txt"})


def test_second_writer_waits_then_fails_clearly(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from cusync_gen import fsio

    monkeypatch.setattr(fsio, "LOCK_WAIT_S", 0.2)
    proj = tmp_path / "proj"
    with fsio.lock(proj):
        with pytest.raises(ToolError, match="another cusync-gen is writing"):
            render.generate(TWO_GEMM, proj)
    assert not proj.exists()
    render.generate(TWO_GEMM, proj)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]  # the lock file goes with the lock


def test_concurrent_generates_leave_one_complete_project(tmp_path: Path, other: Path) -> None:
    proj = tmp_path / "proj"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen([sys.executable, "-m", "cusync_gen.cli", "generate", str(spec), "-o", str(proj)],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for spec in (TWO_GEMM, other)]
    results = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], results
    manifest = json.loads((proj / "manifest.json").read_text())
    assert_only_project_files(proj)
    assert_is_project(proj, TWO_GEMM if manifest["name"] == "two_gemm" else other)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["proj"]


# --------------------------------------------------------------------------------------------------
# generate --check: short


def test_check_of_a_missing_folder_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli_run(capsys, "generate", "two_gemm", "-o", str(tmp_path / "nope"), "--check")
    assert code == 1 and len((out + err).strip().splitlines()) <= 3 and "does not exist" in err
    assert not (tmp_path / "nope").exists()


def test_check_lists_each_difference_on_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = project_with_extras(tmp_path)
    (proj / "src" / "stage_gemm1.cu").unlink()
    for rel in ("src/two_gemm.cu", "src/stage_gemm2.cu", "README.md", "CMakeLists.txt", "bench/two_gemm_bench.cu"):
        (proj / rel).write_text("".join(f"line {i}\n" for i in range(500)))
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj), "--check")
    assert code == 1
    lines = err.splitlines()
    assert "missing: src/stage_gemm1.cu" in lines and "changed: src/two_gemm.cu" in lines
    assert "not generated (generate keeps it): notes.txt" in lines
    assert not any("keep.txt" in line for line in lines)  # build/ is not looked at
    assert len(lines) < 100  # diffs are capped


def test_check_passes_with_foreign_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    proj = project_with_extras(tmp_path)
    code, out, err = cli_run(capsys, "generate", "two_gemm", "-o", str(proj), "--check")
    assert code == 0 and "up to date" in out, err


# --------------------------------------------------------------------------------------------------
# 7. one path per generated file


def spec_file(tmp_path: Path, example: str, edit: dict) -> Path:
    data = yaml.safe_load((EXAMPLES / f"{example}.yaml").read_text())
    for key, value in edit.items():
        if key == "name":
            data["name"] = value
        else:
            index = int(key)
            old = data["stages"][index]["name"]
            data["stages"][index]["name"] = value
            for stage in data["stages"]:
                for ref in ("a", "b"):
                    if stage.get(ref) == old:
                        stage[ref] = value
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.mark.parametrize("example, edit, field", [
    ("two_gemm", {"name": "stage_gemm1"}, "stages[0].name"),
    ("two_gemm", {"1": "Gemm1"}, "stages[1].name"),
    ("two_gemm_sm90", {"1": "gemm1_stock"}, "stages[1].name"),
    ("gpt3_attention", {"name": "stage_softmax"}, "name"),
    ("gpt3_attention", {"name": "stage_qkv"}, "name"),
])
def test_file_name_collisions(tmp_path: Path, capsys: pytest.CaptureFixture[str], example: str, edit: dict,
                              field: str) -> None:
    spec = spec_file(tmp_path, example, edit)
    code, _, err = cli_run(capsys, "validate", str(spec))
    assert code == 1 and len(error_lines(err)) == 1 and f"{field}:" in err and "rename" in err
    with pytest.raises(SpecError) as info:
        render.generate(spec, tmp_path / "out")
    assert info.value.field == field
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------------------------------
# 9. what reaches CMake


def cmake_cutlass_dir(cmakelists: str, tmp_path: Path, env: dict[str, str] | None = None) -> str:
    """Run the CUTLASS_DIR lines of a CMakeLists.txt (from its first CUTLASS line to set(CUTLASS_DIR ...))
    in cmake's script mode; returns the value CUTLASS_DIR gets."""
    cmake = shutil.which("cmake")
    if cmake is None:
        pytest.skip("cmake not found")
    lines = cmakelists.splitlines()
    first = next(i for i, line in enumerate(lines) if "CUTLASS" in line)
    last = next(i for i, line in enumerate(lines) if line.startswith("set(CUTLASS_DIR"))
    script = tmp_path / "cutlass_dir.cmake"
    result = tmp_path / "cutlass_dir.txt"
    script.write_text("\n".join(lines[first:last + 1]) + '\nfile(WRITE "${OUT}" "${CUTLASS_DIR}")\n')
    run_env = {k: v for k, v in os.environ.items() if k != "CUTLASS_DIR"} | (env or {})
    proc = subprocess.run([cmake, f"-DOUT={result}", "-P", str(script)], capture_output=True, text=True, env=run_env)
    assert proc.returncode == 0, proc.stderr
    assert "pwned" not in proc.stdout + proc.stderr
    return result.read_text()


def test_no_cutlass_path_reaches_the_project(tmp_path: Path) -> None:
    """generate writes no CUTLASS folder into the project (it finds CUTLASS when configured): a hostile
    --cutlass-dir, even one with a newline, changes nothing."""
    plain = render.generate(TWO_GEMM, tmp_path / "plain")
    for cutlass in (tmp_path / 'c") message(FATAL_ERROR pwned) set(X "${HOME} ;#', tmp_path / 'c")\nmessage(FATAL_ERROR pwned)\n#'):
        proj = render.generate(TWO_GEMM, tmp_path / "p", cutlass_dir=cutlass)
        for f in proj.rglob("*"):
            if f.is_file():
                text = f.read_text()
                assert "pwned" not in text and str(tmp_path) not in text, f
                assert text == (plain / f.relative_to(proj)).read_text(), f


def test_cmake_string_filter(tmp_path: Path) -> None:
    from cusync_gen.cpp import cmake_string

    value = 'a"b\\c$d ${HOME} ") message(FATAL_ERROR pwned) #;'
    assert cmake_string('a"b\\c$d') == 'a\\"b\\\\c\\$d'
    script = f'# CUTLASS\nset(CUTLASS_DIR "{cmake_string(value)}")'
    assert cmake_cutlass_dir(script, tmp_path) == value  # CMake reads back exactly the value
    with pytest.raises(ValueError):
        cmake_string("a\nb")


# --------------------------------------------------------------------------------------------------
# 2. fetch-cutlass


def fake_wheel(path: Path) -> Path:
    """A dist-info folder, one header and the FMHA example's marker file: the minimal wheel fetch accepts."""
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr("nvidia_cutlass-4.2.0.0.dist-info/METADATA", "Name: nvidia-cutlass\n")
        whl.writestr("cutlass_library/source/include/cutlass/cutlass.h", "#pragma once\n")
        whl.writestr("cutlass_library/source/examples/88_hopper_fmha/collective/fmha_fusion.hpp", "#pragma once\n")
    return path


@pytest.fixture
def trusted(monkeypatch: pytest.MonkeyPatch) -> None:
    """Let the small wheels above stand in for the real one."""
    monkeypatch.setattr(cutlass_fetch, "check_wheel", lambda wheel: None, raising=False)


def test_pinned_wheel_hash() -> None:
    """PyPI's only file for nvidia-cutlass 4.2.0.0 (py3-none-any), as `pip download` + sha256sum gave it."""
    assert cutlass_fetch.WHEEL_SHA256 == {"f9599ada45c7bcb6bf53f7d3f0a7d154183e53451c01bfa59eecd37dd4a693f6"}


def test_fake_wheel_is_rejected(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    wheel = fake_wheel(tmp_path / "nvidia_cutlass-4.2.0.0-py3-none-any.whl")
    code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(tmp_path / "c"))
    assert code == 1 and len(error_lines(err)) == 1
    assert "sha256" in err and "f9599ada45c7bcb6" in err
    assert not (tmp_path / "c").exists()


def test_fetch_refuses_a_folder_it_did_not_fill(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                               capsys: pytest.CaptureFixture[str], trusted: None) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("key")
    wheel = fake_wheel(tmp_path / "w.whl")
    monkeypatch.chdir(home)
    before = snapshot(tmp_path)
    for extra in ([], ["--force"]):
        code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", ".", *extra)
        assert code == 2 and "--dest" in err
    code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(home / ".ssh"))
    assert code == 2 and "not a CUTLASS tree fetched by cusync-gen" in err and "--force" in err
    assert snapshot(tmp_path) == before
    code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(home / ".ssh"), "--force")
    assert code == 0, err
    assert cutlass_fetch.is_fetched(home / ".ssh")


def test_fetch_never_replaces_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str], trusted: None) -> None:
    wheel = fake_wheel(tmp_path / "w.whl")
    afile = tmp_path / "file.txt"
    afile.write_text("hello")
    for dest in (afile, afile / "sub"):
        for extra in ([], ["--force"]):
            code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(dest), *extra)
            assert code == 2 and len(error_lines(err)) == 1 and "is a file" in err
    assert afile.read_text() == "hello"


def test_fetch_interrupted_keeps_the_old_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str], trusted: None) -> None:
    wheel = fake_wheel(tmp_path / "w.whl")
    dest = tmp_path / "cutlass"
    cutlass_fetch.fetch_cutlass(dest, wheel=wheel)
    (dest / "marker").write_text("old")
    before = snapshot(tmp_path)
    failing_rename(monkeypatch, 2, after=True)  # staging -> dest done, then Ctrl-C
    code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(dest), "--force")
    assert code == 130 and len(error_lines(err)) == 1
    assert snapshot(tmp_path) == before


def test_refetch_is_a_no_op_and_recovers_leftovers(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                   trusted: None) -> None:
    wheel = fake_wheel(tmp_path / "w.whl")
    dest = tmp_path / "third_party" / "cutlass"
    code, out, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(wheel), "--dest", str(dest))
    assert code == 0 and "fetched" in out, err
    (dest.parent / ".cutlass.cusync-new-deadbeef").mkdir()  # a SIGKILLed fetch's staging folder
    code, out, _ = cli_run(capsys, "fetch-cutlass", "--dest", str(dest), "--force", "--wheel", str(wheel))
    assert code == 0
    assert sorted(p.name for p in dest.parent.iterdir()) == ["cutlass"]
    code, out, _ = cli_run(capsys, "fetch-cutlass", "--dest", str(dest))
    assert code == 0 and "already there" in out
