"""The `dispatch:` block for a spec from a bench run's rows (what `cusync-gen tune` writes, for rows
measured by a bench run elsewhere, e.g. on the GPU machine by scripts/h200_probe.sh).

    python3 scripts/dispatch_table.py bench-llama_mlp_sm90.jsonl [--spec cusync_gen/examples/llama_mlp_sm90.yaml]

Rows of one binary (the spec's own tiles): per M the fastest correct mode (ties within tune.MODE_TIE go to
the simpler mode), cuts at geometric means between measured M (tune.dispatch_table). With --spec, the
spec's `dispatch:` block is replaced in place (the rest of the file is kept as written).
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from cusync_gen import tune


def table(rows_path: Path) -> dict:
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.startswith("{") and '"m"' in line]
    for r in rows:
        r["variant_index"] = 0
    return tune.dispatch_table(tune.choose(rows))


def block(t: dict, comment: str) -> str:
    lines = [f"dispatch:                   # {comment}", f"  gpu: {t['gpu']}", f"  sms: {t['sms']}", "  modes:"]
    lines += [f"    - {{m_max: {e['m_max']}, mode: {e['mode']}}}" for e in t["modes"]]
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("rows", type=Path)
    parser.add_argument("--spec", type=Path)
    parser.add_argument("--comment", default="how run() computes the chain by M, measured (benchmarks/NOTES.md)")
    args = parser.parse_args(argv)
    t = table(args.rows)
    text = block(t, args.comment)
    if args.spec is None:
        sys.stdout.write(text)
        return 0
    spec = args.spec.read_text()
    # The block runs from `dispatch:` to the next top-level key or the end of the file.
    new, count = re.subn(r"^dispatch:.*?(?=^\S|\Z)", lambda _: text, spec, flags=re.S | re.M)
    if count == 0:
        new = spec.rstrip("\n") + "\n" + text
    args.spec.write_text(new)
    print(text, end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
