#!/usr/bin/env bash
# The conv table over ResNet and VGG layers (NOTES c22) on the GPU machine, in two calls on one warm machine. Here
# (pydantic): the 13 blocks of scripts/conv_waves.py, without tiles (the generator derives them), generated into
# .gen-layers/proj/<name>:
#   python3 scripts/conv_waves.py --write /tmp/cw --no-tiles && mkdir -p .gen-layers/specs && cp /tmp/cw/*.json .gen-layers/specs/
#   for f in .gen-layers/specs/*.json; do cusync-gen generate $f -o .gen-layers/proj/$(basename $f .json); done
# There, with third_party/cutlass and .gen-layers carried: `STEP=build` builds every project into build/conv-layers
# (what is built already is kept), checks each at batch 3 (every mode bitwise equal to back to back, within
# tolerance of the reference conv) and times as many blocks as BUDGET allows; `STEP=rest` (the next call) builds
# what is missing, times the blocks not yet timed in this machine's build/conv-layers/done, then cuDNN through
# PyTorch (`conv_torch.py --specs`), a skipped post in two derived configurations and memcheck on one.
# BATCHES (1,2,4,8,16,32), REPEATS (60), BUDGET seconds (default 520) after which no step starts. Leaves
# $OUT/ly.tgz; the table: `python3 scripts/conv_results.py DIR` on the unpacked folders together.
set -u
left() { [ "$SECONDS" -lt "${BUDGET:-520}" ] || { echo "skipped $1: ${SECONDS}s used"; return 1; }; }
O=$OUT/ly; mkdir -p "$O/logs"
B=$PWD/build/conv-layers; mkdir -p "$B/done"
P=$PWD/.gen-layers/proj
BATCHES=${BATCHES:-1,2,4,8,16,32}
bin() { echo "$B/$1/build/$1_bench"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
NAMES=$(ls "$P")
GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
build() {  # one project, 4 jobs; 4 projects at once keep the 16 cores busy within memory (~3.4 GB a TU)
  local n=$1
  [ -x "$(bin "$n")" ] && return 0
  rm -rf "${B:?}/$n"; cp -r "$P/$n" "$B/$n"
  cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCUTLASS_DIR="$PWD/third_party/cutlass" > "$O/logs/build-$n.log" 2>&1 \
    && timeout 400 cmake --build "$B/$n/build" -j 4 --target "${n}_bench" >> "$O/logs/build-$n.log" 2>&1
  echo "build $n rc=$? ($(date +%T))"
}
export -f build bin; export B P O GEN
echo "$NAMES" | xargs -P 4 -I{} bash -c 'build {}'
echo "built (${SECONDS}s)"
if [ "${STEP:-build}" = build ]; then
  for n in $NAMES; do
    left "check $n" || continue
    timeout 60 "$(bin "$n")" --batch 3 --check-only > "$O/check-$n.txt" 2>&1
    echo "check $n rc=$? $(grep -c 'bitwise yes' "$O/check-$n.txt") bitwise; $(tail -1 "$O/check-$n.txt")"
  done
fi
for n in $NAMES; do
  [ -e "$B/done/$n" ] && continue
  left "bench $n" || continue
  timeout 150 "$(bin "$n")" --batch "$BATCHES" --repeats "${REPEATS:-60}" --preheat 0.5 > "$O/bench-$n.txt" 2>&1
  rc=$?; [ $rc = 0 ] && touch "$B/done/$n"
  echo "bench $n rc=$rc (${SECONDS}s) $(grep -c 'bitwise yes' "$O/bench-$n.txt") bitwise"
  grep "^RESULT" "$O/bench-$n.txt" | python3 -c '
import sys, json
for l in sys.stdin:
    r = json.loads(l.split("RESULT ", 1)[1])
    print(" ", r["batch"], "run", r["run_us"], r["run_mode"], "b2b", r["sequential_us"], "pdl", r["chained_us"],
          "overlap", r["overlap_us"])'
done
if [ "${STEP:-build}" = rest ]; then
  if left torch; then
    timeout 240 python3 scripts/conv_torch.py --specs .gen-layers/specs --batch "$BATCHES" --repeats "${REPEATS:-60}" \
      --preheat 0.3 > "$O/torch.jsonl" 2> "$O/torch.err"
    echo "torch rc=$? (${SECONDS}s) $(wc -l < "$O/torch.jsonl") lines"
  fi
  for m in resnet50_bottleneck_28x28x512:32:conv2 vgg19_14x14x512:2:conv1; do
    IFS=: read -r n b s <<< "$m"
    left "missing $m" || continue
    timeout 60 "$(bin "$n")" --batch "$b" --missing-post "$s" > "$O/missing-$n-$s.txt" 2>&1
    echo "missing $m rc=$? $(grep -E 'missing-post check' "$O/missing-$n-$s.txt")"
  done
  if left memcheck; then
    timeout 120 compute-sanitizer --tool memcheck --error-exitcode 9 "$(bin resnet_basic_28x28x128)" --batch 8 \
      --check-only > "$O/memcheck.txt" 2>&1
    echo "memcheck rc=$? $(tail -1 "$O/memcheck.txt")"
  fi
fi
cd "$OUT" && tar czf ly.tgz ly && rm -rf ly
