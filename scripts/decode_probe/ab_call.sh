#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (ab_objects.sh made its objects here): link every
# build/decode_probe/*.o, run them ROUNDS times in turn (landed, patch, landed, patch, ...) on SHAPES at MS with
# every probe check and the per-CTA timeline, then the odd shape and memcheck and synccheck on each patched one.
# Writes $OUT/<name>-<round>/ (the probe's files) and prints each run's table.
# NO_SAN=1 skips the odd shape and the sanitizers (timing probes whose results are wrong by design).
# Usage: OUT=... [SHAPES=gpt3,llama65,llama3-8b] [MS=1,4,8] [ROUNDS=2] [NO_SAN=1] bash scripts/decode_probe/ab_call.sh
set -u
B=$(cd "$(dirname "$0")/../.." && pwd)/build/decode_probe
OUT=${OUT:?an output folder}
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
names=""
for o in "$B"/*.o; do
  n=$(basename "$o" .o)
  nvcc "$o" -o "$B/$n" -lcublas -lcublasLt > "$B/$n.link.log" 2>&1 && names="$names $n" || { echo "$n: link failed"; cat "$B/$n.link.log"; }
done
nvidia-smi --query-gpu=name --format=csv,noheader
for r in $(seq 1 "${ROUNDS:-2}"); do
  for n in $names; do
    mkdir -p "$OUT/$n-$r"
    DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS:-1,4,8} DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65,llama3-8b} \
      timeout 120 "$B/$n" "$OUT/$n-$r" > "$OUT/$n-$r/stdout.txt" 2>&1
    echo "== $n round $r rc=$?"; sed -n '/^bulk trace/p;/^bulk cycles/p;/^shape/,$p' "$OUT/$n-$r/stdout.txt" | cut -c1-250
  done
done
for n in $names; do
  [ "$n" = landed ] || [ -n "${NO_SAN:-}" ] && continue
  mkdir -p "$OUT/$n-odd"
  DECODE_PROBE_SHAPES=odd timeout 60 "$B/$n" "$OUT/$n-odd" > "$OUT/$n-odd/stdout.txt" 2>&1
  echo "$n odd shape rc=$?: $(grep -h '^odd' "$OUT/$n-odd/stdout.txt")"
  for tool in memcheck synccheck; do
    DECODE_PROBE_SHAPES=odd timeout 100 compute-sanitizer --tool $tool --kernel-name kns=bulk_chain --error-exitcode 9 \
      "$B/$n" "$OUT/$n-odd" > "$OUT/$n-odd/$tool.txt" 2>&1
    echo "$n $tool rc=$?: $(tail -1 "$OUT/$n-odd/$tool.txt")"
  done
done
