#!/usr/bin/env bash
# The sm90 conv poll warp and once-per-group finish counts (kHookPollAhead, kHookFinishOnce) on a GPU machine, in
# two calls of at most 10 minutes (STEPS=build,check,san then STEPS=prof,bench on the warm machine):
#   build  the projects pre-generated in .gen-conv/ (conv_mix_sm90, conv_mix_sm90_waves, resnet_block_sm90,
#          bottleneck_block_sm90, vgg_block_sm90; see scripts/gpu_conv_sm90.sh), ~140 s;
#   check  bitwise to back to back and within tolerance of the reference, the new hooks (default) and the previous
#          lean hooks (--hooks 15) on the persistent stages, one and two streams; missing posts time out naming the
#          tile (a persistent consumer with the poll warp);
#   san    memcheck and racecheck of conv_mix_sm90_waves at batch 8 (a persistent stage with the poll warp);
#   prof   each ResNet stage alone, waits satisfied at the first poll (--profile-hooks: lean, lean without the poll
#          warp, lean with a finish count per tile);
#   bench  the three examples at batch 1, 8, 32 with the new default hooks (111) and with 15, same binaries;
#   torch  cuDNN through PyTorch at the same batches (scripts/conv_torch.py), right after (STEPS=prof,bench,torch).
# Generate here first (the GPU machine has no pydantic), into the non-ignored .gen-conv/ (delete it before a commit):
#   for f in tests/data/conv_mix_sm90.yaml tests/data/conv_mix_sm90_waves.yaml \
#            cusync_gen/examples/{resnet,bottleneck,vgg}_block_sm90.yaml; do
#     cusync-gen generate "$f" -o ".gen-conv/$(basename "$f" .yaml)"; done
# Writes $OUT/log.txt, $OUT/bench-<example>-h<hooks>.txt (6 files) and $OUT/all.tgz (everything, sanitizer logs too).
set -u
export OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT/logs"
L=$OUT/log.txt
STEPS=${STEPS:-build,check,san,prof,bench,torch}
step() { [[ ",$STEPS," == *",$1,"* ]]; }
b() { echo "$PWD/build/conv-sm90/$1/build/$1_bench"; }
r() { local n=$1 t=$2; shift 2; echo "== $n $* ($(date +%T), ${SECONDS}s)" >> "$L"; timeout "$t" "$(b "$n")" "$@" >> "$L" 2>&1; echo "rc=$?" >> "$L"; }
nvidia-smi -L >> "$L" 2>&1
if step build; then
  PHASE=build JOBS=${JOBS:-16} bash scripts/gpu_conv_sm90.sh > /dev/null 2>&1
fi
if step check; then
  r conv_mix_sm90 120 --batch 1,3 --check-only
  r conv_mix_sm90_waves 150 --batch 1,3,8,24 --check-only
  r conv_mix_sm90_waves 120 --batch 3,24 --check-only --two-streams
  r conv_mix_sm90_waves 120 --batch 8,24 --check-only --hooks 15
  r resnet_block_sm90 120 --batch 1,3,8,32 --check-only
  r bottleneck_block_sm90 120 --batch 1,3,8,32 --check-only
  r vgg_block_sm90 120 --batch 1,3,32 --check-only
  r conv_mix_sm90_waves 60 --batch 24 --missing-post s2
  r resnet_block_sm90 60 --batch 32 --missing-post conv1
  r bottleneck_block_sm90 60 --batch 32 --missing-post conv2
fi
if step san; then
  for tool in memcheck racecheck; do
    echo "== $tool conv_mix_sm90_waves batch 8 ($(date +%T), ${SECONDS}s)" >> "$L"
    timeout 240 compute-sanitizer --tool $tool --print-limit 10 "$(b conv_mix_sm90_waves)" --batch 8 --check-only \
      > "$OUT/logs/san-$tool.log" 2>&1
    echo "rc=$?: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/logs/san-$tool.log" | tr '\n' ' ')" >> "$L"
  done
fi
if step prof; then
  r resnet_block_sm90 200 --batch 8,32 --profile-hooks --repeats 40
fi
if step bench; then
  for n in resnet_block_sm90 bottleneck_block_sm90 vgg_block_sm90; do
    for h in 111 15; do
      echo "== bench $n --hooks $h ($(date +%T), ${SECONDS}s)" >> "$L"
      timeout 240 "$(b $n)" --batch 1,8,32 --repeats "${REPEATS:-60}" --preheat 0.5 --hooks $h > "$OUT/bench-$n-h$h.txt" 2>&1
      echo "rc=$?" >> "$L"
    done
  done
fi
if step torch; then  # cuDNN through PyTorch right after our benches (the results file's last two lines need it)
  PHASE=torch BATCHES=1,8,32 REPEATS=${REPEATS:-60} PREHEAT=0.5 bash scripts/gpu_conv_sm90.sh > /dev/null 2>&1
fi
echo "== done ($(date +%T), ${SECONDS}s)" >> "$L"
# Back: log.txt, the six bench files and all.tgz (everything, torch.jsonl and the sanitizer logs too). The table:
#   python3 scripts/conv_results.py OUTDIR _sm90-h111   (and _sm90-h15), with torch.jsonl unpacked into OUTDIR.
cd "$OUT" && tar czf all.tgz ./*.txt ./*.jsonl logs 2>/dev/null; rm -rf logs ./*.jsonl; tail -c 9000 log.txt
