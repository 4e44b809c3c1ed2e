#!/usr/bin/env bash
# One device call: the FMHA's tile as wide as the head (80, 96) against the padded 128-wide tile. Builds h80
# and h96 (the specs of scripts/gpu_check_attention_heads.sh) twice, the second with kTileDim = head_dim,
# checks the exact-width builds, and times the prompts of both, A B B A (one process each).
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_fmha_tile_width.sh
set -u
OUT=${OUT:-$PWD/gpu-out}; LOG=$OUT/logs; mkdir -p "$LOG"
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
cg() { python3 -m cusync_gen.cli "$@"; }
P=${P:-/tmp/width}; mkdir -p "$P"
printf 'name: h80\narch: sm90\ntarget: sm_90\ndtype: fp16\nattention: {hidden: 2560, heads: 32, kv_heads: 8, head_dim: 80, causal: true, rotary: true}\n' > "$P/h80.yaml"
printf 'name: h96\narch: sm90\ntarget: sm_90\ndtype: bf16\nattention: {hidden: 3072, heads: 32, head_dim: 96, causal: true, rotary: true}\n' > "$P/h96.yaml"
for n in h80 h96; do
  cg generate "$P/$n.yaml" -o "$P/$n-pad" > /dev/null
  cg generate "$P/$n.yaml" -o "$P/$n-exact" > /dev/null
  sed -i 's/static constexpr int kTileDim = kHeadDim <= 64 ? 64 : 128;/static constexpr int kTileDim = kHeadDim;/' \
    "$P/$n-exact/include/cusync/attention_sm90/kernels.cuh"
  grep -c "kTileDim = kHeadDim;" "$P/$n-exact/include/cusync/attention_sm90/kernels.cuh"
done
for v in h80-pad h80-exact h96-pad h96-exact; do (cg build "$P/$v" --jobs 4 > "$LOG/build-$v.txt" 2>&1; echo "build $v exit $? at ${SECONDS}s") & done
wait
bench() { ls "$P/$1"/build/*_bench | head -1; }
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:2x200+4097 p:3x200+0/511/4097 p:4x129+0/1/7/130 g:3+1"
for n in h80 h96; do
  timeout 120 "$(bench $n-exact)" --check $CHECK > "$OUT/check-$n-exact.jsonl" 2> "$LOG/check-$n.err"
  echo "check $n-exact exit $? ($(grep -c '"ok": true' "$OUT/check-$n-exact.jsonl") ok of $(wc -l < "$OUT/check-$n-exact.jsonl"))"
  grep -v '"ok": true' "$OUT/check-$n-exact.jsonl" | head -2
done
timeout 60 compute-sanitizer --tool memcheck "$(bench h80-exact)" --check p:2x7+1/0 p:1x130+3 > "$LOG/san.log" 2>&1
echo "memcheck exit $?: $(grep -h 'ERROR SUMMARY' "$LOG/san.log")"
TIME="p:1x512+0 p:1x2048+0 p:1x8192+0 p:4x1024+0 p:1x1024+3072"
for n in h80 h96; do
  for v in pad exact exact pad; do
    timeout 60 "$(bench $n-$v)" --time --repeats 30 $TIME | sed "s/^{/{\"variant\": \"$v\", /" >> "$OUT/ab-$n.jsonl" 2>> "$LOG/ab-$n.err"
    echo "time $n-$v at ${SECONDS}s"
  done
done
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs; ls
