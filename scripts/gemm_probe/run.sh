#!/usr/bin/env bash
# Builds and runs the GEMM kernel probe on a Hopper GPU. Usage: OUT=dir scripts/gemm_probe/run.sh [MS] [SHAPES]
# SHAPES: N:K:b,... (b: r = B [K, N] row-major, c = B [N, K]); default: the shipped GPT-3 / LLaMA MLP shards.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
CUTLASS_DIR=${CUTLASS_DIR:-$here/../../third_party/cutlass}
B=${BUILD:-$here/../../build/gemm_probe}; mkdir -p "$B"
flags="-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG -I$CUTLASS_DIR/include -I$CUTLASS_DIR/tools/util/include"
for c in 0 1 2 3 4 5; do nvcc $flags -DPROBE_CONFIG=$c -c "$here/kernel_tu.cu" -o "$B/k$c.o" & done
nvcc $flags -c "$here/main.cu" -o "$B/main.o" &
wait
nvcc -gencode=arch=compute_90a,code=sm_90a "$B"/*.o -lcublasLt -lcublas -o "$B/gemm_probe"
"$B/gemm_probe" --m "${1:-256,512,1024,2048,4096,8192}" --shapes "${2:-6144:12288:r,12288:6144:r,5632:8192:r,8192:2816:r}" --repeats "${REPEATS:-15}" > "$OUT/gemm_probe.jsonl"
python3 "$here/torch_mm.py" "${1:-256,512,1024,2048,4096,8192}" "${2:-6144:12288:r,12288:6144:r,5632:8192:r,8192:2816:r}" "${REPEATS:-15}" >> "$OUT/gemm_probe.jsonl" || echo "torch_mm failed"
python3 "$here/summary.py" "$OUT/gemm_probe.jsonl"
