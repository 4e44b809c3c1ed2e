"""Turn bench JSON lines (one object per M and policy) into the markdown table of a results file.

Usage: python3 scripts/results_table.py RUN_DIR/auto-*.jsonl
Columns: M, sequential us (run_sequential), then per policy the time of run() and its speedup.
       python3 scripts/results_table.py --sm90 bench-*.jsonl torch.jsonl  (the sm90 results file's table)
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




def sm90_table(paths: list[Path], headline: set[str] | None = None) -> str:
    """sm90 runs (issue 10's results file): per (chain, M) every peer, what run() picked and its time.

    `paths`: the benches' JSON lines and scripts/torch_peers.py's (rows with "variant": torch_eager or
    torch_compile), all from one run on one machine. Peers: the cuBLAS chain, CUTLASS back to back, with
    PDL and stream-K (our bench times them in the same binary), PyTorch eager and torch.compile. "ours"
    is run() as the library runs it (its dispatch table or rule; the mode is shown), the best overlap is
    the fastest tile-synced run of any policy. Ends with the two lines the issue asks for, over the chains
    in `headline` (default: every chain; one spec per MLP when two specs compute the same MLP)."""
    import math

    floors: dict[str, float] = {}  # each bench binary measures the cuBLAS rate once, at its start
    best: dict[tuple[str, int], dict] = {}
    torch: dict[tuple[str, int, str], float] = {}
    for path in paths:
        for line in path.read_text().splitlines():
            if not line.startswith("{"):
                continue
            r = json.loads(line)
            if "floor_tflops" in r:
                floors[r["chain"]] = r["floor_tflops"]
                continue
            if "variant" in r:
                torch[(r["chain"], r["m"], r["variant"])] = r["us"]
                continue
            key = (r["chain"], r["m"])
            prev = best.get(key)
            if prev is None or (r["overlapped_us"] > 0 and r["overlapped_us"] < prev["overlapped_us"]):
                best[key] = r
    head = ("| chain | M | cuBLAS chain | CUTLASS b2b | CUTLASS + PDL | CUTLASS stream-K | PyTorch eager | "
            "torch.compile | ours: run() (mode) | best overlap (policy) | vs cuBLAS | vs best peer (which) | "
            "chain / floor | checks |")
    out = ["Times in us (medians of CUDA-graph replays).", "", head, "|" + "---|" * 14]
    vs_cublas_all, vs_peer_all = [], []
    missing: list[str] = []
    for (chain, m), r in sorted(best.items()):
        ours = r.get("run_us", r["overlapped_us"])
        peers = {"cuBLAS": r.get("cublas_us", -1.0), "CUTLASS b2b": r.get("stock_us", -1.0),
                 "CUTLASS + PDL": r.get("stock_pdl_us", -1.0), "CUTLASS stream-K": r.get("streamk_us", -1.0),
                 "PyTorch eager": torch.get((chain, m, "torch_eager"), -1.0),
                 "torch.compile": torch.get((chain, m, "torch_compile"), -1.0)}
        for name in ("PyTorch eager", "torch.compile"):
            if peers[name] <= 0:
                missing.append(f"{chain} M={m}: {name}")
        measured = {k: v for k, v in peers.items() if v > 0}
        peer_name = min(measured, key=measured.__getitem__)
        vs_cublas = peers["cuBLAS"] / ours if peers["cuBLAS"] > 0 else float("nan")
        vs_peer = measured[peer_name] / ours
        if headline is None or chain in headline:
            if not math.isnan(vs_cublas):
                vs_cublas_all.append(vs_cublas)
            vs_peer_all.append(vs_peer)
        floor = floors.get(chain)
        over_floor = ours / (r["gemm_flops"] / (floor * 1e12) * 1e6) if floor else float("nan")
        ok = (r["bitwise_equal"] and r["graph_ok"] and r["sync_error"] is None and r.get("stock_bitwise", True)
              and r.get("run_ok", True) and r.get("cluster_bitwise", True) and r.get("streamk_rel_diff", 0) < 1e-2
              and r.get("pingpong_rel_diff", 0) < 1e-2 and r.get("cublaslt_rel_diff", 0) < 1e-2)
        checks = f"{'ok' if ok else 'FAILED'}, ref err {r['ref_rel_err']:.1e}"
        cell = lambda v: f"{v:.1f}" if v > 0 else "-"  # noqa: E731
        out.append(f"| {chain} | {m} | {cell(peers['cuBLAS'])} | {cell(peers['CUTLASS b2b'])} | "
                   f"{cell(peers['CUTLASS + PDL'])} | {cell(peers['CUTLASS stream-K'])} | {cell(peers['PyTorch eager'])} | "
                   f"{cell(peers['torch.compile'])} | {ours:.1f} ({r.get('mode', 'overlap')}) | "
                   f"{r['overlapped_us']:.1f} ({r['policy']}) | {vs_cublas:.3f} | {vs_peer:.3f} ({peer_name}) | "
                   f"{over_floor:.2f} | {checks} |")
    for chain, floor in sorted(floors.items()):
        out.append(f"\nfloor for {chain}: cuBLAS 8192^3 at {floor:.1f} TFLOP/s, measured at the start of its bench run")
    if missing:
        out.append("\nnot measured (the best peer is taken over the others): " + "; ".join(missing))
    if headline is not None:
        out.append(f"\nthe two lines below are over {', '.join(sorted(headline))} ({len(vs_peer_all)} points)")
    if vs_cublas_all:
        geo = math.exp(sum(math.log(x) for x in vs_cublas_all) / len(vs_cublas_all))
        out.append(f"\ngeomean speedup over cuBLAS chain: {geo:.2f}x")
    if vs_peer_all:
        out.append(f"min speedup over best peer: {min(vs_peer_all):.2f}x")
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
        chains = None
        if len(args) > 2 and args[1] == "--headline":  # --sm90 --headline CHAIN,CHAIN FILES...
            chains, args = set(args[2].split(",")), args[2:]
        print(sm90_table([Path(p) for p in args[1:]], chains))
    elif args and args[0] == "--attention":
        print(attention_table([Path(p) for p in args[1:]]))
    else:
        print(table([Path(p) for p in args]))
