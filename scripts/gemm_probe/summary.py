"""Summarizes gemm_probe.jsonl: per shape and M, cuBLAS / cuBLASLt / PyTorch against the best CUTLASS variant."""
import collections
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
points = collections.defaultdict(dict)
for r in rows:
    if r.get("ok") and r["us"] > 0:
        points[(r["n"], r["k"], r["b"], r["m"])][r["variant"]] = r
print(f"{'N':>6} {'K':>6} b   {'M':>5} {'gemmex':>8} {'lt_h0':>8} {'lt_best':>8} {'torch':>8} {'c128x256':>8} {'best cutlass (variant)':>40} {'err':>8}")
for key in sorted(points):
    v = points[key]
    us = lambda name: v[name]["us"] if name in v else float("nan")
    lt = [x for x in v if x.startswith("cublaslt")]
    lt_best = min((v[x]["us"] for x in lt), default=float("nan"))
    cut = [x for x in v if x.startswith(("coop", "pingpong")) and v[x].get("rel_err", 1) < 1e-2]
    best = min(cut, key=lambda x: v[x]["us"], default=None)
    base = us("coop_128x256_1x1_H_s1")  # the configuration and scheduler defaults the chains use today
    print(f"{key[0]:>6} {key[1]:>6} {key[2]} {key[3]:>5} {us('cublas_gemmex'):>8.1f} {us('cublaslt_h0'):>8.1f} {lt_best:>8.1f} "
          f"{us('torch_mm'):>8.1f} {base:>8.1f} {(v[best]['us'] if best else float('nan')):>8.1f} {best or '-':>31} "
          f"{max((v[x].get('rel_err', 0) for x in cut), default=0):>8.1e}")
