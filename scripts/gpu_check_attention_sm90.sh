#!/usr/bin/env bash
# One device run for the sm90 attention layer: correctness (ragged shapes, fp32 references, bitwise, graph
# replay), compute-sanitizer memcheck and racecheck at small shapes, timing of every stage and the layer,
# and the PyTorch peer on the same shapes, right after. Usage (from a folder holding the benches):
#   OUT=out scripts/gpu_check_attention_sm90.sh DIR_WITH_llama_AND_gpt3_BENCHES
# Each DIR/<example>/bench is a built <name>_bench (or DIR/<example>/src.cu to build here with nvcc).
set -u
DIR=${1:-.}
OUT=${OUT:-$PWD/gpu-out}; LOG=$OUT/logs; mkdir -p "$LOG"  # at most 8 files come back: logs go in one tar
REPEATS=${REPEATS:-50}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$LOG/gpu.txt" 2>&1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
echo "cublasLt: $LT" >> "$LOG/gpu.txt"; cat "$LOG/gpu.txt"
CHECK_P="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+0 p:1x7+1 p:1x200+511 p:2x200+4097 p:1x1000+4097"
CHECK_G="g:1+0 g:3+1 g:5+511 g:2+4097 g:7+127 g:64+16384"
TIME_P="p:1x512+0 p:1x1024+0 p:1x2048+0 p:1x4096+0 p:1x8192+0 p:4x1024+0 p:8x512+0 p:1x1024+3072"
TIME_G="g:1+512 g:1+4096 g:1+16384 g:8+512 g:8+4096 g:8+16384 g:32+512 g:32+4096 g:32+16384 g:64+512 g:64+4096 g:64+16384"
for e in llama gpt3; do
  b=$DIR/$e/bench
  "$b" --check p:1x8+0 > /dev/null 2> "$LOG/probe-$e.err"; rc=$?
  echo "$e probe exit $rc: $(head -c 300 "$LOG/probe-$e.err")"
done
for e in llama gpt3; do
  timeout 100 "$DIR/$e/bench" --check $CHECK_P $CHECK_G > "$OUT/check-$e.jsonl" 2> "$LOG/check-$e.err"
  echo "check $e exit $?"; head -c 1500 "$LOG/check-$e.err"
done
for tool in memcheck racecheck; do
  timeout 75 compute-sanitizer --tool $tool --print-limit 10 "$DIR/llama/bench" --check p:1x7+1 g:3+129 > "$LOG/san-$tool.log" 2>&1
  echo "sanitizer $tool exit $?: $(grep -h 'ERROR SUMMARY' "$LOG/san-$tool.log" | tr '\n' ' ')"
done
for e in llama gpt3; do
  timeout 120 "$DIR/$e/bench" --time --repeats "$REPEATS" $TIME_P $TIME_G > "$OUT/time-$e.jsonl" 2> "$LOG/time-$e.err"
  echo "time $e exit $?"; head -c 800 "$LOG/time-$e.err"
done
# The CUDA-core decode kernel on the GQA layer's steps, for comparison with the tensor-core one.
timeout 60 "$DIR/llama/bench" --time --decode-simt --repeats "$REPEATS" --preheat-ms 500 $TIME_G > "$OUT/time-simt-llama.jsonl" 2> "$LOG/time-simt.err"
echo "time simt exit $?"
join() { echo "$*" | tr ' ' ','; }
timeout 120 python3 "$DIR/attention_torch.py" --sm90 --hidden 8192 --heads 8 --kv-heads 1 --rotary --dtype bf16 --repeats "$REPEATS" \
  --shapes "$(join $TIME_P $TIME_G)" > "$OUT/torch-llama.jsonl" 2> "$LOG/torch-llama.err"; echo "torch llama exit $?"
timeout 120 python3 "$DIR/attention_torch.py" --sm90 --hidden 12288 --heads 12 --kv-heads 12 --repeats "$REPEATS" \
  --shapes "$(join $TIME_P $TIME_G)" > "$OUT/torch-gpt3.jsonl" 2> "$LOG/torch-gpt3.err"; echo "torch gpt3 exit $?"
tail -c 600 "$LOG/torch-llama.err" "$LOG/torch-gpt3.err"
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs; ls
