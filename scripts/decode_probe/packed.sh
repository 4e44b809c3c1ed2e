#!/usr/bin/env bash
# v3 with packed weights (NOTES d7): the same binary, row-major W vs W packed so that every warp streams one
# contiguous range (DECODE_PROBE_REG_PACKED=1), 1 and 4 warps along N; then v4's ring alone (consumer mode 1).
# NOTES d8: RUNS="packed:DECODE_PROBE_REG_PACKED=1;pers:DECODE_PROBE_REG_PACKED=1 DECODE_PROBE_REG_PERSIST=1"
# (regs as one persistent kernel), RING=0 skips the ring.
# Usage: BIN=path/decode_probe bash scripts/decode_probe/packed.sh OUT_DIR   (~70 s on an H200)
set -u
R=${1:?OUT_DIR}; B=${BIN:?path of a built decode_probe}
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
P="DECODE_PROBE_MS=${MS:-1,2,8,16,32} DECODE_PROBE_SHAPES=gpt3,llama65,llama3-8b DECODE_PROBE_VARIANTS=reg,regs"
IFS=';' read -r -a RUN_LIST <<< "${RUNS:-row:;packed:DECODE_PROBE_REG_PACKED=1;packed_wn4:DECODE_PROBE_REG_PACKED=1 DECODE_PROBE_REG_CFG=2;row_wn4:DECODE_PROBE_REG_CFG=2}"
for run in "${RUN_LIST[@]}"; do
  name=${run%%:*}; envs=${run#*:}; mkdir -p $R/$name
  env $P $envs timeout 100 $B $R/$name > $R/$name/stdout.txt 2>&1; echo "$name rc=$? at ${SECONDS}s"
  sed -n '/^stream-read/p;/^shape/,$p' $R/$name/stdout.txt | cut -c1-200
done
[ "${RING:-1}" = 0 ] && exit 0
mkdir -p $R/ring1
DECODE_PROBE_RING_MODE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,16 DECODE_PROBE_SHAPES=gpt3,llama3-8b DECODE_PROBE_VARIANTS=ring \
  timeout 40 $B $R/ring1 > $R/ring1/stdout.txt 2>&1; echo "ring mode 1 rc=$? at ${SECONDS}s"
sed -n '/^shape/,$p' $R/ring1/stdout.txt | cut -c1-200
grep -h -i "fail\|DET!\|mismatch" $R/*/decode_probe.log | head -20
