#!/usr/bin/env python3
"""The conv results table: our bench's RESULT lines (bench-<chain>.txt) and scripts/conv_torch.py's JSON lines
(torch.jsonl), per chain and batch, then per layer, then the two geometric means. Standard library only.

    python3 scripts/conv_results.py OUTDIR
"""

from __future__ import annotations

import json
import math
import sys
from pathlib import Path

LAYERS = {"resnet_block": ["conv1", "conv2"], "vgg_block": ["conv1", "conv2", "conv3"]}


def main() -> None:
    out = Path(sys.argv[1])
    ours: dict[tuple[str, int], dict] = {}
    for chain in LAYERS:
        path = out / f"bench-{chain}.txt"
        if not path.exists():
            continue
        for line in path.read_text().splitlines():
            if line.startswith("RESULT "):
                row = json.loads(line[len("RESULT "):])
                ours[(row["chain"], row["batch"])] = row
    torch: dict[tuple[str, int], dict] = {}
    if (out / "torch.jsonl").exists():
        for line in (out / "torch.jsonl").read_text().splitlines():
            if line.strip().startswith("{"):
                row = json.loads(line)
                torch[(row["chain"], row["batch"])] = row
    print("| chain | batch | back-to-back us | tile-synced us | cuDNN block us | synced vs back-to-back | synced vs cuDNN | bitwise | max err vs reference |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|")
    over_b2b, over_cudnn = [], []
    for (chain, batch), r in sorted(ours.items()):
        t = torch.get((chain, batch))
        cudnn = t["block_us"] if t else float("nan")
        s_b2b = r["sequential_us"] / r["overlap_us"]
        s_cudnn = cudnn / r["overlap_us"] if t else float("nan")
        over_b2b.append(s_b2b)
        if t:
            over_cudnn.append(s_cudnn)
        print(f"| {chain} | {batch} | {r['sequential_us']:.1f} | {r['overlap_us']:.1f} | {cudnn:.1f} | {s_b2b:.3f}x | "
              f"{s_cudnn:.3f}x | {'yes' if r['bitwise'] else 'NO'} | {r['ref_err']:.2g} |")
    print()
    print("Per layer (each kernel alone, CUDA graph of one launch; cuDNN: conv + bias + the epilogue's elementwise ops):")
    print()
    print("| chain | layer | batch | ours us | cuDNN us | ours vs cuDNN |")
    print("|---|---|---:|---:|---:|---:|")
    for (chain, batch), r in sorted(ours.items()):
        t = torch.get((chain, batch), {})
        for i, layer in enumerate(LAYERS[chain]):
            mine = r["stages_us"][i]
            theirs = t.get(f"{layer}_us", float("nan"))
            print(f"| {chain} | {layer} | {batch} | {mine:.1f} | {theirs:.1f} | {theirs / mine:.3f}x |")
    print()
    geo = lambda xs: math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else float("nan")  # noqa: E731
    print(f"conv geomean over cuDNN: {geo(over_cudnn):.2f}x")
    print(f"conv geomean over back-to-back: {geo(over_b2b):.2f}x")


if __name__ == "__main__":
    main()
