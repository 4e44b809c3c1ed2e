"""GPU tests of `generate --torch` (docs/torch.md), both build routes:

- CMake: generate a chain with its PyTorch op, build torch/ with CMake against the installed torch, and
  run examples/torch/check_torch_mlp.py on it: Hugging Face-style MLPs (written in the example) swapped
  for the op, compared with the module's own output eagerly in modes auto / overlap / sequential and
  through replayed CUDA graphs, the capture-before-warm-up error, refused arguments.
- pip (torch.utils.cpp_extension): `pip install --no-build-isolation --target <tmp> <project>/torch`,
  then examples/torch/check_hf_mlp.py on transformers' own GPT2MLP (GPT-2 small, gelu_new, bias) and
  LlamaMLP (hidden 1024, intermediate 2816, fp16 and bf16), built from configs with random weights:
  eager, on a side stream, in a CUDA graph, torch.compile, torch.library.opcheck, chains freed with the
  module. Needs `transformers` (skipped without it).

Needs a CUDA GPU, torch with CUDA, CMake and CUTLASS (as the other GPU tests):

    python3 -m pytest -m gpu tests/test_torch_gpu.py                     # every chain, both routes
    python3 -m pytest -m gpu tests/test_torch_gpu.py -k hf               # the pip route on transformers' MLPs
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

pytestmark = pytest.mark.gpu

EXAMPLES = REPO / "cusync_gen" / "examples"
TORCH_EXAMPLE = REPO / "examples" / "torch"
#: name -> (spec, Hopper only): a GPT-2-shaped and a LLaMA-shaped chain per backend.
CHAINS = {
    "gpt2_mlp_sm90": (TORCH_EXAMPLE / "gpt2_mlp_sm90.yaml", True),    # fp16, bias, tanh GELU, col-layout weights
    "llama_mlp_sm90": (EXAMPLES / "llama_mlp_sm90.yaml", True),       # bf16, [gate | up] -> swiglu -> down
    "llama_mlp_fused_sm90": (EXAMPLES / "llama_mlp_fused_sm90.yaml", True),  # bf16, silu(gate) * up fused into gemm1
    "gpt2_mlp": (TORCH_EXAMPLE / "gpt2_mlp.yaml", False),             # sm80 backend, bias, tanh GELU, row layout
    "llama_mlp_split": (EXAMPLES / "llama_mlp_split.yaml", False),    # sm80, gate and up in two GEMMs
}


def _compute_capability() -> str:
    out = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                         capture_output=True, text=True, check=True)
    return out.stdout.split()[0].replace(".", "")


def _run(command: list[str], timeout: int, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout, **kwargs)


@pytest.mark.parametrize("name", list(CHAINS))
def test_torch_op_replaces_the_mlp_on_gpu(name: str, tmp_path: Path, cutlass_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    spec, hopper_only = CHAINS[name]
    cc = os.environ.get("CUSYNC_GPU_ARCH") or _compute_capability()
    if hopper_only and not cc.startswith("9"):
        pytest.skip(f"{name} is an sm90 chain (Hopper); this GPU is sm_{cc}")
    project = tmp_path / name
    out = _run([sys.executable, "-m", "cusync_gen.cli", "generate", str(spec), "-o", str(project), "--torch"],
               120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    build = project / "build" / "torch"
    configure = ["cmake", "-S", str(project / "torch"), "-B", str(build), f"-DCUTLASS_DIR={cutlass_dir}",
                 f"-DCMAKE_CUDA_ARCHITECTURES={'90a' if hopper_only else cc}", f"-DCUSYNC_TORCH_PYTHON={sys.executable}"]
    configure += ["-G", "Ninja"] if shutil.which("ninja") else []
    out = _run(configure, 600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    out = _run(["cmake", "--build", str(build), "-j", str(os.cpu_count() or 2)], 1800)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-2000:]
    assert (build / f"lib{name}_torch.so").is_file()
    out = _run([sys.executable, str(TORCH_EXAMPLE / "check_torch_mlp.py"), str(project)], 900)
    print(out.stdout)
    assert out.returncode == 0 and "all checks passed" in out.stdout, out.stdout[-6000:] + out.stderr[-3000:]


#: The pip route, on transformers' modules: name -> (spec, Hopper only).
HF_CHAINS = {
    "gpt2_mlp_sm90": (TORCH_EXAMPLE / "gpt2_mlp_sm90.yaml", True),                         # GPT-2 small, fp16
    "gpt2_mlp": (TORCH_EXAMPLE / "gpt2_mlp.yaml", False),                                   # sm80 backend: Conv1D weights as they are
    "llama_mlp_1024_sm90_bf16": (TORCH_EXAMPLE / "llama_mlp_1024_sm90_bf16.yaml", True),   # LlamaMLP 1024 / 2816
    "llama_mlp_1024_sm90_fp16": (TORCH_EXAMPLE / "llama_mlp_1024_sm90_fp16.yaml", True),
}


@pytest.mark.parametrize("name", list(HF_CHAINS))
def test_hf_mlp_swap_pip_installed_on_gpu(name: str, tmp_path: Path, cutlass_dir: Path) -> None:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    if not torch.cuda.is_available():
        pytest.skip("torch sees no CUDA device")
    spec, hopper_only = HF_CHAINS[name]
    cc = os.environ.get("CUSYNC_GPU_ARCH") or _compute_capability()
    if hopper_only and not cc.startswith("9"):
        pytest.skip(f"{name} is an sm90 chain (Hopper); this GPU is sm_{cc}")
    project = tmp_path / name
    out = _run([sys.executable, "-m", "cusync_gen.cli", "generate", str(spec), "-o", str(project), "--torch"],
               120, cwd=REPO)
    assert out.returncode == 0, out.stderr
    site = tmp_path / "site"
    env = {**os.environ, "CUTLASS_DIR": str(cutlass_dir), "MAX_JOBS": str(os.cpu_count() or 2)}
    if not hopper_only:
        env["CUSYNC_CUDA_ARCH"] = cc
    out = _run([sys.executable, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index",
                "--target", str(site), str(project / "torch")], 1800, env=env)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    assert (site / f"{name}_torch.py").is_file() and list(site.glob(f"{name}_torch_ext*.so"))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    # the installed module by name (tmp_path/<name> is the generated project, which check_hf_mlp.py would
    # import from its folder instead)
    out = _run([sys.executable, str(TORCH_EXAMPLE / "check_hf_mlp.py"), f"{name}_torch"], 900, env=env, cwd=site)
    print(out.stdout)
    assert out.returncode == 0 and "all checks passed" in out.stdout, out.stdout[-6000:] + out.stderr[-3000:]
