#!/usr/bin/env bash
# One device call on the generation step's tensor-core decode (one binary per layer, A B B A): its units
# walked by a persistent grid or one CTA per unit, in sequence-major or split-major order, on the shipped
# llama (one KV head), llama3 (8 KV heads) and gpt3 (G = 1: also the CUDA-core comparison decode) layers; checks of each order; Nsight Compute on llama's decode in both orders; PyTorch on gpt3.
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_decode_order.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
P=${P:-/tmp/order}; mkdir -p "$P"
for n in llama llama3 gpt3; do cg generate ${n}_attention_sm90 -o "$P/$n" > /dev/null; done
NAMES="llama llama3 gpt3"
JOBS=4 build_all $NAMES
CHECK="g:1+0 g:3+1 g:7+127 g:3+0/511/4097 g:64+16384 g:64+511 p:2x7+1/0"
check_all $NAMES
for n in llama llama3; do
  timeout 120 "$(bench "$n")" --check --decode-split-major $CHECK > "$OUT/check-$n-split.jsonl" 2>> "$LOG/check-$n.err"
  echo "check $n split-major exit $? ($(grep -c '"ok": true' "$OUT/check-$n-split.jsonl") ok)"
done
timeout 120 "$(bench gpt3)" --check --decode-simt $CHECK > "$OUT/check-gpt3-simt.jsonl" 2>> "$LOG/check-gpt3.err"
echo "check gpt3 simt exit $? ($(grep -c '"ok": true' "$OUT/check-gpt3-simt.jsonl") ok)"
STEPS="g:1+4096 g:8+4096 g:32+4096 g:32+16384 g:64+4096 g:64+16384"
variants() {  # NAME FLAGS...: each variant's flags joined by ',' (empty: the default), run A B B A
  local n=$1; shift
  local order=("$@"); local rev=(); for ((i=${#order[@]}-1; i>=0; i--)); do rev+=("${order[i]}"); done
  for v in "${order[@]}" "${rev[@]}"; do
    timeout 100 "$(bench "$n")" --time --repeats 30 ${v//,/ } $STEPS >> "$OUT/order-$n-${v:-default}.jsonl" 2>> "$LOG/order-$n.err"
    echo "order $n ${v:-default} exit $? at ${SECONDS}s"
  done
}
variants llama "" --decode-split-major --decode-persistent --decode-persistent,--decode-split-major
variants llama3 "" --decode-split-major --decode-persistent --decode-persistent,--decode-split-major
variants gpt3 "" --decode-split-major --decode-persistent --decode-simt
for v in "" --decode-split-major; do
  timeout 120 ncu --kernel-name regex:decode_split_mma --launch-count 1 --section SpeedOfLight --section MemoryWorkloadAnalysis \
    --section Occupancy --section WarpStateStats "$(bench llama)" --check $v g:64+16384 > "$LOG/ncu-llama${v}.txt" 2>&1
  echo "ncu llama ${v:-default} exit $?"; grep -E "DRAM Throughput|Memory Throughput|Duration|L2 Hit|Achieved Occupancy" "$LOG/ncu-llama${v}.txt" | head -8
done
TIME="$STEPS"
time_vs_torch "gpt3 --hidden 12288 --heads 12 --kv-heads 12 --head-dim 128 --dtype fp16"
cd "$OUT" && tar czf logs.tgz logs *.jsonl && rm -rf logs *.jsonl; ls
