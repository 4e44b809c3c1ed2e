#!/usr/bin/env bash
# NOTES d33's probe on the GPU machine: links build/slab/slab_mlp.o (compiled here:
#   nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I<cuBLAS 13 include> \
#        -c scripts/decode_probe/slab_mlp.cu -o build/slab/slab_mlp.o; carried) against cuBLASLt and runs it
# (gpt3 at M = 1, 2, 4 and a LLaMA-7B-sized GeLU MLP at M = 1, 2: checks, then the slab kernel, the cuBLASLt chain
# and a streaming read of the weights' bytes in one CUDA-graph round robin). Leaves $OUT/slab.txt.
set -u
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvcc build/slab/slab_mlp.o -o build/slab/slab_mlp ${LT:+-L$(dirname "$LT")} -lcublasLt || exit 1
timeout 120 build/slab/slab_mlp "${REPS:-200}" 2>&1 | tee "$OUT/slab.txt"
