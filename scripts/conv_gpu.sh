#!/usr/bin/env bash
# The conv examples on a GPU machine, in one go: generate (or take the pre-generated copies in .gen/),
# build for sm_90a, check (odd sizes, batch 1 and 3, stride 1/2, padding 0/1/2, dilation 2, fp16 and bf16;
# tile-synced bitwise equal to back-to-back, within tolerance of a direct reference conv; a missing post must
# time out naming the tile), then time resnet_block and vgg_block at BATCHES (ours), then cuDNN through
# PyTorch on the same layers (scripts/conv_torch.py) right after. Writes logs into $OUT.
# Env: BATCHES (1,8,32), REPEATS (100), PREHEAT (2.0 s), PHASE (build,check,bench,torch), JOBS (16).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BATCHES=${BATCHES:-1,8,32}
REPEATS=${REPEATS:-100}
PREHEAT=${PREHEAT:-2.0}
PHASE=${PHASE:-build,check,bench,torch}
JOBS=${JOBS:-16}
CUT=${CUTLASS_DIR:-$PWD/third_party/cutlass}
B=${BUILD:-/tmp/conv-build}
LOG="$OUT/log.txt"
SPECS="cusync_gen/examples/resnet_block.yaml cusync_gen/examples/vgg_block.yaml tests/data/conv_mix.yaml tests/data/conv_mix_bf16.yaml"
say() { echo "== $*" | tee -a "$LOG"; }
has() { [[ ",$PHASE," == *",$1,"* ]]; }
nvidia-smi -L >> "$LOG" 2>&1
GEN=""
command -v ninja > /dev/null && GEN="-G Ninja"

if has build; then
  say "build $(date +%T)"
  for f in $SPECS; do
    n=$(basename "$f" .yaml)
    mkdir -p "$B"
    if [ -d ".gen/$n" ]; then rm -rf "$B/$n"; cp -r ".gen/$n" "$B/$n"
    else python3 -m cusync_gen.cli generate "$f" -o "$B/$n" >> "$LOG" 2>&1 || say "generate $n failed"; fi
    cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_CUDA_ARCHITECTURES=90a -DCUTLASS_DIR="$CUT" > "$OUT/build-$n.log" 2>&1
  done
  for f in $SPECS; do
    n=$(basename "$f" .yaml)
    (cmake --build "$B/$n/build" -j "$JOBS" >> "$OUT/build-$n.log" 2>&1; echo "build $n rc=$?" >> "$LOG") &
  done
  wait
  say "built $(date +%T)"
fi

run() {  # run NAME TIMEOUT ARGS...: the bench, its output appended to the log
  local n=$1 t=$2; shift 2
  say "$n $* ($(date +%T))"
  timeout "$t" "$B/$n/build/${n}_bench" "$@" >> "$LOG" 2>&1
  echo "rc=$?" | tee -a "$LOG"
}

if has check; then
  run conv_mix 120 --batch 1,3 --check-only
  run conv_mix_bf16 120 --batch 1,3 --check-only
  run resnet_block 120 --batch 1,3,32 --check-only
  run vgg_block 120 --batch 1,3 --check-only
  run resnet_block 60 --batch 1 --missing-post conv1
  run conv_mix 60 --batch 3 --missing-post s2
  if command -v compute-sanitizer > /dev/null; then
    say "memcheck conv_mix"
    timeout 180 compute-sanitizer --tool memcheck "$B/conv_mix/build/conv_mix_bench" --batch 3 --check-only > "$OUT/sanitizer.log" 2>&1
    echo "memcheck rc=$?" | tee -a "$LOG"; tail -3 "$OUT/sanitizer.log" >> "$LOG"
  fi
fi

if has bench; then
  for n in resnet_block vgg_block; do
    say "bench $n ($(date +%T))"
    timeout 300 "$B/$n/build/${n}_bench" --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" > "$OUT/bench-$n.txt" 2>&1
    echo "rc=$?" | tee -a "$LOG"
  done
fi

if has torch; then
  say "torch ($(date +%T))"
  timeout 300 python3 scripts/conv_torch.py --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" > "$OUT/torch.jsonl" 2>> "$LOG"
  echo "rc=$?" | tee -a "$LOG"
fi
say "done $(date +%T)"
