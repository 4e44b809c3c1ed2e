#!/usr/bin/env python3
"""Swap Hugging Face-style MLPs for generated cuSync ops and check them on the GPU (README.md here).

For each generated project (made with `cusync-gen generate --torch`, its torch/ built into build/torch/):
builds the MLP that the chain computes as a plain PyTorch module, defined below as Hugging Face writes it
(GPT-2: Conv1D c_fc / c_proj with GELU; GPT-NeoX/OPT style: nn.Linear fc1 / fc2; LLaMA: nn.Linear
gate_proj / up_proj / down_proj with SiLU), with random weights; swaps it for the op's module
(`<Class>.from_mlp`) and compares both on the GPU, in every run mode that matters and through a CUDA
graph that is captured once and replayed on new inputs. Needs torch with CUDA; nothing else.

    python3 examples/torch/check_torch_mlp.py build/torch_mlp/gpt2_mlp_sm90 build/torch_mlp/llama_mlp_sm90

Exit status 0 when every check passes, 1 otherwise; one line per check.
"""

from __future__ import annotations

import argparse
import importlib.util
import math
import sys
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

#: Relative error bounds (Frobenius norm of the difference over that of the module's output): both sides
#: round every intermediate to the chain's dtype, but sum in other orders.
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 3e-2}
DEFAULT_MS = "1,77,256,1000,2048"


# --------------------------------------------------------------------------------------------------
# Hugging Face-style MLPs, written here so that the example needs no `transformers`.

class Conv1D(nn.Module):
    """GPT-2's linear layer (transformers.pytorch_utils.Conv1D): weight [in, out], bias zeros at init."""

    def __init__(self, nf: int, nx: int) -> None:
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        size_out = x.size()[:-1] + (self.nf,)
        x = torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight)
        return x.view(size_out)


class GPT2MLP(nn.Module):
    """transformers' GPT2MLP: activation_function "gelu" (exact, the default here) or "gelu_new" (tanh)."""

    def __init__(self, intermediate_size: int, hidden_size: int, act: nn.Module | None = None) -> None:
        super().__init__()
        self.c_fc = Conv1D(intermediate_size, hidden_size)
        self.c_proj = Conv1D(hidden_size, intermediate_size)
        self.act = act if act is not None else nn.GELU()

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        return self.c_proj(self.act(self.c_fc(hidden_states)))


class LinearMLP(nn.Module):
    """fc1 -> activation -> fc2 with nn.Linear layers (OPT, GPT-NeoX style), without bias."""

    def __init__(self, hidden_size: int, intermediate_size: int, act: nn.Module) -> None:
        super().__init__()
        self.fc1 = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.fc2 = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act = act

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x)))


class LlamaMLP(nn.Module):
    """transformers' LlamaMLP (hidden_act="silu", mlp_bias=False)."""

    def __init__(self, hidden_size: int, intermediate_size: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


ACTIVATIONS = {"gelu": nn.GELU, "relu": nn.ReLU, "silu": nn.SiLU, "identity": nn.Identity,
               "gelu_tanh": lambda: nn.GELU(approximate="tanh")}


def hf_mlp_for(chain: ModuleType) -> nn.Module:
    """The Hugging Face-style module that computes what `chain` computes, at its sizes."""
    widths = {arg: (k, n) for arg, k, n, _layout, _roles in chain.WEIGHTS}
    hidden = chain.INPUT_WIDTH
    if chain.MLP == "mlp":
        intermediate = widths[chain.WEIGHTS[0][0]][1]
        if chain.ACTIVATION in ("gelu", "gelu_tanh"):
            mlp = GPT2MLP(intermediate, hidden, ACTIVATIONS[chain.ACTIVATION]())
            if any(bias is not None for bias in getattr(chain, "_BIASES", {}).values()):
                with torch.no_grad():  # GPT-2's biases start at zero, which would test nothing
                    mlp.c_fc.bias.normal_(0.0, 0.02)
                    mlp.c_proj.bias.normal_(0.0, 0.02)
            return mlp
        return LinearMLP(hidden, intermediate, ACTIVATIONS[chain.ACTIVATION]())
    if chain.MLP in ("gated", "gated_split"):
        down_k = widths[chain.WEIGHTS[-1][0]][0]
        return LlamaMLP(hidden, down_k)
    raise SystemExit(f"{chain.NAME}: not an MLP this example knows (MLP = {chain.MLP!r})")


# --------------------------------------------------------------------------------------------------

def import_chain(project: Path) -> ModuleType:
    """<project>/torch/<name>_torch.py, and its library from <project>/build/torch/."""
    found = sorted((project / "torch").glob("*_torch.py"))
    if not found:
        raise SystemExit(f"{project}/torch/*_torch.py not found: generate the project with --torch")
    spec = importlib.util.spec_from_file_location(found[0].stem, found[0])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.load()
    return module


def rel_err(got: torch.Tensor, want: torch.Tensor) -> float:
    return ((got.float() - want.float()).norm() / want.float().norm().clamp_min(1e-30)).item()


class Checks:
    def __init__(self) -> None:
        self.failed = 0

    def expect(self, ok: bool, line: str) -> None:
        print(("ok    " if ok else "FAIL  ") + line, flush=True)
        self.failed += not ok

    def close(self, label: str, got: torch.Tensor, want: torch.Tensor, tol: float) -> None:
        err = rel_err(got, want)
        finite = bool(torch.isfinite(got).all())
        self.expect(finite and err <= tol and got.shape == want.shape,
                    f"{label}: rel err {err:.2e} (bound {tol:.0e}), shape {list(got.shape)}"
                    + ("" if finite else ", NOT FINITE"))


def check_project(project: Path, ms: list[int], checks: Checks) -> None:
    chain = import_chain(project)
    dtype = chain.DTYPE
    tol = TOLERANCE[dtype]
    torch.manual_seed(0)
    mlp = hf_mlp_for(chain).to("cuda")
    swapped = chain.Module
    print(f"== {chain.NAME}: {type(mlp).__name__} -> {swapped.__name__} ({chain.MLP}, {str(dtype)[6:]}, "
          f"[M, {chain.INPUT_WIDTH}] -> [M, {chain.OUTPUT_WIDTH}])", flush=True)
    reference = mlp.to(dtype)  # the module's own output, in the chain's dtype, on the GPU
    modes = [m for m in ("auto", "overlap", "sequential") if m in chain.MODES]
    ops = {mode: swapped.from_mlp(reference, mode=mode) for mode in modes}

    with torch.inference_mode():
        # Eager, every M and mode; x with leading batch dimensions through the module.
        for m in ms:
            x = torch.randn(m, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
            want = reference(x)
            for mode, op in ops.items():
                checks.close(f"{chain.NAME} M={m} mode={mode}", op(x), want, tol)
        x3 = torch.randn(2, 33, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
        checks.close(f"{chain.NAME} x [2, 33, {chain.INPUT_WIDTH}]", ops["auto"](x3), reference(x3), tol)
        checks.expect(chain.sync_error() == "", f"{chain.NAME} no tile wait timed out")

    # A CUDA graph: warm up on a side stream (torch's recipe), capture once, replay on new inputs.
    for mode in ("auto", "overlap"):
        op = ops[mode]
        m = ms[-1]
        static_x = torch.randn(m, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side), torch.inference_mode():
            for _ in range(2):
                op(static_x)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.inference_mode():
            with torch.cuda.graph(graph):
                static_y = op(static_x)
            for replay in range(3):
                static_x.copy_(torch.randn_like(static_x))
                graph.replay()
                torch.cuda.synchronize()
                checks.close(f"{chain.NAME} graph mode={mode} M={m} replay {replay}", static_y, reference(static_x), tol)
    checks.expect(chain.sync_error() == "", f"{chain.NAME} no tile wait timed out after the graphs")

    # Capture with more rows than any chain initialized so far: a clear error, not a broken graph.
    too_many = 2 ** math.ceil(math.log2(max(ms) + 1)) * 2 + 1
    big = torch.randn(too_many, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
    graph = torch.cuda.CUDAGraph()
    message = ""
    try:
        with torch.inference_mode(), torch.cuda.graph(graph):
            ops["auto"](big)
    except RuntimeError as err:
        message = str(err)
    checks.expect("before capturing" in message,
                  f"{chain.NAME} capture at M={too_many} before any warm-up raises: {message.splitlines()[0] if message else 'nothing raised'}")
    with torch.inference_mode():
        checks.close(f"{chain.NAME} eager M={too_many} after that (initializes)", ops["auto"](big), reference(big), tol)

    # A wrong argument names itself (the op; the module casts x to the chain's dtype).
    buffers = list(ops["auto"].buffers())
    try:
        with torch.inference_mode():
            chain.__dict__[chain.NAME](torch.randn(4, chain.INPUT_WIDTH, device="cuda", dtype=torch.float32), *buffers)
        raised = ""
    except (TypeError, ValueError) as err:
        raised = str(err)
    checks.expect(raised.startswith(f"cusync::{chain.NAME}: x must be") and "got fp32" in raised,
                  f"{chain.NAME} fp32 x is refused: {raised.splitlines()[0] if raised else 'nothing raised'}")
    try:
        with torch.inference_mode():
            chain.__dict__[chain.NAME](torch.randn(4, chain.INPUT_WIDTH, dtype=dtype),
                                       *[b.cpu() for b in buffers])
        raised = ""
    except ValueError as err:
        raised = str(err)
    checks.expect("on a CUDA device; got" in raised and "on cpu" in raised,
                  f"{chain.NAME} CPU tensors are refused: {raised.splitlines()[0] if raised else 'nothing raised'}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("projects", nargs="+", type=Path, help="generated projects (with torch/, built)")
    parser.add_argument("--m", default=DEFAULT_MS, help=f"rows to check, comma-separated [{DEFAULT_MS}]")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device visible to torch", file=sys.stderr)
        return 1
    ms = [int(m) for m in args.m.split(",")]
    checks = Checks()
    for project in args.projects:
        check_project(project, ms, checks)
    print("all checks passed" if checks.failed == 0 else f"{checks.failed} checks FAILED", flush=True)
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
