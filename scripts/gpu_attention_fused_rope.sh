#!/usr/bin/env bash
# One device call on the generation step's rope stage fused into the tensor-core decode (Layer::decode_fused_rope,
# bench --decode-fused-rope): checks of the three shipped sm90 layers with it on (each check also runs the rope
# stage and compares output, rotated queries and appended K/V rows bitwise: "rope_equal"), memcheck and racecheck
# of llama's steps, then the steps timed with the stage and fused, one binary per layer, A B B A, and a summary.
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_attention_fused_rope.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv | tee "$OUT/gpu.txt"
P=${P:-/tmp/fused_rope}; mkdir -p "$P"
NAMES="llama llama3 gpt3"
for n in $NAMES; do cg generate ${n}_attention_sm90 -o "$P/$n" > /dev/null; done
JOBS=4 build_all $NAMES
for n in $NAMES; do
  timeout 150 "$(bench "$n")" --check --decode-fused-rope g:1+0 g:3+1 g:7+127 g:3+0/511/4097 g:64+16384 g:64+511 g:5+255 \
    p:2x7+1/0 > "$OUT/check-$n.jsonl" 2> "$LOG/check-$n.err"
  echo "check $n exit $? ($(grep -c '"ok": true' "$OUT/check-$n.jsonl") ok of $(wc -l < "$OUT/check-$n.jsonl"),"\
    "$(grep -c '"rope": "fused"' "$OUT/check-$n.jsonl") fused, $(grep -c '"rope_equal": true' "$OUT/check-$n.jsonl") rope_equal) at ${SECONDS}s"
  grep -v '"ok": true' "$OUT/check-$n.jsonl" | head -3; head -c 600 "$LOG/check-$n.err"
done
timeout 100 "$(bench llama)" --check --decode-fused-rope --decode-persistent g:3+700 > "$OUT/check-llama-persistent.jsonl" 2>> "$LOG/check-llama.err"
echo "check llama persistent exit $? ($(grep -c '"ok": true' "$OUT/check-llama-persistent.jsonl") ok)"
sanitize llama --decode-fused-rope g:2+700 g:3+129
STEPS="g:1+512 g:1+4096 g:8+512 g:8+4096 g:32+4096 g:64+512 g:64+4096 g:64+16384"
for n in $NAMES; do
  for v in --decode-rope-stage --decode-fused-rope --decode-fused-rope --decode-rope-stage; do
    [ $SECONDS -lt 500 ] || { echo "skip time $n $v at ${SECONDS}s"; continue; }
    timeout 100 "$(bench "$n")" --time --repeats 30 --preheat-ms 1500 $v $STEPS >> "$OUT/time-$n${v#--decode}.jsonl" 2>> "$LOG/time-$n.err"
    echo "time $n $v exit $? at ${SECONDS}s"
  done
done
python3 - "$OUT" <<'PY' | tee "$OUT/summary.txt"
import json, statistics, sys
from pathlib import Path
out = Path(sys.argv[1])
for n in ("llama", "llama3", "gpt3"):
    runs = {}
    for v in ("-rope-stage", "-fused-rope"):
        f = out / f"time-{n}{v}.jsonl"
        for line in f.read_text().splitlines() if f.exists() else []:
            try:
                r = json.loads(line)
            except ValueError:
                continue
            if "layer_us" in r:
                runs.setdefault((r["shape"], v), []).append((r["layer_us"], r.get("rope_us", 0.0), r.get("attention_us", 0.0)))
    for shape in dict.fromkeys(s for s, _ in runs):
        a, b = runs.get((shape, "-rope-stage"), []), runs.get((shape, "-fused-rope"), [])
        if a and b:
            la, lb = statistics.median(x[0] for x in a), statistics.median(x[0] for x in b)
            print(f"{n:7s} {shape:12s} layer stage {la:8.2f} us  fused {lb:8.2f} us  {la / lb:5.3f}x"
                  f"  (attention stage {statistics.median(x[2] for x in a):7.2f} -> {statistics.median(x[2] for x in b):7.2f},"
                  f" rope {statistics.median(x[1] for x in a):6.2f} -> {statistics.median(x[1] for x in b):6.2f})")
PY
cd "$OUT" && tar czf logs.tgz logs *.jsonl && rm -rf logs *.jsonl; ls
