"""The decode results file's tables from one or more GPU calls' output folders (scripts/gpu_stream_mode.sh,
scripts/decode_probe/table_call.sh): per chain and M, the HBM floor, every peer (the cuBLAS chain, cuBLASLt,
stream-K and stock+PDL from the bench; PyTorch eager and torch.compile from peers.jsonl or torch.jsonl), mode
stream's own time (where the chain has it), run()'s time and mode, time over the floor and over the measured
streaming read of the same bytes, achieved TB/s and the checks; then a prefill tie-in table (bench rows at M >= 256) and the geomeans the decode issue asks for, as its
last three lines.

    python3 scripts/decode_results.py OUT_DIR [OUT_DIR2 ...] --projects .gen-stream [--chains a,b] [--read-tbps 4.43]
        [--hbm-tbps 4.8] [--prefill FILE.jsonl]

The floor is the bytes that must cross HBM (every weight once, plus the input, the intermediate and the output
rows) over 4.8 TB/s (`--hbm-tbps`), or the GEMMs' FLOPs at the bench's cuBLAS 8192^3 rate (its `floor_tflops`
line), whichever is larger. Decode is M <= 128; bench rows at M >= 256 (in the same files, or `--prefill`) make the prefill table
and line. `--read-tbps`: the measured streaming-read bandwidth; without it, the median of the `RESULT` lines'
streaming reads in `probe-*.txt` (scripts/decode_probe/slab_product.cu) where there are any. The checks column:
the bench row's own checks, and every row of `check-<chain>.jsonl` at any M (the correctness pass) where present.
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


PROBE_BYTES = {"gpt3": 2 * 12288 * 6144 * ELEMENT_BYTES, "l7b": 2 * 4096 * 11008 * ELEMENT_BYTES}


def row_ok(r: dict) -> bool:
    """No sync error, within 1e-2 of the fp32 reference, run() right, and mode stream (where timed) within 1e-2 of
    back to back, bitwise repeatable and without a timeout."""
    ok = r["sync_error"] is None and r["ref_rel_err"] < 1e-2 and bool(r.get("run_ok"))
    if r.get("stream_us", -1) > 0:
        ok = ok and r.get("stream_rel_diff", 1) < 1e-2 and bool(r.get("stream_repeatable")) and r.get("stream_sync_ok", True)
    return ok


def read_tbps_of(outs: list[Path]) -> float | None:
    """The median streaming-read bandwidth of the slab probe's RESULT lines (the weights' bytes over read_us)."""
    rates = []
    for out in outs:
        for path in sorted(out.glob("probe-*.txt")):
            for line in path.read_text().splitlines():
                if line.startswith("RESULT "):
                    r = json.loads(line[len("RESULT "):])
                    shape = str(r.get("shape", "")).split(" ")[0]
                    if r.get("read_us", 0) > 0 and shape in PROBE_BYTES:
                        rates.append(PROBE_BYTES[shape] / r["read_us"] / 1e6)
    rates.sort()
    return rates[len(rates) // 2] if rates else None


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path, nargs="+")
    parser.add_argument("--projects", type=Path, default=Path(".gen-stream"))
    parser.add_argument("--chains", default=None, help="comma-separated chains to tabulate (default: every bench file's)")
    parser.add_argument("--read-tbps", type=float, default=None, help="the measured streaming-read bandwidth")
    parser.add_argument("--hbm-tbps", type=float, default=HBM_TBPS,
                        help=f"the GPU's HBM bandwidth for the floor (default {HBM_TBPS}, the H200's; an H100 SXM: 3.35)")
    parser.add_argument("--prefill", type=Path, default=None)
    args = parser.parse_args(argv)
    chains = None if args.chains is None else set(args.chains.split(","))
    bench: dict[str, dict[int, dict]] = defaultdict(dict)
    floor_tflops: dict[str, float] = {}
    peers: dict[tuple[str, int], dict[str, float]] = defaultdict(dict)
    checks: dict[str, list[dict]] = defaultdict(list)
    for out in args.out:
        for path in sorted(out.glob("bench-*.jsonl")):
            for r in rows_of(path):
                if chains is not None and r.get("chain") not in chains:
                    continue
                if "floor_tflops" in r:
                    floor_tflops[r["chain"]] = r["floor_tflops"]
                elif "m" in r and r.get("policy", "spec") == "spec":
                    bench[r["chain"]][r["m"]] = r
        for name in ("peers.jsonl", "torch.jsonl"):
            if (out / name).is_file():
                for r in rows_of(out / name):
                    if "us" in r:
                        peers[(r["chain"], r["m"])][r["variant"]] = r["us"]
        for path in sorted(out.glob("check-*.jsonl")):
            checks[path.stem[len("check-"):]] += [r for r in rows_of(path) if "m" in r]
    read_tbps = args.read_tbps if args.read_tbps is not None else read_tbps_of(args.out)
    over_cublas, over_floor, prefill = [], [], []
    hbm = args.hbm_tbps
    print(f"Floor: bytes / {hbm} TB/s (or FLOPs at the cuBLAS 8192^3 rate, if larger)"
          + (f"; the streaming read measured {read_tbps:.2f} TB/s" if read_tbps else "") + ".\n")
    cell = lambda v: f"{v:.1f}" if v and v > 0 else "-"  # noqa: E731
    for chain in sorted(bench):
        manifest = json.loads((args.projects / chain / "manifest.json").read_text())
        checked = checks.get(chain, [])
        if checked:
            bad = [r["m"] for r in checked if not row_ok(r)]
            ms = sorted({r["m"] for r in checked})
            policies = sorted({r.get("policy", "spec") for r in checked})
            print(f"## {chain}\n\nCorrectness pass (every mode, overlap forced, policies {', '.join(policies)}) at M = "
                  f"{', '.join(map(str, ms))}: " + ("all pass" if not bad else f"FAIL at M = {sorted(set(bad))}") + "\n")
        else:
            print(f"## {chain}\n")
        print("| M | floor us | cuBLAS | cuBLASLt | stream-K | stock+PDL | eager | compile | mode stream | run() us | mode | "
              "x floor | x read | TB/s | vs cuBLAS | vs best peer | checks |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for m in sorted(k for k in bench[chain] if k <= 128):
            r = bench[chain][m]
            nbytes = floor_bytes(manifest, m)
            flops_us = r.get("gemm_flops", 0.0) / (floor_tflops.get(chain, 0.0) * 1e6) if floor_tflops.get(chain) else 0
            floor_us = max(nbytes / (hbm * 1e6), flops_us)
            p = {name: r.get(key, -1.0) for name, key in PEERS}
            p.update({k: v for k, v in peers[(chain, m)].items() if not k.endswith("_isolated")})
            named = {k: v for k, v in p.items() if v and v > 0}
            run_us = r["run_us"]
            best_name, best = min(named.items(), key=lambda kv: kv[1]) if named else ("-", float("nan"))
            ok = row_ok(r) and all(row_ok(c) for c in checked if c["m"] == m)
            print(f"| {m} | {floor_us:.1f} | {cell(p['cublas'])} | {cell(p['cublaslt'])} | {cell(p['streamk'])} | "
                  f"{cell(p['stock'])} | {cell(p.get('torch_eager'))} | {cell(p.get('torch_compile'))} | "
                  f"{cell(r.get('stream_us'))} | {run_us:.1f} | "
                  f"{r['mode']} | {run_us / floor_us:.2f} | "
                  + (f"{run_us * read_tbps * 1e6 / nbytes:.2f}" if read_tbps else "-")
                  + f" | {nbytes / run_us / 1e6:.2f} | "
                  f"{p['cublas'] / run_us:.2f}x | {best / run_us:.2f}x ({best_name}) | {'pass' if ok else 'FAIL'} |")
            if p["cublas"] > 0:
                over_cublas.append(p["cublas"] / run_us)
            over_floor.append(run_us / floor_us)
        print()
    big = [(chain, m, r) for chain in sorted(bench) for m, r in sorted(bench[chain].items()) if m >= 256]
    if args.prefill is not None:
        big += [(r["chain"], r["m"], r) for r in rows_of(args.prefill)
                if r.get("m", 0) >= 256 and r.get("policy", "spec") == "spec"
                and (chains is None or r.get("chain") in chains)]
    if big:
        print("## Prefill tie-in\n")
        print("| chain | M | cuBLAS | cuBLASLt | ping-pong | stream-K | run() us | mode | vs cuBLAS | checks |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for chain, m, r in big:
            print(f"| {chain} | {m} | {cell(r.get('cublas_us'))} | {cell(r.get('cublaslt_us'))} | "
                  f"{cell(r.get('pingpong_us'))} | {cell(r.get('streamk_us'))} | {r['run_us']:.1f} | {r['mode']} | "
                  + (f"{r['cublas_us'] / r['run_us']:.2f}x" if r.get("cublas_us", -1) > 0 else "-")
                  + f" | {'pass' if row_ok(r) else 'FAIL'} |")
            if r.get("cublas_us", -1) > 0:
                prefill.append(r["cublas_us"] / r["run_us"])
        print()
    print(f"decode geomean over cuBLAS chain: {geomean(over_cublas):.2f}x")
    print(f"decode geomean time over HBM floor: {geomean(over_floor):.2f}")
    print(f"prefill geomean over cuBLAS chain: {geomean(prefill):.2f}x" if prefill
          else "prefill geomean over cuBLAS chain: n/a")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
