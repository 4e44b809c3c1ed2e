#!/usr/bin/env bash
# Deep ResNet / VGG layers against cuDNN, in one GPU call (benchmarks/results/2026-12-06-h100-conv-deep.md).
# Here (pydantic): write the blocks' specs (--no-tiles: without tiles, so that the generator derives them), keep
# the ones to time in .gen-convdeep/specs, and generate each into .gen-convdeep/proj/<name>:
#   python3 scripts/conv_waves.py --batches 1,2,8 --write /tmp/cw [--no-tiles] && mkdir -p .gen-convdeep/specs
#   cp /tmp/cw/{resnet_basic_14x14x256,vgg19_14x14x512}.json .gen-convdeep/specs/   # ... the blocks to time
#   for f in .gen-convdeep/specs/*.json; do cusync-gen generate $f -o .gen-convdeep/proj/$(basename $f .json); done
# There, with third_party/cutlass carried: bash scripts/gpu_conv_deep.sh (builds, checks every project at batch
# 1, 2, 3, 5, 6, 8, times ours (scripts/gpu_conv_sm90.sh's bench phase) and cuDNN (scripts/conv_torch.py
# --specs), prints one line per point, and leaves $OUT/cd.tgz).
set -u
O=$OUT/cd; mkdir -p "$O"
NAMES=$(ls .gen-convdeep/proj | tr '\n' ' ')
PROJECTS=$PWD/.gen-convdeep/proj OUT=$O PHASE=build,bench BENCHES="$NAMES" BATCHES=${BATCHES:-1,2,8} REPEATS=100 \
  PREHEAT=0.5 JOBS=16 timeout 430 bash scripts/gpu_conv_sm90.sh > /dev/null 2>&1
grep "rc=" "$O/log.txt" | tail -20
for n in $NAMES; do
  timeout 60 "build/conv-sm90/$n/build/${n}_bench" --batch 1,2,3,5,6,8 --check-only > "$O/check-$n.txt" 2>&1
  echo "check $n rc=$? $(tail -1 "$O/check-$n.txt")"
done
timeout 150 python3 scripts/conv_torch.py --specs .gen-convdeep/specs --batch "${BATCHES:-1,2,8}" --repeats 60 \
  --preheat 0.3 > "$O/torch.jsonl" 2> "$O/torch.err"
echo "torch rc=$?"
for f in "$O"/bench-*.txt; do grep RESULT "$f" | python3 -c '
import sys, json
for l in sys.stdin:
    r = json.loads(l.split("RESULT ", 1)[1])
    print(r["chain"], r["batch"], "run", r["run_us"], r["run_mode"], "b2b", r["sequential_us"], "stages", r["stages_us"],
          "bitwise", r["bitwise"], "err", r["ref_err"])'; done
python3 -c '
import sys, json
for l in open(sys.argv[1]):
    r = json.loads(l); print("torch", r["chain"], r["batch"], {k: v for k, v in r.items() if k.endswith("_us")})' "$O/torch.jsonl"
cd "$OUT" && tar czf cd.tgz cd && rm -rf cd
