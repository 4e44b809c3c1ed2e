"""PyTorch peers of a generated GEMM chain, timed the way the bench times ours (issue 10, part 5).

For each generated project (its manifest.json: stages, widths, dtype, epilogues), builds the same chain
in PyTorch and times, per M:
  - torch_eager:   matmuls (cuBLAS) and activation kernels, as a model would run it;
  - torch_compile: torch.compile(mode="max-autotune-no-cudagraphs", dynamic=False) of the same function
                   (Inductor autotunes each GEMM over Triton templates and cuBLAS and fuses the
                   activations; "-no-cudagraphs" so that we capture the graph ourselves, like the rest).
Each is captured in one CUDA graph; the graphs of one M are replayed round robin, back to back, with CUDA
events around each replay and one synchronization per round, exactly as the bench times ours
(`Interleaved`); the median of `--repeats` rounds after warm-up. Inputs are drawn fresh (never zeros).
Before timing each M the graphs run round robin for `--preheat` seconds (default 2): the bench's GPU has
been busy for a while when it times a point, and an H200 fresh from idle (here: after Inductor's
autotuning, which is mostly host work) runs a short burst of large GEMMs 15-20% faster than it runs them
sustained (measured: benchmarks/NOTES.md h6; `--idle` reproduces it). The first results of issue 10
compared PyTorch timed that way with our chains timed sustained. Run on the GPU machine right after the bench, in the same
call. One JSON line per (chain, M, variant) on stdout.

    python3 scripts/torch_peers.py generated/gpt3_mlp_sm90 generated/llama_mlp_sm90 --m 256,1024 \\
        [--compile 256,1024] [--repeats 30]

`--compile` lists the M at which torch.compile is timed (autotuning takes tens of seconds per shape);
default: every M. TORCHINDUCTOR_CACHE_DIR keeps Inductor's autotuning between calls.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
ACTIVATIONS = {
    "identity": lambda x: x,
    "relu": F.relu,
    "gelu": F.gelu,  # erf GELU: CUTLASS's GELU epilogue is the erf form too
    "silu": F.silu,
}


def chain_function(manifest: dict):
    """The chain as one Python function of (x, weights...), in manifest order."""
    stages = manifest["stages"]
    index = {s["name"]: i for i, s in enumerate(stages)}

    def run(x, *weights):
        outs: list[torch.Tensor] = []
        w = iter(weights)
        for s in stages:
            a = x if s["producer"] is None else outs[index[s["producer"]]]
            if s["op"] == "gemm":
                weight = next(w)
                y = a @ (weight.t() if s["b_layout"] == "col" else weight)
                if s["epilogue"] == "swiglu":  # a gated GEMM: [gate | up] in one weight, as PyTorch's LLaMA MLP
                    outs.append(F.silu(y[:, :s["n"]]) * y[:, s["n"]:])
                else:
                    outs.append(ACTIVATIONS[s["epilogue"]](y))
            else:  # swiglu: gate | up halves of one producer, or gate and up from two producers
                n = s["n"]
                if s.get("producer_b"):
                    gate, up = a, outs[index[s["producer_b"]]]
                else:
                    gate, up = a[:, :n], a[:, n:2 * n]
                outs.append(F.silu(gate) * up)
        return outs[-1]

    return run


def weights_of(manifest: dict, dtype: torch.dtype) -> list[torch.Tensor]:
    out = []
    for s in manifest["stages"]:
        if s["op"] != "gemm":
            continue
        n = 2 * s["n"] if s["epilogue"] == "swiglu" else s["n"]  # a gated GEMM's weights: [gate | up]
        shape = (n, s["k"]) if s["b_layout"] == "col" else (s["k"], n)
        out.append((torch.rand(shape, device="cuda", dtype=dtype) * 2 - 1) * (3.0 / s["k"]) ** 0.5)
    return out


def capture(fn, warmup: int = 5) -> torch.cuda.CUDAGraph:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def isolated_median_us(graph: torch.cuda.CUDAGraph, repeats: int) -> float:
    """One replay at a time, the host synchronizing after each (the GPU idles in between)."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    times.sort()
    return times[len(times) // 2]


def interleaved_median_us(graphs: list[torch.cuda.CUDAGraph], repeats: int, warmup: int = 3,
                          preheat_s: float = 0.0, idle_s: float = 0.0) -> list[float]:
    """The bench's Interleaved::run: rounds of A B C ..., back to back; median per graph. idle_s: the GPU
    idles this long first; preheat_s: the graphs run round robin this long first (the bench's GPU has
    been busy for a while when it times a point; a GPU fresh from idle runs a short burst at a higher
    clock)."""
    if idle_s > 0:
        torch.cuda.synchronize()
        time.sleep(idle_s)
    deadline = time.time() + preheat_s
    while time.time() < deadline:
        for g in graphs:
            g.replay()
        torch.cuda.synchronize()
    for _ in range(warmup):
        for g in graphs:
            g.replay()
    times: list[list[float]] = [[] for _ in graphs]
    for _ in range(repeats):
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in graphs]
        for g, (start, end) in zip(graphs, events):
            start.record()
            g.replay()
            end.record()
        events[-1][1].synchronize()
        for t, (start, end) in zip(times, events):
            t.append(start.elapsed_time(end) * 1e3)
    out = []
    for t in times:
        t.sort()
        k = len(t)
        out.append(t[k // 2] if k % 2 else 0.5 * (t[k // 2 - 1] + t[k // 2]))
    return out


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("projects", nargs="+", type=Path)
    parser.add_argument("--m", default="256,512,1024,1536,2048,3072,4096,8192")
    parser.add_argument("--compile", default=None, help="M values at which torch.compile is timed (default: all)")
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--preheat", type=float, default=2.0,
                        help="seconds of replays before timing each M (the bench's GPU is busy when it times; 0: none)")
    parser.add_argument("--idle", type=float, default=0.0, help="seconds of idle GPU before timing each M")
    parser.add_argument("--isolated", action="store_true",
                        help="also time each graph alone, synchronizing after every replay (the old method), as "
                             "<variant>_isolated")
    args = parser.parse_args(argv)
    ms = [int(m) for m in args.m.split(",")]
    compile_ms = ms if args.compile is None else [int(m) for m in args.compile.split(",") if m]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.manual_seed(1)
    gpu = torch.cuda.get_device_name()
    for project in args.projects:
        manifest = json.loads((project / "manifest.json").read_text())
        dtype = DTYPES[manifest["dtype"]]
        fn = chain_function(manifest)
        weights = weights_of(manifest, dtype)
        # One compiled function per M (dynamic=False): lift Dynamo's recompile limit (8 by default), and
        # start each chain from a clean cache, or later shapes would silently fall back to eager.
        torch._dynamo.reset()
        torch._dynamo.config.recompile_limit = max(64, 2 * len(ms))
        compiled = torch.compile(fn, mode="max-autotune-no-cudagraphs", dynamic=False)
        k0 = manifest["stages"][0]["k"]
        for m in ms:
            x = torch.rand(m, k0, device="cuda", dtype=dtype) * 2 - 1
            row = {"chain": manifest["name"], "gpu": gpu, "m": m}
            graphs, names, extra = [capture(lambda: fn(x, *weights))], ["torch_eager"], [{}]
            if m in compile_ms:
                start = time.time()
                reference = fn(x, *weights).float()
                got = compiled(x, *weights).float()
                err = float((got - reference).norm() / reference.norm())
                seconds = time.time() - start
                if seconds < 1.0 and m == compile_ms[0]:
                    print(f"warning: torch.compile of {manifest['name']} took {seconds:.1f} s: did it compile?",
                          file=sys.stderr)
                graphs.append(capture(lambda: compiled(x, *weights)))
                names.append("torch_compile")
                extra.append({"rel_err_vs_eager": err, "compile_s": round(seconds, 1)})
            for name, us, more in zip(names, interleaved_median_us(graphs, args.repeats, preheat_s=args.preheat,
                                                                      idle_s=args.idle), extra):
                print(json.dumps({**row, "variant": name, "us": round(us, 2), **more}), flush=True)
            if args.isolated:
                for name, graph in zip(names, graphs):
                    print(json.dumps({**row, "variant": name + "_isolated", "us": round(isolated_median_us(graph, args.repeats), 2)}),
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
