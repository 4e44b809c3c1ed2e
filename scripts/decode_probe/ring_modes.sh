#!/usr/bin/env bash
# v4 follow-up (not yet run): ring vs ws (v2.1) vs reg in one binary; ring consumer modes (DECODE_PROBE_RING_MODE:
# 1 = no loads/mma, wrong results, times producer + ring + schedule alone; 2 = no stage-ahead); ncu of v2, v4, v4 mode 1.
# Usage: BIN=path/decode_probe bash scripts/decode_probe/ring_modes.sh OUT_DIR   (~120 s on an H200)
set -u
R=${1:?OUT_DIR}; mkdir -p $R/a $R/nc $R/na $R/n1 $R/nw $R/nn
B=${BIN:?path of a built decode_probe}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/a/gpu.txt 2>&1
DECODE_PROBE_MS=1,16,64,128 DECODE_PROBE_SHAPES=gpt3,llama3-8b DECODE_PROBE_VARIANTS=ws,reg,ring timeout 80 $B $R/a > $R/a/stdout.txt 2>&1; echo "a rc=$? at ${SECONDS}s"
for md in 1 2; do d=$([ $md = 1 ] && echo nc || echo na)
  DECODE_PROBE_RING_MODE=$md DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,16 DECODE_PROBE_SHAPES=gpt3,llama65,llama3-8b DECODE_PROBE_VARIANTS=ring timeout 40 $B $R/$d > $R/$d/stdout.txt 2>&1; echo "mode $md rc=$? at ${SECONDS}s"
done
SEC="--section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats"
for k in ChainWS ChainRing; do
  DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1 DECODE_PROBE_SHAPES=gpt3 DECODE_PROBE_VARIANTS=ring DECODE_PROBE_QUICK=1 \
    timeout 30 ncu --clock-control none --kernel-name-base mangled -k regex:$k --launch-skip 2 --launch-count 1 $SEC \
    $B $R/n1 > $R/ncu2_$k.txt 2>&1; echo "ncu $k rc=$? at ${SECONDS}s"
done
DECODE_PROBE_RING_MODE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1 DECODE_PROBE_SHAPES=gpt3 DECODE_PROBE_VARIANTS=ring DECODE_PROBE_QUICK=1 \
  timeout 30 ncu --clock-control none --kernel-name-base mangled -k regex:ChainRing --launch-skip 2 --launch-count 1 $SEC \
  $B $R/nn > $R/ncu2_nocompute.txt 2>&1; echo "ncu nocompute rc=$? at ${SECONDS}s"

sed -n '/^stream-read/,$p' $R/a/stdout.txt | tail -12
for d in nc na; do echo "== $d"; sed -n '/^shape/,$p' $R/$d/stdout.txt | cut -c1-20,110-130; grep "ring" $R/$d/decode_probe.log | grep timing; done
for f in $R/ncu2_*.txt; do echo "== $f"; grep -E "Duration|DRAM Throughput|Issued Warp Per|Warp Cycles Per Issued" $f; grep -A3 "Est. Speedup" $f | grep -E "stalled" | head -2; done
