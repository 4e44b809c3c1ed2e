#!/usr/bin/env bash
# NOTES d38 on the GPU machine (written, not run): the gather kernel with W2's next columns prefetched into L2
# before the wait (scripts/decode_probe/slab_l2.patch, CUSYNC_SLAB_L2_COLS = 1 or 2) against the landed kernel.
# Carried in build/carry2/: slab_product_cur (landed), slab_product_l2c1, slab_product_l2c2 (the probe compiled
# with -DCUSYNC_SLAB_L2_COLS=1 / 2 after `git apply`), and the llama_fused_cc_sm90 bench built twice (landed, and
# with -DCMAKE_CUDA_FLAGS=-DCUSYNC_SLAB_L2_COLS=1 as llama_fused_ccl2_sm90_bench); two rounds, alternately. Then, where
# CARRY holds slab_product_trace (the probe built with -DCUSYNC_SLAB_TRACE after `git apply slab_trace.patch`),
# the per-CTA stamps of the landed gather kernel: when the slabs post, when the last CTA sees them all, the end.
# Then racecheck, memcheck and synccheck of slab_race_<v> and d41's mma_gemv where CARRY holds them. VARIANTS names the probes timed in turn (slab_product_<v>; e.g.
# "cur tk" with d40's tickets, slab_tickets.patch). All of these are built in build/carry3/.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; C=${CARRY:-build/carry2}
nvidia-smi --query-gpu=name,clocks.sm --format=csv | tee "$OUT/gpu.txt"
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in ${VARIANTS:-cur l2c1 l2c2}; do
    [ -x $C/slab_product_$v ] || continue
    SLAB_ROWS=0 SLAB_W2COL=1 timeout 60 $C/slab_product_$v 100 > "$OUT/probe-$v-r$r.txt" 2>&1; echo "probe $v $r exit $? at $SECONDS"
  done
  for p in llama_fused_cc_sm90 llama_fused_ccl2_sm90; do
    timeout 60 $C/${p}_bench --m 1,2 --policies spec --repeats 50 --warmup 5 --preheat-ms 2000 > "$OUT/ab-$p-r$r.jsonl" \
      2> "$OUT/ab-$p-r$r.err"; echo "ab $p $r exit $? at $SECONDS"
  done
done
# The landed kernel's per-CTA stamps (slab_trace.patch; entry, post, every slab seen, end), where it was built.
if [ -x $C/slab_product_trace ]; then
  SLAB_ROWS=0 SLAB_W2COL=1 timeout 60 $C/slab_product_trace 50 > "$OUT/trace.txt" 2>&1; echo "trace exit $? at $SECONDS"
  grep -h "^TRACE" "$OUT/trace.txt"
fi
# The sanitizers on slab_race built with each patch (slab_race_<v>: every gate kind, both layouts of each weight).
for b in $C/slab_race_*; do
  [ -x "$b" ] || continue
  for tool in racecheck memcheck synccheck; do
    n=$(basename "$b"); f="$OUT/$tool-$n.log"
    timeout 60 compute-sanitizer --tool $tool --print-limit 10 --error-exitcode 9 "$b" > "$f" 2>&1; rc=$?
    echo "$tool $n exit $rc: $(grep -h 'SUMMARY' "$f" | tr '\n' ' ')$(grep -h 'race driver' "$f")"
  done
done
# d41's GEMV probe (mma.sync over 16 column-major columns against the CUDA-core warp per column), where built.
if [ -x $C/mma_gemv ]; then
  timeout 120 $C/mma_gemv 50 > "$OUT/mma_gemv.txt" 2>&1; echo "mma_gemv exit $? at $SECONDS"; grep -c '"check": true' "$OUT/mma_gemv.txt"
fi
grep -h "^RESULT" "$OUT"/probe-*-r1.txt | head -3
cd "$OUT" && tar czf ../l2.tgz . && rm -rf ./* && mv ../l2.tgz .
