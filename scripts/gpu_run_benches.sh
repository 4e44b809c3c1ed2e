#!/usr/bin/env bash
# One device call: `cusync-gen run` end to end (generate, build with CMake, check and time through the bench)
# on the chains that run through their own bench: the three conv examples and both sm90 attention layers
# (built first, in parallel), the options run refuses for them, and then, on the layers' built benches,
# scripts/gpu_tune_attention_sm90.sh (checks, every timed point with Layer::autotune, PyTorch after).
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_run_benches.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
P=${P:-/tmp/p}
NAMES="resnet_block vgg_block bottleneck_block llama_attention_sm90 gpt3_attention_sm90"
for n in $NAMES; do cg generate "$n" -o "$P/$n" > /dev/null || echo "generate $n failed"; done
for n in $NAMES; do (cg build "$P/$n" --jobs 4 > "$OUT/build-$n.txt" 2>&1; echo "build $n exit $? at ${SECONDS}s") & done
wait
for spec in "resnet_block --batch 1,8,32" "vgg_block --batch 1,8,32" "bottleneck_block --batch 1,8,32" \
            "llama_attention_sm90 --m 1,7,200 --batch 1,3 --cache 0,129" \
            "gpt3_attention_sm90 --m 1,512 --batch 2 --cache 511"; do
  name=${spec%% *}; args=${spec#* }
  echo "== run $name $args (${SECONDS}s)"
  timeout 200 python3 -m cusync_gen.cli run "$P/$name" $args --repeats 20 --results "$OUT/run-$name.json" \
    > "$OUT/run-$name.txt" 2> "$OUT/run-$name.err"
  echo "exit $?"; cat "$OUT/run-$name.txt"; grep -i "error\|differ\|timeout" "$OUT/run-$name.err" | head -5
done
echo "== options run refuses (exit 2 expected)"
cg run resnet_block --m 256 --project "$P/resnet_block"; echo "exit $?"
cg run llama_attention_sm90 --policies row --project "$P/llama_attention_sm90"; echo "exit $?"
cg trace resnet_block; echo "exit $?"
[ "${RETIME:-1}" = 1 ] || exit 0
D=/tmp/benches; mkdir -p $D/llama $D/gpt3
ln -sf "$P/llama_attention_sm90/build/llama_attention_sm90_bench" $D/llama/bench
ln -sf "$P/gpt3_attention_sm90/build/gpt3_attention_sm90_bench" $D/gpt3/bench
echo "== attention re-time (${SECONDS}s)"
OUT=$OUT/retime timeout 240 bash scripts/gpu_tune_attention_sm90.sh $D | tail -60
