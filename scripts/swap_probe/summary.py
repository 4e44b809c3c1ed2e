"""Summarizes swap_probe.jsonl: per chain and M, the HBM floor, each GEMM's best cuBLAS(Lt) and best swap-AB
CUTLASS kernel, and the chain through cuBLASLt against the swap-AB kernels back to back and chained by PDL."""
import collections
import json
import sys

rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
by = collections.defaultdict(dict)
for r in rows:
    by[(r["chain"], r["m"], r["gemm"])][r["variant"]] = r


def best(d, swap):
    c = [v for k, v in d.items() if v["ok"] and v["us"] > 0 and v.get("rel_err", 1) <= 1e-2
         and ("swap" in k) == swap and (not swap or v.get("rerun_differs", 1) == 0)]
    return min(c, key=lambda v: v["us"]) if c else None


print(f"{'chain':>24} {'M':>4} {'floor':>6} | {'g1 lt':>6} {'g1 swap':>7} {'(variant)':>22} | {'g2 lt':>6} {'g2 swap':>7} {'(variant)':>22} |"
      f" {'ch lt':>6} {'b2b':>6} {'pdl':>6} {'lt/pdl':>6} {'pdl/floor':>9}")
ratios = []
for chain, m in sorted({(k[0], k[1]) for k in by}, key=lambda x: (x[0], x[1])):
    n1, k1, n2, k2 = (int(x) for x in chain.split(":")[:4])
    floor = (2 * (n1 * k1 + n2 * k2) + 2 * m * (k1 + n1 + k2 + n2)) / 4.8e12 * 1e6
    g = [by.get((chain, m, s), {}) for s in (1, 2)]
    lt = [best(x, False) for x in g]
    sw = [best(x, True) for x in g]
    ch = by.get((chain, m, 0), {})
    f = lambda v: f"{v['us']:.1f}" if v else "-"
    cl, cb, cp = ch.get("chain_lt"), ch.get("chain_swap_b2b"), ch.get("chain_swap_pdl")
    r = cl["us"] / cp["us"] if cl and cp and cp["us"] > 0 else float("nan")
    if r == r:
        ratios.append(r)
    print(f"{chain:>24} {m:>4} {floor:>6.1f} | {f(lt[0]):>6} {f(sw[0]):>7} {(sw[0] or {}).get('variant', '-'):>22} |"
          f" {f(lt[1]):>6} {f(sw[1]):>7} {(sw[1] or {}).get('variant', '-'):>22} | {f(cl):>6} {f(cb):>6} {f(cp):>6} {r:>6.2f}"
          f" {(cp['us'] / floor if cp else float('nan')):>9.2f}")
if ratios:
    import math
    print(f"geomean chain cuBLASLt / swap PDL: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}x over {len(ratios)} points")
