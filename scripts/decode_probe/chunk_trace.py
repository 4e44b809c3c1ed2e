#!/usr/bin/env python3
"""Reads the probe's chunk traces (ctrace.patch: chunks-<shape>-M<m>.bin, one traced run) and prints, per file,
where a chunk's time goes in the whole kernel's ring.

Per chunk j of a CTA (both GEMMs, in the producer's order) the stamps are clock64: P issued (the producer past
the slot's empty wait), S0 the owning warpgroup's iteration start, S1 past the finishes before it, X its X stored,
A before the full wait, B past it, R the slot released. The CTA's clock runs from its entry (word 8) to its end
(word 9), which %globaltimer also stamps (words 0 and 6), so every stamp is placed in ns on one timeline.

Printed (medians over CTAs unless said):
- rate: us a chunk per CTA in gemm1 and gemm2 (first full-wait return to last release);
- lat: B - P of the chunks whose warpgroup waited on the full barrier (B - A > 50 ns), i.e. the time from issue
  to landing, and how many chunks waited (the wait and its stamps cost about 50 ns themselves, so on an H100 nearly
  every chunk counts: read lat as an upper bound of the copy's time in flight);
- held: the time-average of slots issued and not yet released (in flight + landed + in use) and of slots in
  flight (issued, not yet landed; landing taken as B for waited chunks, else as A: an upper bound of in flight);
- issue gap: P[j] - R[j - stages], the producer's delay past the release of the slot it needed (near 0 when it
  waits on the consumers);
- the warpgroup's loop, per chunk: finish (S1 - S0), X store (X - S1), X issue and polls (A - X), full wait
  (B - A), work and release (R - B).
Usage: python3 chunk_trace.py [--stages N] FILE...   (numpy; stages default: 8 at M <= 8, 9 else)
"""
import argparse
import re
import sys

import numpy as np

TRACE_CHUNKS = 192
WORDS = 16 + 8 * TRACE_CHUNKS


def analyse(path, stages):
    raw = np.fromfile(path, dtype=np.uint64)
    ctas = raw.size // WORDS
    t = raw[: ctas * WORDS].reshape(ctas, WORDS).astype(np.float64)
    entry_gt, done_gt, clk0, clk1 = t[:, 0], t[:, 6], t[:, 8], t[:, 9]
    ok = (entry_gt > 0) & (done_gt > entry_gt) & (clk1 > clk0)
    t0 = entry_gt[ok].min()
    rows = []
    for c in np.nonzero(ok)[0]:
        ghz = (clk1[c] - clk0[c]) / (done_gt[c] - entry_gt[c])  # cycles per ns
        ch = t[c, 16:].reshape(TRACE_CHUNKS, 8)
        n = int(np.count_nonzero(ch[:, 7]))
        ch = ch[:n].copy()
        for i in range(1, 7):  # a stamp the mode skips (X in the ring-only and hold modes): the one before it
            ch[:, i] = np.where(ch[:, i] == 0, ch[:, i - 1], ch[:, i])
        us = (ch[:, :7] - clk0[c]) / ghz * 1e-3 + (entry_gt[c] - t0) * 1e-3  # us on the common timeline
        gi = ((ch[:, 7].astype(int) - 1) % 2)
        rows.append((c, ghz, us, gi))
    out = {}
    rate = {0: [], 1: []}
    lat, waited_frac, held, inflight, gap = [], [], [], [], []
    parts = {k: [] for k in ("finish", "x-store", "x-issue", "full-wait", "work")}
    for c, ghz, us, gi in rows:
        P, S0, S1, X, A, B, R = (us[:, i] for i in range(7))
        for g in (0, 1):
            sel = gi == g
            if sel.sum() > 1:
                rate[g].append((R[sel].max() - B[sel].min()) / (sel.sum() - 1))
        waited = (B - A) > 0.05
        waited_frac.append(waited.mean())
        if waited.any():
            lat.append(np.median(B[waited] - P[waited]))
        land = np.where(waited, B, np.minimum(A, B))
        lo, hi = P.min(), R.max()
        grid = np.linspace(lo, hi, 400)
        held.append(np.mean([np.count_nonzero((P <= x) & (x < R)) for x in grid]))
        inflight.append(np.mean([np.count_nonzero((P <= x) & (x < land)) for x in grid]))
        if len(P) > stages:
            gap.append(np.median(P[stages:] - R[:-stages]))
        parts["finish"].append(np.mean(S1 - S0))
        parts["x-store"].append(np.mean(X - S1))
        parts["x-issue"].append(np.mean(A - X))
        parts["full-wait"].append(np.mean(B - A))
        parts["work"].append(np.mean(R - B))
    med = lambda v: float(np.median(v)) if len(v) else float("nan")
    out["ctas"] = len(rows)
    out["ghz"] = med([r[1] for r in rows])
    out["rate1"], out["rate2"] = med(rate[0]), med(rate[1])
    out["lat"] = med(lat)
    out["lat_p90"] = float(np.percentile(lat, 90)) if lat else float("nan")
    out["waited"] = med(waited_frac)
    out["held"], out["inflight"], out["gap"] = med(held), med(inflight), med(gap)
    for k, v in parts.items():
        out[k] = med(v)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stages", type=int, default=0)
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    print("file | CTAs | GHz | us/chunk g1 | g2 | lat us (p90) | waited | held | in flight | issue gap | "
          "finish | x-store | x-issue | full-wait | work (us a chunk, warpgroup)")
    for f in a.files:
        m = re.search(r"-M(\d+)\.bin$", f)
        mm = int(m.group(1)) if m else 1
        st = a.stages or (8 if mm <= 8 else 9)
        o = analyse(f, st)
        print(f"{f} | {o['ctas']} | {o['ghz']:.2f} | {o['rate1']:.3f} | {o['rate2']:.3f} | {o['lat']:.2f} "
              f"({o['lat_p90']:.2f}) | {o['waited']:.2f} | {o['held']:.1f} | {o['inflight']:.1f} | {o['gap']:.3f} | "
              f"{o['finish']:.3f} | {o['x-store']:.3f} | {o['x-issue']:.3f} | {o['full-wait']:.3f} | {o['work']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
