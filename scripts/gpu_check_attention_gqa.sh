#!/usr/bin/env bash
# One device call for grouped-query layers with several KV heads (1 < kv_heads < heads) and prompts whose
# sequences hold different caches: generate and build (in parallel) llama3_attention_sm90 and two layers
# written here (G = 3 fp16 head_dim 64; G = 7 bf16 rotary), plus the shipped llama (G = 8, one KV head)
# and gpt3 (G = 1) layers; check each at ragged and odd shapes (fp32 references, bitwise, graph replay);
# memcheck and racecheck at small shapes; time llama3 and the G = 7 layer and their PyTorch peers.
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_check_attention_gqa.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
P=${P:-/tmp/gqa}; mkdir -p "$P"
cat > "$P/gqa_g3.yaml" <<'SPEC'
name: gqa_g3
arch: sm90
target: sm_90
dtype: fp16
attention: {hidden: 1536, heads: 12, kv_heads: 4, head_dim: 64, causal: true}
SPEC
cat > "$P/gqa_g7.yaml" <<'SPEC'
name: gqa_g7
arch: sm90
target: sm_90
dtype: bf16
attention: {hidden: 3584, heads: 28, kv_heads: 4, head_dim: 128, causal: true, rotary: true, rotary_base: 1000000.0}
SPEC
cg generate llama3_attention_sm90 -o "$P/llama3" > /dev/null
cg generate "$P/gqa_g3.yaml" -o "$P/g3" > /dev/null
cg generate "$P/gqa_g7.yaml" -o "$P/g7" > /dev/null
cg generate llama_attention_sm90 -o "$P/llama" > /dev/null
cg generate gpt3_attention_sm90 -o "$P/gpt3" > /dev/null
NAMES="llama3 g3 g7 llama gpt3"
JOBS=3 build_all $NAMES
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:1x200+511 p:2x200+4097 p:3x200+0/511/4097 p:2x7+1/0 p:4x129+0/1/7/130
       g:1+0 g:3+1 g:7+127 g:2+4097 g:3+0/511/4097 g:64+16384"
check_all $NAMES
sanitize g3 p:2x7+1/0 p:1x130+3 g:3+129
TIME="p:1x512+0 p:1x2048+0 p:1x8192+0 p:4x1024+0 p:1x1024+3072 g:1+4096 g:8+4096 g:32+16384 g:64+4096"
time_vs_torch "llama3 --hidden 4096 --heads 32 --kv-heads 8 --rotary --rotary-base 500000 --dtype bf16" \
            "g7 --hidden 3584 --heads 28 --kv-heads 4 --rotary --rotary-base 1000000 --dtype bf16"
cd "$OUT" && tar czf logs.tgz logs *.jsonl && rm -rf logs *.jsonl; ls
