#!/usr/bin/env python3
"""cuDNN through PyTorch on the conv examples' layers: the ResNet basic block, the VGG block and the ResNet-50
bottleneck block (fp16, channels_last, torch.backends.cudnn.benchmark = True), each block and each layer in its
own CUDA graph, ~2 s of preheat per graph, then timed round robin; medians. One JSON line per (chain, batch).
--compile: the block through torch.compile (inductor, default mode: cuDNN's convs, the bias/add/ReLU fused by
Triton) instead, captured in a CUDA graph too, as `compiled_us` (one line per chain and batch as each is done).

    python3 scripts/conv_torch.py [--batch 1,8,32] [--repeats 200] [--preheat 2.0] [--chains ...] [--compile]
    python3 scripts/conv_torch.py --specs DIR ...   (every DIR/*.json conv chain spec, e.g. from conv_waves.py --write)
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch
import torch.nn.functional as F


def make_chain(name: str, batch: int, dev: str = "cuda", dt: torch.dtype = torch.float16):
    """(input, block fn, [(layer name, layer fn)]): the same shapes and epilogues as the example specs."""
    g = torch.Generator(device=dev).manual_seed(0)

    def conv(c: int, k: int, r: int = 3):
        w = (torch.rand(k, c, r, r, device=dev, generator=g) * 2 - 1) * (3.0 / (r * r * c)) ** 0.5
        b = (torch.rand(k, device=dev, generator=g) * 2 - 1) * 0.1
        return w.to(dt).contiguous(memory_format=torch.channels_last), b.to(dt)

    if name == "bottleneck_block":
        x = torch.rand(batch, 256, 56, 56, device=dev, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
        (w1, b1), (w2, b2), (w3, b3) = conv(256, 64, 1), conv(64, 64), conv(64, 256, 1)
        y1 = torch.relu(F.conv2d(x, w1, b1))
        y2 = torch.relu(F.conv2d(y1, w2, b2, padding=1))

        def block():
            h = torch.relu_(F.conv2d(x, w1, b1))
            h = torch.relu_(F.conv2d(h, w2, b2, padding=1))
            return torch.relu_(F.conv2d(h, w3, b3).add_(x))

        return block, [("conv1", lambda: torch.relu_(F.conv2d(x, w1, b1))),
                       ("conv2", lambda: torch.relu_(F.conv2d(y1, w2, b2, padding=1))),
                       ("conv3", lambda: torch.relu_(F.conv2d(y2, w3, b3).add_(x)))]

    if name == "resnet_block":
        x = torch.rand(batch, 64, 56, 56, device=dev, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
        (w1, b1), (w2, b2) = conv(64, 64), conv(64, 64)
        y1 = torch.relu(F.conv2d(x, w1, b1, padding=1))  # conv2's input, as the block computes it

        def block():
            y = torch.relu_(F.conv2d(x, w1, b1, padding=1))
            return torch.relu_(F.conv2d(y, w2, b2, padding=1).add_(x))

        def conv1():
            return torch.relu_(F.conv2d(x, w1, b1, padding=1))

        def conv2():
            return torch.relu_(F.conv2d(y1, w2, b2, padding=1).add_(x))

        return block, [("conv1", conv1), ("conv2", conv2)]
    x = torch.rand(batch, 256, 56, 56, device=dev, generator=g).to(dt).contiguous(memory_format=torch.channels_last)
    params = [conv(256, 256) for _ in range(3)]
    y = torch.relu(F.conv2d(x, *params[0], padding=1))  # the input of conv2 and conv3 alone

    def block():
        h = x
        for w, b in params:
            h = torch.relu_(F.conv2d(h, w, b, padding=1))
        return h

    layers = []
    for i, (w, b) in enumerate(params):
        src = x if i == 0 else y
        layers.append((f"conv{i + 1}", lambda src=src, w=w, b=b: torch.relu_(F.conv2d(src, w, b, padding=1))))
    return block, layers


def make_spec_chain(spec: dict, batch: int, dev: str = "cuda"):
    """(input, block fn, [(layer name, layer fn)]) of a conv chain spec (the JSON `cusync-gen` reads; e.g.
    scripts/conv_waves.py --write): each stage a conv of the stage before it (the first of the input), with its
    padding, stride, dilation, bias, ReLU or identity epilogue and residual ("input" or an earlier stage)."""
    dt = torch.bfloat16 if spec.get("dtype") == "bf16" else torch.float16
    g = torch.Generator(device=dev).manual_seed(0)
    first = spec["stages"][0]
    x = torch.rand(batch, first["c"], first["h"], first["w"], device=dev, generator=g).to(dt)
    x = x.contiguous(memory_format=torch.channels_last)
    params, c = [], first["c"]
    for st in spec["stages"]:
        k, r, s_ = st["k"], st.get("r", 3), st.get("s", st.get("r", 3))
        w = (torch.rand(k, c, r, s_, device=dev, generator=g) * 2 - 1) * (3.0 / (r * s_ * c)) ** 0.5
        b = (torch.rand(k, device=dev, generator=g) * 2 - 1) * 0.1 if st.get("bias") else None
        params.append((w.to(dt).contiguous(memory_format=torch.channels_last), None if b is None else b.to(dt)))
        c = k

    def stage(i: int, h: torch.Tensor, outs: dict) -> torch.Tensor:
        st, (w, b) = spec["stages"][i], params[i]
        y = F.conv2d(h, w, b, stride=st.get("stride", 1), padding=st.get("padding", 0), dilation=st.get("dilation", 1))
        if st.get("residual"):
            y = y.add_(outs[st["residual"]])
        return torch.relu_(y) if st.get("epilogue", "identity") == "relu" else y

    outs = {"input": x}
    with torch.no_grad():
        h = x
        for i, st in enumerate(spec["stages"]):
            h = stage(i, h, outs)
            outs[st["name"]] = h

    def block():
        o = {"input": x}
        h = x
        for i, st in enumerate(spec["stages"]):
            h = stage(i, h, o)
            o[st["name"]] = h
        return h

    layers = []
    for i, st in enumerate(spec["stages"]):
        src = x if i == 0 else outs[spec["stages"][i - 1]["name"]]
        layers.append((st["name"], lambda i=i, src=src: stage(i, src, outs)))
    return block, layers


def graph_of(fn) -> torch.cuda.CUDAGraph:
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        for _ in range(3):  # cudnn.benchmark picks its algorithms here, outside the capture
            fn()
    torch.cuda.current_stream().wait_stream(s)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", default="1,8,32")
    ap.add_argument("--repeats", type=int, default=200)
    ap.add_argument("--preheat", type=float, default=2.0, help="seconds of replays per graph before timing")
    ap.add_argument("--chains", default="resnet_block,vgg_block,bottleneck_block")
    ap.add_argument("--compile", action="store_true", help="time the blocks through torch.compile only")
    ap.add_argument("--specs", default="", help="a folder of conv chain specs (JSON) to time instead of --chains")
    a = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    specs = {p.stem: json.loads(p.read_text()) for p in sorted(Path(a.specs).glob("*.json"))} if a.specs else {}
    for name in (list(specs) if specs else a.chains.split(",")):
        for batch in (int(b) for b in a.batch.split(",")):
            block, layers = make_spec_chain(specs[name], batch) if specs else make_chain(name, batch)
            if a.compile:  # functional ops in place (relu_, add_) are fine for inductor; no graph breaks expected
                # Every chain's and batch's block is the same code object: without a reset dynamo recompiles it per
                # point and, past its recompile limit (8), silently runs the rest eagerly.
                torch._dynamo.reset()
                compiled = torch.compile(block, dynamic=False)
                peers = [("compiled", graph_of(compiled))]
            else:
                peers = [("block", graph_of(block))] + [(n, graph_of(f)) for n, f in layers]
            for _, graph in peers:  # preheat each peer
                end = time.perf_counter() + a.preheat
                while time.perf_counter() < end:
                    for _ in range(10):
                        graph.replay()
                    torch.cuda.synchronize()
            times: dict[str, list[float]] = {n: [] for n, _ in peers}
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in peers]
            for _ in range(a.repeats):  # round robin
                for (n, graph), (start, stop) in zip(peers, events):
                    start.record()
                    graph.replay()
                    stop.record()
                torch.cuda.synchronize()
                for (n, _), (start, stop) in zip(peers, events):
                    times[n].append(start.elapsed_time(stop) * 1000.0)
            row = {"chain": name, "batch": batch, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
                   "device": torch.cuda.get_device_name(), "repeats": a.repeats, "preheat_s": a.preheat}
            row.update({f"{n}_us": round(statistics.median(t), 3) for n, t in times.items()})
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
