"""Turn bench JSON lines (one object per M and policy) into the markdown table of a results file.

Usage: python3 scripts/results_table.py RUN_DIR/auto-*.jsonl
Columns: M, sequential us (run_sequential), then per policy the time of run() and its speedup.
       python3 scripts/results_table.py --sm90 bench-*.jsonl       (the sm90 results file's table)
       python3 scripts/results_table.py --attention bench-*.jsonl  (ours and PyTorch's rows together)
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




def sm90_table(paths: list[Path]) -> str:
    """sm90 runs: the baselines and the best overlapped variant per (chain, M), speedups and the floor."""
    import math

    floors: dict[str, float] = {}  # each bench binary measures the cuBLAS rate once, at its start
    best: dict[tuple[str, int], dict] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "floor_tflops" in r:
                floors[r["chain"]] = r["floor_tflops"]
                continue
            key = (r["chain"], r["m"])
            prev = best.get(key)
            if prev is None or (r["overlapped_us"] > 0 and r["overlapped_us"] < prev["overlapped_us"]):
                best[key] = r
    head = ("| chain | M | cuBLAS chain us | CUTLASS back-to-back us | CUTLASS + PDL us | ours sequential us | "
            "best overlapped us (policy) | vs cuBLAS | vs back-to-back | chain / floor | checks |")
    out = [head, "|" + "---|" * 11]
    ratios = []
    for (chain, m), r in sorted(best.items()):
        ovl = r["overlapped_us"]
        cub = r.get("cublas_us", -1.0)
        vs_cublas = cub / ovl if cub > 0 and ovl > 0 else float("nan")
        if not math.isnan(vs_cublas):
            ratios.append(vs_cublas)
        vs_stock = r["stock_us"] / ovl if ovl > 0 else float("nan")
        floor = floors.get(chain)
        over_floor = ovl / (r["gemm_flops"] / (floor * 1e12) * 1e6) if floor else float("nan")
        ok = r["bitwise_equal"] and r["graph_ok"] and r["sync_error"] is None and r.get("stock_bitwise", True)
        checks = f"{'ok' if ok else 'FAILED'}, ref err {r['ref_rel_err']:.1e}"
        policy = r["policy"] + ("" if r.get("overlaps", True) else ", seq fallback")
        out.append(f"| {chain} | {m} | {cub:.1f} | {r['stock_us']:.1f} | {r['stock_pdl_us']:.1f} | "
                   f"{r['sequential_us']:.1f} | {ovl:.1f} ({policy}) | {vs_cublas:.3f} | {vs_stock:.3f} | "
                   f"{over_floor:.2f} | {checks} |")
    for chain, floor in sorted(floors.items()):
        out.append(f"\nfloor for {chain}: cuBLAS 8192^3 at {floor:.1f} TFLOP/s, measured at the start of its bench run")
    if ratios:
        geo = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        out.append(f"\ngeomean speedup over cuBLAS chain: {geo:.2f}x")
    return "\n".join(out)


def attention_table(paths: list[Path]) -> str:
    """One line per (chain, batch, new, cached): our back-to-back and overlapped times, PyTorch's, the
    per-stage times (each stage alone), and the checks."""
    ours: dict[tuple, dict] = {}
    torch: dict[tuple, float] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            key = (r["chain"], r["batch"], r["new_tokens"], r["cache_tokens"])
            if "torch_us" in r:
                torch[key] = r["torch_us"]
            else:
                ours[key] = r
    out = ["| chain | phase | batch | new | cached | back-to-back us | overlapped us | speedup | PyTorch us | "
           "vs PyTorch | qkv / scores / softmax / pv / proj us (alone) | checks |",
           "|" + "---|" * 12]
    for key in sorted(ours, key=lambda k: (k[0], k[2] == 1, k[1], k[3], k[2])):
        r = ours[key]
        phase = "generation" if r["new_tokens"] == 1 else "prompt"
        t = torch.get(key)
        vs = f"{t / r['overlapped_us']:.2f}x" if t else "-"
        stages = " / ".join(f"{x:.0f}" for x in r.get("stage_us", []))
        ok = r["bitwise_equal"] and r["graph_ok"] and "sync_error" not in r
        checks = f"{'bitwise+graph ok' if ok else 'FAILED'}, ref err {r['ref_rel_err']:.1e}"
        out.append(f"| {key[0]} | {phase} | {key[1]} | {key[2]} | {key[3]} | {r['sequential_us']:.1f} | "
                   f"{r['overlapped_us']:.1f} | {r['speedup']:.3f} | {t if t else '-'} | {vs} | {stages} | {checks} |")
    return "\n".join(out)


if __name__ == "__main__":
    args = sys.argv[1:]
    if args and args[0] == "--sm90":
        print(sm90_table([Path(p) for p in args[1:]]))
    elif args and args[0] == "--attention":
        print(attention_table([Path(p) for p in args[1:]]))
    else:
        print(table([Path(p) for p in args]))
