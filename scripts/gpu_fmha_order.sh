#!/usr/bin/env bash
# One device call for the FMHA's tile order (NOTES f6): builds both sm90 attention layers, checks the
# prompts with each head's query blocks in reverse order (--fmha-heaviest-first), times every prompt point on
# the cooperative schedule in both orders (A B B A, the same binary, autotune on), then PyTorch on the same
# prompts, and a memcheck. Raw JSON lines go to $OUT/run.tgz (time-heavy-<e>.jsonl: longest tiles first, the
# layer's default; time-forward-<e>.jsonl: CUTLASS's order, --fmha-forward; check-<e>.jsonl, torch-<e>.jsonl).
#   OUT=out bash scripts/gpu_fmha_order.sh     (repo root; .whl/ with pydantic's wheels where it is missing)
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-$PWD/gpu-out}; R=$OUT/run; mkdir -p "$R"; LOG=$OUT/log.txt
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH}
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.limit --format=csv > "$LOG" 2>&1
cp "$LOG" "$R/gpu.txt"
P=/tmp/p
for n in llama_attention_sm90 gpt3_attention_sm90; do
  python3 -m cusync_gen.cli generate "$n" -o "$P/$n" > /dev/null
  (python3 -m cusync_gen.cli build "$P/$n" --jobs 8 > "$OUT/build-$n.txt" 2>&1; echo "build $n exit $? at ${SECONDS}s" | tee -a "$LOG") &
done
wait
B() { echo "$P/$1_attention_sm90/build/$1_attention_sm90_bench"; }
CHECK_P="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+0 p:1x7+1 p:1x200+511 p:2x200+4097 p:1x1000+4097"
TIME_P="p:1x512+0 p:1x1024+0 p:1x2048+0 p:1x4096+0 p:1x8192+0 p:4x1024+0 p:8x512+0 p:1x1024+3072"
REPEATS=${REPEATS:-50}
for e in llama gpt3; do
  timeout 60 "$(B $e)" --check --fmha-heaviest-first $CHECK_P > "$R/check-$e.jsonl" 2>> "$LOG"
  echo "check heaviest-first $e exit $? ok $(grep -c '"ok": true' "$R/check-$e.jsonl")/8" | tee -a "$LOG"
done
for e in llama gpt3; do
  for v in heavy forward forward heavy; do
    f=$([ $v = heavy ] && echo "--fmha-heaviest-first" || echo "--fmha-forward")
    timeout 90 "$(B $e)" --time --repeats "$REPEATS" $f $TIME_P >> "$R/time-$v-$e.jsonl" 2>> "$LOG"
    echo "time $v $e exit $? (${SECONDS}s)" | tee -a "$LOG"
  done
done
join() { echo "$*" | tr ' ' ','; }
timeout 90 python3 "$HERE/attention_torch.py" --sm90 --hidden 8192 --heads 8 --kv-heads 1 --rotary --dtype bf16 \
  --repeats "$REPEATS" --shapes "$(join $TIME_P)" > "$R/torch-llama.jsonl" 2>> "$LOG"; echo "torch llama exit $?" | tee -a "$LOG"
timeout 90 python3 "$HERE/attention_torch.py" --sm90 --hidden 12288 --heads 12 --kv-heads 12 \
  --repeats "$REPEATS" --shapes "$(join $TIME_P)" > "$R/torch-gpt3.jsonl" 2>> "$LOG"; echo "torch gpt3 exit $?" | tee -a "$LOG"
timeout 40 compute-sanitizer --tool memcheck --print-limit 10 "$(B llama)" --check --fmha-heaviest-first p:1x7+1 p:1x200+511 \
  > "$R/sanitizer.txt" 2>&1; echo "memcheck heaviest-first llama exit $?: $(grep -h 'ERROR SUMMARY' "$R/sanitizer.txt")" | tee -a "$LOG"
python3 - "$R" <<'PY' | tee -a "$LOG"
import json, sys, pathlib, statistics
r = pathlib.Path(sys.argv[1])
def rows(p):
    out = {}
    for l in p.read_text().splitlines() if p.is_file() else []:
        if l.startswith("{"):
            d = json.loads(l); out.setdefault(d["shape"], []).append(d)
    return out
for e in ("llama", "gpt3"):
    h, f, t = rows(r / f"time-heavy-{e}.jsonl"), rows(r / f"time-forward-{e}.jsonl"), rows(r / f"torch-{e}.jsonl")
    for s in h:
        hl = statistics.mean(d["layer_us"] for d in h[s]); fl = statistics.mean(d["layer_us"] for d in f.get(s, h[s]))
        ha = statistics.mean(d["attention_us"] for d in h[s]); fa = statistics.mean(d["attention_us"] for d in f.get(s, h[s]))
        tu = t.get(s, [{}])[0].get("torch_us")
        print(e, s, f"attn fwd {fa:.1f} heavy {ha:.1f} ({fa / ha:.3f}x)  layer fwd {fl:.1f} heavy {hl:.1f}  torch {tu}",
              f"torch/heavy {tu / hl:.3f} torch/fwd {tu / fl:.3f}" if tu else "")
PY
cd "$OUT" && tar czf run.tgz run && rm -rf run; ls "$OUT"
