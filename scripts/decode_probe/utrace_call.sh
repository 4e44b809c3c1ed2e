#!/usr/bin/env bash
# On the GPU machine, with build/decode_probe carried (unit.o): NOTES d30's calls. v6 (slab-major gemm2) with the
# per-unit trace and the poster's times. CALL=1: the poster on one warp and on four (WIDE), then gemm2's X stage
# skipped (NO_X=2: wrong results, timing only); CALL=2 (M = 1, 16): X staged by one TMA box a unit, with the
# poster's finishes on four finisher warps (WIDE=2) or on the four-warp poster, against cp.async. Then
# compute-sanitizer memcheck of the first variant of the call on odd shapes. CALL=3 (next): X by TMA boxes of
# 128-byte rows in the 128-byte swizzle (X_TMA=2; K a multiple of 64, so its memcheck shapes are too) against
# cp.async, both with the finisher warps.
# Usage: OUT=... [CALL=2] [NO_SAN=1] [WIDE_TMA=1] [SHAPES=gpt3,llama65] [MS=1,8,16 for CALL=1, else 1,16] bash scripts/decode_probe/utrace_call.sh
set -u
# shellcheck source=scripts/decode_probe/probe_env.sh
. "$(dirname "$0")/probe_env.sh"  # ROOT, B, NVCC, cuBLASLt on LD_LIBRARY_PATH
OUT=${OUT:?an output folder}
"$NVCC" "$B/unit.o" -o "$B/unit" -lcublas -lcublasLt > "$B/unit.link.log" 2>&1 || { cat "$B/unit.link.log"; exit 1; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
one() {  # name, timeout, env...
  local o=$OUT/$1 t=$2; shift 2; mkdir -p "$o"
  env "$@" DECODE_PROBE_ONLY=unit,bulk DECODE_PROBE_UNIT_TRACE=1 DECODE_PROBE_NO_EXTRA=1 timeout "$t" "$B/unit" "$o" > "$o/stdout.txt" 2>&1
  echo "== $o rc=$?"; grep -E "^unit |negative|NO$|timeout|timing:|FAIL|error" "$o/stdout.txt" | cut -c1-240
}
ms=$([ "${CALL:-2}" = 1 ] && echo 1,8,16 || echo 1,16)
pts="DECODE_PROBE_MS=${MS:-$ms} DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65}"
if [ "${CALL:-2}" = 1 ]; then
  one narrow 150 DECODE_PROBE_UNIT_WIDE=0 $pts
  one wide 150 DECODE_PROBE_UNIT_WIDE=1 $pts
  one nox2 80 DECODE_PROBE_UNIT_WIDE=1 DECODE_PROBE_UNIT_NO_X=2 DECODE_PROBE_MS=1,16 DECODE_PROBE_SHAPES=gpt3
  runs="narrow wide nox2"; last="DECODE_PROBE_UNIT_WIDE=1"
elif [ "${CALL:-2}" = 3 ]; then
  one split_tma128 ${TMO:-110} DECODE_PROBE_UNIT_WIDE=2 DECODE_PROBE_UNIT_X_TMA=2 $pts
  one split_cp ${TMO:-110} DECODE_PROBE_UNIT_WIDE=2 DECODE_PROBE_UNIT_X_TMA=0 $pts
  runs="split_tma128 split_cp"; last="DECODE_PROBE_UNIT_WIDE=2 DECODE_PROBE_UNIT_X_TMA=2"
  SAN_SHAPES=small64:1024:320:512:swiglu:bf16,smallg64:1088:256:1024:gelu:fp16
else
  one split_tma ${TMO:-110} DECODE_PROBE_UNIT_WIDE=2 DECODE_PROBE_UNIT_X_TMA=1 $pts
  [ -n "${WIDE_TMA:-}" ] && one wide_tma ${TMO:-100} DECODE_PROBE_UNIT_WIDE=1 DECODE_PROBE_UNIT_X_TMA=1 $pts
  one wide_cp ${TMO:-100} DECODE_PROBE_UNIT_WIDE=1 DECODE_PROBE_UNIT_X_TMA=0 $pts
  runs="split_tma wide_cp"; [ -n "${WIDE_TMA:-}" ] && runs="$runs wide_tma"; last="DECODE_PROBE_UNIT_WIDE=2 DECODE_PROBE_UNIT_X_TMA=1"
fi
if [ -z "${NO_SAN:-}" ]; then
  mkdir -p "$OUT/san"
  env $last DECODE_PROBE_QUICK=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_ONLY=unit DECODE_PROBE_MS=3,9 \
    DECODE_PROBE_SHAPES=none DECODE_PROBE_CUSTOM=${SAN_SHAPES:-small:1008:336:528:swiglu:bf16,smallg:1040:272:1008:gelu:fp16} timeout ${SAN_TMO:-60} \
    compute-sanitizer --tool memcheck --kernel-name kns=unit_chain --error-exitcode 9 "$B/unit" "$OUT/san" > "$OUT/san/memcheck.txt" 2>&1
  echo "memcheck rc=$?: $(tail -1 "$OUT/san/memcheck.txt")"; grep -E "^unit |two launches|FAIL|Invalid" "$OUT/san/memcheck.txt" | head
fi
(cd "$OUT" && tar czf all.tgz $runs $([ -d san ] && echo san))
