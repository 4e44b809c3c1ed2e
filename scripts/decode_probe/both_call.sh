#!/usr/bin/env bash
# One device call for two jobs (the machine's start paid once): the decode table's steps on the shipped sm90 MLP
# chains (table_call.sh, build/carry/, into $OUT/t) with torch.compile at M = 1 and 16 only, then
# d43's mma slabs and d40's tickets against the landed kernel, d39's per-CTA trace and d41's GEMV probe (l2_call.sh,
# build/carry3/, one round, into $OUT/l; d38's prefetch in a second call: VARIANTS="cur mma tk l2c1 l2c2").
set -u
O=$OUT
DEADLINE=440 STEPS=probe,check,bench,torch PROBE_ROUNDS=1 PROJECTS="gpt3_mlp_decode_sm90 llama_mlp_fused_sm90 llama_mlp_sm90 gpt3_mlp_sm90" TORCH="generated/gpt3_mlp_decode_sm90 generated/llama_mlp_fused_sm90 generated/llama_mlp_sm90 generated/gpt3_mlp_sm90" COMPILE_MS=1,16 OUT=$O/t bash scripts/decode_probe/table_call.sh 2>&1 | tail -40
echo "table done at $SECONDS"
VARIANTS="cur mma tk" ROUNDS=1 CARRY=build/carry3 OUT=$O/l bash scripts/decode_probe/l2_call.sh 2>&1 | tail -30
