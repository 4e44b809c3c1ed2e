#!/usr/bin/env bash
# Device call B (2026-12-02, NOTES h17): the GPU tests that exercise the changed runtime (ticket ring, posting
# epilogue, warp-collective epoch close): every example's correctness, every sm90 run mode, the missing-post
# timeouts, the epoch wrap (sm80 and sm90), the ping-pong schedule.
set -uo pipefail
cd "$(dirname "$0")/.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTLASS_DIR=$PWD/third_party/cutlass
t0=$(date +%s)
CUSYNC_GPU_BUILD_DIR=build/gpu CUSYNC_GPU_EXAMPLES=two_gemm,gpt3_mlp,two_gemm_sm90,gpt3_mlp_sm90,llama_mlp_fused_sm90 \
  timeout 540 python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py --basetemp=build/ptA \
  -k "example_is_correct or every_run_mode or missing_posts or epoch_wrap or pingpong" > $OUT/pytest-gpu-h17.log 2>&1
echo "pytest exit $? after $(( $(date +%s) - t0 )) s"; tail -n 15 $OUT/pytest-gpu-h17.log
