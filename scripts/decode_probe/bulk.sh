#!/usr/bin/env bash
# v5, the bulk-copy persistent chain (NOTES d11), in one call: the probe at M = 1..64 on the three shapes with
# cuBLAS, cuBLASLt, packed v3 (reg/regs) and v5 (bulk: chain, chain under PDL, two launches) timed and every
# variant checked, v5's per-CTA timeline at every point; v5 alone on an odd shape (partial tiles, K tail, fewer chunks than CTAs); v5 on shapes no example ships (CUSTOM, empty to skip); then v5's ring alone (consumers only release slots: the stream's own rate).
# Usage: BIN=path/decode_probe bash scripts/decode_probe/bulk.sh OUT_DIR   (BIN built by run.sh's nvcc line)
set -u
R=${1:?OUT_DIR}; B=${BIN:?path of a built decode_probe}
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv > $R/gpu.txt 2>&1
mkdir -p $R/main $R/ring
DECODE_PROBE_REG_PACKED=1 DECODE_PROBE_BULK_TRACE=1 DECODE_PROBE_VARIANTS=reg,regs,bulk DECODE_PROBE_MS=${MS:-1,2,4,8,16,32,64} \
  DECODE_PROBE_SHAPES=${SHAPES:-gpt3,llama65,llama3-8b} timeout ${T_MAIN:-330} $B $R/main > $R/main/stdout.txt 2>&1
echo "main rc=$? at ${SECONDS}s"
sed -n '/^stream-read/p;/^bulk M_pad/p;/^bulk trace/p;/^shape/,$p' $R/main/stdout.txt | cut -c1-240
grep -h -i "fail\|DET!\|BIT!\|mismatch\| NO$" $R/main/decode_probe.log | head -20
mkdir -p $R/odd
DECODE_PROBE_SHAPES=odd timeout 60 $B $R/odd > $R/odd/stdout.txt 2>&1; echo "odd shape rc=$? at ${SECONDS}s"
grep -h "^odd" $R/odd/stdout.txt; grep -h "FAIL\| NO" $R/odd/decode_probe.log | head
# Shapes no example ships (DECODE_PROBE_CUSTOM=name:k1:n1:n2:act:dtype): v5 against cuBLAS and cuBLASLt, checked.
CUSTOM=${CUSTOM-qwen1.5b:1536:8960:1536:swiglu:bf16,gpt2xl:1600:6400:1600:gelu:fp16,plain:2048:8192:2048:identity:fp16}
if [ -n "$CUSTOM" ]; then
  mkdir -p $R/custom
  DECODE_PROBE_CUSTOM=$CUSTOM DECODE_PROBE_SHAPES=none DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,8,16,64 DECODE_PROBE_VARIANTS=bulk \
    timeout 120 $B $R/custom > $R/custom/stdout.txt 2>&1; echo "custom shapes rc=$? at ${SECONDS}s"
  sed -n '/^shape/,$p' $R/custom/stdout.txt | cut -c1-240
  grep -h -i "fail\|DET!\|BIT!\|mismatch\| NO$" $R/custom/decode_probe.log | head -10
fi
# The library launches mode stream cooperatively (every CTA resident at once): what that costs, same points.
mkdir -p $R/coop
DECODE_PROBE_BULK_COOP=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,16,64 DECODE_PROBE_SHAPES=gpt3,llama3-8b DECODE_PROBE_VARIANTS=bulk \
  timeout 90 $B $R/coop > $R/coop/stdout.txt 2>&1; echo "cooperative rc=$? at ${SECONDS}s"
sed -n '/^shape/,$p' $R/coop/stdout.txt | cut -c1-240
[ "${RING:-1}" = 0 ] && exit 0
DECODE_PROBE_BULK_MODE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,16 DECODE_PROBE_SHAPES=gpt3,llama3-8b DECODE_PROBE_VARIANTS=bulk \
  timeout 90 $B $R/ring > $R/ring/stdout.txt 2>&1; echo "ring alone rc=$? at ${SECONDS}s"
sed -n '/^shape/,$p' $R/ring/stdout.txt | cut -c1-240
if [ -n "${BIN16:-}" ]; then  # the same probe built with -DCUSYNC_BULK_CHUNK_STEPS=16 (32 KB copies, 6 stages)
  mkdir -p $R/c16 $R/c16ring
  DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,8,16 DECODE_PROBE_VARIANTS=bulk timeout 120 $BIN16 $R/c16 > $R/c16/stdout.txt 2>&1
  echo "32 KB chunks rc=$? at ${SECONDS}s"; sed -n '/^shape/,$p' $R/c16/stdout.txt | cut -c1-240
  DECODE_PROBE_BULK_MODE=1 DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1,16 DECODE_PROBE_SHAPES=gpt3,llama3-8b DECODE_PROBE_VARIANTS=bulk \
    timeout 90 $BIN16 $R/c16ring > $R/c16ring/stdout.txt 2>&1; echo "32 KB ring alone rc=$? at ${SECONDS}s"
  sed -n '/^shape/,$p' $R/c16ring/stdout.txt | cut -c1-240
fi
[ "${NCU:-0}" = 0 ] && exit 0
mkdir -p $R/ncu
DECODE_PROBE_NO_EXTRA=1 DECODE_PROBE_MS=1 DECODE_PROBE_SHAPES=gpt3 DECODE_PROBE_VARIANTS=bulk timeout 150 \
  ncu --kernel-name regex:bulk_chain_kernel --launch-skip 2 --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
  --section WarpStateStats $B $R/ncu > $R/ncu/ncu.txt 2>&1; echo "ncu rc=$? at ${SECONDS}s"
grep -E "DRAM Throughput|Memory Throughput|Duration|Stall|Warp Cycles" $R/ncu/ncu.txt | head -20
