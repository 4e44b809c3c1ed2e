#!/usr/bin/env bash
# One device call for NOTES d13's open step: d16.patch in the probe (against the landed kernel and d15) and in two
# generated libraries (one packing SwiGLU gate|up halves), everything d16 needs before `git apply`.
#   1. the libraries build (library_call.sh PHASE=build) while the probe binaries build;
#   2. the probe: landed, d15 and d16 on the three shapes at M = 1..64, then the odd shape, memcheck and synccheck
#      on d16 (x_ahead_call.sh);
#   3. the libraries: every M_pad checked, timed, memcheck and racecheck (library_call.sh).
# ~7-8 minutes on an H100; carry third_party/cutlass. Here first: python3 scripts/stream_specs.py .gen-stream
# Usage (on the GPU machine): bash scripts/decode_probe/d16_call.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R/probe" "$R/lib"
D=$(dirname "$0")
PATCH=${PATCH:-d16} PHASE=build bash "$D/library_call.sh" "$R/lib" > "$R/lib-build.txt" 2>&1 &
PATCHES="d15 ${PATCH:-d16}" SAN_PATCHES=${PATCH:-d16} bash "$D/x_ahead_call.sh" "$R/probe" > "$R/probe.txt" 2>&1
echo "probe done at ${SECONDS}s"
wait
cat "$R/lib-build.txt"
PATCH=${PATCH:-d16} PHASE=check,bench,san bash "$D/library_call.sh" "$R/lib" > "$R/lib.txt" 2>&1
echo "library done at ${SECONDS}s"
grep -E "rc=|^odd|SUMMARY|build failed" "$R/probe.txt"
for v in decode_probe decode_probe_d15 "decode_probe_${PATCH:-d16}"; do
  echo "== $v"; sed -n '/^shape/,$p' "$R/probe/$v/stdout.txt" 2> /dev/null | cut -c1-200
done
tail -n 40 "$R/lib.txt"
