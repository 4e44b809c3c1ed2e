"""Summarizes swap_probe.jsonl: per chain and M, the HBM floor, each GEMM's best cuBLAS(Lt) and best swap-AB
CUTLASS kernel, and the chain through cuBLASLt against the swap-AB kernels back to back and chained by PDL, and
the same configurations on the weights-ahead kernel (back to back, chained, chained with L2 prefetch; a column is
'x' where the chain's output differed from the swap chain's back to back or its check failed)."""
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
      f" {'ch lt':>6} {'b2b':>6} {'pdl':>6} {'lt/pdl':>6} {'pdl/floor':>9} | {'a b2b':>6} {'a pdl':>6} {'a l2':>6}"
      f" {'lt/a':>6} {'a/floor':>7}")
ratios = []
ahead_ratios = []
ahead_gain = []


def ahead_ok(v):
    return v and v["ok"] and v["us"] > 0 and v.get("rel_err", 1) <= 1e-2 and v.get("differs_from_b2b", 1) == 0
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
    ahead = [ch.get(k) for k in ("chain_ahead_b2b", "chain_ahead_pdl", "chain_ahead_pdl_l2")]
    fa = lambda v: f"{v['us']:.1f}" if ahead_ok(v) else ("x" if v else "-")
    best_ahead = min((v["us"] for v in ahead[1:] if ahead_ok(v)), default=None)
    ra = cl["us"] / best_ahead if cl and best_ahead else float("nan")
    if ra == ra:
        ahead_ratios.append(ra)
    if best_ahead and cp and cp["us"] > 0:
        ahead_gain.append(cp["us"] / best_ahead)
    print(f"{chain:>24} {m:>4} {floor:>6.1f} | {f(lt[0]):>6} {f(sw[0]):>7} {(sw[0] or {}).get('variant', '-'):>22} |"
          f" {f(lt[1]):>6} {f(sw[1]):>7} {(sw[1] or {}).get('variant', '-'):>22} | {f(cl):>6} {f(cb):>6} {f(cp):>6} {r:>6.2f}"
          f" {(cp['us'] / floor if cp else float('nan')):>9.2f} | {fa(ahead[0]):>6} {fa(ahead[1]):>6} {fa(ahead[2]):>6}"
          f" {ra:>6.2f} {(best_ahead / floor if best_ahead else float('nan')):>7.2f}")
if ratios:
    import math
    print(f"geomean chain cuBLASLt / swap PDL: {math.exp(sum(map(math.log, ratios)) / len(ratios)):.3f}x over {len(ratios)} points")
if ahead_ratios:
    import math
    g = lambda xs: math.exp(sum(map(math.log, xs)) / len(xs))
    print(f"geomean chain cuBLASLt / best weights-ahead chain: {g(ahead_ratios):.3f}x over {len(ahead_ratios)} points")
    print(f"geomean swap PDL / best weights-ahead chain: {g(ahead_gain):.3f}x over {len(ahead_gain)} points")
clears = []
for chain, m in sorted({(k[0], k[1]) for k in by}, key=lambda x: (x[0], x[1])):
    for s in (1, 2):
        d = by.get((chain, m, s), {})
        b = best(d, True)
        c = d.get(b["variant"] + "_clearonly") if b else None
        if c and c["ok"] and c["us"] > 0:
            clears.append(f"{chain} M={m} gemm{s} {b['variant']}: {b['us']:.1f} us; the workspace clear alone {c['us']:.1f}")
if clears:
    print("split reduction's workspace clear (timed alone; it precedes every launch of the variant):")
    print("\n".join("  " + c for c in clears))
