#!/usr/bin/env bash
# Device call 1 (2026-12-02): pytest -m gpu on the sm90 code in two concurrent parts, then the bench with autotune.
set -uo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTLASS_DIR=$PWD/third_party/cutlass
mkdir -p build "$OUT/r"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv,noheader | tee "$OUT/r/gpu.txt"
python3 -c "import torch; print('torch', torch.__version__)" | tee -a "$OUT/r/gpu.txt"
date -u | tee -a "$OUT/r/gpu.txt"
t0=$(date +%s)
(timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py --basetemp=build/ptA \
   -k "pingpong or embed_example or (bias and sm90)" > "$OUT/r/pytest-gpu-pp-embed-bias.log" 2>&1; echo "A exit $?") &
(CUSYNC_GPU_BUILD_DIR=build/gpu CUSYNC_GPU_EXAMPLES=two_gemm_sm90,gpt3_mlp_sm90,llama_mlp_sm90,llama_mlp_fused_sm90 \
  timeout 400 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py --basetemp=build/ptB \
   -k "sm90 and not pingpong and not bias" > "$OUT/r/pytest-gpu-sm90.log" 2>&1; echo "B exit $?") &
wait
echo "pytest: $(( $(date +%s) - t0 )) s"
tail -n 4 "$OUT"/r/pytest-*.log
date -u | tee -a "$OUT/r/gpu.txt"
OUT=$OUT/r CHAINS="gpt3_mlp_sm90 llama_mlp_sm90" PHASE=bench ORDERS=spec BENCH_ARGS="--policies spec,tile --autotune 10" \
  timeout $(( 585 - ($(date +%s) - t0) )) scripts/h200_probe.sh 256,512,1024,1536,2048,3072,4096,8192 20
echo "total: $(( $(date +%s) - t0 )) s"
cd "$OUT" && tar czf r.tgz r && ls -la r
