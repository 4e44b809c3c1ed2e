#!/usr/bin/env python3
"""The conv results table: our bench's RESULT lines (bench-<chain>.txt) and scripts/conv_torch.py's JSON lines
(torch.jsonl), per chain and batch, then per layer, then the two geometric means. Standard library only.

    python3 scripts/conv_results.py OUTDIR [SUFFIX]

SUFFIX: our projects' name suffix (`_sm90`: bench-<chain>_sm90.txt, the sm90 kernels' versions of the
examples), against the same PyTorch blocks. Without a suffix every bench-<chain>.txt counts: the examples' blocks,
then any other chain (e.g. the layers of scripts/conv_waves.py, timed by PyTorch through `conv_torch.py --specs`),
whose stages are conv1, conv2, ... in order.
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

LAYERS = {"resnet_block": ["conv1", "conv2"], "vgg_block": ["conv1", "conv2", "conv3"],
          "bottleneck_block": ["conv1", "conv2", "conv3"]}


def _geo(xs: list[float]) -> float:
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")


def main() -> None:
    out = Path(sys.argv[1])
    suffix = sys.argv[2] if len(sys.argv) > 2 else ""
    ours: dict[tuple[str, int], dict] = {}
    others = sorted({p.name[len("bench-"):-len(".txt")] for p in out.glob("bench-*.txt")} - set(LAYERS)) if not suffix else []
    order = list(LAYERS) + others
    for chain in order:
        path = out / f"bench-{chain}{suffix}.txt"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if line.startswith("RESULT "):
                row = json.loads(line[len("RESULT "):])
                ours[(chain, row["batch"])] = row  # the PyTorch block's name (without the suffix)
    for (chain, _), row in ours.items():
        LAYERS.setdefault(chain, [f"conv{i + 1}" for i in range(len(row["stages_us"]))])
    torch: dict[tuple[str, int], dict] = {}
    for name in ("torch.jsonl", "compile.jsonl"):
        if (out / name).exists():
            for line in (out / name).read_text().splitlines():
                if line.strip().startswith("{"):
                    row = json.loads(line)
                    torch.setdefault((row["chain"], row["batch"]), {}).update(row)
    print("| chain | batch | cuDNN block us | torch.compile us | our back-to-back us | back-to-back + PDL us | our overlap us "
          "| two-stream overlap us | overlap, block order us | run() us | run()'s pick | run() vs cuDNN | run() vs back-to-back "
          "| overlap vs back-to-back | bitwise | max err |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---|---:|")
    run_b2b, run_cudnn, ovl_b2b, ovl_cudnn, run_compiled = [], [], [], [], []
    nan = float("nan")
    for (chain, batch), r in sorted(ours.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
        t = torch.get((chain, batch), {})
        cudnn, compiled = t.get("block_us", nan), t.get("compiled_us", nan)
        two = r.get("two_stream_us", -1.0)
        chained, block_order = r.get("chained_us", nan), r.get("block_order_us", nan)
        run_b2b.append(r["sequential_us"] / r["run_us"])
        ovl_b2b.append(r["sequential_us"] / r["overlap_us"])
        if "compiled_us" in t:
            run_compiled.append(compiled / r["run_us"])
        if "block_us" in t:
            run_cudnn.append(cudnn / r["run_us"])
            ovl_cudnn.append(cudnn / r["overlap_us"])
        print(f"| {chain} | {batch} | {cudnn:.1f} | {compiled:.1f} | {r['sequential_us']:.1f} | {chained:.1f} | "
              f"{r['overlap_us']:.1f} | {two:.1f} | {block_order:.1f} | {r['run_us']:.1f} | {r['run_mode']} | {cudnn / r['run_us']:.3f}x | "
              f"{r['sequential_us'] / r['run_us']:.3f}x | {r['sequential_us'] / r['overlap_us']:.3f}x | "
              f"{'yes' if r['bitwise'] else 'NO'} | {r['ref_err']:.2g} |")
    print()
    print("Per layer (each kernel alone, CUDA graph of one launch; cuDNN: conv + bias + the epilogue's elementwise ops):")
    print()
    print("| chain | layer | batch | ours us | ours, plain kernel us | cuDNN us | ours vs cuDNN |")
    print("|---|---|---:|---:|---:|---:|---:|")
    for (chain, batch), r in sorted(ours.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
        t = torch.get((chain, batch), {})
        for i, layer in enumerate(LAYERS[chain]):
            mine = r["stages_us"][i]
            theirs = t.get(f"{layer}_us", nan)
            plain = r.get("plain_stages_us", [nan] * len(LAYERS[chain]))[i]
            print(f"| {chain} | {layer} | {batch} | {mine:.1f} | {plain:.1f} | {theirs:.1f} | {theirs / mine:.3f}x |")
    if any("plain_sequential_us" in r for r in ours.values()):
        print()
        print("Kernels and hooks (the plain kernels: no register bound, 2 blocks per SM where the bounded one holds 3; "
              "the first overlap: the hooks as first built, tiles from the ticket):")
        print()
        print("| chain | batch | back-to-back us | plain kernels us | chained us | plain kernels us | overlap us "
              "| plain kernels us | first overlap us | overlap vs chained | run() vs plain back-to-back |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        run_plain = []
        for (chain, batch), r in sorted(ours.items(), key=lambda kv: (order.index(kv[0][0]), kv[0][1])):
            if "plain_sequential_us" not in r:
                continue
            run_plain.append(r["plain_sequential_us"] / r["run_us"])
            print(f"| {chain} | {batch} | {r['sequential_us']:.1f} | {r['plain_sequential_us']:.1f} | {r['chained_us']:.1f} | "
                  f"{r['plain_chained_us']:.1f} | {r['overlap_us']:.1f} | {r['plain_overlap_us']:.1f} | "
                  f"{r['legacy_overlap_us']:.1f} | {r['chained_us'] / r['overlap_us']:.3f}x | "
                  f"{r['plain_sequential_us'] / r['run_us']:.3f}x |")
        print()
        print(f"run() geomean over back-to-back with the plain kernels: {_geo(run_plain):.2f}x")
    print()
    print(f"overlap (always tile-synced) geomean over cuDNN: {_geo(ovl_cudnn):.2f}x, over back-to-back: {_geo(ovl_b2b):.2f}x")
    if run_compiled:
        print(f"run() geomean over torch.compile at the {len(run_compiled)} points where it was timed: {_geo(run_compiled):.2f}x")
    print()
    print(f"conv geomean over cuDNN: {_geo(run_cudnn):.2f}x")
    print(f"conv geomean over back-to-back: {_geo(run_b2b):.2f}x")


if __name__ == "__main__":
    main()
