"""build.py and cutlass_fetch.py: locating tools and CUTLASS, cmake runs, the bench protocol."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

from cusync_gen import bench_protocol, build, cutlass_fetch, paths
from cusync_gen.errors import CheckFailedError, NoGpuError, NotRunError, SyncTimeoutError, ToolError, UsageError

# --------------------------------------------------------------------------------------------------
# helpers


def make_cutlass(root: Path) -> Path:
    header = root / "include" / "cutlass" / "cutlass.h"
    header.parent.mkdir(parents=True)
    header.write_text("#pragma once\n")
    return root


def make_project(root: Path, name: str = "fake", bench: str | None = "fake_bench") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    manifest = {"name": name, "class_name": "Fake", "spec_hash": "0" * 12, "target": "sm_80", "stages": []}
    if bench is not None:
        manifest["bench"] = bench
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root


# A stand-in for the generated bench: prints what FAKE_BENCH_OUT holds and exits with FAKE_BENCH_RC.
FAKE_BENCH = textwrap.dedent(
    """\
    #!{python}
    import os, sys
    sys.stdout.write(open(os.path.join(os.path.dirname(__file__), "out.txt")).read())
    sys.stderr.write(open(os.path.join(os.path.dirname(__file__), "err.txt")).read())
    open(os.path.join(os.path.dirname(__file__), "argv.json"), "w").write(repr(sys.argv[1:]))
    sys.exit(int(open(os.path.join(os.path.dirname(__file__), "rc.txt")).read()))
    """
)

ROW = {"m": 256, "policy": "row", "sequential_us": 130.5, "overlapped_us": 110.25, "speedup": 1.18,
       "bitwise_equal": True, "ref_rel_err": 1.5e-4, "sync_error": None, "graph_ok": True}


def make_bench(project: Path, stdout: str, rc: int = 0, stderr: str = "bench stderr line\n") -> Path:
    bench_dir = project / "build"
    bench_dir.mkdir(parents=True, exist_ok=True)
    bench = bench_dir / "fake_bench"
    bench.write_text(FAKE_BENCH.format(python=sys.executable))
    bench.chmod(0o755)
    (bench_dir / "out.txt").write_text(stdout)
    (bench_dir / "rc.txt").write_text(str(rc))
    (bench_dir / "err.txt").write_text(stderr)
    return bench


@pytest.fixture
def gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(build, "has_gpu", lambda: True)


# --------------------------------------------------------------------------------------------------
# find_cutlass / find_tool


def test_find_cutlass_explicit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    root = make_cutlass(tmp_path / "cutlass")
    assert build.find_cutlass(root) == root.resolve()


def test_find_cutlass_explicit_without_header_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTLASS_DIR", str(make_cutlass(tmp_path / "good")))
    with pytest.raises(ToolError) as err:
        build.find_cutlass(tmp_path / "empty")
    assert "cutlass.h" in err.value.message
    assert "fetch-cutlass" in err.value.hint


def test_find_cutlass_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = make_cutlass(tmp_path / "cutlass")
    monkeypatch.setenv("CUTLASS_DIR", str(root))
    assert build.find_cutlass() == root.resolve()


def test_find_cutlass_env_without_header_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTLASS_DIR", str(tmp_path))
    with pytest.raises(ToolError) as err:
        build.find_cutlass()
    assert "CUTLASS_DIR" in err.value.message


def test_find_cutlass_default_missing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    monkeypatch.setattr(build, "default_cutlass_dir", lambda: tmp_path / "third_party" / "cutlass")
    with pytest.raises(ToolError) as err:
        build.find_cutlass()
    assert err.value.exit_code == 1
    assert "cusync-gen fetch-cutlass" in err.value.hint and "--cutlass-dir" in err.value.hint


def test_find_cutlass_default_present(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CUTLASS_DIR", raising=False)
    root = make_cutlass(tmp_path / "third_party" / "cutlass")
    monkeypatch.setattr(build, "default_cutlass_dir", lambda: root)
    assert build.find_cutlass() == root.resolve()


def test_find_tool_missing_nvcc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("CUDA_HOME", raising=False)
    monkeypatch.delenv("CUDA_PATH", raising=False)
    monkeypatch.setattr(build, "CUDA_ROOTS", (str(tmp_path / "no-cuda"),))
    with pytest.raises(ToolError) as err:
        build.find_tool("nvcc")
    assert "nvcc" in err.value.message
    assert "CUDA toolkit" in err.value.hint


def test_find_tool_nvcc_from_cuda_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nvcc = tmp_path / "cuda" / "bin" / "nvcc"
    nvcc.parent.mkdir(parents=True)
    nvcc.write_text("#!/bin/sh\n")
    nvcc.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setenv("CUDA_HOME", str(tmp_path / "cuda"))
    assert build.find_tool("nvcc") == str(nvcc)


def test_find_tool_missing_cmake(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(ToolError) as err:
        build.find_tool("cmake")
    assert "cmake" in err.value.message
    assert "pip install cmake" in err.value.hint


@pytest.mark.parametrize(("target", "arch"), [("sm_80", "80"), ("sm_90", "90"), ("sm_90a", "90a"), ("86", "86")])
def test_cuda_arch(target: str, arch: str) -> None:
    assert build.cuda_arch(target) == arch


@pytest.mark.parametrize("target", ["hopper", "sm_", "sm_9", ""])
def test_cuda_arch_rejects(target: str) -> None:
    with pytest.raises(UsageError):
        build.cuda_arch(target)


def test_build_architectures() -> None:
    assert build.build_architectures({"cuda_arch": "80"}, None) == "80"
    assert build.build_architectures({}, None) is None
    assert build.build_architectures({"cuda_arch": "80"}, "sm_90") == "90"
    assert build.build_architectures({"cuda_arch": "90a"}, "sm_90") == "90a"
    with pytest.raises(UsageError) as info:  # Hopper kernels cannot be built for another GPU
        build.build_architectures({"cuda_arch": "90a", "arch": "sm90"}, "sm_80")
    assert "sm_90" in info.value.hint
    assert build.build_architectures({"cuda_arch": "90a"}, "sm_100") == "100"


# --------------------------------------------------------------------------------------------------
# manifest


def test_read_manifest_missing(tmp_path: Path) -> None:
    with pytest.raises(UsageError) as err:
        build.read_manifest(tmp_path)
    assert "manifest.json" in err.value.message


def test_read_manifest_corrupt(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{not json")
    with pytest.raises(Exception) as err:
        build.read_manifest(tmp_path)
    assert err.value.exit_code == 1  # type: ignore[attr-defined]


def test_bench_name_defaults_to_name_bench(tmp_path: Path) -> None:
    project = make_project(tmp_path / "p", name="gpt3_mlp", bench=None)
    assert build.bench_path(project).name == "gpt3_mlp_bench"
    assert build.bench_name({"name": "x", "bench": {"executable": "y"}}) == "y"


# --------------------------------------------------------------------------------------------------
# build(): real cmake on tiny projects (no CUDA compile unless marked nvcc)

needs_cmake = pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake not installed")


def _cxx_project(root: Path, source: str) -> Path:
    project = make_project(root, name="fake", bench="fake_bench")
    (project / "CMakeLists.txt").write_text(textwrap.dedent(
        """\
        cmake_minimum_required(VERSION 3.18)
        project(fake LANGUAGES CXX)
        if(NOT EXISTS "${CUTLASS_DIR}/include/cutlass/cutlass.h")
          message(FATAL_ERROR "CUTLASS_DIR not passed")
        endif()
        add_executable(fake_bench main.cpp)
        """))
    (project / "main.cpp").write_text(source)
    return project


@needs_cmake
@pytest.mark.parametrize("progress", [False, True])
def test_build_compiles_a_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, progress: bool) -> None:
    monkeypatch.setenv("CUTLASS_DIR", str(make_cutlass(tmp_path / "cutlass")))
    monkeypatch.setattr(build, "find_tool", lambda name: shutil.which(name) or "/usr/bin/false")
    project = _cxx_project(tmp_path / "p", "int main() { return 0; }\n")
    build_dir = build.build(project, jobs=1, progress=progress)
    assert build_dir == project.resolve() / "build"
    assert (build_dir / "fake_bench").is_file()
    assert build.bench_path(project) == build_dir / "fake_bench"
    build.build(project, jobs=1, progress=progress)  # second run reuses the build folder


@needs_cmake
def test_build_failure_keeps_command_and_tail(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTLASS_DIR", str(make_cutlass(tmp_path / "cutlass")))
    monkeypatch.setattr(build, "find_tool", lambda name: shutil.which(name) or "/usr/bin/false")
    project = _cxx_project(tmp_path / "p", "int main() { return this_is_not_declared; }\n")
    with pytest.raises(ToolError) as err:
        build.build(project, progress=False)
    assert err.value.message.startswith("build failed")
    assert err.value.command is not None and "--build" in err.value.command
    assert "this_is_not_declared" in err.value.stderr_tail
    assert len(err.value.stderr_tail.splitlines()) <= build.TAIL_LINES


@needs_cmake
def test_configure_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CUTLASS_DIR", str(make_cutlass(tmp_path / "cutlass")))
    monkeypatch.setattr(build, "find_tool", lambda name: shutil.which(name) or "/usr/bin/false")
    project = make_project(tmp_path / "p")
    (project / "CMakeLists.txt").write_text('project(x LANGUAGES NONE)\nmessage(FATAL_ERROR "boom here")\n')
    with pytest.raises(ToolError) as err:
        build.build(project, target="sm_90", progress=False)
    assert err.value.message.startswith("configure failed")
    assert "-DCMAKE_CUDA_ARCHITECTURES=90" in err.value.command
    assert "boom here" in err.value.stderr_tail


@needs_cmake
@pytest.mark.nvcc
def test_build_cuda_project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    try:
        build.find_tool("nvcc")
    except ToolError:
        pytest.skip("nvcc not installed")
    monkeypatch.setenv("CUTLASS_DIR", str(make_cutlass(tmp_path / "cutlass")))
    project = make_project(tmp_path / "p")
    (project / "CMakeLists.txt").write_text(textwrap.dedent(
        """\
        cmake_minimum_required(VERSION 3.24)
        project(fake LANGUAGES CXX CUDA)
        add_executable(fake_bench main.cu)
        target_include_directories(fake_bench PRIVATE "${CUTLASS_DIR}/include")
        """))
    (project / "main.cu").write_text(
        "#include <cutlass/cutlass.h>\n__global__ void k(int* p) { *p = 1; }\nint main() { return 0; }\n")
    build.build(project, target="sm_80", progress=False)
    assert build.bench_path(project).is_file()


# --------------------------------------------------------------------------------------------------
# has_gpu / run


def test_has_gpu_false_without_driver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(build, "GPU_DEVICE_NODE", tmp_path / "nvidia0")
    assert build.has_gpu() is False


def test_has_gpu_reads_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    smi = tmp_path / "nvidia-smi"
    smi.write_text("#!/bin/sh\necho 'GPU 0: NVIDIA H200 (UUID: GPU-1234)'\n")
    smi.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert build.has_gpu() is True


def test_run_without_gpu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n")
    monkeypatch.setattr(build, "has_gpu", lambda: False)
    with pytest.raises(NotRunError) as err:
        build.run(project, [256])
    assert err.value.exit_code == 6 and isinstance(err.value, NoGpuError)
    assert err.value.message == f"{project} is built; running it needs a CUDA GPU, and none was found"
    assert "NVIDIA GPU" in err.value.hint and "exit 6" in err.value.hint
    assert not (project / "build" / "argv.json").exists()  # the bench was not started


def test_run_not_built(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    with pytest.raises(ToolError) as err:
        build.run(project, [256])
    assert "not built" in err.value.message
    assert "cusync-gen build" in err.value.hint


def test_run_parses_json_lines(tmp_path: Path, gpu: None, capsys: pytest.CaptureFixture[str]) -> None:
    project = make_project(tmp_path / "p")
    tile = dict(ROW, policy="tile", overlapped_us=120.0)
    make_bench(project, f"device: fake GPU\n{json.dumps(ROW)}\n  \n{json.dumps(tile)}\n")
    rows = build.run(project, [1, 256], policies=["row", "tile"], repeats=7, warmup=2, extra_args=["--x"])
    assert rows == [ROW, tile]
    argv = (project / "build" / "argv.json").read_text()
    assert argv == repr(["--m", "1,256", "--repeats", "7", "--warmup", "2", "--policies", "row,tile", "--x"])
    err = capsys.readouterr().err
    assert "device: fake GPU" in err and "bench stderr line" in err


def test_run_without_policies_passes_none(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n")
    build.run(project, [64])
    argv = (project / "build" / "argv.json").read_text()
    assert "--policies" not in argv and "'--repeats', '50'" in argv and "'--warmup', '10'" in argv


def test_run_accepts_enum_policies(tmp_path: Path, gpu: None) -> None:
    from cusync_gen.spec import Policy

    project = make_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n")
    build.run(project, [64], policies=[Policy.ROW, Policy.TILE])
    assert "'row,tile'" in (project / "build" / "argv.json").read_text()


def test_parse_bench_line() -> None:
    assert bench_protocol.parse_bench_line("hello") is None
    assert bench_protocol.parse_bench_line('  {"m": 1}') == {"m": 1}
    with pytest.raises(ToolError):
        bench_protocol.parse_bench_line("{broken")


def test_run_malformed_json(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n{oops\n")
    with pytest.raises(ToolError) as err:
        build.run(project, [256])
    assert "malformed JSON" in err.value.message


def test_run_no_rows(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, "nothing useful\n")
    with pytest.raises(ToolError) as err:
        build.run(project, [256])
    assert "no result rows" in err.value.message


def test_run_sync_timeout(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    row = dict(ROW, sync_error="stage gemm2 tile (1, 3) waited 2.0 s on semaphore 1 (value 12 of 48)")
    make_bench(project, json.dumps(row) + "\n", rc=4)
    with pytest.raises(SyncTimeoutError) as err:
        build.run(project, [256])
    assert err.value.exit_code == 4
    assert "tile (1, 3) waited" in err.value.message
    assert err.value.rows == [row]  # type: ignore[attr-defined]


def test_run_check_failed(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    bad = dict(ROW, policy="tile", bitwise_equal=False, ref_rel_err=0.25)
    make_bench(project, json.dumps(ROW) + "\n" + json.dumps(bad) + "\n", rc=5)
    with pytest.raises(CheckFailedError) as err:
        build.run(project, [256])
    assert err.value.exit_code == 5
    assert "m=256 tile" in err.value.message and "2.50e-01" in err.value.message
    assert len(err.value.rows) == 2  # type: ignore[attr-defined]


def test_run_bench_usage_error(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, "", rc=2, stderr="error: --policies takes spec, row and tile\nusage: fake_bench ...\n")
    with pytest.raises(UsageError) as err:
        build.run(project, [256], policies=["strided"])
    assert err.value.exit_code == 2
    assert err.value.message == "fake_bench rejected its arguments: --policies takes spec, row and tile"
    assert "--policies strided" in err.value.hint


def test_run_bench_finds_no_device(tmp_path: Path, gpu: None) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, "", rc=3, stderr="error: no CUDA device found\n")
    with pytest.raises(NoGpuError) as err:
        build.run(project, [256])
    assert err.value.exit_code == 3
    assert err.value.message == "fake_bench: no CUDA device found"


@pytest.mark.parametrize("rc", [1, 6, 134])
def test_run_other_exit_codes_are_tool_errors(tmp_path: Path, gpu: None, rc: int) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n", rc=rc)
    with pytest.raises(ToolError) as err:
        build.run(project, [256])
    assert type(err.value) is ToolError
    assert f"exit {rc}" in err.value.message
    assert "bench stderr line" in err.value.stderr_tail
    assert err.value.command is not None and err.value.command[0].endswith("fake_bench")


@pytest.mark.parametrize("ms", [[], [0], [-4], [1.5]])
def test_run_rejects_bad_m(tmp_path: Path, gpu: None, ms: list) -> None:
    project = make_project(tmp_path / "p")
    make_bench(project, json.dumps(ROW) + "\n")
    with pytest.raises(UsageError):
        build.run(project, ms)


def test_format_table() -> None:
    from rich.console import Console

    rows = [ROW, dict(ROW, policy="tile", bitwise_equal=False, sync_error="stuck", graph_ok=False),
            {"m": 1, "policy": "row"}]
    table = bench_protocol.format_table(rows)
    assert [c.header for c in table.columns] == [
        "M", "policy", "sequential us", "overlapped us", "speedup", "bitwise", "ref err"]
    assert table.row_count == 3
    console = Console(width=120, record=True)
    console.print(table)
    text = console.export_text()
    assert "130.5" in text and "110.2" in text and "1.18x" in text and "1.5e-04" in text
    assert "yes" in text and "NO" in text and "stuck" in text and "graph" in text


def test_format_table_sm90_leads_with_run_against_cublas() -> None:
    """The first screen a Hopper user sees: run()'s time, mode and reason next to the cuBLAS chain, and a
    plain statement where run() does not run the tile-synced kernels."""
    from rich.console import Console

    rows = [{"chain": "c", "floor_tflops": 771.2},
            dict(ROW, m=256, run_us=131.0, mode="cublaslt", mode_reason="default rule: gemm1 has few tiles",
                 cublas_us=140.0, stock_us=150.0),
            dict(ROW, m=1024, run_us=463.0, mode="overlap", mode_reason="dispatch table: M <= 2048",
                 cublas_us=475.0),
            dict(ROW, m=4096, run_us=1800.0, mode="pingpong", mode_reason="table", cublas_us=-1.0),
            dict(ROW, m=16, run_us=40.0, mode="stream", mode_reason="autotune on this GPU: M <= 64", cublas_us=47.0)]
    table = bench_protocol.format_table(rows)
    headers = [c.header for c in table.columns]
    assert headers[:5] == ["M", "run() us", "run() mode", "cuBLAS chain us", "run() vs cuBLAS"]
    assert table.row_count == 4  # the floor record is not a result row
    console = Console(width=220, record=True)
    console.print(table)
    text = console.export_text()
    assert "131.0" in text and "cublaslt" in text and "1.07x" in text and "771 TFLOP/s" in text
    assert "-1.0" not in text  # a baseline the bench could not run
    assert "M = 256: run() took default rule: gemm1 has few tiles" in text
    assert "At M = 256, 4096 run() does not run the tile-synced kernels" in text  # mode stream's kernel waits per tile


# --------------------------------------------------------------------------------------------------
# cutlass_fetch


@pytest.fixture(autouse=True)
def trust_test_wheels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The small wheels below stand in for the real one, whose sha256 check test_write_safety.py tests."""
    monkeypatch.setattr(cutlass_fetch, "check_wheel", lambda wheel: None)


def make_wheel(path: Path, version: str = "4.2.0.0", with_header: bool = True, with_fmha: bool = True) -> Path:
    with zipfile.ZipFile(path, "w") as whl:
        whl.writestr(f"nvidia_cutlass-{version}.dist-info/METADATA", "Name: nvidia-cutlass\n")
        whl.writestr(f"nvidia_cutlass-{version}.dist-info/licenses/LICENSE.txt", "BSD-3-Clause\n")
        if with_header:
            whl.writestr("cutlass_library/source/include/cutlass/cutlass.h", "#pragma once\n")
        whl.writestr("cutlass_library/source/include/cute/tensor.hpp", "#pragma once\n")
        whl.writestr("cutlass_library/source/tools/util/include/cutlass/util/host_tensor.h", "// util\n")
        whl.writestr("cutlass_library/source/examples/00_basic_gemm/basic_gemm.cu", "// not wanted\n")
        if with_fmha:
            whl.writestr("cutlass_library/source/examples/88_hopper_fmha/collective/fmha_fusion.hpp", "#pragma once\n")
        whl.writestr("cutlass_library/__init__.py", "raise ImportError('must not be imported')\n")
    return path


def test_fetch_from_wheel(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "nvidia_cutlass-4.2.0.0-py3-none-any.whl")
    dest = tmp_path / "third_party" / "cutlass"
    assert cutlass_fetch.fetch_cutlass(dest, wheel=wheel) == dest.resolve()
    assert (dest / "include" / "cutlass" / "cutlass.h").is_file()
    assert (dest / "include" / "cute" / "tensor.hpp").is_file()
    assert (dest / "tools" / "util" / "include" / "cutlass" / "util" / "host_tensor.h").is_file()
    assert (dest / "VERSION").read_text().strip() == "nvidia-cutlass==4.2.0.0"
    assert (dest / "LICENSE.txt").is_file()
    assert (dest / "examples" / "88_hopper_fmha" / "collective" / "fmha_fusion.hpp").is_file()
    assert [p.name for p in (dest / "examples").iterdir()] == ["88_hopper_fmha"] and not list(dest.rglob("*.py"))
    assert sorted(p.name for p in dest.parent.iterdir()) == ["cutlass"]  # no staging left behind
    assert cutlass_fetch.is_fetched(dest)
    assert build.find_cutlass(dest) == dest.resolve()


def test_fetch_is_idempotent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dest = tmp_path / "cutlass"
    cutlass_fetch.fetch_cutlass(dest, wheel=make_wheel(tmp_path / "w.whl"))
    marker = dest / "include" / "mine.h"
    marker.write_text("kept")

    def no_download(into: Path) -> Path:
        raise AssertionError("must not download again")

    monkeypatch.setattr(cutlass_fetch, "download_wheel", no_download)
    cutlass_fetch.fetch_cutlass(dest)
    assert marker.read_text() == "kept"
    cutlass_fetch.fetch_cutlass(dest, wheel=tmp_path / "w.whl", force=True)  # replaces the tree
    assert not marker.exists() and cutlass_fetch.is_fetched(dest)


def test_fetch_replaces_an_unversioned_tree_only_with_force(tmp_path: Path) -> None:
    dest = make_cutlass(tmp_path / "cutlass")
    assert not cutlass_fetch.is_fetched(dest)
    with pytest.raises(UsageError, match="not a CUTLASS tree fetched by cusync-gen"):  # not ours: a CUTLASS checkout of the user's
        cutlass_fetch.fetch_cutlass(dest, wheel=make_wheel(tmp_path / "w.whl"))
    cutlass_fetch.fetch_cutlass(dest, wheel=tmp_path / "w.whl", force=True)
    assert cutlass_fetch.is_fetched(dest)


def test_fetch_rejects_other_wheels(tmp_path: Path) -> None:
    dest = tmp_path / "cutlass"
    with pytest.raises(ToolError) as err:
        cutlass_fetch.fetch_cutlass(dest, wheel=make_wheel(tmp_path / "old.whl", version="3.5.0"))
    assert "4.2.0.0" in err.value.message
    with pytest.raises(ToolError):
        cutlass_fetch.fetch_cutlass(dest, wheel=make_wheel(tmp_path / "bad.whl", with_header=False))
    with pytest.raises(ToolError, match="88_hopper_fmha/collective/fmha_fusion.hpp"):
        cutlass_fetch.fetch_cutlass(dest, wheel=make_wheel(tmp_path / "bad.whl", with_fmha=False))
    not_zip = tmp_path / "x.whl"
    not_zip.write_text("no")
    with pytest.raises(ToolError):
        cutlass_fetch.fetch_cutlass(dest, wheel=not_zip)
    with pytest.raises(ToolError) as err:
        cutlass_fetch.fetch_cutlass(dest, wheel=tmp_path / "missing.whl")
    assert "CUTLASS_DIR" in err.value.hint
    assert not dest.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.whl", "old.whl", "x.whl"]


def test_fetch_rejects_path_traversal(tmp_path: Path) -> None:
    wheel = make_wheel(tmp_path / "w.whl")
    with zipfile.ZipFile(wheel, "a") as whl:
        whl.writestr("cutlass_library/source/include/../../evil.h", "x")
    with pytest.raises(ToolError):
        cutlass_fetch.fetch_cutlass(tmp_path / "cutlass", wheel=wheel)
    assert not (tmp_path / "evil.h").exists()


def test_download_failure_is_a_tool_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def failing_pip(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, stdout="",
                                           stderr="ERROR: No matching distribution found for nvidia-cutlass\n")

    monkeypatch.setattr(cutlass_fetch.subprocess, "run", failing_pip)
    with pytest.raises(ToolError) as err:
        cutlass_fetch.fetch_cutlass(tmp_path / "cutlass")
    assert "nvidia-cutlass==4.2.0.0" in err.value.message
    assert err.value.command is not None and "download" in err.value.command
    assert "No matching distribution" in err.value.stderr_tail
    assert "CUTLASS_DIR" in err.value.hint and "--wheel" in err.value.hint


def test_download_uses_pip_download(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[list[str]] = []

    def fake_pip(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        seen.append(command)
        make_wheel(Path(command[command.index("-d") + 1]) / "nvidia_cutlass-4.2.0.0-py3-none-any.whl")
        return subprocess.CompletedProcess(command, 0, stdout="Saved\n", stderr="")

    monkeypatch.setattr(cutlass_fetch.subprocess, "run", fake_pip)
    dest = cutlass_fetch.fetch_cutlass(tmp_path / "cutlass")
    assert seen[0][1:5] == ["-m", "pip", "download", "--no-deps"] and "nvidia-cutlass==4.2.0.0" in seen[0]
    assert cutlass_fetch.is_fetched(dest)


def test_paths_point_into_the_checkout() -> None:
    root = paths.repo_root()
    assert root is not None and (root / "pyproject.toml").is_file()
    assert paths.templates_dir() == root / "templates"
    assert paths.default_cutlass_dir() == root / "third_party" / "cutlass"
    assert {"gpt3_mlp", "llama_mlp", "two_gemm"} <= set(paths.example_names())
    assert paths.example_path("nope") is None and paths.example_path("../pyproject") is None



# A bench that closes stdout, then writes a lot to stderr and its error line last: a reader still
# draining stderr when stdout ends must not lose the end of it.
LATE_STDERR_BENCH = textwrap.dedent(
    """\
    #!{python}
    import os, sys, time
    os.close(1)
    time.sleep(0.3)
    for i in range(5000):
        sys.stderr.write(f"progress line {{i}} {{'.' * 60}}\\n")
    sys.stderr.write("error: --m 3 is not a multiple of the tile\\n")
    sys.exit(2)
    """
)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_run_reads_all_of_stderr_before_closing_it(tmp_path: Path, gpu: None,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    """build.run closed the bench's stderr once stdout ended, while its reader thread was still
    draining it: the bench's `error:` line was lost (and pytest warned about the reader's exception)."""
    project = make_project(tmp_path / "p")
    bench = make_bench(project, "", rc=2)
    bench.write_text(LATE_STDERR_BENCH.format(python=sys.executable))
    with pytest.raises(UsageError) as err:
        build.run(project, [3])
    assert "--m 3 is not a multiple of the tile" in err.value.message
    assert "progress line 4999" in capsys.readouterr().err
