#!/usr/bin/env bash
# The device call: everything of scripts/conv_gpu.sh, then the results table (scripts/conv_results.py) and
# every log tarred into $OUT (at most 8 files come back: log.txt, results.md, all.tgz).
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out} bash scripts/conv_gpu.sh
python3 scripts/conv_results.py "$OUT" > "$OUT/results.md" 2>&1
cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude results.md * 2>/dev/null
find . -maxdepth 1 -type f ! -name all.tgz ! -name results.md ! -name log.txt -delete
cat results.md; ls -la "$OUT"
