#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (ab_objects.sh with PATCHES=balance made landed.o and
# balance.o here): ROUNDS rounds of the landed kernel, the balance build with the uniform split, and the balance
# build with its per-point table (DECODE_PROBE_BALANCE=1), each with every probe check and the per-CTA timeline.
# Usage: OUT=... [SHAPES=gpt3,llama65,llama3-8b] [MS=1,16,32] [ROUNDS=2] bash scripts/decode_probe/balance_call.sh
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:?an output folder}
source "$HERE/probe_env.sh"
for n in landed balance; do
  $NVCC "$B/$n.o" -o "$B/$n" -lcublas -lcublasLt > "$B/$n.link.log" 2>&1 || { echo "$n: link failed"; cat "$B/$n.link.log"; exit 1; }
done
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv,noheader
for r in $(seq 1 "${ROUNDS:-2}"); do
  for v in landed uniform balanced; do
    d=$OUT/$v-$r; mkdir -p "$d"
    bin=$B/balance; [ $v = landed ] && bin=$B/landed
    env $([ $v = balanced ] && echo DECODE_PROBE_BALANCE=1) DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=bulk \
      DECODE_PROBE_MS=${MS:-1,16,32} DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65,llama3-8b} timeout 150 "$bin" "$d" > "$d/stdout.txt" 2>&1
    echo "== $v round $r rc=$? at ${SECONDS}s"; sed -n '/^balance/p;/^bulk trace/p;/^shape/,$p' "$d/stdout.txt" | cut -c1-250
  done
done
