#!/usr/bin/env bash
# One short device run for the sm90 attention layer's generation steps (NOTES f4): the full correctness
# checks of gpu_check_attention_sm90.sh (prompts and steps, fp32 reference, bitwise, graph replay),
# memcheck and racecheck of the decode at a small step whose splits reuse ring slots, then the generation
# points (TIME_G) for ours and the PyTorch peer in the same call. Prompt timings are not repeated.
#   OUT=out scripts/gpu_decode_attention_sm90.sh DIR   (DIR/<llama|gpt3>/bench built; attention_torch.py next to this)
set -u
DIR=${1:-.}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"; LOG=$OUT/log.txt  # at most 8 files come back
REPEATS=${REPEATS:-50}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > "$LOG" 2>&1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
for e in llama gpt3; do  # a bench built without cuBLASLt returns status 6 (kLibraryError) at qkv for every shape
  "$DIR/$e/bench" --check g:1+0 2>&1 | head -c 300 | tee -a "$LOG"; echo | tee -a "$LOG"
done
CHECK_P="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+0 p:1x7+1 p:1x200+511 p:2x200+4097 p:1x1000+4097"
CHECK_G="g:1+0 g:3+1 g:5+511 g:2+4097 g:7+127 g:64+16384"
TIME_G="g:1+512 g:1+4096 g:1+16384 g:8+512 g:8+4096 g:8+16384 g:32+512 g:32+4096 g:32+16384 g:64+512 g:64+4096 g:64+16384"
for e in llama gpt3; do
  timeout 45 "$DIR/$e/bench" --check $CHECK_P $CHECK_G > "$OUT/check-$e.jsonl" 2>> "$LOG"
  echo "check $e exit $? ok $(grep -c '"ok": true' "$OUT/check-$e.jsonl")" | tee -a "$LOG"
done
for e in llama gpt3; do
  timeout 30 "$DIR/$e/bench" --time --repeats "$REPEATS" --preheat-ms 1500 $TIME_G > "$OUT/time-$e.jsonl" 2>> "$LOG"
  echo "time $e exit $?" | tee -a "$LOG"
done
join() { echo "$*" | tr ' ' ','; }
timeout 45 python3 "$HERE/attention_torch.py" --sm90 --hidden 8192 --heads 8 --kv-heads 1 --rotary --dtype bf16 --repeats "$REPEATS" \
  --preheat-s 1.5 --shapes "$(join $TIME_G)" > "$OUT/torch-llama.jsonl" 2>> "$LOG"; echo "torch llama exit $?" | tee -a "$LOG"
timeout 45 python3 "$HERE/attention_torch.py" --sm90 --hidden 12288 --heads 12 --kv-heads 12 --repeats "$REPEATS" \
  --preheat-s 1.5 --shapes "$(join $TIME_G)" > "$OUT/torch-gpt3.jsonl" 2>> "$LOG"; echo "torch gpt3 exit $?" | tee -a "$LOG"
for e in llama gpt3; do
  timeout 25 compute-sanitizer --tool memcheck --print-limit 10 "$DIR/$e/bench" --check g:2+700 g:3+129 > "$OUT/san.tmp" 2>&1
  echo "memcheck $e exit $?: $(grep -h 'ERROR SUMMARY' "$OUT/san.tmp" | tr '\n' ' ')" | tee -a "$LOG"; tail -c 1500 "$OUT/san.tmp" >> "$LOG"
done
timeout 25 compute-sanitizer --tool racecheck --print-limit 10 "$DIR/llama/bench" --check g:2+700 > "$OUT/san.tmp" 2>&1
echo "racecheck llama exit $?: $(grep -h "SUMMARY" "$OUT/san.tmp" | tr "\n" " ")" | tee -a "$LOG"
grep -h -i "decode\|hazard" "$OUT/san.tmp" | head -20 >> "$LOG"; rm -f "$OUT/san.tmp"
ls "$OUT"
