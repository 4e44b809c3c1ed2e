"""The slab kernel's results table (benchmarks/results/*-decode-slab*.md) from one call of scripts/gpu_slab_mode.sh:
per chain and M, run()'s time and mode, mode stream's own time, every peer (cuBLASLt, cuBLAS, CUTLASS stream-K from
the bench; PyTorch eager and torch.compile from torch.jsonl), run() over the cuBLAS chain and over the best peer,
and the checks of check-*.jsonl at that M (every mode within tolerance, mode stream bitwise run to run, no timeout).

    python3 scripts/slab_results.py OUT_DIR [--chains a,b,...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PEERS = (("cublaslt_us", "cuBLASLt"), ("cublas_us", "cuBLAS"), ("streamk_us", "stream-K"))


def rows_of(path: Path) -> list[dict]:
    if not path.is_file():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.startswith("{") and '"m"' in line]


def check_of(row: dict | None) -> str:
    if row is None:
        return "-"
    ok = (row.get("run_ok", False) and row.get("sync_error") is None and row.get("bitwise_equal", False)
          and row.get("stream_repeatable", True) and row.get("stream_sync_ok", True))
    return "pass" if ok else "FAIL"


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.1f}"


def table(out: Path, chains: list[str]) -> list[str]:
    torch: dict[tuple[str, int, str], float] = {}
    for r in rows_of(out / "torch.jsonl"):
        torch[(r["chain"], r["m"], r["variant"])] = r["us"]
    lines = ["| chain | M | run() (mode) | stream | cuBLASLt | cuBLAS | stream-K | torch eager | torch.compile "
             "| run / cuBLAS | run / best peer | checks |", "|" + " --- |" * 12]
    for chain in chains:
        checks = {r["m"]: r for r in rows_of(out / f"check-{chain}.jsonl")}
        for r in rows_of(out / f"bench-{chain}.jsonl"):
            m = r["m"]
            peers = {name: r.get(key) for key, name in PEERS}
            peers["torch eager"] = torch.get((chain, m, "torch_eager"))
            peers["torch.compile"] = torch.get((chain, m, "torch_compile"))
            timed = {k: v for k, v in peers.items() if v}
            best = min(timed.values()) if timed else None
            run = r.get("run_us")
            lines.append(f"| {chain} | {m} | {fmt(run)} ({r.get('mode', '?')}) | {fmt(r.get('stream_us'))} | "
                         + " | ".join(fmt(peers[k]) for k in ("cuBLASLt", "cuBLAS", "stream-K", "torch eager",
                                                             "torch.compile"))
                         + f" | {peers['cuBLAS'] / run:.3f}x | {best / run:.3f}x | {check_of(checks.get(m))} |"
                         if run and best and peers["cuBLAS"] else f"| {chain} | {m} | incomplete row | |||||||||")
    return lines


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", type=Path)
    parser.add_argument("--chains", default=None, help="comma-separated (default: every bench-*.jsonl)")
    args = parser.parse_args(argv)
    chains = args.chains.split(",") if args.chains else sorted(p.stem[len("bench-"):] for p in args.out.glob("bench-*.jsonl"))
    print("\n".join(table(args.out, chains)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
