"""An ab_call.sh log (its stdout) as one markdown table: per shape and M, cuBLASLt's chain (median over the runs)
and each binary's chain under PDL (`bulkp`, us, the mean over its rounds), binaries in the order they first ran.

    python3 scripts/decode_probe/ab_table.py ab.txt
"""
import collections
import re
import sys

SHAPES = ("gpt3", "llama65", "llama3-8b")


def main(path: str) -> None:
    cur, order = None, []
    ours, lt = collections.defaultdict(list), collections.defaultdict(list)
    for line in open(path):
        m = re.match(r"== (\S+) round (\d+)", line)
        if m:
            cur = m.group(1)
            if cur not in order:
                order.append(cur)
            continue
        f = line.split()
        if cur and f and f[0] in SHAPES and len(f) > 15:  # the probe's table: $5 cuBLASLt, $14 bulkp
            ours[(cur, f[0], int(f[1]))].append(float(f[13]))
            lt[(f[0], int(f[1]))].append(float(f[4]))
    points = sorted(lt, key=lambda p: (SHAPES.index(p[0]), p[1]))
    print("| shape | M | cuBLASLt | " + " | ".join(order) + " |")
    print("|---|---|---|" + "---|" * len(order))
    for s, m in points:
        v = sorted(lt[(s, m)])
        cells = [f"{sum(x) / len(x):.1f}" if (x := ours.get((n, s, m))) else "-" for n in order]
        print(f"| {s} | {m} | {v[len(v) // 2]:.1f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main(sys.argv[1])
