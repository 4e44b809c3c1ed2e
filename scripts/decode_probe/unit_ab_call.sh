#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (unit.o): v6 alone and the landed kernel (DECODE_PROBE_ONLY:
# the other variants are neither checked nor timed), once with gemm2's units slab-major (the default) and once
# tile-major (DECODE_PROBE_UNIT_G2_TILE_MAJOR=1), each with its checks and per-CTA trace.
# Usage: OUT=... [SHAPES=gpt3,llama65] [MS=1,8] bash scripts/decode_probe/unit_ab_call.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd); B=$ROOT/build/decode_probe
OUT=${OUT:?an output folder}
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvcc "$B/unit.o" -o "$B/unit" -lcublas -lcublasLt > "$B/unit.link.log" 2>&1 || { cat "$B/unit.link.log"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for order in slab tile; do
  mkdir -p "$OUT/$order"
  env $([ $order = tile ] && echo DECODE_PROBE_UNIT_G2_TILE_MAJOR=1) DECODE_PROBE_ONLY=unit,bulk DECODE_PROBE_UNIT_TRACE=1 \
    DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=${MS:-1,8} DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65} \
    timeout 150 "$B/unit" "$OUT/$order" > "$OUT/$order/stdout.txt" 2>&1
  echo "== gemm2 $order-major rc=$?"; grep -E "^unit |negative|NO$|timeout|FAIL" "$OUT/$order/stdout.txt" | cut -c1-200
done
