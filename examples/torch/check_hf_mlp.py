#!/usr/bin/env python3
"""Swap Hugging Face transformers' own MLPs for a generated cuSync op and check it on the GPU (README.md here).

For each chain module given (`<name>_torch`, importable: pip-installed from <project>/torch, or a project
folder whose torch/ was built), builds the MLP the chain computes with transformers, from a config with
random weights (no download): GPT2MLP (Conv1D c_fc/c_proj with bias, gelu_new) or LlamaMLP (gate_proj,
up_proj, down_proj, SiLU, no bias), in the chain's dtype on the GPU; swaps it with
`<Class>.from_mlp(hf_mlp)` and checks: outputs against the module's own (eager, several M, batched
input), on a non-default stream, from a CUDA graph captured once and replayed, through torch.compile
(aot_eager: the op's Meta kernel), torch.library.opcheck, and that dropping a module frees its chains.

    python3 examples/torch/check_hf_mlp.py gpt2_mlp_sm90 llama_mlp_1024_sm90_bf16     # installed modules
    python3 examples/torch/check_hf_mlp.py build/torch_mlp/gpt2_mlp_sm90               # a built project

Exit status 0 when every check passes, 1 otherwise; one line per check.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import torch

#: Relative error bounds (Frobenius norm): both sides round to the chain's dtype but sum in other orders.
TOLERANCE = {torch.float16: 1e-2, torch.bfloat16: 2e-2}
MS = (1, 77, 512, 2048)


def import_chain(what: str) -> ModuleType:
    path = Path(what)
    if path.is_dir():
        found = sorted((path / "torch").glob("*_torch.py"))
        if not found:
            raise SystemExit(f"{path}/torch/*_torch.py not found: generate the project with --torch")
        spec = importlib.util.spec_from_file_location(found[0].stem, found[0])
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(what if what.endswith("_torch") else f"{what}_torch")
    module.load()
    return module


def hf_mlp_for(chain: ModuleType) -> torch.nn.Module:
    """transformers' module that computes what `chain` computes, at its sizes, random weights, on the GPU."""
    widths = {arg: (k, n) for arg, k, n, _layout, _roles in chain.WEIGHTS}
    if chain.MLP == "mlp":
        from transformers import GPT2Config
        from transformers.models.gpt2.modeling_gpt2 import GPT2MLP

        act = {"gelu_tanh": "gelu_new", "gelu": "gelu"}[chain.ACTIVATION]
        intermediate = widths[chain.WEIGHTS[0][0]][1]
        config = GPT2Config(n_embd=chain.INPUT_WIDTH, n_inner=intermediate, activation_function=act)
        mlp = GPT2MLP(intermediate, config)
    elif chain.MLP in ("gated", "gated_split"):
        from transformers import LlamaConfig
        from transformers.models.llama.modeling_llama import LlamaMLP

        intermediate = widths[chain.WEIGHTS[-1][0]][0]
        mlp = LlamaMLP(LlamaConfig(hidden_size=chain.INPUT_WIDTH, intermediate_size=intermediate, hidden_act="silu"))
    else:
        raise SystemExit(f"{chain.NAME}: not an MLP this check knows (MLP = {chain.MLP!r})")
    with torch.no_grad():
        for p in mlp.parameters():
            p.normal_(0.0, 0.02)  # biases too: GPT-2's start at zero, which would test nothing
    return mlp.to(device="cuda", dtype=chain.DTYPE).eval()


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


def check_chain(chain: ModuleType, checks: Checks) -> None:
    dtype, tol, name = chain.DTYPE, TOLERANCE[chain.DTYPE], chain.NAME
    torch.manual_seed(0)
    before = chain._cached_chains()
    mlp = hf_mlp_for(chain)
    swapped = chain.Module.from_mlp(mlp)  # the three-line swap: layer.mlp = chain.Module.from_mlp(layer.mlp)
    print(f"== {name}: transformers {type(mlp).__name__} -> {type(swapped).__name__} ({chain.MLP}, "
          f"{str(dtype)[6:]}, {chain.ACTIVATION}, [M, {chain.INPUT_WIDTH}] -> [M, {chain.OUTPUT_WIDTH}])", flush=True)
    shared = [arg for arg in dict(swapped.named_buffers())
              if any(getattr(swapped, arg).data_ptr() == p.data_ptr() for p in mlp.parameters())]
    print(f"   buffers shared with the model (no copy): {shared or 'none'}", flush=True)

    with torch.inference_mode():
        for m in MS:
            x = torch.randn(1, m, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
            checks.close(f"{name} eager x [1, {m}, {chain.INPUT_WIDTH}]", swapped(x), mlp(x), tol)
        for mode in ("overlap", "sequential"):
            x = torch.randn(3, 100, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
            checks.close(f"{name} mode={mode}", chain.Module.from_mlp(mlp, mode=mode)(x), mlp(x), tol)

        # A non-default stream: the op runs on torch.cuda.current_stream().
        side = torch.cuda.Stream()
        x = torch.randn(256, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            y = swapped(x)
            want = mlp(x)
        side.synchronize()
        checks.close(f"{name} on a side stream", y, want, tol)

    # A CUDA graph: warm-up on a side stream (torch's recipe), capture once, replay on new inputs.
    static_x = torch.randn(512, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm), torch.inference_mode():
        swapped(static_x)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.inference_mode():
        with torch.cuda.graph(graph):
            static_y = swapped(static_x)
        for replay in range(3):
            static_x.copy_(torch.randn_like(static_x))
            graph.replay()
            torch.cuda.synchronize()
            checks.close(f"{name} CUDA graph replay {replay}", static_y, mlp(static_x), tol)
    del graph

    # torch.compile traces the op with its Meta kernel (fake tensors, symbolic M).
    try:
        compiled = torch.compile(swapped, backend="aot_eager", fullgraph=True, dynamic=True)
        with torch.inference_mode():
            x = torch.randn(2, 50, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
            checks.close(f"{name} torch.compile(aot_eager, dynamic)", compiled(x), mlp(x), tol)
    except Exception as err:  # noqa: BLE001 (reported as a failed check)
        checks.expect(False, f"{name} torch.compile: {type(err).__name__}: {str(err).splitlines()[0]}")

    # torch.library.opcheck: schema (no input mutated), fake tensor kernel, autograd registration, AOT dispatch.
    x = torch.randn(64, chain.INPUT_WIDTH, device="cuda", dtype=dtype)
    op = getattr(torch.ops.cusync, name).default
    try:
        torch.library.opcheck(op, (x, *swapped.buffers()), {"mode": "auto"})
        checks.expect(True, f"{name} torch.library.opcheck")
    except Exception as err:  # noqa: BLE001
        checks.expect(False, f"{name} torch.library.opcheck: {type(err).__name__}: {str(err).splitlines()[0]}")

    # The chains live as long as their weights: dropping the model and the module frees them.
    during = chain._cached_chains()
    del swapped, mlp, compiled, static_x, static_y
    torch._dynamo.reset()  # compiled code holds the module
    gc.collect()
    torch.cuda.synchronize()
    after = chain._cached_chains()
    checks.expect(during > before and after == before,
                  f"{name} chains cached: {before} before, {during} with the module, {after} after dropping it")
    checks.expect(chain.sync_error() == "", f"{name} no tile wait timed out")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("chains", nargs="+", help="importable <name>_torch modules (or <name>), or project folders")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA device visible to torch", file=sys.stderr)
        return 1
    checks = Checks()
    for what in args.chains:
        check_chain(import_chain(what), checks)
    print("all checks passed" if checks.failed == 0 else f"{checks.failed} checks FAILED", flush=True)
    return 0 if checks.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
