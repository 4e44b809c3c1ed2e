#!/usr/bin/env bash
# NOTES d11 in one device call: builds the probe twice (16 KB and 32 KB copies) unless BUILD holds both, runs
# bulk.sh (timings, checks, v5's timeline, the odd shape, the ring alone, ncu), then memcheck, racecheck and
# synccheck on v5 alone (the odd shape, only v5's kernels instrumented), and racecheck on d10's weights-ahead
# kernels alone where SWAP_BIN names a built scripts/swap_probe binary (its build takes minutes: build it ahead).
# Usage: bash scripts/decode_probe/bulk_call.sh OUT_DIR
#   EXTRA_FLAGS="-I.../include -L.../lib" where cuBLAS is not in the toolkit (e.g. the nvidia-cublas wheel).
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
. "$(dirname "$0")/probe_env.sh"
[ -x "$B/decode_probe" ] || $NVCC $FLAGS "$SRC" -o "$B/decode_probe" -lcublas -lcublasLt 2> "$R/build.log" &
[ -x "$B/decode_probe_c16" ] || $NVCC -DCUSYNC_BULK_CHUNK_STEPS=16 $FLAGS "$SRC" -o "$B/decode_probe_c16" -lcublas -lcublasLt 2> "$R/build16.log" &
wait
[ -x "$B/decode_probe" ] || { tail -30 "$R/build.log"; exit 1; }
echo "built at ${SECONDS}s"
NCU=${NCU:-1} BIN=$B/decode_probe BIN16=$B/decode_probe_c16 bash "$ROOT/scripts/decode_probe/bulk.sh" "$R" 2>&1 | tail -150
mkdir -p "$R/san"
only() { echo --kernel-name "kns=$1"; }
for tool in memcheck racecheck synccheck; do
  DECODE_PROBE_SHAPES=odd timeout 150 compute-sanitizer --tool $tool $(only bulk_chain) --error-exitcode 9 \
    "$B/decode_probe" "$R/san" > "$R/san/bulk-$tool.txt" 2>&1
  echo "v5 $tool rc=$? at ${SECONDS}s"; tail -3 "$R/san/bulk-$tool.txt"
done
if [ -x "${SWAP_BIN:-}" ]; then
  timeout 150 compute-sanitizer --tool racecheck $(only WeightsAhead) --error-exitcode 9 "$SWAP_BIN" --m 1,3 \
    --chains 1024:2048:1024:1024 --repeats 1 --only 128x16_ > "$R/san/ahead-racecheck.jsonl" 2> "$R/san/ahead-racecheck.log"
  echo "weights-ahead racecheck rc=$? at ${SECONDS}s"; tail -3 "$R/san/ahead-racecheck.log"
fi
