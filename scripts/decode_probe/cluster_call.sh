#!/usr/bin/env bash
# NOTES d35 on the GPU machine, with slab_cluster.patch applied here: the slab kernel in clusters of 1, 2, 4 and
# auto (slab_product, built here and carried), and racecheck/memcheck of slab_race.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee $OUT/gpu.txt
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
echo "LT=$LT"
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
for c in 1 2 4; do
  echo "== cluster $c"; SLAB_ROWS=0 SLAB_CLUSTER=$c timeout 100 build/slab/slab_product 100 > $OUT/cl$c.txt 2>&1; echo "exit $? at $SECONDS s"; grep -v RESULT $OUT/cl$c.txt | grep -E "slab [0-9]|FAIL|refused|error" | head -12
done
echo "== auto"; SLAB_ROWS=0 timeout 100 build/slab/slab_product 100 > $OUT/cl0.txt 2>&1; echo "exit $?"; grep -E "slab [0-9]|FAIL|rror" $OUT/cl0.txt | head -8
timeout 200 compute-sanitizer --tool racecheck --print-limit 10 --error-exitcode 9 build/slab/slab_race > $OUT/racecheck.log 2>&1; echo "racecheck exit $?: $(grep -h 'RACECHECK SUMMARY' $OUT/racecheck.log) at $SECONDS s"
timeout 150 compute-sanitizer --tool memcheck --print-limit 10 --error-exitcode 9 build/slab/slab_race > $OUT/memcheck.log 2>&1; echo "memcheck exit $?: $(grep -h 'ERROR SUMMARY' $OUT/memcheck.log)"
