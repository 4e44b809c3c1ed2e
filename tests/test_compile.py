"""nvcc compile tests: every shipped example builds (library + bench), with -Werror=all-warnings.

No GPU needed, so these run in CI. sm80 examples build for sm_80 and sm_90 (about half a minute each on
2 cores); sm90 examples build for sm_90a (CUTLASS 3.x units take one to two minutes each there).
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from conftest import EXAMPLES_SM80, EXAMPLES_SM90, REPO
from sass import find_tool

pytestmark = pytest.mark.nvcc


def _tool(name: str) -> str:
    path = find_tool(name)
    if path is None:
        pytest.skip(f"{name} not found")
    return path


CONFIGS = ([(name, arch) for name in EXAMPLES_SM80 for arch in ("80", "90")] + [(name, "90a") for name in EXAMPLES_SM90]
           + [("gpt3_attention", "90")])  # llama_attention is the same code with other constants


@pytest.mark.parametrize(("name", "arch"), CONFIGS)
def test_example_compiles(name: str, arch: str, tmp_path: Path, cutlass_dir: Path) -> None:
    cmake = _tool("cmake")
    nvcc = _tool("nvcc")
    build = tmp_path / "build"
    configure = [cmake, "-S", str(REPO / "generated" / name), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                 f"-DCMAKE_CUDA_ARCHITECTURES={arch}", f"-DCMAKE_CUDA_COMPILER={nvcc}",
                 f"-D{name.upper()}_WERROR=ON"]
    if shutil.which("ninja"):
        configure += ["-G", "Ninja"]
    out = subprocess.run(configure, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = subprocess.run([cmake, "--build", str(build), "-j", str(os.cpu_count() or 2)], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    assert (build / f"{name}_bench").is_file()
    if arch == "90a":
        _assert_uniform_wgmma(sorted((build / "CMakeFiles" / f"{name}.dir" / "src").glob("stage_*.cu.o")))


def _assert_uniform_wgmma(objects: list[Path]) -> None:
    """Every kernel's wgmma loop in these sm90 units (ours synced, CUTLASS's stock) keeps its descriptors in
    uniform registers: no R2UR before the HGMMAs, as in CUTLASS's own kernels (benchmarks/NOTES.md h17).
    Results stay bitwise equal either way, so only the machine code shows a regression."""
    from sass import find_cuobjdump, sass_of, wgmma_loops

    cuobjdump = find_cuobjdump()
    if cuobjdump is None:
        pytest.skip("cuobjdump or nvdisasm not found (pip install nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm: test extras)")
    assert objects
    checked = 0
    for obj in objects:
        for loop in wgmma_loops(sass_of(cuobjdump, obj)):
            checked += 1
            assert loop.r2ur == 0, (f"{obj.name}: the wgmma loop of {loop.kernel[:160]}... moves its descriptors to "
                                    f"uniform registers {loop.r2ur} times ({loop.instructions} instructions for "
                                    f"{loop.hgmma} HGMMAs): a lane-dependent branch reaches the tile loop (NOTES h17)")
    assert checked > 0, "no wgmma loop found in the sm90 units"


@pytest.mark.parametrize(("name", "arch", "stage"), [("two_gemm", "80", "gemm2"), ("two_gemm_sm90", "90a", "gemm2")])
def test_a_bias_stage_compiles(name: str, arch: str, stage: str, tmp_path: Path, cutlass_dir: Path) -> None:
    """`bias: true` (issue 12 item 5): one synced stage unit of the example with a bias on every GEMM builds
    with -Werror (sm80: CUTLASS's C operand at row stride 0; sm90: LinCombPerColBiasEltAct), and the library
    unit that carries the bias pointer. One unit each, to keep the suite's compile time down; the sm90 stock
    unit (CUTLASS's own kernels and cuBLASLt with the bias) is built by the GPU test."""
    from conftest import bias_spec
    from cusync_gen.render import generate

    cmake = _tool("cmake")
    nvcc = _tool("nvcc")
    project = generate(bias_spec(name, tmp_path / "spec"), tmp_path / f"{name}_bias")
    build = tmp_path / "build"
    configure = [cmake, "-S", str(project), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                 f"-DCMAKE_CUDA_ARCHITECTURES={arch}", f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-D{name.upper()}_BIAS_WERROR=ON",
                 "-G", "Ninja"]
    if not shutil.which("ninja"):
        pytest.skip("ninja not found (the test builds single object files)")
    out = subprocess.run(configure, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    objects = [f"CMakeFiles/{name}_bias.dir/src/stage_{stage}.cu.o", f"CMakeFiles/{name}_bias.dir/src/{name}_bias.cu.o"]
    out = subprocess.run(["ninja", "-C", str(build), "-j", "1", *objects], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]


# uniform: the unit's wgmma loops keep uniform descriptors (_assert_uniform_wgmma). Not yet on the gated
# epilogue under the synced ping-pong kernel (89 instructions, 32 R2UR per 8 HGMMAs, where CUTLASS's gated
# ping-pong kernel has 57 and none: NOTES h17); no shipped example uses that combination.
@pytest.mark.parametrize(("name", "stage", "uniform"), [("two_gemm_sm90", "gemm2", True), ("llama_mlp_fused_sm90", "gemm1", False)])
def test_a_pingpong_stage_compiles(name: str, stage: str, uniform: bool, tmp_path: Path, cutlass_dir: Path) -> None:
    """`schedule: pingpong` (issue 10 part 2): one synced stage unit on the ping-pong kernel builds with
    -Werror, on the TMA-store epilogue (two_gemm_sm90) and the gated one (llama_mlp_fused_sm90). One unit
    each (a CUTLASS 3.x unit takes one to two minutes on 2 cores); the GPU test builds and runs the rest."""
    from conftest import pingpong_spec
    from cusync_gen.render import generate

    cmake = _tool("cmake")
    nvcc = _tool("nvcc")
    if not shutil.which("ninja"):
        pytest.skip("ninja not found (the test builds single object files)")
    project = generate(pingpong_spec(name, tmp_path / "spec"), tmp_path / f"{name}_pp")
    assert "SyncedPingpongConfig<" in (project / "src" / f"stage_{stage}.cu").read_text()
    build = tmp_path / "build"
    configure = [cmake, "-S", str(project), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                 "-DCMAKE_CUDA_ARCHITECTURES=90a", f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-D{name.upper()}_PP_WERROR=ON",
                 "-G", "Ninja"]
    out = subprocess.run(configure, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    obj = f"CMakeFiles/{name}_pp.dir/src/stage_{stage}.cu.o"
    out = subprocess.run(["ninja", "-C", str(build), "-j", "1", obj], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-6000:] + out.stderr[-3000:]
    if uniform:
        _assert_uniform_wgmma([build / obj])



def _accepted(stages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The one-stage sm80 specs of `stages` that the spec rules accept."""
    from cusync_gen.errors import SpecError
    from cusync_gen.spec import parse_spec

    kept = []
    for stage in stages:
        try:
            parse_spec({"name": "t", "arch": "sm80", "stages": [stage]})
        except SpecError:
            continue
        kept.append(stage)
    return kept


def _instantiate_each(tmp_path: Path, cutlass_dir: Path, header: str, kernel: str, args: list[str]) -> None:
    """One unit that instantiates `kernel` (a type of the template parameters TM TN TK WM WN, and LayoutB where
    `args` give it) for each of `args`: its mainloop, epilogue and shared storage, where CUTLASS's static
    assertions on thread maps, warp iterators and shared-memory layouts fire."""
    params = "typename LayoutB, " if args[0].startswith("cutlass::layout") else ""
    calls = "".join(f"  s += probe<{a}>();\n" for a in args)
    unit = tmp_path / "tiles.cu"
    unit.write_text(f"""#include "{header}"
template <{params}int TM, int TN, int TK, int WM, int WN>
int probe() {{
  using K = typename {kernel}::Kernel;
  return int(sizeof(typename K::Mma)) + int(sizeof(typename K::Epilogue)) + int(sizeof(typename K::SharedStorage));
}}
int every_tile() {{
  int s = 0;
{calls}  return s;
}}
""")
    templates = REPO / "templates"
    cmd = [_tool("nvcc"), "-std=c++17", "-arch=sm_80", "--expt-relaxed-constexpr", "-DNDEBUG",
           *[arg for d in ("conv", "sm80", "runtime") for arg in ("-I", str(templates / d / "include"))],
           "-I", str(cutlass_dir / "include"), "-c", str(unit), "-o", str(tmp_path / "tiles.o")]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]


_GRID = list(itertools.product((16, 32, 64, 128, 256), (32, 64, 128, 256), (32, 64), (16, 32, 64), (32, 64)))


def test_every_sm80_gemm_tile_the_rules_accept_instantiates(tmp_path: Path, cutlass_dir: Path) -> None:
    """The sm80 tile rules (spec/rules.py `_check_sm80_gemm_shape`) against CUTLASS itself: the backend's GEMM
    (cusync::sm80::SyncedGemm, as every sm80 stage unit declares it) for every tile of a grid wide enough to
    reach each rule's edge that the rules accept, both B layouts. A tile they let through that CUTLASS cannot
    build fails here, not in a user's build (fuzzing found several: K-blocks of 16, warps 8 or 16 wide)."""
    stages = [{"name": "g", "op": "gemm", "a": "input", "n": 512, "k": 512, "b_layout": layout,
               "tile": {"threadblock": [tm, tn, tk], "warp": [wm, wn, tk]}}
              for tm, tn, tk, wm, wn in _GRID for layout in ("row", "col")]
    layouts = {"row": "cutlass::layout::RowMajor", "col": "cutlass::layout::ColumnMajor"}
    args = [", ".join([layouts[s["b_layout"]], *map(str, s["tile"]["threadblock"] + s["tile"]["warp"][:2])])
            for s in _accepted(stages)]
    assert len(args) > 150, len(args)  # the grid reaches past every edge; the rules keep most of it
    _instantiate_each(tmp_path, cutlass_dir, "cusync/sm80/gemm.cuh", "cusync::sm80::SyncedGemm<cutlass::half_t, "
                      "LayoutB, cutlass::gemm::GemmShape<TM, TN, TK>, cutlass::gemm::GemmShape<WM, WN, TK>, "
                      "cutlass::gemm::GemmShape<16, 8, 16>, cutlass::epilogue::thread::LinearCombination<cutlass::half_t, "
                      "8, float, float>, 3>", args)


def test_every_sm80_conv_tile_the_rules_accept_instantiates(tmp_path: Path, cutlass_dir: Path) -> None:
    """The same for the sm80 conv stages (cusync::conv::SyncedConv: CUTLASS's implicit-GEMM fprop with the
    residual epilogue)."""
    stages = [{"name": "c1", "op": "conv", "a": "input", "n": 1, "h": 16, "w": 16, "c": 64, "k": 256, "r": 3, "s": 3,
               "padding": 1, "tile": {"threadblock": [tm, tn, tk], "warp": [wm, wn, tk], "stages": 3}}
              for tm, tn, tk, wm, wn in _GRID]
    args = [", ".join(map(str, s["tile"]["threadblock"] + s["tile"]["warp"][:2])) for s in _accepted(stages)]
    assert len(args) > 60, len(args)
    _instantiate_each(tmp_path, cutlass_dir, "cusync/conv/conv.cuh", "cusync::conv::SyncedConv<cutlass::half_t, "
                      "cutlass::gemm::GemmShape<TM, TN, TK>, cutlass::gemm::GemmShape<WM, WN, TK>, "
                      "cutlass::gemm::GemmShape<16, 8, 16>, 3, cutlass::epilogue::thread::ReLu, true>", args)


def test_the_stream_mode_units_compile(tmp_path: Path, cutlass_dir: Path) -> None:
    """A project with optimizations.stream_weights (tests/data/decode_stream_sm90.yaml) configures, and the units
    mode stream touches compile with -Werror=all-warnings: its kernels' own units (bulk, slab), the chain, the C
    ABI and the bench (the CUTLASS stage units are the other sm90 tests')."""
    from cusync_gen.cli import main

    cmake, nvcc = _tool("cmake"), _tool("nvcc")
    name = "decode_stream_sm90"
    project, build = tmp_path / name, tmp_path / "build"
    with pytest.raises(SystemExit) as done:
        main(["generate", str(REPO / "tests" / "data" / f"{name}.yaml"), "-o", str(project)])
    assert done.value.code == 0
    configure = [cmake, "-S", str(project), "-B", str(build), "-G", "Unix Makefiles", f"-DCUTLASS_DIR={cutlass_dir}",
                 "-DCMAKE_CUDA_ARCHITECTURES=90a", f"-DCMAKE_CUDA_COMPILER={nvcc}", f"-D{name.upper()}_WERROR=ON"]
    out = subprocess.run(configure, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    for unit in (f"src/{name}_stream.cu.o", f"src/{name}_slab.cu.o", f"src/{name}.cu.o", f"src/{name}_c.cpp.o",
                 f"bench/{name}_bench.cu.o"):
        out = subprocess.run(["make", "-C", str(build), unit], capture_output=True, text=True)
        assert out.returncode == 0, unit + "\n" + out.stdout[-4000:] + out.stderr[-4000:]


def test_the_decode_probe_v5_kernels_compile(tmp_path: Path) -> None:
    """Run() mode stream's chain kernel (templates/sm90/include/cusync/sm90/bulk_chain.cuh, NOTES d11: one
    persistent kernel over both GEMMs, a ring of 1D bulk copies) for each type, M_pad and launch kind, with
    either consumer kind, compiled for sm_90a with ptxas's report: it builds without the probe's cuBLAS, no
    instantiation spills, and ptxas serializes no wgmma."""
    calls = "".join(f"  e = e == cudaSuccess ? cusync::stream::bulk::bulk_prepare<{t}, {m}, {p}>() : e;\n"
                    for t in ("__half", "__nv_bfloat16") for m in (8, 16, 32, 64) for p in ("false", "true"))
    unit = tmp_path / "bulk.cu"
    unit.write_text(f'#include "cusync/sm90/bulk_chain.cuh"\ncudaError_t prepare_all() {{\n  cudaError_t e = cudaSuccess;\n{calls}  return e;\n}}\n')
    templates = REPO / "templates"
    # The default consumers (wgmma) and the mma.sync ones that -DCUSYNC_BULK_GMMA=0 selects.
    for macros in ([], ["-DCUSYNC_BULK_GMMA=0"]):
        cmd = [_tool("nvcc"), "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "-Xptxas", "-v", *macros,
               "-I", str(templates / "runtime" / "include"),
               "-I", str(templates / "sm90" / "include"), "-c", str(unit), "-o", str(tmp_path / "bulk.o")]
        out = subprocess.run(cmd, capture_output=True, text=True)
        assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
        report = out.stderr.splitlines()
        kernels = [i for i, line in enumerate(report) if "Compiling entry function" in line and "bulk_chain_kernel" in line]
        assert len(kernels) == 16, out.stderr[-4000:]
        spills = [line for line in report if "spill" in line and not line.strip().startswith("0 bytes stack frame, 0 bytes spill")]
        assert not spills, "\n".join(spills)
        # ptxas serializes wgmma it cannot prove warpgroup-uniform (C7520): the consumers' MMAs would then
        # wait for each other.
        serialized = [line for line in report if "wgmma.mma_async instructions are serialized" in line]
        assert not serialized, "\n".join(serialized)


def test_the_attention_decode_kernels_compile(tmp_path: Path, cutlass_dir: Path) -> None:
    """The sm90 attention layer's tensor-core decode and rope_append, for both types and head widths from 48 to
    128 (the GQA group 1 to 16), compiled for sm_90a with ptxas's report: no instantiation spills. (The layer's
    bench, with the FMHA, takes too long for CI; its small kernels' unit is this one.)"""
    configs = [("cutlass::bfloat16_t", 128, 8, 256), ("cutlass::half_t", 128, 1, 256), ("cutlass::half_t", 80, 16, 256),
               ("cutlass::bfloat16_t", 48, 4, 128)]
    kernels = [f"(void const*)cusync::attention_sm90::decode_split_mma<{t}, {d}, {g}, {s}>" for t, d, g, s in configs]
    kernels += [f"(void const*)cusync::attention_sm90::rope_append<{t}, {d}>" for t, d, _, _ in configs]
    unit = tmp_path / "decode.cu"
    unit.write_text('#include "cusync/attention_sm90/kernels.cuh"\nvoid const* kernels[] = {\n  '
                    + ",\n  ".join(kernels) + "};\n")
    templates = REPO / "templates"
    cmd = [_tool("nvcc"), "-std=c++17", "-O3", "-gencode=arch=compute_90a,code=sm_90a", "--expt-relaxed-constexpr",
           "-Werror", "all-warnings", "-Xptxas", "-v",
           "-I", str(templates / "attention_sm90" / "include"), "-I", str(templates / "runtime" / "include"),
           "-I", str(cutlass_dir / "include"), "-I", str(cutlass_dir / "tools" / "util" / "include"),
           "-I", str(cutlass_dir / "examples" / "88_hopper_fmha"), "-c", str(unit), "-o", str(tmp_path / "decode.o")]
    out = subprocess.run(cmd, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    report = out.stderr.splitlines()
    entries = [line for line in report if "Compiling entry function" in line]
    assert len(entries) == len(kernels), out.stderr[-4000:]
    # sincosf's slow path (arguments past ~1e5) keeps a 32-byte local array in rope_append: a stack frame, not a spill.
    spills = [line for line in report if "spill" in line and "0 bytes spill stores, 0 bytes spill loads" not in line]
    assert not spills, "\n".join(spills)
