#!/usr/bin/env bash
# Final H200 run: the sm90 benchmark for the results file, and the sm80 llama chain (its swiglu kernel
# changed) checked on the same machine.
set -uo pipefail
C=$PWD/third_party/cutlass
cmake -S generated/llama_mlp -B build/gpu/llama_mlp -G Ninja -DCUTLASS_DIR=$C -DCMAKE_CUDA_ARCHITECTURES=90 > /dev/null
(cmake --build build/gpu/llama_mlp -j 4 > $OUT/build-llama80.log 2>&1 || echo "BUILD FAILED llama_mlp") &
OUT=$OUT SKIP_CHECK=1 POLICIES=spec,tile POLICIES_LLAMA=spec,tile POLICIES_TWO=spec,row \
  bash scripts/gpu_check_sm90.sh 256,512,1024,1536,2048,3072,4096,8192 30 > $OUT/table.md 2>&1
wait
./build/gpu/llama_mlp/llama_mlp_bench --m 1,256,1000,2048 --policies spec --repeats 3 --warmup 1 --no-fallback > $OUT/check-llama_mlp-sm80.jsonl
echo "sm80 llama exit $?"; grep -c '"bitwise_equal": true, "graph_ok": true' $OUT/check-llama_mlp-sm80.jsonl
rm -f $OUT/build-*.log
tail -40 $OUT/table.md
