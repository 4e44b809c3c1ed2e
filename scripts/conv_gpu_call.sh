#!/usr/bin/env bash
# The device call: everything of scripts/conv_gpu.sh, then the logs tarred into $OUT.
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out} bash scripts/conv_gpu.sh
cd "$OUT" && tar czf logs.tgz build-*.log sel-*.txt chosen-* sanitizer.log 2>/dev/null; rm -f build-*.log sel-*.txt; ls -la "$OUT"
