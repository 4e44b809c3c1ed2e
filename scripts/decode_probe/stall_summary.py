"""Summarize `ncu --page source --csv --print-source sass`: the instructions holding most warp-state samples,
each with its largest stall reasons, and the totals per reason (columns as ncu names them)."""
import csv
import sys


def num(s):
    try:
        return float(str(s).replace(",", ""))
    except ValueError:
        return None


def main(path):
    with open(path, newline="") as f:
        lines = f.read().splitlines()
    start = next((i for i, l in enumerate(lines) if l.startswith('"#') or "Source" in l and "Address" in l), 0)
    rows = list(csv.reader(lines[start:]))
    head, body = rows[0], [r for r in rows[1:] if len(r) == len(rows[0])]
    print("columns:", " | ".join(head))
    src = next((i for i, h in enumerate(head) if h.strip().lower() == "source"), 1)
    allc = next((i for i, h in enumerate(head) if "Sampling (All" in h), None)
    if allc is None:
        print("no sampling column"); return
    reason = [i for i, h in enumerate(head) if h.lower().startswith("stall_") or "smsp__pcsamp" in h]
    total = sum(num(r[allc]) or 0 for r in body)
    print(f"instructions {len(body)}, samples {total:.0f}")
    per = {}
    for i in reason:
        per[head[i]] = sum(num(r[i]) or 0 for r in body)
    for k, v in sorted(per.items(), key=lambda kv: -kv[1])[:14]:
        print(f"  {k}: {v:.0f} ({100 * v / max(total, 1):.1f}%)")
    print("top instructions (samples, share, source, reasons):")
    for r in sorted(body, key=lambda r: -(num(r[allc]) or 0))[:36]:
        s = num(r[allc]) or 0
        rs = sorted(((num(r[i]) or 0, head[i]) for i in reason), reverse=True)[:3]
        why = ", ".join(f"{h.replace('stall_', '')} {v:.0f}" for v, h in rs if v > 0)
        print(f"{s:7.0f} {100 * s / max(total, 1):5.1f}%  {r[0][:8]} {r[src][:70]:70s} {why}")


if __name__ == "__main__":
    main(sys.argv[1])
