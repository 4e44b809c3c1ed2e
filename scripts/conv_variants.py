#!/usr/bin/env python3
"""Tile variants of the conv examples, for the selection pass of scripts/conv_gpu.sh: each variant is the
example spec with every stage's tile replaced (same name, so the project it generates differs from the
example's only in the tiles). Writes DIR/<chain>@<variant>.yaml.

    python3 scripts/conv_variants.py DIR
    python3 scripts/conv_variants.py --sm90 DIR

--sm90: the sm90 examples instead, every stage on one sm90 tile (its N at most the stage's channels), each
variant its own chain <chain>_<variant> (DIR/<chain>_<variant>.yaml), distinct tiles only, for
scripts/gpu_conv_sm90.sh's BENCHES: each stage's time alone at each tile picks its tile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
VARIANTS = {
    "resnet_block": {
        "t128x64x32s4": {"threadblock": [128, 64, 32], "warp": [64, 32, 32], "stages": 4},
        "t128x64x64s3": {"threadblock": [128, 64, 64], "warp": [64, 32, 64], "stages": 3},
        "t64x64x64s4": {"threadblock": [64, 64, 64], "warp": [32, 32, 64], "stages": 4},
    },
    "vgg_block": {
        "t128x128x32s4": {"threadblock": [128, 128, 32], "warp": [64, 64, 32], "stages": 4},
        "t128x128x64s3": {"threadblock": [128, 128, 64], "warp": [64, 64, 64], "stages": 3},
        "t256x128x32s3": {"threadblock": [256, 128, 32], "warp": [64, 64, 32], "stages": 3},
        "t64x128x64s4": {"threadblock": [64, 128, 64], "warp": [32, 64, 64], "stages": 4},
    },
}


#: sm90 conv tiles (pixels, channels): every shape the spec takes (M 64 or 128, N 64-256, M * N <= 128 * 128).
SM90_TILES = ((128, 64), (128, 128), (64, 64), (64, 128), (64, 256))
SM90_CHAINS = ("vgg_block_sm90", "resnet_block_sm90", "bottleneck_block_sm90")


def sm90_variants(out: Path) -> None:
    for chain in SM90_CHAINS:
        seen = set()
        for m, n in SM90_TILES:
            data = yaml.safe_load((REPO / "cusync_gen" / "examples" / f"{chain}.yaml").read_text())
            tiles = tuple((m, min(n, max(64, stage["k"]))) for stage in data["stages"])
            if tiles in seen:
                continue
            seen.add(tiles)
            for stage, (tm, tn) in zip(data["stages"], tiles):
                stage["tile"] = {"threadblock": [tm, tn, 64]}
            data["name"] = f"{chain}_t{m}x{n}"
            (out / f"{data['name']}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


def main() -> None:
    if sys.argv[1] == "--sm90":
        out = Path(sys.argv[2])
        out.mkdir(parents=True, exist_ok=True)
        sm90_variants(out)
        return
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    for chain, variants in VARIANTS.items():
        data = yaml.safe_load((REPO / "cusync_gen" / "examples" / f"{chain}.yaml").read_text())
        for name, tile in variants.items():
            for stage in data["stages"]:
                stage["tile"] = tile
            (out / f"{chain}@{name}.yaml").write_text(yaml.safe_dump(data, sort_keys=False))


if __name__ == "__main__":
    main()
