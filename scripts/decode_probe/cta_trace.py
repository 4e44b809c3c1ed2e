"""Per-CTA timeline of the stream kernel from a probe log (DECODE_PROBE_TRACE_DUMP=n, DECODE_PROBE_BULK_TRACE=1):
is a CTA's gemm1 time set by its SM, or by its range of the weights? For each shape: how the CTA -> SM mapping
and the CTAs' times repeat from run to run, how a CTA's time correlates with its range's piece structure (pieces,
where its first piece ends), and the mean time of CTAs with one piece against two. Shapes and their gemm1 tile
counts as the probe's (SHAPES below: tiles = ceil(n1 x (2 for SwiGLU) / 64), chunks per tile = ceil(k1 / 128)).

    python3 scripts/decode_probe/cta_trace.py decode_probe.log [grid]
"""

import collections
import math
import re
import statistics
import sys

SHAPES = {"gpt3": (12288, 6144, False), "llama65": (8192, 2816, True), "llama3-8b": (4096, 14336, True)}
STAMPS = ["entry", "issued1", "issued", "data", "done1", "ready2", "done"]


def corr(a, b):
    ma, mb = statistics.mean(a), statistics.mean(b)
    den = math.sqrt(sum((x - ma) ** 2 for x in a) * sum((y - mb) ** 2 for y in b))
    return sum((x - ma) * (y - mb) for x, y in zip(a, b)) / den if den else float("nan")


def main(path, grid=132):
    rows = collections.defaultdict(list)  # shape -> (run, cta, sm, stamps)
    for line in open(path):
        m = re.match(r"cta (\S+) M=(\d+) run (\d+) cta (\d+) sm (\d+): (.*)", line)
        if m:
            rows[m.group(1)].append((int(m.group(3)), int(m.group(4)), int(m.group(5)), [float(v) for v in m.group(6).split()]))
    by_sm = {}
    for shape, rs in rows.items():
        at = STAMPS.index("issued1")
        runs = sorted({r[0] for r in rs})
        sm_of = [{r[1]: r[2] for r in rs if r[0] == k} for k in runs]
        fixed = sum(all(m.get(c) == sm_of[0][c] for m in sm_of) for c in sm_of[0])
        t = collections.defaultdict(list)
        for r in rs:
            t[r[1]].append(r[3][at])
        mean = {c: statistics.mean(v) for c, v in t.items()}
        within = statistics.mean(statistics.pstdev(v) for v in t.values())
        across = statistics.pstdev(list(mean.values()))
        print(f"{shape}: {len(runs)} runs; CTA -> SM the same in every run for {fixed} of {len(sm_of[0])} CTAs; "
              f"issued1 std run to run {within:.1f} us, across CTAs {across:.1f} us")
        by_sm[shape] = {sm_of[0][c]: v for c, v in mean.items()}
        if shape not in SHAPES:
            continue
        k1, n1, swiglu = SHAPES[shape]
        tiles, chunks = -(-n1 * (2 if swiglu else 1) // 64), -(-k1 // 128)
        q = tiles * chunks
        pieces, first_end = [], []
        for c in range(grid):
            lo, hi = c * q // grid, (c + 1) * q // grid
            pieces.append((hi - 1) // chunks - lo // chunks + 1)
            first_end.append(min(hi, (lo // chunks + 1) * chunks) - lo)
        cs = [c for c in range(grid) if c in mean]
        ts = [mean[c] for c in cs]
        print(f"  corr(issued1, pieces) {corr([pieces[c] for c in cs], ts):.2f}, "
              f"corr(issued1, chunks before the first piece end) {corr([first_end[c] for c in cs], ts):.2f}")
        groups = collections.defaultdict(list)
        for c in cs:
            groups[pieces[c]].append(mean[c])
        print("  mean issued1 by pieces: " + ", ".join(f"{p}: {statistics.mean(v):.1f} us ({len(v)} CTAs)"
                                                      for p, v in sorted(groups.items())))
    shapes = sorted(by_sm)
    for i in range(len(shapes)):
        for j in range(i + 1, len(shapes)):
            a, b = by_sm[shapes[i]], by_sm[shapes[j]]
            ks = sorted(set(a) & set(b))
            print(f"issued1 by SM, {shapes[i]} against {shapes[j]}: corr {corr([a[k] for k in ks], [b[k] for k in ks]):.2f}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 132)
