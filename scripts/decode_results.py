"""The decode results file's tables from one GPU call of scripts/gpu_stream_mode.sh: per chain and M, the HBM
floor, every peer (the cuBLAS chain and cuBLASLt from the bench; PyTorch eager and torch.compile from
peers.jsonl), mode stream's own time (where the spec turns it on), run()'s time and mode, time over the floor,
achieved TB/s and the checks; then the geomeans the decode issue asks for, as its last three lines.

    python3 scripts/decode_results.py OUT_DIR --projects .gen-stream [--read-tbps 4.43] [--prefill FILE.jsonl]

The floor is the bytes that must cross HBM (every weight once, plus the input, the intermediate and the output
rows) over 4.8 TB/s, or the GEMMs' FLOPs at the bench's cuBLAS 8192^3 rate (its `floor_tflops` line), whichever
is larger. `--prefill`: bench rows at M >= 256 of the same binaries (their run() over the cuBLAS chain); without
it the prefill line says n/a.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections import defaultdict
from pathlib import Path

HBM_TBPS = 4.8
ELEMENT_BYTES = 2
PEERS = (("cublas", "cublas_us"), ("cublaslt", "cublaslt_us"), ("streamk", "streamk_us"), ("stock", "stock_pdl_us"))


def rows_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{")]


def floor_bytes(manifest: dict, m: int) -> int:
    """Every weight once, and the input, every stage's output rows (read or written once each)."""
    total = 0
    for i, s in enumerate(manifest["stages"]):
        if s["op"] == "gemm":
            cols = 2 * s["n"] if s["epilogue"] == "swiglu" else s["n"]
            total += s["k"] * cols * ELEMENT_BYTES
            if i == 0:
                total += m * s["k"] * ELEMENT_BYTES
            total += m * cols * ELEMENT_BYTES
        else:
            total += m * s["n"] * ELEMENT_BYTES
    return total


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--projects", type=Path, default=Path(".gen-stream"))
    parser.add_argument("--read-tbps", type=float, default=None, help="the measured streaming-read bandwidth")
    parser.add_argument("--prefill", type=Path, default=None)
    args = parser.parse_args(argv)
    bench: dict[str, dict[int, dict]] = defaultdict(dict)
    floor_tflops: dict[str, float] = {}
    for path in sorted(args.out.glob("bench-*.jsonl")):
        for r in rows_of(path):
            if "floor_tflops" in r:
                floor_tflops[r["chain"]] = r["floor_tflops"]
            elif "m" in r and r.get("policy", "spec") == "spec":
                bench[r["chain"]][r["m"]] = r
    peers: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    if (args.out / "peers.jsonl").is_file():
        for r in rows_of(args.out / "peers.jsonl"):
            peers[(r["chain"], r["m"])][r["variant"]] = r["us"]
    over_cublas, over_floor = [], []
    print(f"Floor: bytes / {HBM_TBPS} TB/s (or FLOPs at the cuBLAS 8192^3 rate, if larger)"
          + (f"; the streaming read measured {args.read_tbps:.2f} TB/s" if args.read_tbps else "") + ".\n")
    for chain in sorted(bench):
        manifest = json.loads((args.projects / chain / "manifest.json").read_text())
        print(f"## {chain}\n")
        print("| M | floor us | cuBLAS | cuBLASLt | stream-K | stock+PDL | eager | compile | mode stream | run() us | mode | "
              "x floor | TB/s | vs cuBLAS | vs best peer | checks |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for m in sorted(bench[chain]):
            r = bench[chain][m]
            nbytes = floor_bytes(manifest, m)
            flops_us = r.get("gemm_flops", 0.0) / (floor_tflops.get(chain, 0.0) * 1e6) if floor_tflops.get(chain) else 0
            floor_us = max(nbytes / (HBM_TBPS * 1e6), flops_us)
            p = {name: r.get(key, -1.0) for name, key in PEERS}
            p.update({k: v for k, v in peers[(chain, m)].items() if not k.endswith("_isolated")})
            named = {k: v for k, v in p.items() if v and v > 0}
            run_us = r["run_us"]
            best_name, best = min(named.items(), key=lambda kv: kv[1]) if named else ("-", float("nan"))
            ok = r["sync_error"] is None and r["ref_rel_err"] < 1e-2 and r.get("run_ok")
            if r.get("stream_us", -1) > 0:
                ok = ok and r.get("stream_rel_diff", 1) < 1e-2 and r.get("stream_repeatable") and r.get("stream_sync_ok", True)
            cell = lambda v: f"{v:.1f}" if v and v > 0 else "-"  # noqa: E731
            print(f"| {m} | {floor_us:.1f} | {cell(p['cublas'])} | {cell(p['cublaslt'])} | {cell(p['streamk'])} | "
                  f"{cell(p['stock'])} | {cell(p.get('torch_eager'))} | {cell(p.get('torch_compile'))} | "
                  f"{cell(r.get('stream_us'))} | {run_us:.1f} | "
                  f"{r['mode']} | {run_us / floor_us:.2f} | {nbytes / run_us / 1e6:.2f} | "
                  f"{p['cublas'] / run_us:.2f}x | {best / run_us:.2f}x ({best_name}) | {'pass' if ok else 'FAIL'} |")
            if p["cublas"] > 0:
                over_cublas.append(p["cublas"] / run_us)
            over_floor.append(run_us / floor_us)
        print()
    prefill = []
    if args.prefill is not None:
        prefill = [r["cublas_us"] / r["run_us"] for r in rows_of(args.prefill)
                   if r.get("m", 0) >= 256 and r.get("cublas_us", -1) > 0 and r.get("policy", "spec") == "spec"]
    print(f"decode geomean over cuBLAS chain: {geomean(over_cublas):.2f}x")
    print(f"decode geomean time over HBM floor: {geomean(over_floor):.2f}")
    print(f"prefill geomean over cuBLAS chain: {geomean(prefill):.2f}x" if prefill
          else "prefill geomean over cuBLAS chain: n/a")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
