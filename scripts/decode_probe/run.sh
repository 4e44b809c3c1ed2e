#!/usr/bin/env bash
# Builds and runs the decode-size MLP chain probe (cuBLAS/cuBLASLt vs cusync stream kernels) on one GPU.
# Usage: bash scripts/decode_probe/run.sh OUT_DIR
#   DECODE_PROBE_QUICK=1: M in {1,16,128}, fewer repetitions; DEBUG=1: device checks (-DCUSYNC_STREAM_DEBUG);
#   DECODE_PROBE_VARIANTS=ws,b2b: time only these of our variants (v2 = "ws"); DECODE_PROBE_SHAPES / DECODE_PROBE_MS pick points;
#   EXTRA_FLAGS="-I.../include -L.../lib": where cuBLAS is not in the toolkit (e.g. the nvidia-cublas wheel).
#   v3 (reg_stream.cuh, variants "reg" and "regs", M <= 32): DECODE_PROBE_REG_CFG=0|1|2 (1, 2, 4 warps along N),
#   DECODE_PROBE_REG_F=a,b (CTAs = f x occupancy x SMs), DECODE_PROBE_REG_G1_SPLIT_MAJOR=1. sweep.sh runs several.
#   v4 (stream_ring.cuh, variant "ring", f = rounds, M <= 128): DECODE_PROBE_RING_MODE=1|2 (ring_modes.sh).
set -euo pipefail
OUT=${1:-/tmp/decode_probe_out}
mkdir -p "$OUT"
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
NVCC=${NVCC:-nvcc}
command -v "$NVCC" >/dev/null || NVCC=/usr/local/cuda/bin/nvcc
FLAGS="${EXTRA_FLAGS:-} ${DEBUG:+-DCUSYNC_STREAM_DEBUG} -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I$ROOT/templates/runtime/include -I$ROOT/templates/sm90/include"
BIN="$OUT/decode_probe"
{
  time "$NVCC" $FLAGS -Xptxas -v "$ROOT/scripts/decode_probe/main.cu" -o "$BIN" -lcublas -lcublasLt 2> "$OUT/build.log" \
    || { tail -50 "$OUT/build.log"; exit 1; }
  grep -E 'spill|stack frame' "$OUT/build.log" | sort | uniq -c | tail -5 || true
}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > "$OUT/gpu.txt" 2>&1 || true
"$BIN" "$OUT" 2>&1 | tee "$OUT/stdout.txt"
