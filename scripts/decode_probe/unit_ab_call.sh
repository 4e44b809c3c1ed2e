#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (unit.o): v6 alone and the landed kernel (DECODE_PROBE_ONLY:
# the other variants are neither checked nor timed), once with gemm2's units slab-major (the default) and once
# tile-major (DECODE_PROBE_UNIT_G2_TILE_MAJOR=1), each with its checks and per-CTA trace.
# The per-unit trace lines ("unit units ...": the consumers' X wait, chunks, scratch wait and period per GEMM) come
# with the per-CTA trace.
# WIDES="0 1": each also with the poster on one warp (0) and on four (1, DECODE_PROBE_UNIT_WIDE).
# Usage: OUT=... [SHAPES=gpt3,llama65] [MS=1,8] [ORDERS="slab tile"] [WIDES="0 1"] [TMO=150] bash scripts/decode_probe/unit_ab_call.sh
set -u
# shellcheck source=scripts/decode_probe/probe_env.sh
. "$(dirname "$0")/probe_env.sh"  # ROOT, B, NVCC, cuBLASLt on LD_LIBRARY_PATH
OUT=${OUT:?an output folder}
"$NVCC" "$B/unit.o" -o "$B/unit" -lcublas -lcublasLt > "$B/unit.link.log" 2>&1 || { cat "$B/unit.link.log"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for order in ${ORDERS:-slab tile}; do
for wide in ${WIDES:-0}; do
  o=$OUT/$order-w$wide; mkdir -p "$o"
  env $([ $order = tile ] && echo DECODE_PROBE_UNIT_G2_TILE_MAJOR=1) DECODE_PROBE_UNIT_WIDE=$wide DECODE_PROBE_ONLY=unit,bulk \
    DECODE_PROBE_UNIT_TRACE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=${MS:-1,8} DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65} \
    timeout ${TMO:-150} "$B/unit" "$o" > "$o/stdout.txt" 2>&1
  echo "== gemm2 $order-major, wide poster $wide: rc=$?"
  grep -E "^unit |negative|NO$|timeout|FAIL|error" "$o/stdout.txt" | cut -c1-220
done
done
