"""Summarizes decode_probe.json for v5 (bulk_chain.cuh): per shape and M, the HBM floor, the cuBLAS and cuBLASLt
chains, packed v3 (best of reg/regs), and v5 as one kernel, under PDL across runs and as two launches; each
against cuBLASLt and the floor, with the geomeans. Usage: python3 bulk_summary.py DIR/decode_probe.json"""
import json
import math
import sys

d = json.load(open(sys.argv[1]))
bw = d.get("stream_read_tbps", 0)
gm = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs)) if xs else float("nan")
print(f"stream-read bandwidth {bw:.2f} TB/s; floor = bytes / 4.8 TB/s")
for e in d.get("extra_checks", []):
    print(f"checks: {e}")
print("| shape | M | floor us | cuBLAS | cuBLASLt | v3 packed | v5 chain | v5 chain PDL | v5 two launches | "
      "best v5 / cuBLASLt | best v5 / floor | TB/s | checks |")
print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
over_lt, over_cublas, over_floor = [], [], []
for r in d["rows"]:
    v5 = [r.get(k, 0) for k in ("bulk_us", "bulkp_us", "bulkb_us")]
    best = min((v for v in v5[:2] if v > 0), default=0)
    v3 = min((v for v in (r["reg_us"], r["regs_us"]) if v > 0), default=0)
    f = lambda v: f"{v:.1f}" if v > 0 else "-"
    if best > 0:
        over_lt.append(r["lt_us"] / best)
        over_cublas.append(r["cublas_us"] / best)
        over_floor.append(best / r["floor_us"])
    tbps = r["floor_us"] * 4.8 / best if best > 0 else 0
    print(f"| {r['shape']} | {r['M']} | {r['floor_us']:.1f} | {f(r['cublas_us'])} | {f(r['lt_us'])} | {f(v3)} | {f(v5[0])} | "
          f"{f(v5[1])} | {f(v5[2])} | {r['lt_us'] / best if best else float('nan'):.3f} | "
          f"{best / r['floor_us'] if best else float('nan'):.2f} | {tbps:.2f} | {r['checks']} |")
print(f"\nv5 geomean over cuBLASLt chain: {gm(over_lt):.3f}x; over cuBLAS chain: {gm(over_cublas):.3f}x; "
      f"time over HBM floor: {gm(over_floor):.2f} ({len(over_lt)} points)")
