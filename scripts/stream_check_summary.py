"""One line per row of a mode-stream GPU call's check-*.jsonl and bench-*.jsonl (written by the projects' benches
in scripts/gpu_stream_mode.sh and scripts/decode_probe/library_call.sh), and a verdict: every row must have no sync
error, the reference error under 1e-2, run() correct, and at M <= 64 mode stream within 1e-2 of back to back,
bitwise repeatable and timed.

    python3 scripts/stream_check_summary.py OUT_DIR [LABEL]
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(out: Path, label: str) -> int:
    bad = seen = 0
    for f in sorted(out.glob("check-*.jsonl")) + sorted(out.glob("bench-*.jsonl")):
        for line in f.read_text().splitlines():
            if not (line.startswith("{") and '"m"' in line):
                continue
            r = json.loads(line)
            seen += 1
            stream_ok = r["m"] > 64 or (
                r.get("stream_rel_diff", 1) < 1e-2 and r.get("stream_repeatable") and r.get("stream_us", 0) > 0
            )
            ok = r["sync_error"] is None and r["ref_rel_err"] < 1e-2 and r.get("run_ok") and stream_ok
            bad += not ok
            print(
                f"{f.stem:40s} M={r['m']:4d} run={str(r.get('mode')):9s} {r.get('run_us', 0):8.2f} us"
                f"  stream {r.get('stream_us', 0):8.2f}  cublaslt {r.get('cublaslt_us', 0):8.2f}"
                f"  cublas {r.get('cublas_us', 0):8.2f}  diff {r.get('stream_rel_diff', 0):.1e}  {'ok' if ok else 'FAIL'}"
            )
    print(f"{label}:", "ALL OK" if bad == 0 and seen else f"{bad} FAILED of {seen} rows")
    return 0 if bad == 0 and seen else 1


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else "stream mode"))
