# Sourced by the probe's one-call scripts (bulk_call.sh, x_ahead_call.sh, stall_call.sh): the repository root, the
# build folder (BUILD), nvcc (NVCC, else the toolkit's), the probe's flags (EXTRA_FLAGS first: -I/-L where cuBLAS is
# not in the toolkit), its source, and cuBLASLt 13's folder on LD_LIBRARY_PATH where the machine has it elsewhere.
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
B=${BUILD:-$ROOT/build/decode_probe}; mkdir -p "$B"
NVCC=${NVCC:-nvcc}; command -v "$NVCC" > /dev/null || NVCC=/usr/local/cuda/bin/nvcc
FLAGS="${EXTRA_FLAGS:-} -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo -I$ROOT/templates/runtime/include -I$ROOT/templates/sm90/include"
SRC=$ROOT/scripts/decode_probe/main.cu
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
