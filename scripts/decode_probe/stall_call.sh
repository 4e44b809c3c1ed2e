#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (ab_objects.sh made its objects here): ncu's warp-state
# sampling of the stream kernel (the chain in one launch) per SASS instruction, for each object of NAMES at each
# M of MS on SHAPE, summarized by stall_summary.py (the instructions that hold most samples, and their reasons).
# Writes $OUT/<name>-m<M>.{ncu-rep,csv,details.txt,summary.txt} and prints the summaries.
# Usage: OUT=... [NAMES="landed"] [SHAPE=llama65] [MS="1 8"] [BUILD=build/decode_probe] bash scripts/decode_probe/stall_call.sh
set -u
. "$(dirname "$0")/probe_env.sh"  # ROOT, B (BUILD), NVCC, cuBLASLt's folder
OUT=${OUT:?an output folder}; mkdir -p "$OUT"
for n in ${NAMES:-landed}; do
  [ -x "$B/$n" ] || "$NVCC" "$B/$n.o" -o "$B/$n" -lcublas -lcublasLt || { echo "$n: link failed"; continue; }
  for m in ${MS:-1 8}; do
    r=$OUT/$n-m$m
    DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=$m DECODE_PROBE_SHAPES=${SHAPE:-llama65} DECODE_PROBE_NO_EXTRA=1 \
      timeout 240 ncu --clock-control none --kernel-name regex:bulk_chain_kernel --launch-skip 0 --launch-count 1 \
      --section SpeedOfLight --section WarpStateStats --section SourceCounters --section ComputeWorkloadAnalysis \
      --section MemoryWorkloadAnalysis --import-source no -f -o "$r" "$B/$n" "$OUT/tmp-$n" > "$r.log" 2>&1
    echo "== $n M=$m ncu rc=$?"
    ncu -i "$r.ncu-rep" --page details > "$r.details.txt" 2>&1
    ncu -i "$r.ncu-rep" --page source --csv --print-source sass > "$r.csv" 2>&1
    grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall|Tensor|Shared" "$r.details.txt" | head -20
    python3 "$ROOT/scripts/decode_probe/stall_summary.py" "$r.csv" > "$r.summary.txt" 2>&1
    head -60 "$r.summary.txt"
  done
done
