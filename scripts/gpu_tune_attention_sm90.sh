#!/usr/bin/env bash
# One device run for the sm90 attention layer with the cuBLASLt algorithm search (Layer::autotune, NOTES
# f5): the correctness checks of gpu_check_attention_sm90.sh with --autotune (fp32 reference, bitwise run
# to run and from a graph replay, on the algorithms the search kept), then per layer every prompt and
# generation point timed (autotune on, the bench's --time default; it also checks the timed graph bitwise)
# and the PyTorch peer right after; last, the prompts on the FMHA's ping-pong schedule (checks, times,
# memcheck). Every JSON file goes into run.tgz (8 files come back).
#   OUT=out scripts/gpu_tune_attention_sm90.sh DIR   (DIR/<llama|gpt3>/bench built; attention_torch.py next to this)
set -u
DIR=${1:-.}
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}; R=$OUT/run; mkdir -p "$R"; LOG=$OUT/log.txt
REPEATS=${REPEATS:-50}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$LOG" 2>&1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
echo "cublasLt: $LT" >> "$LOG"; cp "$LOG" "$R/gpu.txt"
for e in llama gpt3; do  # a bench built without cuBLASLt returns status 6 (kLibraryError) at qkv for every shape
  timeout 30 "$DIR/$e/bench" --check p:1x8+0 2>&1 | head -c 400 | tee -a "$LOG"; echo | tee -a "$LOG"
done
CHECK_P="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+0 p:1x7+1 p:1x200+511 p:2x200+4097 p:1x1000+4097"
CHECK_G="g:1+0 g:3+1 g:5+511 g:2+4097 g:7+127 g:64+16384"
TIME_P="p:1x512+0 p:1x1024+0 p:1x2048+0 p:1x4096+0 p:1x8192+0 p:4x1024+0 p:8x512+0 p:1x1024+3072"
TIME_G="g:1+512 g:1+4096 g:1+16384 g:8+512 g:8+4096 g:8+16384 g:32+512 g:32+4096 g:32+16384 g:64+512 g:64+4096 g:64+16384"
for e in llama gpt3; do
  timeout 60 "$DIR/$e/bench" --check --autotune $CHECK_P $CHECK_G > "$R/check-$e.jsonl" 2>> "$LOG"
  echo "check $e exit $? ok $(grep -c '"ok": true' "$R/check-$e.jsonl")/14" | tee -a "$LOG"
done
join() { echo "$*" | tr ' ' ','; }
torch() {  # layer, then attention_torch.py's layer arguments
  local e=$1; shift
  timeout 90 python3 "$HERE/attention_torch.py" --sm90 "$@" --repeats "$REPEATS" \
    --shapes "$(join $TIME_P $TIME_G)" > "$R/torch-$e.jsonl" 2>> "$LOG"; echo "torch $e exit $?" | tee -a "$LOG"
}
timeout 100 "$DIR/llama/bench" --time --repeats "$REPEATS" $TIME_P $TIME_G > "$R/time-llama.jsonl" 2>> "$LOG"
echo "time llama exit $?" | tee -a "$LOG"
torch llama --hidden 8192 --heads 8 --kv-heads 1 --rotary --dtype bf16
timeout 100 "$DIR/gpt3/bench" --time --repeats "$REPEATS" $TIME_P $TIME_G > "$R/time-gpt3.jsonl" 2>> "$LOG"
echo "time gpt3 exit $?" | tee -a "$LOG"
torch gpt3 --hidden 12288 --heads 12 --kv-heads 12
for e in gpt3 llama; do
  timeout 40 "$DIR/$e/bench" --check --fmha-pingpong $CHECK_P > "$R/check-pingpong-$e.jsonl" 2>> "$LOG"
  echo "check pingpong $e exit $? ok $(grep -c '"ok": true' "$R/check-pingpong-$e.jsonl")/8" | tee -a "$LOG"
done
for e in gpt3 llama; do
  timeout 40 "$DIR/$e/bench" --time --fmha-pingpong --repeats "$REPEATS" --preheat-ms 1000 $TIME_P > "$R/time-pingpong-$e.jsonl" 2>> "$LOG"
  echo "time pingpong $e exit $?" | tee -a "$LOG"
done
timeout 40 compute-sanitizer --tool memcheck --print-limit 10 "$DIR/llama/bench" --check --fmha-pingpong p:1x7+1 p:1x200+511 > "$R/san.txt" 2>&1
echo "memcheck pingpong llama exit $?: $(grep -h 'ERROR SUMMARY' "$R/san.txt" | tr '\n' ' ')" | tee -a "$LOG"
# The short table: per point, ours (tuned) and PyTorch; the FMHA schedules' attention stage at each prompt.
python3 - "$R" <<'PY' | tee -a "$LOG"
import json, sys, pathlib
r = pathlib.Path(sys.argv[1])
def rows(p):
    return {d["shape"]: d for d in (json.loads(l) for l in p.read_text().splitlines() if l.startswith("{"))} if p.is_file() else {}
for e in ("llama", "gpt3"):
    ours, torch, pp = rows(r / f"time-{e}.jsonl"), rows(r / f"torch-{e}.jsonl"), rows(r / f"time-pingpong-{e}.jsonl")
    for s, d in ours.items():
        t = torch.get(s, {}).get("torch_us")
        p = pp.get(s, {}).get("attention_us")
        print(e, s, d.get("layer_us"), t, f"{t / d['layer_us']:.3f}" if t and d.get("layer_us") else "-",
              "attn", d.get("attention_us"), "pp", p, "algo", d.get("qkv_algo"), d.get("proj_algo"), d.get("time_bitwise"))
PY
cd "$OUT" && tar czf run.tgz run && rm -rf run; ls "$OUT"  # (a caller that stops this early tars run/ itself)
