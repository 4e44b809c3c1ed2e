#!/usr/bin/env bash
# One device call that times v5 (templates/sm90/include/cusync/sm90/bulk_chain.cuh) as it is against the same
# kernel with each of PATCHES applied (scripts/decode_probe/<name>.patch, none by default; NOTES d13's patches d13
# to d16 are in the git history, and d16 landed), one probe binary per kernel built side by side: each with v5's
# timeline, on the three shapes at M = 1..64 (MS), every variant checked; then the odd shape and memcheck and
# synccheck on each patched kernel of SAN_PATCHES (default: all). NOTES d12 measured an earlier pair this way (X 4
# chunks ahead against 1: PATCHES=none EXTRA_NEXT=-DCUSYNC_BULK_X_AHEAD=1). A patch that does not build is
# reported and left out. Four binaries take ~260 s on an H100 (build ~170 s).
# Usage: bash scripts/decode_probe/x_ahead_call.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
. "$(dirname "$0")/probe_env.sh"
PATCHES=${PATCHES:-}
$NVCC $FLAGS "$SRC" -o "$B/decode_probe" -lcublas -lcublasLt 2> "$R/build.log" &
for p in $PATCHES; do
  NEXT=$(mktemp -d); cp -r "$ROOT/templates/sm90/include" "$NEXT/"
  if [ "$p" != none ]; then (cd "$NEXT" && patch -s --batch --forward -p3 < "$ROOT/scripts/decode_probe/$p.patch") || { echo "$p.patch does not apply"; exit 1; }; fi
  $NVCC ${EXTRA_FLAGS:-} ${EXTRA_NEXT:-} -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo \
    -I"$ROOT/templates/runtime/include" -I"$NEXT/include" "$SRC" -o "$B/decode_probe_$p" -lcublas -lcublasLt 2> "$R/build_$p.log" &
done
wait
[ -x "$B/decode_probe" ] || { tail -30 "$R"/build.log; exit 1; }
BUILT=""
for p in $PATCHES; do
  if [ -x "$B/decode_probe_$p" ]; then BUILT="$BUILT $p"; else echo "$p: build failed"; tail -30 "$R/build_$p.log"; fi
done
PATCHES=$BUILT
echo "built at ${SECONDS}s"
for v in decode_probe $(printf 'decode_probe_%s ' $PATCHES); do
  mkdir -p "$R/$v"
  DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=bulk DECODE_PROBE_MS=${MS:-1,4,16,32,64} DECODE_PROBE_SHAPES=gpt3,llama65,llama3-8b \
    timeout 150 "$B/$v" "$R/$v" > "$R/$v/stdout.txt" 2>&1
  echo "$v rc=$? at ${SECONDS}s"
  sed -n '/^bulk trace/p;/^shape/,$p' "$R/$v/stdout.txt" | cut -c1-240
  grep -h -i "fail\|DET!\|BIT!\|mismatch\| NO$" "$R/$v/decode_probe.log" | head -10
done
for p in ${SAN_PATCHES:-$PATCHES}; do
  [[ " $PATCHES " == *" $p "* ]] || continue
  mkdir -p "$R/odd_$p" "$R/san_$p"
  DECODE_PROBE_SHAPES=odd timeout 60 "$B/decode_probe_$p" "$R/odd_$p" > "$R/odd_$p/stdout.txt" 2>&1
  echo "$p odd shape rc=$? at ${SECONDS}s"; grep -h "^odd" "$R/odd_$p/stdout.txt"
  for tool in memcheck synccheck; do
    DECODE_PROBE_SHAPES=odd timeout 100 compute-sanitizer --tool $tool --kernel-name kns=bulk_chain --error-exitcode 9 \
      "$B/decode_probe_$p" "$R/san_$p" > "$R/san_$p/$tool.txt" 2>&1
    echo "$p $tool rc=$? at ${SECONDS}s"; tail -1 "$R/san_$p/$tool.txt"
  done
done
