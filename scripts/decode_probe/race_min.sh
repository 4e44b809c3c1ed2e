#!/usr/bin/env bash
# On the GPU machine (seconds): race_min.cu with and without its wgmma (and, RINGS, without and with the weight ring), each under racecheck as it is and with
# --check-warpgroup-mma no (SITES=1: the two warpgroups run the finish from two copies of its code). Prints one summary line per run; the reports go to OUT_DIR.
# Usage: bash scripts/decode_probe/race_min.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for ring in ${RINGS:-0 1}; do
for m in 0 1; do
  x=$R/race_min$m$ring${SITES:-0}
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DMMA=$m -DRING=$ring -DSITES=${SITES:-0} -I "$ROOT/templates/sm90/include" -I "$ROOT/templates/runtime/include" \
    "$ROOT/scripts/decode_probe/race_min.cu" -o "$x" > "$x.log" 2>&1 || { cat "$x.log"; continue; }
  "$x"
  for flags in "" "--check-warpgroup-mma no"; do
    tag=$m$ring${SITES:-0}${flags:+-nowgmma}
    # shellcheck disable=SC2086  # flags: words
    compute-sanitizer --tool racecheck $flags --print-limit 10 "$x" > "$R/racecheck-$tag.txt" 2>&1
    echo "racecheck MMA=$m RING=$ring SITES=${SITES:-0} ${flags:-(default)} rc=$?: $(grep -h "RACECHECK SUMMARY\|Internal\|rror:" "$R/racecheck-$tag.txt" | head -2 | tr '\n' ' ')"
  done
done
done
