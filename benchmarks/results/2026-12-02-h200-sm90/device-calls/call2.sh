#!/usr/bin/env bash
# Device call 2 (2026-12-02): the PyTorch peers on the same machine right after call 1's bench, then the rest of pytest -m gpu.
set -uo pipefail
cd "$(dirname "$0")/../.."
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1 CUTLASS_DIR=$PWD/third_party/cutlass
mkdir -p build "$OUT/t"
t0=$(date +%s)
ls build/gpu 2>/dev/null | tr '\n' ' '; echo "(build/gpu left from call 1)"
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader | tee "$OUT/t/gpu.txt"; date -u | tee -a "$OUT/t/gpu.txt"
export TORCHINDUCTOR_CACHE_DIR=$PWD/build/inductor-cache
timeout ${TORCH_TIMEOUT:-420} python3 scripts/torch_peers.py generated/gpt3_mlp_sm90 generated/llama_mlp_sm90 \
  --m 256,512,1024,1536,2048,3072,4096,8192 --repeats 20 --preheat 2 > "$OUT/t/torch.jsonl" 2> "$OUT/t/torch.err"
echo "torch exit $? after $(( $(date +%s) - t0 )) s: $(grep -c '{' "$OUT/t/torch.jsonl") rows"; tail -3 "$OUT/t/torch.err"
date -u | tee -a "$OUT/t/gpu.txt"
left=$(( 585 - ($(date +%s) - t0) ))
if [ $left -gt 150 ]; then
  CUSYNC_GPU_EXAMPLES=two_gemm,gpt3_mlp,llama_mlp,llama_mlp_split,gpt3_attention,llama_attention timeout $left \
    python3 -m pytest -q -m gpu -p no:cacheprovider tests/test_gpu.py --basetemp=build/ptC \
    -k "not pingpong and not embed_example and not sm90" > "$OUT/t/pytest-gpu-rest.log" 2>&1; echo "C exit $?"
  tail -n 4 "$OUT/t/pytest-gpu-rest.log"
fi
echo "total: $(( $(date +%s) - t0 )) s"
cd "$OUT" && tar czf t.tgz t
