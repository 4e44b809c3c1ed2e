#!/usr/bin/env bash
# One device call: `cusync-gen run` end to end (generate, build with CMake, check and time through the bench)
# on the chains that run through their own bench: a conv chain and both sm90 attention layers, plus the
# options run refuses for them. Usage (repo root, .whl/ holding pydantic's wheels where it is missing):
#   OUT=out bash scripts/gpu_run_benches.sh
set -u
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
cg() { python3 -m cusync_gen.cli "$@"; }
J=$(nproc)
for spec in "resnet_block --batch 1,3,8" \
            "llama_attention_sm90 --m 1,7,200 --batch 1,3 --cache 0,129" \
            "gpt3_attention_sm90 --m 1,512 --batch 2 --cache 511"; do
  name=${spec%% *}
  echo "== run $spec ($(date +%T))"
  timeout 420 python3 -m cusync_gen.cli run $spec --repeats 20 --jobs "$J" --project "/tmp/p/$name" \
    --results "$OUT/$name.json" > "$OUT/$name.txt" 2> "$OUT/$name.err"
  echo "exit $?"; grep -v "^--\|^\[" "$OUT/$name.txt" | tail -30; grep -i "error\|differ\|timeout" "$OUT/$name.err" | head -5
done
echo "== options run refuses (exit 2 expected, before any build)"
cg run resnet_block --m 256 --project /tmp/p/resnet_block; echo "exit $?"
cg run llama_attention_sm90 --policies row --project /tmp/p/llama_attention_sm90; echo "exit $?"
cg trace resnet_block; echo "exit $?"
