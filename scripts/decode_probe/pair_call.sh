#!/usr/bin/env bash
# NOTES d46 in one device call: the slab kernel's column-major dot products with two weight columns per warp
# from 3 rows (cols_per_unit) and software-pipelined (batch()), against the landed kernel, in slab_product's round
# robin beside cuBLASLt and the streaming read (build/carry5/slab_product_<v>: cur = the landed kernel; pair = two
# columns from 3 rows, no pipeline; pB, pD, pE = pairs and pipelines of CUSYNC_SLAB_BATCH_SMALL / _BIG 4/2, 2/4,
# 4/3), the sanitizers on slab_race_pB; then the product on the projects built as pB in build/carry7/
# (table_call.sh's check and bench steps: every mode against the fp32 reference and back to back at M = 1-6 and
# 17, a missing post, every mode beside cuBLAS and cuBLASLt at M = 1-4 and 8), within DEADLINE seconds in all.
# Both folders are built here by scripts/decode_probe/build_pair.sh (slab_pair.patch applied, then reverted).
#   bash scripts/decode_probe/pair_call.sh   with carry ["build/carry5", "build/carry7"] (~8 min of command)
set -u
O=$OUT
VARIANTS=${VARIANTS:-"cur pair pB pD pE"} ROUNDS=${ROUNDS:-2} CARRY=build/carry5 OUT=$O/l \
  bash scripts/decode_probe/l2_call.sh 2>&1 | grep -v "^ab " | tail -20
echo "probes done at $SECONDS"
DEADLINE=$(( ${DEADLINE:-560} - SECONDS )) STEPS=check,bench CARRY=build/carry7 \
  PROJECTS=${PROJECTS:-"gpt3_mlp_decode_sm90 llama_fused_cc_sm90 gpt3_colrow_sm90"} SHORT="" \
  CHECK_MS=${CHECK_MS:-1,2,3,4,5,6,17} MS=${MS:-1,2,3,4,8} REPEATS=${REPEATS:-30} PREHEAT_MS=${PREHEAT_MS:-1000} \
  OUT=$O/t bash scripts/decode_probe/table_call.sh 2>&1 | tail -30
