#!/usr/bin/env bash
# The sm90 conv backend on a GPU machine, in one call: build the pre-generated projects in $PROJECTS (default
# .gen-conv/: the sm90 correctness chains tests/data/conv_mix_sm90*.yaml, the examples vgg_block_sm90 and
# resnet_block_sm90, vgg_block_sm90's tile variants _t64 (64x128) and _n256 (64x256), and the sm80 versions
# vgg_block and resnet_block for comparison in the same call), check
# them (odd image sizes, stride 2, padding 0/1/2, dilation 2, 1x1 and 5x3 filters, residuals, fp16 and bf16,
# batch 1 and 3: the overlap and the chained run bitwise equal to back to back, within tolerance of a direct
# reference conv; one stream with programmatic launch and two streams with the wait kernels; a missing post
# times out naming the tile; memcheck and racecheck at a small shape), then time the examples (ours, all
# modes, one binary each) and cuDNN / torch.compile through PyTorch right after (scripts/conv_torch.py).
# Env: PROJECTS, BATCHES (1,8,32), REPEATS (100), PREHEAT (1.0 s), JOBS (16), PHASE (build,check,sanitize,bench,torch,compile),
# SAN_RUNS (the sanitizer's project:batch list),
# BENCHES (the projects timed), TORCH_CHAINS (the PyTorch blocks timed), BUILD (build/conv-sm90).
# Writes $OUT/log.txt, $OUT/bench-*.txt, $OUT/torch.jsonl, $OUT/compile.jsonl; build logs in $OUT/logs/.
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/logs"
PROJECTS=${PROJECTS:-$PWD/.gen-conv}
BATCHES=${BATCHES:-1,8,32}; REPEATS=${REPEATS:-100}; PREHEAT=${PREHEAT:-1.0}; JOBS=${JOBS:-16}
PHASE=${PHASE:-build,check,sanitize,bench,torch,compile}
B=${BUILD:-$PWD/build/conv-sm90}   # kept between calls on a warm machine (an ignored folder)
CUT=${CUTLASS_DIR:-$PWD/third_party/cutlass}
LOG=$OUT/log.txt
say() { echo "== $* ($(date +%T), ${SECONDS}s)" | tee -a "$LOG"; }
has() { [[ ",$PHASE," == *",$1,"* ]]; }
bin() { echo "$B/$1/build/$1_bench"; }
run() {  # run NAME TIMEOUT ARGS...
  local n=$1 t=$2; shift 2
  say "$n $*"
  timeout "$t" "$(bin "$n")" "$@" >> "$LOG" 2>&1
  echo "rc=$?" | tee -a "$LOG"
}
nvidia-smi -L >> "$LOG" 2>&1
GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
if has build; then
  say build
  for d in "$PROJECTS"/*/; do
    n=$(basename "$d"); rm -rf "$B/$n"; mkdir -p "$B"; cp -r "$d" "$B/$n"
    (cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
       -DCUTLASS_DIR="$CUT" > "$OUT/logs/build-$n.log" 2>&1 \
     && cmake --build "$B/$n/build" -j "$JOBS" >> "$OUT/logs/build-$n.log" 2>&1; echo "build $n rc=$?" >> "$LOG") &
  done
  wait
  say built; grep "build .* rc=" "$LOG"
fi
if has check; then
  run conv_mix_sm90 120 --batch 1,3 --check-only
  run conv_mix_sm90 120 --batch 1,3 --check-only --two-streams
  run conv_mix_sm90_bf16 120 --batch 1,3 --check-only
  run vgg_block_sm90 120 --batch 1,3,32 --check-only
  run resnet_block_sm90 120 --batch 1,3,32 --check-only
  run resnet_block_sm90 120 --batch 3 --check-only --two-streams
  run conv_mix_sm90 60 --batch 3 --missing-post s2
  run resnet_block_sm90 60 --batch 1 --missing-post conv1
  if [ -x "$(bin conv_mix_sm90_waves)" ]; then  # the persistent kernels beyond one wave, mixed with one-tile ones
    run conv_mix_sm90_waves 120 --batch 1,3,8,24 --check-only
    run conv_mix_sm90_waves 120 --batch 3,24 --check-only --two-streams
    run conv_mix_sm90_waves 60 --batch 24 --missing-post s2
  fi
fi
# memcheck and racecheck on each built project of $SAN_RUNS ("name:batch ..."): one-tile stages (conv_mix_sm90 at
# batch 1), a persistent stage (the waves chain at batch 8), and persistent consumers whose poll warp polls
# (the waves chain at batch 24, resnet_block_sm90 at batch 8).
if has sanitize && command -v compute-sanitizer > /dev/null; then
  for tool in memcheck racecheck; do
    for r in ${SAN_RUNS:-conv_mix_sm90:1 conv_mix_sm90_waves:8 conv_mix_sm90_waves:24 resnet_block_sm90:8}; do
      n=${r%%:*} batch=${r#*:}
      [ -x "$(bin "$n")" ] || continue
      say "$tool $n (batch $batch)"
      timeout 200 compute-sanitizer --tool $tool --print-limit 10 "$(bin "$n")" --batch "$batch" --check-only \
        > "$OUT/logs/san-$n-$batch-$tool.log" 2>&1
      echo "rc=$?: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/logs/san-$n-$batch-$tool.log" | tr '\n' ' ')" | tee -a "$LOG"
    done
  done
fi
if has bench; then
  for n in ${BENCHES:-vgg_block_sm90 vgg_block_sm90_t64 vgg_block_sm90_n256 vgg_block resnet_block_sm90 resnet_block}; do
    say "bench $n"
    timeout 240 "$(bin "$n")" --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" > "$OUT/bench-$n.txt" 2>&1
    echo "rc=$?" | tee -a "$LOG"
  done
fi
if has torch; then
  say torch
  timeout 200 python3 scripts/conv_torch.py --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" \
    --chains "${TORCH_CHAINS:-vgg_block,resnet_block,bottleneck_block}" > "$OUT/torch.jsonl" 2>> "$LOG"; echo "rc=$?" | tee -a "$LOG"
fi
if has compile && [ $SECONDS -lt 480 ]; then
  say torch.compile
  timeout $(( 570 - SECONDS )) python3 scripts/conv_torch.py --compile --batch "$BATCHES" --repeats "$REPEATS" \
    --preheat "$PREHEAT" --chains "${TORCH_CHAINS:-vgg_block,resnet_block,bottleneck_block}" > "$OUT/compile.jsonl" 2>> "$OUT/logs/compile.err"
  echo "rc=$?" | tee -a "$LOG"
fi
say done
