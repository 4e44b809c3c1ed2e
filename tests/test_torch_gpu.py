"""GPU test of `generate --torch` (docs/torch.md): generate a chain with its PyTorch op, build torch/ with
CMake against the installed torch, and run examples/torch/check_torch_mlp.py on it: Hugging Face-style
MLPs swapped for the op, compared with the module's own output eagerly in modes auto / overlap /
sequential and through replayed CUDA graphs, the capture-before-warm-up error, a refused argument.

Needs a CUDA GPU, torch with CUDA, CMake and CUTLASS (as the other GPU tests):

    python3 -m pytest -m gpu tests/test_torch_gpu.py                     # all four chains
    python3 -m pytest -m gpu tests/test_torch_gpu.py -k gpt2_mlp_sm90    # one
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
    "gpt2_mlp_sm90": (TORCH_EXAMPLE / "gpt2_mlp_sm90.yaml", True),    # fp16, GELU, col-layout weights
    "llama_mlp_sm90": (EXAMPLES / "llama_mlp_sm90.yaml", True),       # bf16, [gate | up] -> swiglu -> down
    "llama_mlp_fused_sm90": (EXAMPLES / "llama_mlp_fused_sm90.yaml", True),  # bf16, silu(gate) * up fused into gemm1
    "gpt2_mlp": (TORCH_EXAMPLE / "gpt2_mlp.yaml", False),             # sm80 backend, row-layout weights
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
