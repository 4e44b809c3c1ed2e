#!/usr/bin/env bash
# One device call that checks and times run() mode stream in generated libraries with a probe patch applied to the
# kernel: the projects scripts/stream_specs.py generated here (GEN_DIR, default .gen-stream; the GPU machine has
# no pydantic), each copied to BUILD and, unless PATCH is none, patched in its own include/ copy of
# bulk_chain.cuh, then built and run:
#   check-*.jsonl  every M_pad (CHECK_MS: 1, 3, 9, 16, 17, 33, 64, 65): mode stream within tolerance of back to
#                  back and of the fp32 reference, bitwise equal run to run (llama_mlp_sm90_stream packs gate|up
#                  halves, which the probe does not);
#   bench-*.jsonl  MS, every mode in one binary against cuBLAS and cuBLASLt (after a short autotune);
#   memcheck of the kernel alone in decode_stream_sm90 at M = 3 and 9 (racecheck: race_call.sh, whose driver has
#   no cuBLAS kernel; racecheck fails inside the bench's cuBLAS peers before it reaches ours).
# PHASE (build,check,bench,san) picks the steps: a caller can build here while the GPU runs something else, then
# check and time. Carry third_party/cutlass (git-ignored) with the call. Prints one line per check row and a verdict.
# Usage: python3 scripts/stream_specs.py .gen-stream (here); on the GPU:
#   [PATCH=name] bash scripts/decode_probe/library_call.sh OUT_DIR   (PATCH none, the default: the kernel as it is)
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
GEN=${GEN_DIR:-$ROOT/.gen-stream}
PATCH=${PATCH:-none}
PROJECTS=${PROJECTS:-decode_stream_sm90 llama_mlp_sm90_stream}
B=${BUILD:-/tmp/library_call}
CUT=${CUTLASS_DIR:-$ROOT/third_party/cutlass}
PHASE=${PHASE:-build,check,bench,san}
has() { [[ ",$PHASE," == *",$1,"* ]]; }
[ -f "$CUT/include/cutlass/cutlass.h" ] || { echo "no CUTLASS at $CUT: carry third_party/cutlass"; exit 1; }
for p in $PROJECTS; do
  has build || break
  rm -rf "${B:?}/$p"; mkdir -p "$B"; cp -r "$GEN/$p" "$B/$p"
  if [ "$PATCH" != none ]; then
    (cd "$B/$p" && patch -s --batch --forward -p3 < "$ROOT/scripts/decode_probe/$PATCH.patch") || { echo "$PATCH.patch does not apply to $p"; exit 1; }
  fi
  (cmake -S "$B/$p" -B "$B/$p/build" -G Ninja -DCUTLASS_DIR="$CUT" -DCMAKE_CUDA_ARCHITECTURES=90a > "$R/build-$p.log" 2>&1 &&
     cmake --build "$B/$p/build" -j 8 >> "$R/build-$p.log" 2>&1; echo "build $p rc=$? at ${SECONDS}s") &
done
wait
for p in $PROJECTS; do
  b=$B/$p/build/${p}_bench; [ -x "$b" ] || { tail -20 "$R/build-$p.log"; continue; }
  has check && timeout 90 "$b" --m "${CHECK_MS:-1,3,9,16,17,33,64,65}" --policies spec --repeats 3 --warmup 1 --no-fallback \
    > "$R/check-$p.jsonl" 2> "$R/check-$p.err" && echo "check $p done at ${SECONDS}s"
  has bench && timeout 200 "$b" --m "${MS:-1,4,16,64}" --policies spec --repeats "${REPEATS:-20}" --warmup 5 --autotune "${AUTOTUNE:-3}" \
    > "$R/bench-$p.jsonl" 2> "$R/bench-$p.err" && echo "bench $p done at ${SECONDS}s"
done
if has san && [ -x "$B/decode_stream_sm90/build/decode_stream_sm90_bench" ]; then
  for tool in memcheck; do
    timeout 120 compute-sanitizer --tool $tool --print-limit 20 --kernel-name kns=bulk_chain --error-exitcode 9 \
      "$B/decode_stream_sm90/build/decode_stream_sm90_bench" --m 3,9 --policies spec --repeats 1 --warmup 1 --no-fallback \
      > "$R/sanitizer-$tool.log" 2>&1
    echo "sanitizer $tool rc=$? at ${SECONDS}s: $(tail -1 "$R/sanitizer-$tool.log")"
  done
fi
has check || has bench || exit 0
python3 "$ROOT/scripts/stream_check_summary.py" "$R" "library with $PATCH"
