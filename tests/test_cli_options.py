"""Every option is checked before a command writes, builds or runs anything (cusync_gen/options.py), and
the option and spec spellings of targets and backends (one function normalizes them)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from cusync_gen import build, cli, paths
from cusync_gen.errors import SpecError, UsageError
from cusync_gen.spec.loading import load_spec
from cusync_gen.spec.model import canonical_backend, canonical_target


def cli_run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        cli.main(list(args))
    captured = capsys.readouterr()
    return (0 if exc.value.code is None else int(exc.value.code)), captured.out, captured.err


def snapshot(root: Path) -> dict[str, str]:
    """Every file under root (or root itself) and its sha256; folders as ''."""
    if not root.exists():
        return {}
    if root.is_file():
        return {".": hashlib.sha256(root.read_bytes()).hexdigest()}
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() if p.is_file() else ""
            for p in sorted(root.rglob("*"))}


@pytest.fixture
def no_tools(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """build/run/has_gpu/gpu_arch replaced by recorders: any call means the command went past its checks."""
    calls: list[str] = []
    monkeypatch.setattr(build, "build", lambda *a, **k: calls.append("build") or Path("x"))
    monkeypatch.setattr(build, "run", lambda *a, **k: calls.append("run") or [])
    monkeypatch.setattr(build, "has_gpu", lambda: True)
    monkeypatch.setattr(build, "gpu_arch", lambda: None)
    return calls


def foreign(folder: Path) -> Path:
    """A folder that is not a cusync-gen project, with a file of the user's in it."""
    folder.mkdir()
    (folder / "notes.txt").write_text("mine\n")
    (folder / "CMakeLists.txt").write_text("# mine\n")
    return folder


# (args after the command, the option the error must name)
RUN_BAD = [
    (["--m", "0"], "--m"),
    (["--m", "1,x"], "--m"),
    (["--m", "99999999"], "--m"),
    (["--policies", "diagonal"], "--policies"),
    (["--policies", "row,,tile"], "--policies"),
    (["--batch", "2"], "--batch"),           # a GEMM chain has no batch
    (["--cache", "-1"], "--cache"),
    (["--target", "sm_75"], "--target"),
    (["--arch", "sm_75"], "--arch"),
    (["--target", "hopper"], "--target"),
    (["--backend", "sm70"], "--backend"),
    (["--autotune", "3"], "--autotune"),     # an sm80 chain
    (["--repeats", "0"], "--repeats"),
    (["--warmup", "0"], "--warmup"),
    (["--jobs", "0"], "--jobs"),
    (["--results", "."], "--results"),
    (["--out", "."], "--results"),
]


@pytest.mark.parametrize(("args", "option"), RUN_BAD)
@pytest.mark.parametrize("force", [False, True])
def test_run_bad_option_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_tools: list[str],
                                       capsys: pytest.CaptureFixture[str], args: list[str], option: str,
                                       force: bool) -> None:
    monkeypatch.chdir(tmp_path)
    spec = tmp_path / "two.yaml"
    spec.write_text((paths.examples_dir() / "two_gemm.yaml").read_text())
    out = foreign(tmp_path / "out") if force else tmp_path / "out"
    before = snapshot(out)
    code, _, err = cli_run(capsys, "run", str(spec), "--project", str(out), *args, *(["--force"] if force else []))
    assert code == 2, err
    assert option in err.splitlines()[-2] or option in err, err
    assert snapshot(out) == before and not (tmp_path / "generated").exists()
    assert no_tools == []


def test_run_sm90_example_for_sm80_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_tools: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli_run(capsys, "run", "gpt3_mlp_sm90", "--target", "sm_80", "--project", "p")
    assert code == 2 and "--target sm_80" in err and "sm90" in err
    assert not (tmp_path / "p").exists() and no_tools == []


def test_run_old_spellings_still_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_tools: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli_run(capsys, "run", "two_gemm", "-o", "p", "--arch", "sm90", "--out", "r.json")
    assert code == 0, err
    assert (tmp_path / "p" / "manifest.json").is_file() and no_tools == ["build", "run"]
    code, _, err = cli_run(capsys, "run", "two_gemm", "--project", "p", "-o", "q")
    assert code == 2 and "--project" in err


GENERATE_BAD = [
    (["--target", "sm_75"], "--target"),
    (["--target", "sm_100"], "--target"),
]


@pytest.mark.parametrize(("args", "option"), GENERATE_BAD)
@pytest.mark.parametrize("force", [False, True])
def test_generate_bad_option_writes_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str],
                                            option: str, force: bool) -> None:
    out = foreign(tmp_path / "out") if force else tmp_path / "out"
    before = snapshot(out)
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(out), *args, *(["--force"] if force else []))
    assert code == 2 and option in err and "sm_80, sm_86, sm_89, sm_90" in err
    assert snapshot(out) == before


def test_generate_output_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    target = tmp_path / "file"
    target.write_text("x")
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(target / "sub"))
    assert code == 2 and "-o" in err and target.read_text() == "x"


@pytest.mark.parametrize("spelling", ["sm90", "sm_90", "sm_90a", "90", "compute_90", "9.0"])
def test_target_spellings(tmp_path: Path, capsys: pytest.CaptureFixture[str], spelling: str) -> None:
    code, _, err = cli_run(capsys, "generate", "two_gemm", "-o", str(tmp_path / spelling), "--target", spelling)
    assert code == 0, err
    assert json.loads((tmp_path / spelling / "manifest.json").read_text())["target"] == "sm_90"


def test_one_normalizer() -> None:
    for text in ("sm80", "sm_80", "80", "sm_80a", "compute_80", 80):
        assert canonical_target(text) == "sm_80" and canonical_backend(text) == "sm80"
    assert canonical_target("hopper") == "hopper" and canonical_backend(None) is None


def test_spec_accepts_spellings(tmp_path: Path) -> None:
    text = (paths.examples_dir() / "gpt3_mlp_sm90.yaml").read_text()
    assert "arch: sm90\ntarget: sm_90\n" in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace("arch: sm90\ntarget: sm_90\n", "arch: sm_90a\ntarget: sm90\n"))
    spec = load_spec(path)
    assert spec.arch.value == "sm90" and spec.target == "sm_90"
    assert spec == load_spec(paths.examples_dir() / "gpt3_mlp_sm90.yaml")  # same canonical spec, same hash


def make_project(root: Path, arch: str) -> Path:
    root.mkdir()
    (root / "manifest.json").write_text(json.dumps({"name": "fake", "arch": arch, "cuda_arch": "80"}))
    return root


@pytest.mark.parametrize(("arch", "args", "option"), [
    ("sm80", ["--target", "sm_75"], "--target"),
    ("sm80", ["--arch", "sm_75"], "--arch"),
    ("sm90", ["--target", "sm_80"], "--target"),
    ("sm90", ["--arch", "sm80"], "--arch"),
    ("sm80", ["--build-type", "Rel ease"], "--build-type"),
    ("sm80", ["--jobs", "0"], "--jobs"),
])
def test_build_bad_option_before_tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_tools: list[str],
                                       capsys: pytest.CaptureFixture[str], arch: str, args: list[str],
                                       option: str) -> None:
    monkeypatch.setenv("PATH", "")  # no cmake, no nvcc: a tool error would come first if we looked
    project = make_project(tmp_path / "p", arch)
    before = snapshot(project)
    code, _, err = cli_run(capsys, "build", str(project), *args)
    assert code == 2 and option in err, err
    assert len([line for line in err.splitlines() if line.startswith("error:")]) == 1
    assert snapshot(project) == before and no_tools == []


def test_build_unsupported_arch_lists_supported(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli_run(capsys, "build", str(make_project(tmp_path / "p", "sm80")), "--arch", "sm_75")
    assert code == 2 and "sm_80, sm_86, sm_89, sm_90" in err and "CUTLASS_DIR" not in err


def test_build_sm80_project_for_hopper(tmp_path: Path, no_tools: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    """sm80's CUTLASS 2.x kernels run on Hopper: building an sm80 project for sm_90 is fine."""
    code, _, err = cli_run(capsys, "build", str(make_project(tmp_path / "p", "sm80")), "--arch", "sm90")
    assert code == 0, err
    assert no_tools == ["build"]


@pytest.mark.parametrize(("args", "option"), [
    (["-o", "x.txt"], "-o"),
    (["--m", "0"], "--m"),
    (["--m", "1,2"], "--m"),
    (["--target", "sm_75"], "--target"),
    (["--png", "x.gif"], "-o"),
])
def test_trace_bad_option_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_tools: list[str],
                                         capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    monkeypatch.chdir(tmp_path)
    out = foreign(tmp_path / "out")
    before = snapshot(out)
    code, _, err = cli_run(capsys, "trace", "two_gemm", "--project", str(out), "--force", *args)
    assert code == 2 and option in err, err
    assert snapshot(out) == before and no_tools == [] and not list(tmp_path.glob("*.png"))


@pytest.mark.parametrize(("args", "option"), [
    (["--m", "0"], "--m"),
    (["--tiles", "gemm1=128x128"], "--tiles"),
    (["--tiles", "nope=128x128x32"], "--tiles"),
    (["--orders", "diagonal"], "--orders"),
    (["--target", "sm_75"], "--target"),
    (["--write", "."], "--write"),
    (["--rounds", "0"], "--rounds"),
])
def test_tune_bad_option_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, no_tools: list[str],
                                        capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    monkeypatch.chdir(tmp_path)
    code, _, err = cli_run(capsys, "tune", "two_gemm", "--work-dir", "w", *args)
    assert code == 2 and option in err, err
    assert not (tmp_path / "w").exists() and not list(tmp_path.glob("*.tuned.yaml")) and no_tools == []


@pytest.mark.parametrize(("args", "option"), [
    (["nope"], "nope"),
    (["two_gemm", "-o", "."], "-o"),
])
def test_init_bad_option_writes_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                        capsys: pytest.CaptureFixture[str], args: list[str], option: str) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "two_gemm.yaml").write_text("mine\n")
    code, _, err = cli_run(capsys, "init", *args, "--force")
    assert code == 2 and option in err
    assert (tmp_path / "two_gemm.yaml").read_text() == "mine\n" and len(list(tmp_path.iterdir())) == 1


@pytest.mark.parametrize("wheel", ["missing.whl", "notes.txt"])
def test_fetch_cutlass_bad_wheel_touches_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                 wheel: str) -> None:
    dest = foreign(tmp_path / "dest")
    (tmp_path / "notes.txt").write_text("x")
    before = snapshot(dest)
    code, _, err = cli_run(capsys, "fetch-cutlass", "--wheel", str(tmp_path / wheel), "--dest", str(dest), "--force")
    assert code == 2 and "--wheel" in err
    assert snapshot(dest) == before


def test_flags_are_plain(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("generate", "validate", "init", "run"):
        code, out, _ = cli_run(capsys, command, "--help")
        lines = [line for line in out.splitlines() if "Show this message" not in line]  # typer's own --help
        assert code == 0 and not [line for line in lines if "<bool>" in line]
    code, _, err = cli_run(capsys, "validate", "two_gemm", "--json", "true")
    assert code == 2  # a flag takes no value (the extra argument is refused)


# --------------------------------------------------------------------------------------------------
# Part 2: where spec errors point


def _sm90(tmp_path: Path, old: str, new: str) -> Path:
    text = (paths.examples_dir() / "gpt3_mlp_sm90.yaml").read_text()
    assert old in text
    path = tmp_path / "s.yaml"
    path.write_text(text.replace(old, new, 1))
    return path


def test_dispatch_error_names_dispatch_only(tmp_path: Path) -> None:
    path = _sm90(tmp_path, "{m_max: 1254, mode: pingpong}", "{m_max: 100, mode: pingpong}")
    with pytest.raises(SpecError) as info:
        load_spec(path)
    assert info.value.field == "dispatch.modes[1].m_max" and "tile_configs" not in str(info.value)


def test_sync_auto_failing_in_a_tile_config_names_it(tmp_path: Path) -> None:
    path = _sm90(tmp_path, "sync: row ", "sync: auto")
    text = path.read_text().replace("      gemm2: [128, 128, 64]", "      gemm2: [256, 128, 64]")
    path.write_text(text)
    from cusync_gen.plan import make_plan

    with pytest.raises(SpecError) as info:
        make_plan(load_spec(path))
    assert info.value.field == "tile_configs[0].tiles.gemm2"
    assert "stages[1].tile" not in info.value.message


def test_yaml_merge_keys(tmp_path: Path) -> None:
    text = (paths.examples_dir() / "two_gemm.yaml").read_text()
    spec = load_spec(paths.examples_dir() / "two_gemm.yaml")
    tile = spec.stages[0].tile
    path = tmp_path / "m.yaml"
    path.write_text(f"name: m\nstages:\n  - &g1 {{name: gemm1, op: gemm, a: input, n: {spec.stages[0].n}, "
                    f"k: {spec.stages[0].k}, tile: {{threadblock: {list(tile.threadblock)}, warp: {list(tile.warp)}}}}}\n"
                    "  - <<: *g1\n    name: gemm2\n    a: gemm1\n    sync: row\n")
    merged = load_spec(path)
    assert merged.stages[1].tile == merged.stages[0].tile and merged.stages[1].name == "gemm2"
    path.write_text(path.read_text() + "    sync: tile\n")  # a key written twice is still refused
    with pytest.raises(UsageError, match="duplicate key 'sync'"):
        load_spec(path)
    assert text  # the example is untouched
