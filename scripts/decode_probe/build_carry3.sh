#!/usr/bin/env bash
# Builds build/carry3/ here (no GPU needed) for l2_call.sh / both_call.sh: the slab probe (slab_product.cu) as
# landed (cur), with each probe patch of slab_chain.cuh (l2c1 / l2c2: d38's prefetch, trace: d39's stamps, tk: d40's
# tickets, mma: d43's tensor cores), slab_race with the tickets and mma patches, and d41's mma_gemv. (The
# llama_fused_cc_sm90 benches of d38's A/B are built as l2_call.sh's header says.)
# Each patch is applied, built and reverted in turn; the tree must have no change to slab_chain.cuh.
#   CUBLAS=<dir with include/cublasLt.h and lib/libcublasLt.so*> bash scripts/decode_probe/build_carry3.sh
set -eu
cd "$(dirname "$0")/../.."
H=templates/sm90/include/cusync/sm90/slab_chain.cuh
git diff --quiet -- "$H" || { echo "$H has local changes: commit or revert them first" >&2; exit 2; }
C=build/carry3 O=build/slab3
mkdir -p "$C" "$O"
CB=${CUBLAS:?set CUBLAS to a folder with include/cublasLt.h and lib/libcublasLt.so (nvidia/cu13 of the nvidia-cublas wheel)}
mkdir -p "$O/lib" && ln -sf "$(ls "$CB"/lib/libcublasLt.so* | head -1)" "$O/lib/libcublasLt.so"
ARCH="-gencode=arch=compute_90a,code=sm_90a"
INC="-Itemplates/runtime/include -Itemplates/sm90/include"
probe() {  # name, extra flags
  nvcc -std=c++17 -O3 $ARCH $INC -I"$CB/include" $2 -c scripts/decode_probe/slab_product.cu -o "$O/$1.o"
  nvcc $ARCH "$O/$1.o" -L"$O/lib" -lcublasLt -o "$C/slab_product_$1"
}
race() { nvcc -std=c++17 -O2 -arch=sm_90a $INC $2 scripts/decode_probe/slab_race.cu -o "$C/slab_race_$1"; }
with_patch() {  # patch, then the commands; the header is restored whatever happens
  git apply "scripts/decode_probe/$1.patch"
  trap 'git checkout -q -- "$H"' EXIT
  shift
  "$@"
  git checkout -q -- "$H"
  trap - EXIT
}
probe cur ""
with_patch slab_l2 probe l2c1 -DCUSYNC_SLAB_L2_COLS=1
with_patch slab_l2 probe l2c2 -DCUSYNC_SLAB_L2_COLS=2
with_patch slab_trace probe trace -DCUSYNC_SLAB_TRACE
with_patch slab_tickets probe tk -DCUSYNC_SLAB_TICKETS
with_patch slab_tickets race tk -DCUSYNC_SLAB_TICKETS
with_patch slab_mma probe mma -DCUSYNC_SLAB_MMA
with_patch slab_mma race mma -DCUSYNC_SLAB_MMA
nvcc -std=c++17 -O3 $ARCH scripts/decode_probe/mma_gemv.cu -o "$C/mma_gemv"
ls -la "$C"
