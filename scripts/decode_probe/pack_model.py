"""Host model of the stream kernel's weight packing (detail::bulk_pack_kernel in bulk_chain.cuh, NOTES d13's d15):
for random weights, every lane's A fragments from the fragment layout must equal those that the earlier layout
(reg_pack_kernel with one warp along N, which reg_stream.cuh still uses) gives after mma_packed's byte permutes, with SwiGLU's gate|up halves on and off and K and N tails.
Mirrors the two kernels' index arithmetic line by line; a model, not the kernels (those ran in the probe).

    python3 scripts/decode_probe/pack_model.py
"""

import numpy as np


def chunks(k, n):
    """Every 16-byte chunk c of both layouts: (c, index within the lane's four, step, lane (g, t), its 8 columns)."""
    ks = (k + 15) // 16
    for c in range(((n + 63) // 64) * ks * 128):
        lane, i, rest = c % 32, (c // 32) % 4, c // 128
        step, tile = rest % ks, rest // ks
        yield c, i, step, lane >> 2, lane & 3, tile * 64 + 8 * (lane >> 2)


def source_col(col8, n, halves):
    """The first weight column of a group of 8 (SwiGLU's gate|up halves interleaved in groups of 8)."""
    return (col8 // 16) * 8 + (n // 2 if col8 % 16 >= 8 else 0) if halves else col8


def reg_pack(w, k, n, halves):
    out = np.zeros((((n + 63) // 64) * ((k + 15) // 16) * 128, 8), np.uint16)
    for c, i, step, g, t, col in chunks(k, n):
        row = step * 16 + 2 * t + (i & 1) + (8 if i >= 2 else 0)
        src = source_col(col, n, halves)
        if row < k and col < n:
            out[c] = w[row, src:src + 8]
    return out


def frag_pack(w, k, n, halves):
    out = np.zeros((((n + 63) // 64) * ((k + 15) // 16) * 128, 8), np.uint16)
    for c, j, step, g, t, col8 in chunks(k, n):
        src8 = source_col(col8, n, halves)
        v = []
        for r in range(4):
            row = step * 16 + 2 * t + (8 if r >= 2 else 0)
            col = src8 + 2 * j + (r & 1)
            lo = w[row, col] if row < k and col8 < n else 0
            hi = w[row + 1, col] if row + 1 < k and col8 < n else 0
            v += [lo, hi]
        out[c] = v
    return out


def perm(a, b, sel):  # __byte_perm on 16-bit halves: 0x5410 -> (a.lo, b.lo), 0x7632 -> (a.hi, b.hi)
    return (a[0], b[0]) if sel == 0x5410 else (a[1], b[1])


rng = np.random.default_rng(1)
for k, n, halves in [(40, 80, False), (48, 96, True), (24, 64, True), (136, 200, False)]:
    w = rng.integers(1, 60000, size=(k, n), dtype=np.uint16)
    rp, fp = reg_pack(w, k, n, halves), frag_pack(w, k, n, halves)
    ks = (k + 15)//16; tiles = (n + 63)//64
    bad = 0
    for tile in range(tiles):
        for s in range(ks):
            for lane in range(32):
                base = (tile*ks + s)*128
                wr = [rp[base + i*32 + lane] for i in range(4)]
                for j in range(4):
                    lo0, lo1 = wr[0][2*j:2*j+2], wr[1][2*j:2*j+2]
                    hi0, hi1 = wr[2][2*j:2*j+2], wr[3][2*j:2*j+2]
                    af = [perm(lo0, lo1, 0x5410), perm(lo0, lo1, 0x7632), perm(hi0, hi1, 0x5410), perm(hi0, hi1, 0x7632)]
                    got = fp[base + j*32 + lane]
                    exp = [x for p in af for x in p]
                    bad += list(got) != [int(x) for x in exp]
    print(f"k={k} n={n} halves={halves}: {bad} mismatching fragments")
    assert bad == 0
