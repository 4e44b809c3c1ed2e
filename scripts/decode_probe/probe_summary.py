#!/usr/bin/env python3
"""Summarize an l2_call.sh / both_call.sh output folder (NOTES d38-d43): the probes' RESULT lines by variant and
round (slab_product_<variant>: slab, cuBLASLt, read, check), the trace's TRACE lines (d39) and mma_gemv's RESULT
lines (d41), as Markdown tables.

    python3 scripts/decode_probe/probe_summary.py OUT_DIR
"""

from __future__ import annotations

import json
import re
import sys
from collections import defaultdict
from pathlib import Path


def tagged(path: Path, tag: str) -> list[dict]:
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith(tag + " "):
            try:
                rows.append(json.loads(line[len(tag) + 1:]))
            except json.JSONDecodeError:
                pass
    return rows


def probes(folder: Path) -> list[str]:
    times: dict[tuple[str, int], dict[str, list[str]]] = defaultdict(lambda: defaultdict(list))
    lt: dict[tuple[str, int], list[float]] = defaultdict(list)
    variants: list[str] = []
    for path in sorted(folder.glob("probe-*-r*.txt")):
        match = re.fullmatch(r"probe-(.+)-r(\d+)\.txt", path.name)
        if not match:
            continue
        variant = match.group(1)
        if variant not in variants:
            variants.append(variant)
        for row in tagged(path, "RESULT"):
            key = (row["shape"], int(row["m"]))
            times[key][variant].append(f"{row['slab_us']:.1f}" + ("" if row.get("check") else " FAIL"))
            lt[key].append(float(row["cublaslt_us"]))
    if not times:
        return []
    out = ["| shape | M | " + " | ".join(variants) + " | cuBLASLt (min-max) |",
           "|---|---|" + "---|" * len(variants) + "---|"]
    for (shape, m), by in sorted(times.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        cells = [", ".join(by.get(v, [])) or "-" for v in variants]
        out.append(f"| {shape} | {m} | " + " | ".join(cells) + f" | {min(lt[(shape, m)]):.1f}-{max(lt[(shape, m)]):.1f} |")
    return out


def traces(folder: Path) -> list[str]:
    path = folder / "trace.txt"
    rows = tagged(path, "TRACE") if path.exists() else []
    if not rows:
        return []
    keys = ["last_entry", "post_first", "post_median", "post_p90", "post_last", "seen_last", "end_last"]
    out = ["| shape | M | " + " | ".join(keys) + " |", "|---|---|" + "---|" * len(keys)]
    out += [f"| {r['shape']} | {r['m']} | " + " | ".join(f"{r[k]:.2f}" for k in keys) + " |" for r in rows]
    return out


def gemv(folder: Path) -> list[str]:
    path = folder / "mma_gemv.txt"
    rows = tagged(path, "RESULT") if path.exists() else []
    if not rows:
        return []
    out = ["| GEMM | N | K | M | CUDA cores us | mma kIn 4 | mma kIn 8 | read us (TB/s) | best x read | check |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        best = min(r["cuda_core_us"], r["mma4_us"], r["mma8_us"])
        out.append(f"| {r['shape']} | {r['n']} | {r['k']} | {r['m']} | {r['cuda_core_us']:.1f} | {r['mma4_us']:.1f} | "
                   f"{r['mma8_us']:.1f} | {r['read_us']:.1f} ({r['read_tbps']:.2f}) | {best / r['read_us']:.2f} | "
                   f"{'pass' if r['check'] else 'FAIL'} |")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2 or not Path(argv[1]).is_dir():
        print(__doc__.strip(), file=sys.stderr)
        return 2
    folder = Path(argv[1])
    for title, lines in (("Probes (us, each round)", probes(folder)), ("Per-CTA stamps (us after the first entry)",
                                                                      traces(folder)), ("GEMV probe", gemv(folder))):
        if lines:
            print(f"## {title}\n")
            print("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
