"""CPU model of d19's unit schedule (scripts/decode_probe/d19.patch): a GEMM's work is units of (tile, K slab),
CTA c takes units first, first + grid, ... (gemm1 tile-major, gemm2 slab-major; with rotate, gemm2's round robin
goes on where gemm1's ended). Checks that every (tile, chunk) is walked once, that the consumers' count of a CTA's
chunks equals the producer's walk, and prints each shape's chunks per CTA (max over mean) and when gemm2's
first units' inputs complete (the gemm1 round in which H's tile of their K slab has all its units).

    python3 scripts/decode_probe/unit_model.py [--grid 132] [--slab 8]
"""

from __future__ import annotations

import argparse
from collections import Counter

STEP_K, CHUNK_STEPS, TILE_N = 16, 8, 64
SHAPES = {"gpt3": (12288, 6144, 12288, False), "llama65": (8192, 2816, 8192, True),
          "llama3-8b": (4096, 14336, 4096, True), "odd": (1352, 200, 72, True)}


def gemm(k: int, n: int, slab: int) -> dict[str, int]:
    ksteps = -(-k // STEP_K)
    chunks = -(-ksteps // CHUNK_STEPS)
    tiles = -(-n // TILE_N)
    slabs = -(-chunks // slab)
    return {"tiles": tiles, "chunks": chunks, "slabs": slabs, "units": tiles * slabs}


def unit_at(g: dict[str, int], gi: int, u: int) -> tuple[int, int]:
    if gi == 0:
        return u // g["slabs"], u % g["slabs"]
    return u % g["tiles"], u // g["tiles"]


def walk(g: dict[str, int], gi: int, first: int, grid: int, slab: int) -> list[tuple[int, int]]:
    """The producer's walk: (tile, chunk) in order."""
    out = []
    for u in range(first, g["units"], grid):
        t, sl = unit_at(g, gi, u)
        out += [(t, cc) for cc in range(sl * slab, min(sl * slab + slab, g["chunks"]))]
    return out


def share(g: dict[str, int], gi: int, first: int, grid: int, slab: int) -> int:
    """The consumers' count (share_of): per unit kSlabChunks, the tile's last slab the rest."""
    last = g["chunks"] - (g["slabs"] - 1) * slab
    return sum(last if unit_at(g, gi, u)[1] == g["slabs"] - 1 else slab for u in range(first, g["units"], grid))


def first_unit(g1: dict[str, int], gi: int, c: int, grid: int, rotate: bool) -> int:
    if rotate and gi == 1:
        return (c - g1["units"] % grid) % grid
    return c


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--grid", type=int, default=132)
    ap.add_argument("--slab", type=int, default=8)
    a = ap.parse_args()
    for name, (hidden, f, n_out, swiglu) in SHAPES.items():
        g1 = gemm(hidden, 2 * f if swiglu else f, a.slab)
        g2 = gemm(f, n_out, a.slab)
        for rotate in (False, True):
            per_cta = []
            for gi, g in ((0, g1), (1, g2)):
                seen: Counter[tuple[int, int]] = Counter()
                for c in range(a.grid):
                    first = first_unit(g1, gi, c, a.grid, rotate)
                    w = walk(g, gi, first, a.grid, a.slab)
                    assert len(w) == share(g, gi, first, a.grid, a.slab), (name, gi, c)
                    seen.update(w)
                    if gi == 0:
                        per_cta.append(len(w))
                    else:
                        per_cta[c] += len(w)
                assert all(v == 1 for v in seen.values()) and len(seen) == g["tiles"] * g["chunks"], (name, gi)
            mean = sum(per_cta) / len(per_cta)
            print(f"{name:9s} slab {a.slab:2d} rotate {int(rotate)}: gemm1 {g1['tiles']} tiles x {g1['slabs']} slabs, "
                  f"gemm2 {g2['tiles']} x {g2['slabs']}; chunks per CTA max {max(per_cta)} / mean {mean:.1f} "
                  f"= {max(per_cta) / mean:.3f}, min {min(per_cta)}")


if __name__ == "__main__":
    main()
