#!/usr/bin/env bash
# One device call: layers no example ships, checked at ragged, varlen and odd shapes (fp32 references,
# bitwise, graph replay): non-causal with several KV heads at head_dim 112 (fp16), G = 7 at head_dim 112
# with rotary (bf16), G = 4 at head_dim 48 (fp16), G = 16 on two KV heads at head_dim 64 with rotary (bf16).
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_check_attention_sweep.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
P=${P:-/tmp/sweep}; mkdir -p "$P"
spec() { printf 'name: %s\narch: sm90\ntarget: sm_90\ndtype: %s\nattention: {%s}\n' "$1" "$2" "$3" > "$P/$1.yaml"; }
spec nc fp16 "hidden: 2048, heads: 16, kv_heads: 4, head_dim: 112, causal: false"
spec g7h112 bf16 "hidden: 1568, heads: 14, kv_heads: 2, head_dim: 112, causal: true, rotary: true"
spec g4h48 fp16 "hidden: 1152, heads: 24, kv_heads: 6, head_dim: 48, causal: true"
spec g16 bf16 "hidden: 2048, heads: 32, kv_heads: 2, head_dim: 64, causal: true, rotary: true"
NAMES="nc g7h112 g4h48 g16"
for n in $NAMES; do cg generate "$P/$n.yaml" -o "$P/$n" > /dev/null || echo "generate $n failed"; done
JOBS=4 build_all $NAMES
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:2x200+4097 p:3x7/200/1000+0 p:3x200/1/77+0/511/4097 p:2x7+1/0
       g:1+0 g:3+1 g:7+127 g:3+0/511/4097 g:64+16384"
check_all $NAMES
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs; ls
