"""Host-side tests of the CuSync runtime headers: policy index math, tile orders, the chain runtime.

The headers are host+device code, so nvcc compiles the checks; they run on the CPU (no GPU needed).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import REPO, embed_header, epoch_wrap_header

pytestmark = pytest.mark.nvcc


def test_policy_math_on_host(tmp_path: Path) -> None:
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    exe = tmp_path / "policy_math"
    build = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "runtime" / "include"),
                            str(REPO / "tests" / "runtime" / "policy_math.cu"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "0 failures" in out.stdout


@pytest.mark.parametrize("driver", ["epoch_wrap", "api_smoke"])
@pytest.mark.parametrize(("name", "arch"), [("two_gemm", "sm_80"), ("two_gemm_sm90", "sm_90a")])
def test_epoch_wrap_driver_compiles(name: str, arch: str, driver: str, tmp_path: Path) -> None:
    """The GPU tests' drivers (tests/runtime/epoch_wrap.cu, api_smoke.cu) compile against a generated chain's
    public, testing and C headers, so the GPU machine never finds them broken."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    build = subprocess.run([nvcc, "-std=c++17", f"-arch={arch}", "-c", "-I", str(REPO / "generated" / name / "include"),
                            "-I", str(epoch_wrap_header(name, tmp_path)),
                            str(REPO / "tests" / "runtime" / f"{driver}.cu"), "-o", str(tmp_path / f"{driver}.o")],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]


def test_default_mode_rule_is_the_same_in_python_and_cpp(tmp_path: Path) -> None:
    """`validate` explains run()'s mode with run_modes.default_mode; the library decides with
    cusync::default_mode (dispatch.h). Both see the same cases and must say the same, reason included."""
    import shutil as _shutil

    from cusync_gen.run_modes import PINGPONG_TILE, PINGPONG_TILES_PER_SM, default_mode

    cxx = _shutil.which("g++") or _shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    # (name, 128x128 tiles): below, at and above the ping-pong threshold, the fewest named
    cases = [([("gemm1", 176), ("gemm2", 256)], 132), ([("a", 384), ("b", 768)], 132), ([("g", 263)], 132),
             ([("g", 264)], 132), ([("up", 800), ("down", 2)], 132), ([("g", 16)], 8), ([("g", 15)], 8), ([], 132)]
    cases = [(g, s, lt) for g, s in cases for lt in (True, False)]
    lines = []
    for gemms, sms, lt in cases:
        pingpong = ", ".join(str(p) for _, p in gemms) or "0"
        names = ", ".join(f'"{n}"' for n, _ in gemms) or "nullptr"
        lines.append(f"  {{ int64_t p[] = {{{pingpong}}}; char const* n[] = {{{names}}}; char r[256];\n"
                     f"    cusync::Mode m = cusync::default_mode(p, n, {len(gemms)}, {sms}, {str(lt).lower()}, r, 256);\n"
                     f'    std::printf("%s|%s\\n", cusync::to_string(m), r); }}')
    source = tmp_path / "rule.cpp"
    lines.insert(0, '  std::printf("%d %d\\n", cusync::kPingpongTile, cusync::kPingpongTilesPerSm);')
    source.write_text('#include "cusync/sm90/dispatch.h"\nint main() {\n' + "\n".join(lines) + "\n}\n")
    exe = tmp_path / "rule"
    build = subprocess.run([cxx, "-std=c++17", "-I", str(REPO / "templates" / "sm90" / "include"), str(source),
                            "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    assert got[0] == f"{PINGPONG_TILE} {PINGPONG_TILES_PER_SM}"  # the rule's numbers, one value in both
    assert got[1:] == [f"{mode.value}|{why}" for mode, why in (default_mode(g, s, lt) for g, s, lt in cases)]


@pytest.mark.parametrize(("name", "arch"), [("two_gemm", "sm_80"), ("llama_mlp_sm90", "sm_90a")])
def test_embed_api_driver_compiles(name: str, arch: str, tmp_path: Path) -> None:
    """tests/runtime/embed_api.cu (the GPU checks of shapes, leading dimensions and caller memory) compiles
    against a generated chain's public and C headers (a two-GEMM sm80 chain, an sm90 chain with a swiglu)."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    build = subprocess.run([nvcc, "-std=c++17", f"-arch={arch}", "-c", "-I", str(REPO / "generated" / name / "include"),
                            "-I", str(embed_header(name, tmp_path)), str(REPO / "tests" / "runtime" / "embed_api.cu"),
                            "-o", str(tmp_path / "embed_api.o")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]


def test_dispatch_entry_finds_the_first_row_that_covers_m(tmp_path: Path) -> None:
    """cusync::dispatch_entry (dispatch.h), the one lookup of run()'s two tables (the spec's `dispatch:`
    and autotune()'s): the first row with M <= m_max, -1 past the last row or in an empty table."""
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    source = tmp_path / "entry.cpp"
    source.write_text("#include <initializer_list>\n" '#include "cusync/sm90/dispatch.h"\nint main() {\n'
                      "  cusync::DispatchEntry t[] = {{724, cusync::Mode::kCublasLt}, {1254, cusync::Mode::kPingpong},"
                      " {8192, cusync::Mode::kStock}};\n"
                      "  for (int m : {1, 724, 725, 1254, 1255, 8192, 8193}) std::printf(\"%d \", cusync::dispatch_entry(t, 3, m));\n"
                      '  std::printf("%d\\n", cusync::dispatch_entry(t, 0, 1));\n}\n')
    exe = tmp_path / "entry"
    build = subprocess.run([cxx, "-std=c++17", "-I", str(REPO / "templates" / "sm90" / "include"), str(source),
                            "-o", str(exe)], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    assert got == ["0", "0", "1", "1", "2", "2", "-1", "-1"]


def test_autotune_table_cuts_like_tune(tmp_path: Path) -> None:
    """autotune() (cusync/sm90/autotune.h, tuned_table) turns the winners at the M it timed into dispatch
    entries by the same rule as `cusync-gen tune` writes a spec's `dispatch:` (tune.dispatch_table): cut at
    the geometric mean of two neighbours, equal neighbours merged, the last entry ending at the largest M."""
    from cusync_gen.tune import dispatch_table

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    modes = ["overlap", "stock", "streamk", "cluster", "pingpong", "cublaslt"]
    cases = [[(256, "cublaslt"), (512, "cublaslt"), (1024, "pingpong"), (1536, "cublaslt"), (8192, "pingpong")],
             [(1, "stock")], [(100, "overlap"), (3000, "overlap")], [(7, "streamk"), (8, "cluster"), (4096, "stock")]]
    body = []
    for case in cases:
        ms = ", ".join(str(m) for m, _ in case)
        ws = ", ".join(f"cusync::Mode({modes.index(w)})" for _, w in case)
        body.append(f"{{ int ms[] = {{{ms}}}; cusync::Mode w[] = {{{ws}}}; cusync::DispatchEntry t[32];\n"
                    f"  int n = cusync::sm90::tuned_table(ms, w, {len(case)}, t);\n"
                    f"  for (int i = 0; i < n; ++i) std::printf(\"%d %s%s\", t[i].m_max, cusync::to_string(t[i].mode),"
                    f" i + 1 == n ? \"\\n\" : \",\");\n}}")
    src = tmp_path / "tuned_table.cpp"
    src.write_text('#include <cstdio>\n#include "cusync/sm90/autotune.h"\nint main() {\n' + "\n".join(body) + "\n}\n")
    exe = tmp_path / "tuned_table"
    build = subprocess.run([nvcc, "-std=c++17", "-I", str(REPO / "templates" / "sm90" / "include"), "-I",
                            str(REPO / "templates" / "runtime" / "include"), str(src), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    lines = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.splitlines()
    for case, line in zip(cases, lines, strict=True):
        table = dispatch_table({m: {"mode": w, "sms": 132, "gpu": "g", "stock_pdl_us": 1.0} for m, w in case})
        assert line == ",".join(f"{e['m_max']} {e['mode']}" for e in table["modes"])


def test_chain_runtime_on_host(tmp_path: Path) -> None:
    """The chain runtime (cusync/chain.cuh, sm80/chain.cuh) on a hand-made table, without a device: the
    argument checks, configuration by M, the emitted wait values in the policies (spec and override),
    the override's checks, moves; and wait_values_consistent refuses a table one post short."""
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    if not Path(nvcc).exists():
        pytest.skip("nvcc not found")
    exe = tmp_path / "chain_host"
    build = subprocess.run([nvcc, "-std=c++17", "--expt-relaxed-constexpr", "-I",
                            str(REPO / "templates" / "runtime" / "include"), "-I", str(REPO / "templates" / "sm80" / "include"),
                            str(REPO / "tests" / "runtime" / "chain_host.cu"), "-o", str(exe)],
                           capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    out = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stdout[-3000:]
    assert "0 failures" in out.stdout


def test_autotune_reasons_name_the_timed_medians() -> None:
    """After autotune(), mode_reason() says what was timed, not only the winner: the sm90 chains list every
    candidate's median at the timed M that the entry stands for (autotune_chain hands them to the chain), and
    the conv chains their three modes' medians at the batch; both time through the runtime's time_modes."""
    sm90 = REPO / "templates" / "sm90" / "include" / "cusync" / "sm90"
    autotune = (sm90 / "autotune.h").read_text()
    chain = (sm90 / "chain.cuh").read_text()
    assert '#include "cusync/time_modes.h"' in autotune and "TunedTimes* times = nullptr" in autotune
    assert "tuned_times_, &tuned_timed_);" in chain and '" (timed at M = %d:"' in chain
    conv = (REPO / "templates" / "conv" / "include" / "cusync" / "conv" / "chain.cuh").read_text()
    assert '#include "cusync/time_modes.h"' in conv and "status = time_modes(run_mode, candidates, n, rounds, stream" in conv
    assert "back to back %.1f us, overlap %.1f us, back to back + PDL %.1f us" in conv


def test_slab_default_rule_is_the_same_in_python_and_cpp(tmp_path: Path) -> None:
    """run()'s first default (mode stream's slab kernel, cusync::slab_default) and its Python mirror
    (run_modes.slab_default): the same mode and reason at and past the limit, with and without column-major
    first weights."""
    import shutil as _shutil

    from cusync_gen.run_modes import slab_default
    from cusync_gen.spec.model import SLAB_DEFAULT_MAX_M, SLAB_GATHER_DEFAULT_MAX_M

    cxx = _shutil.which("g++") or _shutil.which("c++")
    if cxx is None:
        pytest.skip("no C++ compiler")
    ms = (1, SLAB_DEFAULT_MAX_M, SLAB_DEFAULT_MAX_M + 1, SLAB_GATHER_DEFAULT_MAX_M, SLAB_GATHER_DEFAULT_MAX_M + 1, 64)
    cases = [(m, col, col2) for m in ms for col in (True, False) for col2 in (True, False)]
    lines = [f'  {{ char r[256] = ""; cusync::Mode m = cusync::slab_default({m}, {str(col).lower()}, '
             f'{str(col2).lower()}, r, 256);\n'
             f'    std::printf("%s|%s\\n", cusync::to_string(m), r); }}' for m, col, col2 in cases]
    lines.insert(0, '  std::printf("%d %d\\n", cusync::kSlabDefaultMaxM, cusync::kSlabGatherDefaultMaxM);')
    source = tmp_path / "slab.cpp"
    source.write_text('#include "cusync/sm90/dispatch.h"\nint main() {\n' + "\n".join(lines) + "\n}\n")
    build = subprocess.run([cxx, "-std=c++17", "-I", str(REPO / "templates" / "sm90" / "include"), str(source),
                            "-o", str(tmp_path / "slab")], capture_output=True, text=True)
    assert build.returncode == 0, build.stderr[-3000:]
    got = subprocess.run([str(tmp_path / "slab")], capture_output=True, text=True, check=True).stdout.splitlines()
    assert got[0] == f"{SLAB_DEFAULT_MAX_M} {SLAB_GATHER_DEFAULT_MAX_M}"
    want = [(lambda r: f"{r[0].value}|{r[1]}" if r else "auto|")(slab_default(m, col, col2)) for m, col, col2 in cases]
    assert got[1:] == want
