#!/usr/bin/env bash
# NOTES d36 on the GPU machine: the slab kernel with column-major W2 (no partials: each CTA gathers every slab's H
# after its post and computes whole output columns) against the partials path, both beside the cuBLASLt chain of
# the same layout and a streaming read (build/slab/slab_product, built here and carried; SLAB_W2COL=1 selects W2
# column-major); then racecheck, memcheck and synccheck of build/slab/slab_race (every gate kind, both layouts of
# each weight, M = 1 and 3, three epochs).
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
for w2 in 1 0; do rows=$([ $w2 = 1 ] && echo 1 || echo 0)
  echo "== W2 col $w2"; SLAB_ROWS=${SLAB_ROWS:-$rows} SLAB_W2COL=$w2 timeout 150 build/slab/slab_product "${REPS:-100}" > "$OUT/w2col$w2.txt" 2>&1
  echo "exit $? at $SECONDS s"; grep -E "slab [0-9]|FAIL|refused|rror" "$OUT/w2col$w2.txt" | head -14
done
for tool in racecheck memcheck synccheck; do
  timeout 200 compute-sanitizer --tool $tool --print-limit 10 --error-exitcode 9 build/slab/slab_race > "$OUT/$tool.log" 2>&1
  echo "$tool exit $?: $(grep -h 'SUMMARY' "$OUT/$tool.log" | tr '\n' ' ') $(grep -h 'race driver' "$OUT/$tool.log") at $SECONDS s"
done
