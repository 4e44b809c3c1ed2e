#!/usr/bin/env python3
"""What each part of the overlap's per-tile work costs: the bench's PROFILE lines (`<chain>_bench --profile-hooks`,
files profile-<chain>.txt in OUTDIR) as a table. Each stage alone, its own CUDA graph, median us a launch: plain (no
sync), synchronized with the hooks as first built (ticket, waits satisfied at their first poll, post, sink finish
count), then without the ticket, without the waits, without the post; the lean hooks, then without their waits,
their post and a sink's finish count (what remains is the synced kernel's own cost over the plain one; files from
benches before those variants leave the columns nan); the kernels without the register bound. A sink's poll warp counts
its finish (kHookEarlyFinish) only where it waits, so from lean_no_wait on a sink counts it in the epilogue: its
"lean: waits" is then the waits less what the epilogue's count costs over the poll warp's, and the last column (lean
with the count in the epilogue, less lean) is what the poll warp's count saves. Standard library only.

    python3 scripts/conv_profile.py OUTDIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main() -> None:
    out = Path(sys.argv[1])
    rows = []
    for path in sorted(out.glob("profile-*.txt")):
        for line in path.read_text().splitlines():
            if line.startswith("PROFILE "):
                rows.append(json.loads(line[len("PROFILE "):]))
    print("| chain | batch | stage | tiles | plain us | synced (first hooks) us | ticket us | waits us | post us "
          "| rest us | synced (lean) us | lean - plain us | lean: waits us | lean: post us | lean: finish count us "
          "| lean: rest us | plain, unbounded kernel us | synced no ticket, unbounded us | finish in the epilogue us |")
    print("|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    nan = float("nan")
    for r in rows:
        ticket = r["synced_legacy"] - r["no_ticket"]
        waits = r["no_ticket"] - r["no_ticket_no_wait"]
        post = r["no_ticket_no_wait"] - r["no_ticket_no_wait_no_post"]
        rest = r["no_ticket_no_wait_no_post"] - r["plain"]
        lean = [r["synced_lean"], r.get("lean_no_wait", nan), r.get("lean_no_wait_no_post", nan), r.get("lean_bare", nan),
                r["plain"]]
        parts = " | ".join(f"{a - b:+.1f}" for a, b in zip(lean, lean[1:]))
        print(f"| {r['chain']} | {r['batch']} | {r['stage']} | {r['tiles']} | {r['plain']:.1f} | {r['synced_legacy']:.1f} | "
              f"{ticket:+.1f} | {waits:+.1f} | {post:+.1f} | {rest:+.1f} | {r['synced_lean']:.1f} | "
              f"{r['synced_lean'] - r['plain']:+.1f} | {parts} | {r['plain_unbounded']:.1f} | {r.get('no_ticket_unbounded', r.get('synced_legacy_unbounded', nan)):.1f} | "
              f"{r.get('lean_finish_in_epilogue', nan) - r['synced_lean']:+.1f} |")


if __name__ == "__main__":
    main()
