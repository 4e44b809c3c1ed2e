#!/usr/bin/env bash
# Builds the decode probe once and runs it under several v3 (reg_stream.cuh) settings, one output folder each.
# Usage: bash scripts/decode_probe/sweep.sh OUT_DIR "NAME:ENV=V ENV=V" ...   (e.g. "pf8:DECODE_PROBE_REG_PREFETCH=8")
set -euo pipefail
OUT=${1:?OUT_DIR}; shift
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
BIN=$(mktemp -d)/decode_probe
"$NVCC" ${EXTRA_FLAGS:-} -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I"$ROOT/templates/runtime/include" \
  -I"$ROOT/templates/sm90/include" -Xptxas -v "$ROOT/scripts/decode_probe/main.cu" -o "$BIN" -lcublas -lcublasLt 2> "$OUT/build.log" \
  || { tail -50 "$OUT/build.log"; exit 1; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1 || true
for run in "$@"; do
  name=${run%%:*}; envs=${run#*:}
  mkdir -p "$OUT/$name"
  echo "== $name: $envs"
  env $envs "$BIN" "$OUT/$name" > "$OUT/$name/stdout.txt" 2>&1 || echo "run $name failed: $?"
  grep -E "^(gpt3|llama|v3|stream)" "$OUT/$name/stdout.txt" || tail -5 "$OUT/$name/stdout.txt"
done
