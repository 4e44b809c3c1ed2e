#!/usr/bin/env bash
# Device call D (2026-12-02, NOTES h17): the rest of tests/test_gpu.py on the h17 runtime (call B ran the other 14).
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTLASS_DIR=$PWD/third_party/cutlass
t0=$(date +%s)
CUSYNC_GPU_BUILD_DIR=build/gpu CUSYNC_GPU_EXAMPLES=two_gemm,two_gemm_sm90,gpt3_attention,llama_mlp_sm90 \
  timeout 560 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py --basetemp=build/ptD \
  -k "not (every_run_mode or missing_posts_time_out_and or epoch_wrap or pingpong)" > $OUT/pytest-gpu-h17-rest.log 2>&1
echo "pytest exit $? after $(( $(date +%s) - t0 )) s"; tail -n 25 $OUT/pytest-gpu-h17-rest.log
