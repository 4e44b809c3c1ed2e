#!/usr/bin/env bash
# One device call that times v5 (templates/sm90/include/cusync/sm90/bulk_chain.cuh) as it is against the same
# kernel with a patch applied (PATCH, default scripts/decode_probe/d13.patch: NOTES d12's "what it would take"
# items 1-3), in two probe binaries built side by side: both with v5's timeline, on the three shapes at M = 1..64,
# every variant checked; then the odd shape on the patched one, and memcheck and synccheck on its kernels alone.
# NOTES d12 measured the previous pair this way (X 4 chunks ahead against 1: build with
# PATCH=none EXTRA_NEXT=-DCUSYNC_BULK_X_AHEAD=1).
# Usage: bash scripts/decode_probe/x_ahead_call.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
. "$(dirname "$0")/probe_env.sh"
PATCH=${PATCH:-$ROOT/scripts/decode_probe/d13.patch}
NEXT=$(mktemp -d); cp -r "$ROOT/templates/sm90/include" "$NEXT/"
if [ "$PATCH" != none ]; then (cd "$NEXT" && patch -s -p3 < "$PATCH") || { echo "the patch does not apply"; exit 1; }; fi
NEXT_FLAGS="${EXTRA_FLAGS:-} ${EXTRA_NEXT:-} -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I$ROOT/templates/runtime/include -I$NEXT/include"
$NVCC $FLAGS "$SRC" -o "$B/decode_probe" -lcublas -lcublasLt 2> "$R/build.log" &
$NVCC $NEXT_FLAGS "$SRC" -o "$B/decode_probe_next" -lcublas -lcublasLt 2> "$R/build_next.log" &
wait
[ -x "$B/decode_probe" ] && [ -x "$B/decode_probe_next" ] || { tail -30 "$R"/build*.log; exit 1; }
echo "built at ${SECONDS}s"
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
for v in decode_probe decode_probe_next; do
  mkdir -p "$R/$v"
  DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS:-1,4,16,32,64} DECODE_PROBE_SHAPES=gpt3,llama65,llama3-8b \
    timeout 150 "$B/$v" "$R/$v" > "$R/$v/stdout.txt" 2>&1
  echo "$v rc=$? at ${SECONDS}s"
  sed -n '/^bulk trace/p;/^shape/,$p' "$R/$v/stdout.txt" | cut -c1-240
  grep -h -i "fail\|DET!\|BIT!\|mismatch\| NO$" "$R/$v/decode_probe.log" | head -10
done
mkdir -p "$R/odd" "$R/san"
DECODE_PROBE_SHAPES=odd timeout 60 "$B/decode_probe_next" "$R/odd" > "$R/odd/stdout.txt" 2>&1; echo "odd shape rc=$? at ${SECONDS}s"
grep -h "^odd" "$R/odd/stdout.txt"
for tool in memcheck synccheck; do
  DECODE_PROBE_SHAPES=odd timeout 100 compute-sanitizer --tool $tool --kernel-name kns=bulk_chain --error-exitcode 9 \
    "$B/decode_probe_next" "$R/san" > "$R/san/$tool.txt" 2>&1
  echo "$tool rc=$? at ${SECONDS}s"; tail -1 "$R/san/$tool.txt"
done
