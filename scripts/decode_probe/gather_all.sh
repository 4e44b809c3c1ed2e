#!/usr/bin/env bash
# One GPU call for NOTES d36: the probe and sanitizers (gather_call.sh), then the four projects of d36 through
# scripts/gpu_slab_mode.sh (checks, missing posts, the bench at M = 1..16; no peers there), then PyTorch eager and
# torch.compile on the two chains with both weights column-major while time is left; everything in one tarball.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
OUT=$OUT timeout $(( ${DEADLINE:-560} / 3 )) bash scripts/decode_probe/gather_call.sh
OUT=$OUT PEERS=0 SANITIZE=${SANITIZE:-0} MS=${MS:-1,2,3,4,8,16} \
  PROJECTS=${PROJECTS:-"gpt3_mlp_decode_sm90 llama_fused_cc_sm90 gpt3_colrow_sm90 llama_split_row_sm90"} timeout $(( ${DEADLINE:-560} - 25 - SECONDS )) bash scripts/gpu_slab_mode.sh
left=$(( ${DEADLINE:-560} - SECONDS ))
if [ "$left" -gt 60 ] && python3 -c "import torch" 2>/dev/null; then
  timeout $(( left - 20 )) python3 scripts/torch_peers.py .gen-slab/gpt3_mlp_decode_sm90 .gen-slab/llama_fused_cc_sm90 \
    --m "${MS:-1,2,3,4,8,16}" --compile "${COMPILE_MS:-1,2,4}" > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
  echo "torch peers exit $? at ${SECONDS}s"; tail -3 "$OUT/torch.err"
fi
cd "$OUT" && tar czf ../gather-all.tgz . && rm -rf ./* && mv ../gather-all.tgz . && ls -la
