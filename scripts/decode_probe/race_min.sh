#!/usr/bin/env bash
# On the GPU machine (seconds): race_min.cu with and without its wgmma, each under racecheck as it is and with
# --check-warpgroup-mma no. Prints one summary line per run; the reports go to OUT_DIR.
# Usage: bash scripts/decode_probe/race_min.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
for m in 0 1; do
  nvcc -std=c++17 -gencode=arch=compute_90a,code=sm_90a -DMMA=$m -I "$ROOT/templates/sm90/include" \
    "$ROOT/scripts/decode_probe/race_min.cu" -o "$R/race_min$m" > "$R/build$m.log" 2>&1 || { cat "$R/build$m.log"; continue; }
  "$R/race_min$m"
  for flags in "" "--check-warpgroup-mma no"; do
    tag=$m${flags:+-nowgmma}
    # shellcheck disable=SC2086  # flags: words
    compute-sanitizer --tool racecheck $flags --print-limit 10 "$R/race_min$m" > "$R/racecheck-$tag.txt" 2>&1
    echo "racecheck MMA=$m ${flags:-(default)} rc=$?: $(grep -h "RACECHECK SUMMARY\|Internal\|rror:" "$R/racecheck-$tag.txt" | head -2 | tr '\n' ' ')"
  done
done
