"""Where a conv chain's overlap can pay, from the plan alone (no GPU): the blocks of ResNet-18/34 (basic), ResNet-50
(bottleneck) and VGG-19 at every stage's image size, as sm90 conv chains, at batches 1-32. For each block and batch:
each stage's tiles, its waves over the SMs (tiles / (SMs x blocks per SM)), how full the producer's last wave is,
and run()'s rule (`ConvPlan.run_mode`, the mirror of ConvChain::mode). A producer whose last wave is far from full
leaves SMs idle at its end that the consumer's first tiles could use; one whose waves are all full has little to
give (benchmarks/NOTES.md c11). The last column bounds what any overlap can gain over back to back at that point
(wave quantization, c22): a chain of stages of w_s waves takes sum(ceil(w_s)) waves back to back; overlapped, a stage
takes at best w_s where its producer runs more than a wave (its first tiles fill the producer's tail) or it does
and has a consumer (which fills its own tail), else its whole ceil(w_s) (a producer of at most one wave ends all its
tiles together: nothing starts early). The geometric mean over all points closes the table. With --write DIR, also writes each block's spec
(JSON) there, to generate and time on a GPU (scripts/conv_probe/layers_call.sh); --no-tiles: the specs, and the
table, without tiles (the generator derives them).

    python3 scripts/conv_waves.py [--sms 132] [--batches 1,2,4,8,16,32] [--write DIR [--no-tiles]]
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from cusync_gen.conv_plan import make_conv_plan  # noqa: E402
from cusync_gen.spec.loading import parse_spec  # noqa: E402


def _conv(name: str, a: str, k: int, r: int, tile_n: int, **more: Any) -> dict[str, Any]:  # noqa: ANN401
    stage = {"name": name, "op": "conv", "a": a, "k": k, "r": r, "s": r, "bias": True, "epilogue": "relu",
             "tile": {"threadblock": [128, tile_n, 64]}}
    if r == 3:
        stage["padding"] = 1
    if a != "input":
        stage["sync"] = "auto"
    stage.update(more)
    return stage


def _tile_n(k: int) -> int:
    return 64 if k <= 64 else 128


def blocks(batch_max: int) -> list[dict[str, Any]]:
    """The specs: one chain per block kind and stage size (fp16, the largest batch `batch_max`)."""
    out = []
    for hw, ch in ((56, 64), (28, 128), (14, 256), (7, 512)):
        first = _conv("conv1", "input", ch, 3, _tile_n(ch), n=batch_max, h=hw, w=hw, c=ch)
        second = _conv("conv2", "conv1", ch, 3, _tile_n(ch), residual="input")
        out.append({"name": f"resnet_basic_{hw}x{hw}x{ch}", "stages": [first, second]})
    for hw, ch in ((56, 64), (28, 128), (14, 256), (7, 512)):
        wide = 4 * ch
        c1 = _conv("conv1", "input", ch, 1, _tile_n(ch), n=batch_max, h=hw, w=hw, c=wide)
        c2 = _conv("conv2", "conv1", ch, 3, _tile_n(ch))
        c3 = _conv("conv3", "conv2", wide, 1, 128, residual="input")
        out.append({"name": f"resnet50_bottleneck_{hw}x{hw}x{wide}", "stages": [c1, c2, c3]})
    for hw, c_in, ch in ((224, 64, 64), (112, 128, 128), (56, 256, 256), (28, 512, 512), (14, 512, 512)):
        first = _conv("conv1", "input", ch, 3, _tile_n(ch), n=batch_max, h=hw, w=hw, c=c_in)
        second = _conv("conv2", "conv1", ch, 3, _tile_n(ch))
        out.append({"name": f"vgg19_{hw}x{hw}x{ch}", "stages": [first, second]})
    for b in out:
        b.update({"arch": "sm90", "target": "sm_90", "dtype": "fp16"})
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sms", type=int, default=132)
    ap.add_argument("--batches", default="1,2,4,8,16,32")
    ap.add_argument("--write", type=Path)
    ap.add_argument("--no-tiles", action="store_true", help="write the specs without tiles (the generator derives them)")
    args = ap.parse_args()
    batches = [int(x) for x in args.batches.split(",")]
    specs = blocks(max(batches))
    if args.no_tiles:
        specs = [{**data, "stages": [{k: v for k, v in st.items() if k != "tile"} for st in data["stages"]]} for data in specs]
    print("| block | batch | tiles per stage | waves per stage | producer's last wave | run() | overlap bound |")
    print("|---|---:|---|---|---:|---|---:|")
    bounds = []
    for data in specs:
        plan = make_conv_plan(parse_spec(data, data["name"]))
        for batch in batches:
            tiles, waves, fills, w = [], [], [], []
            for st in plan.at(batch).stages if plan.configs else plan.stages:
                n = st.tiles_m(batch) * st.tiles_n
                slots = args.sms * st.blocks_per_sm
                tiles.append(str(n))
                waves.append(f"{n / slots:.2f}")
                w.append(n / slots)
                fills.append((n - (math.ceil(n / slots) - 1) * slots) / slots)
            mode, _ = plan.run_mode(batch, args.sms)
            # a stage's partial last wave can be filled only by its consumer, and its first by its producer's
            # tail, where that producer runs more than a wave; else the stage takes its whole waves
            free = [(x > 1 and i + 1 < len(w)) or (i > 0 and w[i - 1] > 1) for i, x in enumerate(w)]
            bound = sum(math.ceil(x) for x in w) / sum(x if f else math.ceil(x) for x, f in zip(w, free))
            bounds.append(bound)
            print(f"| {data['name']} | {batch} | {' / '.join(tiles)} | {' / '.join(waves)} | {fills[0] * 100:.0f}% | {mode} "
                  f"| {bound:.3f}x |")
    print(f"\noverlap bound, geometric mean over the {len(bounds)} points: "
          f"{math.exp(sum(math.log(b) for b in bounds) / len(bounds)):.3f}x")
    if args.write is not None:
        args.write.mkdir(parents=True, exist_ok=True)
        for data in specs:
            (args.write / f"{data['name']}.json").write_text(json.dumps(data, indent=2) + "\n")
        print(f"\nwrote {len(specs)} specs to {args.write}")


if __name__ == "__main__":
    main()
