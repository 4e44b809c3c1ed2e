"""`generate --torch`: the PyTorch op, its CMake project and its Python module (docs/torch.md).

CPU tests of what is emitted; a compile test of the op against torch's headers (tier `nvcc`: it needs
the CUDA toolkit's headers; skipped where torch is not importable, or point CUSYNC_TORCH_INCLUDE at a
torch/include folder); and, where torch is importable, the Python module run against a CPU stand-in of
the op, which checks how Hugging Face-style weights are taken. The GPU test is tests/test_torch_gpu.py.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from conftest import REPO
from cusync_gen.errors import SpecError, UsageError
from cusync_gen.plan import make_plan
from cusync_gen.render import render_project
from cusync_gen.spec import load_spec, parse_spec
from cusync_gen.spec.model import BLayout, Op
from cusync_gen.torch_plan import make_torch_plan, torch_files

EXAMPLES = REPO / "cusync_gen" / "examples"
TORCH_EXAMPLE = REPO / "examples" / "torch"


def _plan(name: str):
    path = EXAMPLES / f"{name}.yaml"
    return make_plan(load_spec(path if path.exists() else TORCH_EXAMPLE / f"{name}.yaml"))


def _render(plan, torch: bool = True) -> dict[str, str]:
    return render_project(plan, torch=torch)


# --------------------------------------------------------------------------------------------------
# What --torch emits

@pytest.mark.parametrize("name", ["two_gemm", "llama_mlp_sm90", "llama_mlp_split"])
def test_torch_adds_only_its_folder_and_manifest_entries(name: str) -> None:
    plan = _plan(name)
    plain, with_torch = _render(plan, torch=False), _render(plan)
    added = sorted(set(with_torch) - set(plain))
    stock = [f"torch/gdc/stage_{st.name}_stock.cu" for st in plan.stages if name.endswith("sm90") and st.op is Op.GEMM]
    assert added == sorted([f"torch/{name}_op.cpp", f"torch/{name}_torch.py", "torch/CMakeLists.txt",
                            "torch/README.md", "torch/setup.py", *stock])
    assert added == sorted(path for path, _ in torch_files(make_torch_plan(plan)))
    assert {p: t for p, t in with_torch.items() if p in plain and p != "manifest.json"} == \
        {p: t for p, t in plain.items() if p != "manifest.json"}
    manifest = json.loads(with_torch["manifest.json"])
    assert set(added) <= set(manifest["files"]) and set(added) <= set(manifest["sha256"])
    assert render_project(plan) == plain  # the default is off: golden projects stay as they are


def test_op_signature_checks_and_capture_rules() -> None:
    op = _render(_plan("llama_mlp_sm90"))["torch/llama_mlp_sm90_op.cpp"]
    assert ('m.def("llama_mlp_sm90(Tensor x, Tensor gemm1_weight, Tensor gemm2_weight, str mode=\\"auto\\") '
            '-> Tensor");') in op
    assert "TORCH_LIBRARY_FRAGMENT(cusync, m)" in op and "TORCH_LIBRARY_IMPL(cusync, CUDA, m)" in op
    assert "TORCH_LIBRARY_IMPL(cusync, Meta, m)" in op and "TORCH_LIBRARY_IMPL(cusync, CPU, m)" in op
    # x: any M, its width; weights: their layout's shape on x's device
    assert 'check_operand(x, "x", -1, kInputWidth, nullptr, "");' in op and "kInputWidth = 8192;" in op
    assert 'check_operand(gemm1_weight, "gemm1_weight", 8192, 5632, &device, " (row layout: [k, n])");' in op
    assert 'check_operand(gemm2_weight, "gemm2_weight", 2816, 8192, &device, " (row layout: [k, n])");' in op
    assert "constexpr at::ScalarType kDtype = at::kBFloat16;" in op
    # the current stream, torch's allocator, the cache and the capture check
    assert "c10::cuda::getCurrentCUDAStream(device.index())" in op
    for out, n in (("gemm1_out", 5632), ("glu_out", 2816), ("gemm2_out", 8192)):
        assert f"at::Tensor {out} = at::empty({{m, {n}}}, x.options());" in op
    assert "cudaStreamIsCapturing" in op and "before capturing (torch's usual warm-up)" in op
    assert "cudaMalloc(" not in op and "Synchronize(" not in op.split("std::string sync_error")[0]
    # every sm90 mode by name; sm80 chains take auto / overlap / sequential
    assert "chain.run_mode(stream, cusync::Mode::kCublasLt)" in op
    sm80 = _render(_plan("gpt3_mlp"))["torch/gpt3_mlp_op.cpp"]
    assert "chain.set_sequential_fallback(false); status = chain.run(stream);" in sm80
    assert "cusync::Mode" not in sm80


def test_col_layout_weights_are_n_by_k() -> None:
    op = _render(_plan("gpt2_mlp_sm90"))["torch/gpt2_mlp_sm90_op.cpp"]
    assert 'check_operand(fc1_weight, "fc1_weight", 3072, 768, &device, " (col layout: [n, k], as nn.Linear.weight)");' in op


def test_cmake_adds_the_chain_before_torch_and_links_its_target() -> None:
    cmake = _render(_plan("two_gemm"))["torch/CMakeLists.txt"]
    assert cmake.index('add_subdirectory("${CMAKE_CURRENT_SOURCE_DIR}/.."') < cmake.index("find_package(Torch CONFIG)")
    assert "set(CMAKE_POSITION_INDEPENDENT_CODE ON)" in cmake
    assert "torch.utils.cmake_prefix_path" in cmake
    assert "add_library(two_gemm_torch MODULE two_gemm_op.cpp)" in cmake
    assert "target_link_libraries(two_gemm_torch PRIVATE two_gemm::two_gemm ${TORCH_LIBRARIES})" in cmake
    assert "set(CMAKE_CUDA_ARCHITECTURES 80)" in cmake


def test_cmake_links_the_shared_cxx_runtime_where_the_compiler_has_only_the_static_one() -> None:
    """On the H200 machine the GCC under /opt/gcc carries only libstdc++.a: the op then held a second C++
    runtime beside torch's and segfaulted in std::ostream on its first call (every chain). Where
    -print-file-name finds no shared libstdc++, the module links the one torch's process has loaded,
    before the driver's -lstdc++ (verified there: all checks of three chains pass; simulated here by
    tests of the CMake text and, on the GPU machine, tests/test_torch_gpu.py)."""
    cmake = _render(_plan("two_gemm"))["torch/CMakeLists.txt"]
    assert "-print-file-name=libstdc++.so" in cmake and "/proc/self/maps" in cmake
    assert ('target_link_options(two_gemm_torch PRIVATE "LINKER:--no-as-needed" "${CUSYNC_LIBSTDCXX}" '
            '"LINKER:--as-needed")') in cmake
    assert "-DCUSYNC_LIBSTDCXX=<path to libstdc++.so.6>" in cmake  # the error says how to get out


def test_mlp_patterns_and_weight_roles() -> None:
    mlp = make_torch_plan(_plan("gpt3_mlp"))
    assert mlp.mlp == "mlp" and mlp.activation == "gelu" and [w.roles for w in mlp.weights] == [("fc1",), ("fc2",)]
    gated = make_torch_plan(_plan("llama_mlp_sm90"))
    assert gated.mlp == "gated" and [w.roles for w in gated.weights] == [("gate", "up"), ("down",)]
    assert gated.returned.stage == "gemm2" and gated.returned.n == 8192
    split = make_torch_plan(_plan("llama_mlp_split"))
    assert split.mlp == "gated_split" and [w.roles for w in split.weights] == [("gate",), ("up",), ("down",)]
    assert split.modes == ("auto", "overlap", "sequential")
    three = make_plan(parse_spec({"name": "three", "stages": [
        {"name": f"g{i}", "op": "gemm", "a": "input" if i == 0 else f"g{i - 1}", "n": 256, "k": 256,
         **({"sync": "row"} if i else {}), "tile": {"threadblock": [128, 128, 32]}} for i in range(3)]}))
    assert make_torch_plan(three).mlp is None


def test_torch_on_an_attention_spec_is_a_usage_error(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "generate", "gpt3_attention", "-o",
                          str(tmp_path / "att"), "--torch"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 2, out.stderr
    assert "error: --torch: `gpt3_attention` is an attention chain" in out.stderr and "`attention:`" in out.stderr
    assert "hint: generate it without --torch" in out.stderr and "Traceback" not in out.stderr
    assert not (tmp_path / "att").exists()
    with pytest.raises(UsageError, match="attention chain"):
        from cusync_gen.render import plan_of_spec
        render_project(plan_of_spec(load_spec(EXAMPLES / "gpt3_attention.yaml")), torch=True)


@pytest.mark.parametrize("name", ["lambda", "load", "path"])
def test_chain_names_the_python_module_cannot_take_are_refused(name: str) -> None:
    """Refused by the spec itself (cusync_gen/spec/names.py), so a valid spec always generates with --torch."""
    with pytest.raises(SpecError, match="Python") as err:
        parse_spec({"name": name, "stages": [
            {"name": "g1", "op": "gemm", "a": "input", "n": 256, "k": 256, "tile": TILE},
            {"name": "g2", "op": "gemm", "a": "g1", "sync": "row", "n": 256, "k": 256, "tile": TILE}]})
    assert err.value.field == "name" and "rename it" in err.value.hint


def test_cli_generate_torch_writes_the_folder(tmp_path: Path) -> None:
    out = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "generate", "two_gemm", "-o", str(tmp_path / "p"),
                          "--torch"], capture_output=True, text=True, cwd=REPO)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "p" / "torch" / "two_gemm_op.cpp").is_file()
    check = subprocess.run([sys.executable, "-m", "cusync_gen.cli", "generate", "two_gemm", "-o", str(tmp_path / "p"),
                            "--torch", "--check"], capture_output=True, text=True, cwd=REPO)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.parametrize("name", ["two_gemm", "gpt2_mlp_sm90", "llama_mlp_split"])
def test_python_module_is_valid_python(name: str) -> None:
    text = _render(_plan(name))[f"torch/{name}_torch.py"]
    compile(text, f"{name}_torch.py", "exec")


# --------------------------------------------------------------------------------------------------
# The op's C++ against torch's headers

def _torch_includes() -> list[str] | None:
    env = os.environ.get("CUSYNC_TORCH_INCLUDE")
    if env:
        return [env, str(Path(env) / "torch" / "csrc" / "api" / "include")]
    try:
        from torch.utils.cpp_extension import include_paths
    except ImportError:
        return None
    return include_paths()


def _cuda_include() -> str | None:
    nvcc = shutil.which("nvcc")
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"),
             Path(nvcc).resolve().parent.parent if nvcc else None, "/usr/local/cuda"]
    found = [Path(r) / "include" for r in roots if r and (Path(r) / "include" / "cuda_runtime.h").exists()]
    return str(found[0]) if found else None


@pytest.mark.nvcc
@pytest.mark.parametrize("name", ["llama_mlp_sm90", "gpt3_mlp", "llama_mlp_split"])
def test_op_compiles_against_torch_headers(name: str, tmp_path: Path) -> None:
    includes, cuda = _torch_includes(), _cuda_include()
    if includes is None:
        pytest.skip("torch is not importable (and CUSYNC_TORCH_INCLUDE is not set)")
    if not (Path(includes[0]) / "c10" / "cuda" / "impl" / "cuda_cmake_macros.h").exists():
        pytest.skip(f"the torch headers in {includes[0]} have no CUDA configuration (a CPU build of torch)")
    if cuda is None or shutil.which("g++") is None:
        pytest.skip("no CUDA toolkit headers or no g++")
    files = _render(_plan(name))
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    command = ["g++", "-std=c++20", "-fPIC", "-D_GLIBCXX_USE_CXX11_ABI=1", "-Wall", "-Wextra", "-Werror",
               *(f"-isystem{p}" for p in [*includes, cuda]), f"-I{tmp_path / 'include'}",
               "-c", str(tmp_path / "torch" / f"{name}_op.cpp"), "-o", str(tmp_path / "op.o")]
    out = subprocess.run(command, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr[-4000:]


# --------------------------------------------------------------------------------------------------
# The Python module, against a CPU stand-in of the op (needs torch)

SMALL = {  # small chains of each MLP pattern and layout (sm80 rules: tiles of 128)
    "tiny_gelu_col": ("mlp", "col", "gelu"),
    "tiny_relu_row": ("mlp", "row", "relu"),
    "tiny_gated_row": ("gated", "row", None),
    "tiny_gated_col": ("gated", "col", None),
    "tiny_split": ("gated_split", "row", None),
    "tiny_gpt2_row": ("mlp", "row", "gelu_new"),      # GPT-2 as it is: Conv1D [in, out], bias, tanh GELU
    "tiny_gpt2_col": ("mlp", "col", "gelu_tanh"),
}
BIASED = {"tiny_gpt2_row", "tiny_gpt2_col"}
HIDDEN, INTERMEDIATE = 256, 384
TILE = {"threadblock": [128, 128, 32]}


def _small_spec(name: str) -> dict:
    kind, layout, act = SMALL[name]
    def gemm(stage: str, a: str, n: int, k: int, sync: str | None, epilogue: str = "identity") -> dict:
        return {"name": stage, "op": "gemm", "a": a, "n": n, "k": k, "b_layout": layout, "epilogue": epilogue,
                "tile": TILE, **({"sync": sync} if sync else {}), **({"bias": True} if name in BIASED else {})}
    if kind == "mlp":
        stages = [gemm("fc1", "input", INTERMEDIATE, HIDDEN, None, act), gemm("fc2", "fc1", HIDDEN, INTERMEDIATE, "row")]
    elif kind == "gated":
        stages = [gemm("gemm1", "input", 2 * INTERMEDIATE, HIDDEN, None),
                  {"name": "glu", "op": "swiglu", "a": "gemm1", "sync": "strided", "n": INTERMEDIATE,
                   "tile": {"threadblock": [128, 128]}},
                  gemm("gemm2", "glu", HIDDEN, INTERMEDIATE, "row")]
    else:
        stages = [gemm("gate", "input", INTERMEDIATE, HIDDEN, None), gemm("up", "input", INTERMEDIATE, HIDDEN, None),
                  {"name": "glu", "op": "swiglu", "a": "gate", "b": "up", "sync": "tile", "sync_b": "tile",
                   "n": INTERMEDIATE, "tile": {"threadblock": [128, 128]}},
                  gemm("down", "glu", HIDDEN, INTERMEDIATE, "row")]
    return {"name": name, "dtype": "fp16", "stages": stages}


@pytest.fixture(scope="module")
def torch_module():
    return pytest.importorskip("torch")


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_LIBRARIES: dict[str, object] = {}  # keeps the stand-in ops registered, by chain


def _chain_module(name: str, tmp_path: Path, torch) -> tuple[ModuleType, object]:
    """The generated module of a small chain, with a CPU stand-in registered as its op."""
    import torch.nn.functional as F

    plan = make_plan(parse_spec(_small_spec(name)))
    tplan = make_torch_plan(plan)
    path = tmp_path / f"{name}_torch.py"
    path.write_text(_render(plan)[f"torch/{name}_torch.py"])

    def stand_in(x, *args):
        weights = [a for a in args if isinstance(a, torch.Tensor)]  # the mode may come or not (its default)
        outs, it = {}, iter(weights)
        for st in plan.stages:
            a = x if st.input is None else outs[plan.stages[st.input.producer].name]
            if st.op is Op.GEMM:
                w = next(it).float()
                h = a.float() @ (w if st.b_layout is BLayout.ROW else w.t())
                h = h + next(it).float() if st.bias else h
                h = {"identity": h, "relu": torch.relu(h), "gelu": F.gelu(h), "silu": F.silu(h),
                     "gelu_tanh": F.gelu(h, approximate="tanh")}[st.epilogue.value]
            elif st.input_b is None:
                h = F.silu(a[:, :st.n].float()) * a[:, st.n:].float()
            else:
                h = F.silu(a.float()) * outs[plan.stages[st.input_b.producer].name].float()
            outs[st.name] = h.to(x.dtype)
        return outs[plan.stages[-1].name]

    if name not in _LIBRARIES:  # once per process: an op is defined once
        library = torch.library.Library("cusync", "FRAGMENT")
        library.define(tplan.signature)
        library.impl(tplan.op, stand_in, "CPU")
        _LIBRARIES[name] = library
    return _import(path, f"{name}_torch"), plan


def _example():
    return _import(TORCH_EXAMPLE / "check_torch_mlp.py", "check_torch_mlp")


@pytest.mark.parametrize("name", list(SMALL))
def test_from_mlp_matches_the_module(name: str, tmp_path: Path, torch_module) -> None:
    torch = torch_module
    example = _example()
    chain, _plan_ = _chain_module(name, tmp_path, torch)
    torch.manual_seed(0)
    kind, _layout, act = SMALL[name]
    if kind == "mlp" and name in BIASED:
        mlp = example.GPT2MLP(INTERMEDIATE, HIDDEN, torch.nn.GELU(approximate="tanh"))
        with torch.no_grad():
            mlp.c_fc.bias.normal_()
            mlp.c_proj.bias.normal_()
    elif kind == "mlp":
        mlp = example.GPT2MLP(INTERMEDIATE, HIDDEN) if act == "gelu" else \
            example.LinearMLP(HIDDEN, INTERMEDIATE, torch.nn.ReLU())
    else:
        mlp = example.LlamaMLP(HIDDEN, INTERMEDIATE)
    assert example.hf_mlp_for(chain).__class__ is mlp.__class__
    swapped = chain.Module.from_mlp(mlp, device="cpu")
    for arg, k, n, layout, _roles in chain.WEIGHTS:
        weight = getattr(swapped, arg)
        assert weight.dtype == torch.float16 and weight.is_contiguous()
        assert tuple(weight.shape) == ((k, n) if layout == "row" else (n, k))
    x = torch.randn(3, 5, HIDDEN)
    with torch.no_grad():
        got, want = swapped(x.half()), mlp(x)
    assert got.shape == (3, 5, HIDDEN) and got.dtype == torch.float16
    assert ((got.float() - want).norm() / want.norm()).item() < 1e-2
    if name in BIASED:  # the biases are arguments of the op, [n]
        assert [tuple(b.shape) for n_, b in swapped.named_buffers() if n_.endswith("_bias")] == [(INTERMEDIATE,), (HIDDEN,)]


def test_from_mlp_takes_gpt2_conv1d_weights_without_a_copy(tmp_path: Path, torch_module) -> None:
    """b_layout row is Conv1D's own [in, out]: in the chain's dtype, the module's buffers are the model's."""
    torch = torch_module
    example = _example()
    chain, _plan_ = _chain_module("tiny_gpt2_row", tmp_path, torch)
    mlp = example.GPT2MLP(INTERMEDIATE, HIDDEN, torch.nn.GELU(approximate="tanh")).half()
    swapped = chain.Module.from_mlp(mlp, device="cpu")
    assert swapped.fc1_weight.data_ptr() == mlp.c_fc.weight.data_ptr()
    assert swapped.fc2_weight.data_ptr() == mlp.c_proj.weight.data_ptr()
    assert swapped.fc1_bias.data_ptr() == mlp.c_fc.bias.data_ptr()
    x = torch.randn(4, HIDDEN)  # fp32 in, fp32 out: the module casts to the chain's dtype and back
    with torch.no_grad():
        assert swapped(x).dtype == torch.float32


def test_from_mlp_refuses_what_the_chain_does_not_compute(tmp_path: Path, torch_module) -> None:
    torch = torch_module
    example = _example()
    gelu, _ = _chain_module("tiny_gelu_col", tmp_path, torch)
    mlp = example.GPT2MLP(INTERMEDIATE, HIDDEN)
    with torch.no_grad():
        mlp.c_fc.bias.fill_(0.5)
    with pytest.raises(ValueError, match="c_fc has a non-zero bias"):
        gelu.Module.from_mlp(mlp, device="cpu")
    tanh = example.GPT2MLP(INTERMEDIATE, HIDDEN)
    tanh.act = torch.nn.GELU(approximate="tanh")
    with pytest.raises(ValueError, match=r"act is GELU\(approximate='tanh'\) \(gelu_tanh\)"):
        gelu.Module.from_mlp(tanh, device="cpu")
    with pytest.raises(ValueError, match="another size"):
        gelu.Module.from_mlp(example.GPT2MLP(INTERMEDIATE, 2 * HIDDEN), device="cpu")
    with pytest.raises(ValueError, match=r"Sequential has none of the layers c_fc, fc1, fc_in \(fc1\)"):
        gelu.Module.from_mlp(torch.nn.Sequential(torch.nn.Linear(HIDDEN, INTERMEDIATE)), device="cpu")
    with pytest.raises(ValueError, match=r"LlamaMLP.act_fn is SiLU\(\) \(silu\), but the tiny_gelu_col chain computes gelu"):
        gelu.Module.from_mlp(example.LlamaMLP(HIDDEN, INTERMEDIATE), device="cpu")
    swapped = gelu.Module.from_mlp(example.GPT2MLP(INTERMEDIATE, HIDDEN), device="cpu")
    with pytest.raises(ValueError, match=rf"x must be \[\.\.\., {HIDDEN}\]"):
        swapped(torch.randn(2, HIDDEN + 1).half())
    with pytest.raises(ValueError, match="mode must be one of"):
        gelu.Module(*[getattr(swapped, w[0]) for w in gelu.WEIGHTS], mode="fast")


def test_bias_stages_are_arguments_of_the_op(tmp_path: Path) -> None:
    """`bias: true` on a GEMM: the op takes `<stage>_bias` [n] after its weight, checks it and passes it on."""
    from conftest import bias_spec

    plan = make_plan(load_spec(bias_spec("two_gemm", tmp_path)))
    tplan = make_torch_plan(plan)
    assert tplan.signature == ("two_gemm_bias(Tensor x, Tensor gemm1_weight, Tensor gemm1_bias, Tensor gemm2_weight, "
                               'Tensor gemm2_bias, str mode="auto") -> Tensor')
    op = _render(plan)["torch/two_gemm_bias_op.cpp"]
    n = plan.stages[0].n
    assert f'check_bias(gemm1_bias, "gemm1_bias", {n}, device);' in op
    assert "args.gemm1_bias = data_of<Element const>(gemm1_bias);" in op
    assert "check_bias" not in _render(_plan("two_gemm"))["torch/two_gemm_op.cpp"]


def test_gelu_tanh_epilogue_in_both_backends() -> None:
    """`gelu_tanh` (also spelled `gelu_new`): CUTLASS's GELU_taylor on sm90, its LinearCombination on sm80."""
    for spelling in ("gelu_tanh", "gelu_new"):
        spec = parse_spec(_small_spec("tiny_gelu_col") | {"stages": [
            {**st, "epilogue": spelling} if st["name"] == "fc1" else st for st in _small_spec("tiny_gelu_col")["stages"]]})
        assert spec.stages[0].epilogue.value == "gelu_tanh"
    sm80 = render_project(make_plan(load_spec(TORCH_EXAMPLE / "gpt2_mlp.yaml")))
    assert "using EpilogueOp = cusync::sm80::LinearCombinationGeluTanh<Element," in sm80["src/stage_fc1.cu"]
    assert "using LinearCombinationGeluTanh =" in sm80["include/cusync/sm80/gemm.cuh"]
    sm90 = render_project(make_plan(load_spec(TORCH_EXAMPLE / "gpt2_mlp_sm90.yaml")))
    assert "cutlass::epilogue::thread::GELU_taylor" in sm90["src/stage_fc1.cu"]
    assert "bench::Activation::kGeluTanh" in sm90["bench/gpt2_mlp_sm90_bench.cu"]
    assert "case Activation::kGeluTanh:" in sm90["bench/reference.cuh"]


@pytest.mark.parametrize("name", ["gpt2_mlp_sm90", "gpt2_mlp", "llama_mlp_split"])
def test_setup_py_builds_the_op_with_cpp_extension(name: str) -> None:
    """torch/setup.py: every unit of the chain's library (the GDC ones through torch/gdc/) and the op, the
    target's -gencode, CUTLASS from $CUTLASS_DIR; valid Python."""
    plan = _plan(name)
    files = _render(plan)
    setup = files["torch/setup.py"]
    compile(setup, "setup.py", "exec")
    cmake = files["CMakeLists.txt"]
    units = [line.strip() for line in cmake.split("add_library(")[1].split(")")[0].splitlines()[1:] if line.strip()]
    for unit in units:
        wrapped = f"torch/gdc/{unit.removeprefix('src/')}"
        assert (f'"{unit}",' in setup) != (f'"{wrapped}",' in setup), unit
        if wrapped in files:
            assert "#define CUTLASS_ENABLE_GDC_FOR_SM90 1" in files[wrapped]
            assert f'#include "../../{unit}"' in files[wrapped]
            assert unit in cmake.split("PROPERTIES COMPILE_DEFINITIONS CUTLASS_ENABLE_GDC_FOR_SM90=1")[0].split("set_source_files_properties(")[1]
    assert f'"torch/{name}_op.cpp",' in setup and 'os.environ.get("CUTLASS_DIR")' in setup
    assert f'os.environ.get("CUSYNC_CUDA_ARCH", "{plan.cuda_arch}")' in setup
    assert "CUDAExtension(" in setup and f'name="{name}_torch_ext"' in setup and f'py_modules=["{name}_torch"]' in setup
    assert ('"cublasLt"' in setup) == name.endswith("sm90") and "-std=c++20" in setup
    assert "-print-file-name=libstdc++.so" in setup  # the one-C++-runtime rule of the CMake route
