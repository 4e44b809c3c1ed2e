#!/usr/bin/env bash
# NOTES d12 in one device call: v5 with the consumers' per-chunk index arithmetic removed and X's fragments
# loaded CUSYNC_BULK_X_AHEAD chunks ahead (the default, 4) against the same kernel with them one chunk ahead
# (d11's depth), both with v5's timeline; the odd shape; then run() mode stream in the projects GEN_DIR holds
# (scripts/gpu_stream_mode.sh with PROJECTS, no sanitizers or peers) so that the library is timed in the same call.
# Usage: bash scripts/decode_probe/x_ahead_call.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
. "$(dirname "$0")/probe_env.sh"
$NVCC $FLAGS "$SRC" -o "$B/decode_probe" -lcublas -lcublasLt 2> "$R/build.log" &
$NVCC -DCUSYNC_BULK_X_AHEAD=1 $FLAGS "$SRC" -o "$B/decode_probe_x1" -lcublas -lcublasLt 2> "$R/build_x1.log" &
wait
[ -x "$B/decode_probe" ] || { tail -30 "$R/build.log"; exit 1; }
echo "built at ${SECONDS}s"
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
for v in decode_probe decode_probe_x1; do
  mkdir -p "$R/$v"
  DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS:-1,4,16,32,64} DECODE_PROBE_SHAPES=gpt3,llama65,llama3-8b \
    timeout 150 "$B/$v" "$R/$v" > "$R/$v/stdout.txt" 2>&1
  echo "$v rc=$? at ${SECONDS}s"
  sed -n '/^bulk trace/p;/^shape/,$p' "$R/$v/stdout.txt" | cut -c1-240
  grep -h -i "fail\|DET!\|BIT!\|mismatch\| NO$" "$R/$v/decode_probe.log" | head -10
done
mkdir -p "$R/odd"
DECODE_PROBE_SHAPES=odd timeout 60 "$B/decode_probe" "$R/odd" > "$R/odd/stdout.txt" 2>&1; echo "odd shape rc=$? at ${SECONDS}s"
grep -h "^odd" "$R/odd/stdout.txt"
