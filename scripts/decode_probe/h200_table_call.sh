#!/usr/bin/env bash
# The decode results file's call, only on an H200 (the table's machine): on any other GPU it stops at once, so a
# call that lands elsewhere costs only its start. The shipped sm90 MLP chains' benches in build/carry/ (table_call.sh
# with the probe, check, bench and torch steps, torch.compile at COMPILE_MS: 1 and 16, none with 0) within DEADLINE seconds.
set -u
if ! nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then
  nvidia-smi --query-gpu=name --format=csv,noheader; echo "not an H200: nothing run"; exit 0
fi
DEADLINE=${DEADLINE:-400} STEPS=probe,check,bench,torch PROBE_ROUNDS=1 \
  PROJECTS="gpt3_mlp_decode_sm90 llama_mlp_fused_sm90 llama_mlp_sm90 gpt3_mlp_sm90" \
  TORCH="generated/gpt3_mlp_decode_sm90 generated/llama_mlp_fused_sm90 generated/llama_mlp_sm90 generated/gpt3_mlp_sm90" \
  COMPILE_MS=${COMPILE_MS:-1,16} OUT=$OUT bash scripts/decode_probe/table_call.sh 2>&1 | tail -40
