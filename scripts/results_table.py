"""Turn bench JSON lines (one object per M and policy) into the markdown table of a results file.

Usage: python3 scripts/results_table.py RUN_DIR/auto-*.jsonl
Columns: M, sequential us (run_sequential), then per policy the time of run() and its speedup.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path


def table(paths: list[Path]) -> str:
    rows: dict[tuple[str, int], dict] = defaultdict(dict)
    policies: list[str] = []
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            key = (r["chain"], r["m"])
            rows[key]["seq"] = r["sequential_us"]
            rows[key]["overlaps"] = r.get("overlaps", True)
            rows[key][r["policy"]] = r
            if r["policy"] not in policies:
                policies.append(r["policy"])
    head = "| chain | M | sequential us | " + " | ".join(f"{p} us | {p} speedup" for p in policies) + " | run() overlaps | checks |"
    sep = "|" + "---|" * (head.count("|") - 1)
    out = [head, sep]
    for (chain, m), r in sorted(rows.items()):
        ok = all(r[p]["bitwise_equal"] and r[p]["graph_ok"] and r[p]["sync_error"] is None for p in policies if p in r)
        err = max(r[p]["ref_rel_err"] for p in policies if p in r)
        cells = " | ".join(f"{r[p]['overlapped_us']:.1f} | {r[p]['speedup']:.3f}" for p in policies)
        checks = f"{'bitwise+graph ok' if ok else 'FAILED'}, ref err {err:.1e}"
        out.append(f"| {chain} | {m} | {r['seq']:.1f} | {cells} | {'yes' if r['overlaps'] else 'no (one wave)'} | {checks} |")
    return "\n".join(out)


if __name__ == "__main__":
    print(table([Path(p) for p in sys.argv[1:]]))
