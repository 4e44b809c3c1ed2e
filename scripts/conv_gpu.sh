#!/usr/bin/env bash
# The conv examples on a GPU machine, in one go: generate (or take the pre-generated copies in .gen/),
# build for sm_90a, check (odd sizes, batch 1 and 3, stride 1/2, padding 0/1/2, dilation 2, fp16 and bf16;
# tile-synced bitwise equal to back-to-back, within tolerance of a direct reference conv; a missing post must
# time out naming the tile; each with the one-stream programmatic launch and with --two-streams; memcheck of the
# new launch path at a small shape), then time the example chains at BATCHES (ours), then cuDNN through
# PyTorch on the same layers (scripts/conv_torch.py) right after, then torch.compile's blocks (as far as
# COMPILE_S seconds allow). Writes logs into $OUT.
# Projects: every folder of .gen/ (pre-generated: the correctness specs, and the examples' tile variants
# <chain>@<variant> from scripts/conv_variants.py); `select` times each variant briefly and benches the fastest.
# Env: BATCHES (1,8,32), REPEATS (100), PREHEAT (2.0 s), PHASE (build,check,bench,torch,compile; also: select),
# JOBS (16), CHAINS (resnet_block vgg_block bottleneck_block), COMPILE_S (60; at most DEADLINE_S less the seconds
# this script has run).
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BATCHES=${BATCHES:-1,8,32}
REPEATS=${REPEATS:-100}
PREHEAT=${PREHEAT:-2.0}
PHASE=${PHASE:-build,check,bench,torch,compile}
CHAINS=${CHAINS:-resnet_block vgg_block bottleneck_block}
COMPILE_S=${COMPILE_S:-60}
JOBS=${JOBS:-16}
CUT=${CUTLASS_DIR:-$PWD/third_party/cutlass}
B=${BUILD:-/tmp/conv-build}
LOG="$OUT/log.txt"
SPECS="tests/data/conv_mix.yaml tests/data/conv_mix_bf16.yaml"
say() { echo "== $*" | tee -a "$LOG"; }
has() { [[ ",$PHASE," == *",$1,"* ]]; }
nvidia-smi -L >> "$LOG" 2>&1
GEN=""
command -v ninja > /dev/null && GEN="-G Ninja"

if has build; then
  say "build $(date +%T)"
  mkdir -p "$B"
  for f in $SPECS; do
    n=$(basename "$f" .yaml)
    [ -d ".gen/$n" ] || python3 -m cusync_gen.cli generate "$f" -o ".gen/$n" >> "$LOG" 2>&1 || say "generate $n failed"
  done
  for d in .gen/*/; do
    n=$(basename "$d")
    rm -rf "$B/$n"; cp -r ".gen/$n" "$B/$n"
    cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_CUDA_ARCHITECTURES=90a -DCUTLASS_DIR="$CUT" > "$OUT/build-$n.log" 2>&1
  done
  for d in .gen/*/; do
    n=$(basename "$d")
    (cmake --build "$B/$n/build" -j "$JOBS" >> "$OUT/build-$n.log" 2>&1; echo "build $n rc=$?" >> "$LOG") &
  done
  wait
  say "built $(date +%T)"
fi

bench_of() {  # the bench binary of a project folder name (chain@variant or chain)
  echo "$B/$1/build/${1%@*}_bench"
}

run() {  # run NAME TIMEOUT ARGS...: the bench, its output appended to the log
  local n=$1 t=$2; shift 2
  say "$n $* ($(date +%T))"
  timeout "$t" "$(bench_of "$n")" "$@" >> "$LOG" 2>&1
  echo "rc=$?" | tee -a "$LOG"
}

if has check; then
  run conv_mix 120 --batch 1,3 --check-only
  run conv_mix 120 --batch 1,3 --check-only --two-streams
  run conv_mix 120 --batch 1,3 --check-only --two-streams --always-wait
  run conv_mix_bf16 120 --batch 1,3 --check-only
  run conv_mix 120 --batch 1,3 --check-only --block-order
  run conv_mix 120 --batch 1,3 --check-only --block-order --two-streams
  run conv_mix_bf16 120 --batch 3 --check-only --two-streams
  for chain in $CHAINS; do
    for n in $(ls "$B" | grep "^$chain"); do run "$n" 120 --batch 1,3,32 --check-only; done
  done
  run "$(ls "$B" | grep '^bottleneck_block' | head -1)" 120 --batch 3 --check-only --two-streams
  run "$(ls "$B" | grep '^resnet_block' | head -1)" 60 --batch 1 --missing-post conv1
  run "$(ls "$B" | grep '^bottleneck_block' | head -1)" 60 --batch 3 --missing-post conv2
  run conv_mix 60 --batch 3 --missing-post s2
  run conv_mix 60 --batch 3 --missing-post s2 --two-streams
  if command -v compute-sanitizer > /dev/null; then
    say "memcheck conv_mix (one-stream programmatic launch, batch 3)"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$(bench_of conv_mix)" --batch 3 --check-only > "$OUT/sanitizer.log" 2>&1
    echo "rc=$?" | tee -a "$LOG"; tail -3 "$OUT/sanitizer.log" >> "$LOG"
    say "memcheck bottleneck_block (batch 1)"
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$(bench_of bottleneck_block)" --batch 1 --check-only >> "$OUT/sanitizer.log" 2>&1
    echo "rc=$?" | tee -a "$LOG"; tail -3 "$OUT/sanitizer.log" >> "$LOG"
  fi
fi

if has select; then  # each tile variant, short timing; the fastest (geomean of tile-synced us) is benched
  for chain in resnet_block vgg_block; do
    best=""; best_t=""
    for n in $(ls "$B" | grep "^$chain"); do
      timeout 120 "$(bench_of "$n")" --batch "$BATCHES" --repeats 30 --warmup 5 > "$OUT/sel-$n.txt" 2>&1
      t=$(python3 -c "import json,math,sys; r=[json.loads(l[7:]) for l in open(sys.argv[1]) if l.startswith('RESULT ')]; print(math.exp(sum(math.log(x['overlap_us']) for x in r)/len(r)) if r and all(x['bitwise'] for x in r) else 1e30)" "$OUT/sel-$n.txt")
      say "select $n: geomean tile-synced $t us"
      if [ -z "$best" ] || python3 -c "import sys; sys.exit(0 if float(sys.argv[1]) < float(sys.argv[2]) else 1)" "$t" "$best_t"; then best=$n; best_t=$t; fi
    done
    say "chosen $chain: $best"
    echo "$best" > "$OUT/chosen-$chain"
  done
fi

if has bench; then
  for chain in $CHAINS; do
    n=$(cat "$OUT/chosen-$chain" 2>/dev/null || ls "$B" | grep "^$chain" | head -1)
    say "bench $n ($(date +%T))"
    timeout 300 "$(bench_of "$n")" --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" > "$OUT/bench-$chain.txt" 2>&1
    echo "rc=$?" | tee -a "$LOG"
  done
fi

if has torch; then
  say "torch ($(date +%T))"
  timeout 300 python3 scripts/conv_torch.py --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" \
    --chains "${CHAINS// /,}" > "$OUT/torch.jsonl" 2>> "$LOG"
  echo "rc=$?" | tee -a "$LOG"
fi

if has compile; then  # torch.compile's blocks, as many as COMPILE_S seconds allow (lines come as each is done)
  say "torch.compile ($(date +%T))"
  left=$(( ${DEADLINE_S:-100000} - SECONDS )); [ "$left" -lt "$COMPILE_S" ] && COMPILE_S=$(( left > 5 ? left : 5 ))
  timeout "$COMPILE_S" python3 scripts/conv_torch.py --compile --batch "$BATCHES" --repeats "$REPEATS" \
    --preheat "$PREHEAT" --chains "${CHAINS// /,}" > "$OUT/compile.jsonl" 2>> "$OUT/compile.err"
  echo "rc=$?" | tee -a "$LOG"
fi
say "done $(date +%T)"
