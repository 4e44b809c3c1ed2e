#!/usr/bin/env bash
# NOTES d44 in one device call: the slab kernel with tensor cores (d43 landed: mma.sync where a weight is
# column-major, M up to 8 where both are) against the kernel before it, d40's tickets beside them, d39's trace and
# the sanitizers on slab_race (l2_call.sh over build/carry3/: slab_product_{cur,land,tk}, slab_race_{land,tk}); then
# the product itself on the projects built from the landed tree in build/carry4/ (table_call.sh's check and bench
# steps: every mode against the fp32 reference and the back-to-back run at M = 1-9 and 17, a missing post, every
# mode beside cuBLAS and cuBLASLt at M = 1-8 and 16), within DEADLINE seconds in all.
# build/carry4/: with slab_mma_land.patch applied to a clean tree, the shipped gpt3_mlp_decode_sm90 and the specs in
# benchmarks/results/2026-12-07-h100-decode-mma/specs/ generated (cusync_gen.render.generate) and each project's
# <name>_bench target built for sm_90a with cuBLAS found (-DCUDA_cublasLt_LIBRARY=..., -DCUDA_cublas_LIBRARY=...).
set -u
O=$OUT
VARIANTS=${VARIANTS:-"cur land tk"} ROUNDS=${ROUNDS:-2} CARRY=build/carry3 OUT=$O/l bash scripts/decode_probe/l2_call.sh 2>&1 | tail -30
echo "probes done at $SECONDS"
DEADLINE=$(( ${DEADLINE:-560} - SECONDS )) STEPS=check,bench CARRY=build/carry4 \
  PROJECTS=${PROJECTS:-"gpt3_mlp_decode_sm90 llama_fused_cc_sm90 gpt3_colrow_sm90"} SHORT="" \
  CHECK_MS=${CHECK_MS:-1,2,3,4,5,6,8,9,17} MS=${MS:-1,2,3,4,6,8,16} REPEATS=${REPEATS:-30} PREHEAT_MS=${PREHEAT_MS:-1000} \
  OUT=$O/t bash scripts/decode_probe/table_call.sh 2>&1 | tail -40
