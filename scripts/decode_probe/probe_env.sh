# Sourced by the probe's one-call scripts (bulk_call.sh, x_ahead_call.sh): the repository root, the build folder
# (BUILD), nvcc (NVCC, else the toolkit's), the probe's flags (EXTRA_FLAGS first: -I/-L where cuBLAS is not in
# the toolkit) and its source.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${BUILD:-$ROOT/build/decode_probe}; mkdir -p "$B"
NVCC=${NVCC:-nvcc}; command -v "$NVCC" > /dev/null || NVCC=/usr/local/cuda/bin/nvcc
FLAGS="${EXTRA_FLAGS:-} -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I$ROOT/templates/runtime/include -I$ROOT/templates/sm90/include"
SRC=$ROOT/scripts/decode_probe/main.cu
