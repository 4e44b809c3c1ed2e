#!/usr/bin/env bash
# One device call: layers no example ships, checked at ragged, varlen and odd shapes (fp32 references,
# bitwise, graph replay, the decode's two grids), memcheck/racecheck on one (its decode on a persistent
# grid), then timings: non-causal with several KV heads at head_dim 112 (fp16), G = 7 at head_dim 112 with
# rotary (bf16), G = 4 at head_dim 48 (fp16), G = 16 on two KV heads at head_dim 64 with rotary (bf16); and
# the shipped llama and llama3 layers, whose generation steps are timed with the tensor-core decode on its
# persistent grid and with one CTA per unit (the same binary), then against PyTorch.
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):
#   OUT=out [TORCH_SWEEP=1] bash scripts/gpu_check_attention_sweep.sh
# TORCH_SWEEP=1 also times the non-causal and G = 16 layers against PyTorch (another ~150 s).
set -u
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
P=${P:-/tmp/sweep}; mkdir -p "$P"
spec() { printf 'name: %s\narch: sm90\ntarget: sm_90\ndtype: %s\nattention: {%s}\n' "$1" "$2" "$3" > "$P/$1.yaml"; }
spec nc fp16 "hidden: 2048, heads: 16, kv_heads: 4, head_dim: 112, causal: false"
spec g7h112 bf16 "hidden: 1568, heads: 14, kv_heads: 2, head_dim: 112, causal: true, rotary: true"
spec g4h48 fp16 "hidden: 1152, heads: 24, kv_heads: 6, head_dim: 48, causal: true"
spec g16 bf16 "hidden: 2048, heads: 32, kv_heads: 2, head_dim: 64, causal: true, rotary: true"
for n in nc g7h112 g4h48 g16; do cg generate "$P/$n.yaml" -o "$P/$n" > /dev/null || echo "generate $n failed"; done
cg generate llama_attention_sm90 -o "$P/llama" > /dev/null
cg generate llama3_attention_sm90 -o "$P/llama3" > /dev/null
NAMES="nc g7h112 g4h48 g16 llama llama3"
JOBS=2 build_all $NAMES
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:2x200+4097 p:3x7/200/1000+0 p:3x200/1/77+0/511/4097 p:2x7+1/0
       g:1+0 g:3+1 g:7+127 g:3+0/511/4097 g:64+16384 g:64+511"
check_all $NAMES
# The decode's persistent grid against one CTA per unit, in one binary, A B B A.
STEPS="g:1+4096 g:8+4096 g:32+4096 g:32+16384 g:64+4096 g:64+16384"
for n in llama llama3; do
  for v in persistent all all persistent; do
    flag=; [ $v = persistent ] && flag=--decode-persistent
    timeout 100 "$(bench "$n")" --time --repeats 30 $flag $STEPS >> "$OUT/decode-$n-$v.jsonl" 2>> "$LOG/decode-$n.err"
    echo "decode $n $v exit $? at ${SECONDS}s"
  done
done
TIME="$STEPS"
time_vs_torch "llama --hidden 8192 --heads 8 --kv-heads 1 --head-dim 128 --rotary --dtype bf16" \
            "llama3 --hidden 4096 --heads 32 --kv-heads 8 --head-dim 128 --rotary --rotary-base 500000 --dtype bf16"
if [ "${TORCH_SWEEP:-0}" = 1 ]; then
  TIME="p:1x512+0 p:1x2048+0 p:1x8192+0 p:4x1024+0 p:1x1024+3072 g:1+4096 g:8+4096 g:32+16384 g:64+4096"
  time_vs_torch "nc --hidden 2048 --heads 16 --kv-heads 4 --head-dim 112 --non-causal --dtype fp16" \
              "g16 --hidden 2048 --heads 32 --kv-heads 2 --head-dim 64 --rotary --dtype bf16"
fi
sanitize g4h48 p:2x7+1/0 p:1x130+3 g:3+129 g:64+511
cd "$OUT" && tar czf logs.tgz logs *.jsonl && rm -rf logs *.jsonl; ls
