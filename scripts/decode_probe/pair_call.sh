#!/usr/bin/env bash
# NOTES d46 in one device call: the slab kernel's column-major dot products with two weight columns per warp
# from 3 rows (cols_per_unit) and software-pipelined (batch()), against the landed kernel, in slab_product's round
# robin beside cuBLASLt and the streaming read (build/carry5/slab_product_<v>: cur = the landed kernel; pB, pD =
# pairs and register pipelines of CUSYNC_SLAB_BATCH_SMALL / _BIG 4/2, 2/4; pR, pR6 = pairs through a cp.async
# ring of 4 / 6 stages from 3 rows; also built: pair, pE), the sanitizers on slab_race_pB and slab_race_pR; then
# the product on the projects built as pB in build/carry7/
# (table_call.sh's check and bench steps: every mode against the fp32 reference and back to back at M = 1-6 and
# 17, a missing post, every mode beside cuBLAS and cuBLASLt at M = 1-4 and 8), then ncu's warp stalls of the 4-row
# kernel (cur and pB), within DEADLINE seconds in all.
# Both folders are built here by scripts/decode_probe/build_pair.sh (slab_pair.patch applied, then reverted).
#   bash scripts/decode_probe/pair_call.sh   with carry ["build/carry5", "build/carry7"] (~9.5 min of command)
set -u
O=$OUT
VARIANTS=${VARIANTS:-"cur pB pD pR pR6"} ROUNDS=${ROUNDS:-2} CARRY=build/carry5 OUT=$O/l \
  bash scripts/decode_probe/l2_call.sh 2>&1 | grep -v "^ab " | tail -20
echo "probes done at $SECONDS"
NCU_S=${NCU_S:-120}  # kept for the ncu step at the end (0: none)
DEADLINE=$(( ${DEADLINE:-560} - NCU_S - SECONDS )) STEPS=check,bench CARRY=build/carry7 \
  PROJECTS=${PROJECTS:-"gpt3_mlp_decode_sm90 llama_fused_cc_sm90 gpt3_colrow_sm90"} SHORT="" \
  CHECK_MS=${CHECK_MS:-1,2,3,4,5,6,17} MS=${MS:-1,2,3,4,8} REPEATS=${REPEATS:-30} PREHEAT_MS=${PREHEAT_MS:-1000} \
  OUT=$O/t bash scripts/decode_probe/table_call.sh 2>&1 | tail -30
# ncu of the first 4-row slab launch (GPT-3 shard, M = 3, outside graphs) of each NCU_VARIANTS probe: the warp
# stall reasons that tell latency (long scoreboard) from issue (d46's two models), DRAM throughput.
if [ "$NCU_S" -gt 0 ] && command -v ncu > /dev/null; then
  mkdir -p "$O/n"
  for v in ${NCU_VARIANTS:-cur pB}; do
    SLAB_ROWS=0 SLAB_W2COL=1 timeout $(( NCU_S / 2 )) ncu --clock-control none --kernel-name-base mangled \
      --kernel-name regex:slab_chain_kernelI6__halfLi4E --launch-skip 0 --launch-count 1 --section SpeedOfLight \
      --section WarpStateStats --section MemoryWorkloadAnalysis --section LaunchStats -f -o "$O/n/$v" \
      build/carry5/slab_product_$v 3 > "$O/n/$v.log" 2>&1
    echo "ncu $v exit $? at $SECONDS"
    ncu -i "$O/n/$v.ncu-rep" --page details > "$O/n/$v.details.txt" 2>&1
    grep -E "Duration|DRAM Throughput|Warp Cycles Per Issued|Issue Slots Busy|Stall" "$O/n/$v.details.txt" | head -12
  done
  (cd "$O/n" && tar czf ../ncu.tgz . && cd .. && rm -rf n)
fi
