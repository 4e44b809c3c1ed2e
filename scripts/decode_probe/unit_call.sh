#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (unit.o compiled here from main.cu, which includes
# unit_chain.cuh): link, then the probe on SHAPES at MS timing the landed kernel (bulk) and v6 (unit), every probe
# check; then the same binary under compute-sanitizer memcheck on a small SwiGLU shape at M = 3 (unless NO_SAN).
# Usage: OUT=... [SHAPES=gpt3,llama65,llama3-8b] [MS=1,8,16] [ROUNDS=1] bash scripts/decode_probe/unit_call.sh
set -u
# shellcheck source=scripts/decode_probe/probe_env.sh
. "$(dirname "$0")/probe_env.sh"  # ROOT, B, NVCC, cuBLASLt on LD_LIBRARY_PATH
OUT=${OUT:?an output folder}
"$NVCC" "$B/unit.o" -o "$B/unit" -lcublas -lcublasLt > "$B/unit.link.log" 2>&1 || { cat "$B/unit.link.log"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for r in $(seq 1 "${ROUNDS:-1}"); do
  mkdir -p "$OUT/r$r"
  DECODE_PROBE_UNIT_TRACE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_VARIANTS=bulk,unit DECODE_PROBE_MS=${MS:-1,8,16} \
    DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65,llama3-8b} timeout 300 "$B/unit" "$OUT/r$r" > "$OUT/r$r/stdout.txt" 2>&1
  echo "== round $r rc=$?"; grep -E "^unit |two launches|negative|timeout|error|FAIL" "$OUT/r$r/stdout.txt" | head -40
  grep -E "^(gpt3|llama)" "$OUT/r$r/stdout.txt" | cut -c1-42,97-
done
if [ -z "${NO_RING:-}" ]; then  # the ring alone (v5's consumers only free their slots; its checks fail by design)
  mkdir -p "$OUT/ring"
  DECODE_PROBE_BULK_MODE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS:-1,8,16} \
    DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65,llama3-8b} timeout 300 "$B/unit" "$OUT/ring" > "$OUT/ring/stdout.txt" 2>&1
  echo "== ring alone rc=$?"; grep -E "^(gpt3|llama)" "$OUT/ring/stdout.txt" | cut -c1-42,97-133
fi
if [ -z "${NO_SAN:-}" ]; then
  mkdir -p "$OUT/san"
  DECODE_PROBE_QUICK=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_VARIANTS=unit DECODE_PROBE_MS=3,9 DECODE_PROBE_SHAPES=none \
    DECODE_PROBE_CUSTOM=small:1008:336:528:swiglu:bf16,smallg:1040:272:1008:gelu:fp16 timeout 200 \
    compute-sanitizer --tool memcheck --kernel-name kns=unit_chain --error-exitcode 9 "$B/unit" "$OUT/san" > "$OUT/san/memcheck.txt" 2>&1
  echo "memcheck rc=$?: $(tail -1 "$OUT/san/memcheck.txt")"; grep -E "^unit |two launches|FAIL|Invalid" "$OUT/san/memcheck.txt" | head
fi
