#!/usr/bin/env bash
# Builds here (no GPU needed) what pair_call.sh carries (NOTES d46), with slab_pair.patch applied to slab_chain.cuh
# and reverted afterwards (the tree must have no change to it):
#   build/carry5/: slab_product_cur (the landed kernel), slab_product_<v> for each variant below (the patch's
#                  macros), slab_race_pB, slab_race_pR;
#   build/carry7/: gpt3_mlp_decode_sm90 and the two specs in benchmarks/results/2026-12-07-h100-decode-mma/specs/,
#                  generated with the patch (cusync_gen.render.generate) and each <name>_bench built for sm_90a as pB.
#   CUBLAS=<dir with include/cublasLt.h and lib/libcublasLt.so*> CUTLASS_DIR=third_party/cutlass \
#     bash scripts/decode_probe/build_pair.sh          (~3 min for carry5, ~4 min per project on 2 cores)
# Variants (CUSYNC_SLAB_PAIR_MIN_M / CUSYNC_SLAB_BATCH_SMALL / CUSYNC_SLAB_BATCH_BIG): pair = 3/0/0 (d46's first
# form, measured), pB = 3/4/2, pD = 3/2/4, pE = 3/4/3; pR, pR6: a per-thread cp.async ring of 4 / 6 stages from
# 3 rows (CUSYNC_SLAB_RING_BIG) instead of the register pipeline. slab_race_pB, slab_race_pR for the sanitizers.
set -eu
cd "$(dirname "$0")/../.."
H=templates/sm90/include/cusync/sm90/slab_chain.cuh
git diff --quiet -- "$H" || { echo "$H has local changes: commit or revert them first" >&2; exit 2; }
CB=${CUBLAS:?set CUBLAS to a folder with include/cublasLt.h and lib/libcublasLt.so (nvidia/cu13 of the nvidia-cublas wheel)}
CUTLASS=${CUTLASS_DIR:-$PWD/third_party/cutlass}
PY=${PYTHON:-python3}
C=build/carry5 P=build/carry7 O=build/slab5 G=${GEN:-/tmp/gen-pair}
mkdir -p "$C" "$P" "$O/lib"
ln -sf "$(ls "$CB"/lib/libcublasLt.so* | head -1)" "$O/lib/libcublasLt.so"
ARCH="-gencode=arch=compute_90a,code=sm_90a"
INC="-Itemplates/runtime/include -Itemplates/sm90/include"
probe() {  # name, macros
  nvcc -std=c++17 -O3 $ARCH $INC -I"$CB/include" -Xptxas -v $2 -c scripts/decode_probe/slab_product.cu -o "$O/$1.o" \
    2> "$O/$1.ptxas"
  nvcc $ARCH "$O/$1.o" -L"$O/lib" -lcublasLt -o "$C/slab_product_$1"
  echo "$1: $(grep -A1 slab_chain_kernel "$O/$1.ptxas" | grep -o '[0-9]* bytes spill stores' | tr '\n' ' ')"
}
probe cur ""
git apply scripts/decode_probe/slab_pair.patch
trap 'git checkout -q -- "$H"' EXIT
probe pair "-DCUSYNC_SLAB_BATCH_BIG=0"
probe pB "-DCUSYNC_SLAB_BATCH_SMALL=4 -DCUSYNC_SLAB_BATCH_BIG=2"
probe pD "-DCUSYNC_SLAB_BATCH_SMALL=2 -DCUSYNC_SLAB_BATCH_BIG=4"
probe pE "-DCUSYNC_SLAB_BATCH_SMALL=4 -DCUSYNC_SLAB_BATCH_BIG=3"
probe pR "-DCUSYNC_SLAB_RING_BIG=4"
probe pR6 "-DCUSYNC_SLAB_RING_BIG=6"
race() { nvcc -std=c++17 -O2 -arch=sm_90a $INC $2 scripts/decode_probe/slab_race.cu -o "$C/slab_race_$1"; }
race pB "-DCUSYNC_SLAB_BATCH_SMALL=4 -DCUSYNC_SLAB_BATCH_BIG=2"
race pR "-DCUSYNC_SLAB_RING_BIG=4"
rm -rf "$G" && mkdir -p "$G"
$PY - "$G" <<'PYEOF'
import sys
from pathlib import Path
from cusync_gen.render import generate
out = Path(sys.argv[1])
specs = {"gpt3_mlp_decode_sm90": "cusync_gen/examples/gpt3_mlp_decode_sm90.yaml",
         "llama_fused_cc_sm90": "benchmarks/results/2026-12-07-h100-decode-mma/specs/llama_fused_cc_sm90.json",
         "gpt3_colrow_sm90": "benchmarks/results/2026-12-07-h100-decode-mma/specs/gpt3_colrow_sm90.json"}
for name, path in specs.items():
    generate(Path(path), out / name)
PYEOF
git checkout -q -- "$H"
trap - EXIT
for p in gpt3_mlp_decode_sm90 llama_fused_cc_sm90 gpt3_colrow_sm90; do
  cmake -S "$G/$p" -B "$G/$p/build" -DCMAKE_BUILD_TYPE=Release -DCUTLASS_DIR="$CUTLASS" -DCMAKE_CUDA_ARCHITECTURES=90a \
    -DCUDA_cublasLt_LIBRARY="$(ls "$CB"/lib/libcublasLt.so.* | head -1)" -DCUDA_cublas_LIBRARY="$(ls "$CB"/lib/libcublas.so.* | head -1)" \
    "-DCMAKE_CUDA_FLAGS=-I$CB/include -DCUSYNC_SLAB_BATCH_SMALL=4 -DCUSYNC_SLAB_BATCH_BIG=2" -DCMAKE_CXX_FLAGS="-I$CB/include" \
    > "$G/$p.cfg.log"
  cmake --build "$G/$p/build" --target "${p}_bench" -j "${JOBS:-2}" > "$G/$p.build.log"
  cp "$G/$p/build/${p}_bench" "$P/"
done
ls -la "$C" "$P"
