#!/usr/bin/env bash
# One device call: the FMHA's tile as wide as the head (80, 96) against the padded 128-wide tile. Builds h80
# and h96 (the specs of scripts/gpu_check_attention_heads.sh) twice, kTileDim forced to 128 and to head_dim,
# checks the exact-width builds, and times the prompts of both, A B B A (one process each).
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_fmha_tile_width.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
P=${P:-/tmp/width}; mkdir -p "$P"
printf 'name: h80\narch: sm90\ntarget: sm_90\ndtype: fp16\nattention: {hidden: 2560, heads: 32, kv_heads: 8, head_dim: 80, causal: true, rotary: true}\n' > "$P/h80.yaml"
printf 'name: h96\narch: sm90\ntarget: sm_90\ndtype: bf16\nattention: {hidden: 3072, heads: 32, head_dim: 96, causal: true, rotary: true}\n' > "$P/h96.yaml"
SHIPPED='static constexpr int kTileDim = kHeadDim <= 64 ? 64 : kHeadDim % 32 == 0 ? kHeadDim : 128;'
for n in h80 h96; do  # the tile forced to 128 (pad) or to the head's width (exact), whatever the shipped rule
  for v in pad exact; do
    cg generate "$P/$n.yaml" -o "$P/$n-$v" > /dev/null
    width=$([ $v = pad ] && echo 'kHeadDim <= 64 ? 64 : 128' || echo kHeadDim)
    sed -i "s/$SHIPPED/static constexpr int kTileDim = $width;/" "$P/$n-$v/include/cusync/attention_sm90/kernels.cuh"
    grep -c "kTileDim = $width;" "$P/$n-$v/include/cusync/attention_sm90/kernels.cuh"
  done
done
build_all h80-pad h80-exact h96-pad h96-exact
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:2x200+4097 p:3x200+0/511/4097 p:4x129+0/1/7/130 g:3+1"
check_all h80-exact h96-exact
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
