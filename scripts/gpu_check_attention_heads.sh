#!/usr/bin/env bash
# One device call for head widths other than 64 and 128 (multiples of 16 from 32 to 128: the FMHA's 64- or
# 128-wide tile with the head zero-filled past its width, the decode at the head's own width): generate and
# build (in parallel) three layers written here (h80: fp16, 32 heads on 8 KV heads of 80, rotary; h96: bf16,
# 32 heads of 96, rotary; h32: fp16, 16 heads of 32 on one KV head, G = 16) and the shipped llama layer;
# check each at ragged and odd shapes (fp32 references, bitwise, graph replay); memcheck and racecheck at
# small shapes; time h80 and h96 and their PyTorch peers.
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_check_attention_heads.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
P=${P:-/tmp/heads}; mkdir -p "$P"
cat > "$P/h80.yaml" <<'SPEC'
name: h80
arch: sm90
target: sm_90
dtype: fp16
attention: {hidden: 2560, heads: 32, kv_heads: 8, head_dim: 80, causal: true, rotary: true}
SPEC
cat > "$P/h96.yaml" <<'SPEC'
name: h96
arch: sm90
target: sm_90
dtype: bf16
attention: {hidden: 3072, heads: 32, head_dim: 96, causal: true, rotary: true}
SPEC
cat > "$P/h32.yaml" <<'SPEC'
name: h32
arch: sm90
target: sm_90
dtype: fp16
attention: {hidden: 1024, heads: 16, kv_heads: 1, head_dim: 32, causal: true}
SPEC
for n in h80 h96 h32; do cg generate "$P/$n.yaml" -o "$P/$n" > /dev/null; done
cg generate llama_attention_sm90 -o "$P/llama" > /dev/null
NAMES="h80 h96 h32 llama"
JOBS=3 build_all $NAMES
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:1x200+511 p:2x200+4097 p:3x200+0/511/4097 p:2x7+1/0 p:4x129+0/1/7/130
       g:1+0 g:3+1 g:7+127 g:2+4097 g:3+0/511/4097 g:64+16384"
check_all $NAMES
sanitize h80 p:2x7+1/0 p:1x130+3 g:3+129
TIME="p:1x512+0 p:1x2048+0 p:1x8192+0 p:4x1024+0 p:1x1024+3072 g:1+4096 g:8+4096 g:32+16384 g:64+4096"
time_vs_torch "h80 --hidden 2560 --heads 32 --kv-heads 8 --head-dim 80 --rotary --dtype fp16" \
            "h96 --hidden 3072 --heads 32 --kv-heads 32 --head-dim 96 --rotary --dtype bf16"
cd "$OUT" && tar czf logs.tgz logs *.jsonl && rm -rf logs *.jsonl; ls
