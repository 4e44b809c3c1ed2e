#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (ab_objects.sh with PATCHES=ctrace made landed.o and
# ctrace.o here): the landed kernel's times against cuBLASLt at MS_TIME, then the chunk-traced kernel in each
# DECODE_PROBE_BULK_MODE of MODES (0 the whole kernel, 1 the ring alone, T >= 2 the ring with each slot held T
# cycles) on SHAPES at MS, and chunk_trace.py's table of every traced run. The raw traces go to $OUT/chunks.tgz.
# Usage: OUT=... [SHAPES=gpt3,llama65] [MS=1,16] [MODES="0 1 1500 3000 5000"] [MS_TIME=1,16,17] bash scripts/decode_probe/ctrace_call.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:?an output folder}
source "$HERE/probe_env.sh"
mkdir -p "$OUT"
for n in landed ctrace; do
  $NVCC "$B/$n.o" -o "$B/$n" -lcublas -lcublasLt > "$B/$n.link.log" 2>&1 || { echo "$n: link failed"; cat "$B/$n.link.log"; exit 1; }
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
mkdir -p "$OUT/landed"
DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS_TIME:-1,16,17} DECODE_PROBE_SHAPES=${SHAPES_TIME:-gpt3,llama65,llama3-8b} \
  timeout 150 "$B/landed" "$OUT/landed" > "$OUT/landed/stdout.txt" 2>&1
echo "== landed rc=$? at ${SECONDS}s"; sed -n '/^shape/,$p' "$OUT/landed/stdout.txt" | cut -c1-250
for mode in ${MODES:-0 1 1500 3000 5000}; do
  d=$OUT/ct-$mode; mkdir -p "$d"
  DECODE_PROBE_BULK_MODE=$mode DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS:-1,16} \
    DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65} timeout 120 "$B/ctrace" "$d" > "$d/stdout.txt" 2>&1
  echo "== ctrace mode $mode rc=$? at ${SECONDS}s"; sed -n '/^bulk trace/p;/^shape/,$p' "$d/stdout.txt" | cut -c1-250
done
echo "== chunk_trace.py"
python3 "$HERE/chunk_trace.py" "$OUT"/ct-*/chunks-*.bin 2>&1
(cd "$OUT" && tar czf chunks.tgz ct-*/chunks-*.bin && rm -f ct-*/chunks-*.bin)
