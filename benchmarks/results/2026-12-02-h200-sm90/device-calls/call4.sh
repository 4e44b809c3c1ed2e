#!/usr/bin/env bash
# Device call 4 (2026-12-02): the cuBLASLt algorithm search under autotune: GPU tests, then the bench without and with autotune.
set -uo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTLASS_DIR=$PWD/third_party/cutlass
mkdir -p build "$OUT/s"
t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader | tee "$OUT/s/gpu.txt"; date -u | tee -a "$OUT/s/gpu.txt"
CUSYNC_GPU_BUILD_DIR=build/gpu CUSYNC_GPU_EXAMPLES=two_gemm_sm90,gpt3_mlp_sm90,llama_mlp_sm90,llama_mlp_fused_sm90 \
  timeout 250 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py --basetemp=build/ptD \
  -k "every_run_mode or public_api" > "$OUT/s/pytest-gpu-autotune.log" 2>&1; echo "pytest exit $? after $(( $(date +%s) - t0 )) s"
tail -n 3 "$OUT/s/pytest-gpu-autotune.log"
date -u | tee -a "$OUT/s/gpu.txt"
mkdir -p "$OUT/s/h0"
OUT=$OUT/s/h0 CHAINS="gpt3_mlp_sm90 llama_mlp_sm90" PHASE=bench ORDERS=spec BENCH_ARGS="--policies spec,tile" \
  timeout 120 scripts/h200_probe.sh 256,512,1024,1536,2048,3072,4096,8192 20 > "$OUT/s/h0.txt" 2>&1; echo "h0 bench after $(( $(date +%s) - t0 )) s"
OUT=$OUT/s CHAINS="gpt3_mlp_sm90 llama_mlp_sm90" PHASE=bench ORDERS=spec BENCH_ARGS="--policies spec,tile --autotune 10" \
  timeout $(( 440 - ($(date +%s) - t0) )) scripts/h200_probe.sh 256,512,1024,1536,2048,3072,4096,8192 20
echo "total: $(( $(date +%s) - t0 )) s"
cd "$OUT" && tar czf s.tgz s
