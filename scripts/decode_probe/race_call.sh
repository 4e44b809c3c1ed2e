#!/usr/bin/env bash
# One device call: compute-sanitizer racecheck of run() mode stream's kernel, with no cuBLAS kernel in the process
# (stream_race.cu: racecheck fails inside cuBLAS's kernels before it reaches ours), in generated libraries:
# decode_stream_sm90 at M = 1, 3, 9, 17, 33 (every M_pad; its ring never wraps) and llama_mlp_sm90_stream (gate|up
# halves, and every slot reused many times) at M = 1, 9. RUNS: "patch:project:ms ..."; patch none is the kernel as
# it is, another names scripts/decode_probe/<patch>.patch. Each binary also runs once without the sanitizer, with
# a rough timing of mode stream (STREAM_RACE_TIME). PREBUILT: library_call.sh's BUILD, whose libraries patch none reuses.
# Patch "mma" builds the kernel as it is with -DCUSYNC_BULK_GMMA=0 (the mma.sync consumers), "wg1" with one consumer
# warpgroup at every M_pad (-DCUSYNC_BULK_GMMA_WG=1 and the M_pad 8, 16 and 32 counts); SAN_FLAGS adds options
# to racecheck (e.g. "--check-warpgroup-mma no").
# Carry third_party/cutlass. Here first: python3 scripts/stream_specs.py .gen-stream
# Usage (on the GPU machine): bash scripts/decode_probe/race_call.sh OUT_DIR
set -u
R=${1:?OUT_DIR}; mkdir -p "$R"
D=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$D/../.." && pwd)
GEN=${GEN_DIR:-$ROOT/.gen-stream}
CUT=${CUTLASS_DIR:-$ROOT/third_party/cutlass}
B=${BUILD:-/tmp/race_call}
RUNS=${RUNS:-"none:decode_stream_sm90:1,3,9,17,33 none:llama_mlp_sm90_stream:1,9"}
build() {  # patch project
  local w=$B/$1-$2
  rm -rf "$w"; mkdir -p "$B"
  local flags=""
  case $1 in mma) flags=-DCUSYNC_BULK_GMMA=0 ;; wg1) flags="-DCUSYNC_BULK_GMMA_WG=1 -DCUSYNC_BULK_GMMA_WG_M8=1 -DCUSYNC_BULK_GMMA_WG_M16=1 -DCUSYNC_BULK_GMMA_WG_M32=1" ;; esac
  if [ "$1" = none ] && [ -f "${PREBUILT:-/nonexistent}/$2/build/lib$2.a" ]; then
    ln -s "$PREBUILT/$2" "$w"  # PREBUILT: library_call.sh's BUILD (PATCH none), whose library is this one
  else
    cp -r "$GEN/$2" "$w"
    if [ "$1" != none ] && [ "$1" != mma ] && [ "$1" != wg1 ]; then (cd "$w" && patch -s --batch --forward -p3 < "$D/$1.patch") || { echo "$1 does not apply"; return 1; }; fi
    cmake -S "$w" -B "$w/build" -G Ninja -DCUTLASS_DIR="$CUT" -DCMAKE_CUDA_ARCHITECTURES=90a -DCMAKE_CUDA_FLAGS="$flags" \
      > "$R/build-$1-$2.log" 2>&1 &&
      cmake --build "$w/build" --target "$2" -j "${JOBS:-6}" >> "$R/build-$1-$2.log" 2>&1 || { tail -20 "$R/build-$1-$2.log"; return 1; }
  fi
  local def=""; [ "$2" = llama_mlp_sm90_stream ] && def=-DSTREAM_RACE_LLAMA
  # shellcheck disable=SC2086  # def and flags are words or nothing
  nvcc -std=c++17 -O2 -arch=sm_90a -cudart shared $def $flags -I"$w/include" "$D/stream_race.cu" "$w/build/lib$2.a" -lcublasLt -lcuda \
    -o "$w/stream_race" >> "$R/build-$1-$2.log" 2>&1
  echo "build $1 $2 rc=$? at ${SECONDS}s"
}
for r in $RUNS; do IFS=: read -r p proj ms <<< "$r"; build "$p" "$proj" & done
wait
for r in $RUNS; do
  IFS=: read -r p proj ms <<< "$r"
  x=$B/$p-$proj/stream_race; [ -x "$x" ] || { echo "$p $proj: no binary"; continue; }
  STREAM_RACE_TIME=1 "$x" "$ms" > "$R/plain-$p-$proj.txt" 2>&1; echo "plain $p $proj rc=$?: $(tail -1 "$R/plain-$p-$proj.txt")"
  # shellcheck disable=SC2086  # SAN_FLAGS: words
  timeout "${SAN_TIMEOUT:-200}" compute-sanitizer --tool racecheck ${SAN_FLAGS:-} --print-limit 20 --kernel-name kns=bulk_chain \
    --error-exitcode 9 "$x" "$ms" > "$R/racecheck-$p-$proj.txt" 2>&1
  echo "racecheck $p $proj rc=$? at ${SECONDS}s: $(grep -h "RACECHECK SUMMARY\|Internal" "$R/racecheck-$p-$proj.txt" | tr '\n' ' ')"
  grep -h "mode stream:" "$R/plain-$p-$proj.txt"
done
