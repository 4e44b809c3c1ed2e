#!/usr/bin/env bash
# One device call: layers no example ships, checked at ragged, varlen and odd shapes (fp32 references,
# bitwise, graph replay): non-causal with several KV heads at head_dim 112 (fp16), G = 7 at head_dim 112
# with rotary (bf16), G = 4 at head_dim 48 (fp16), G = 16 on two KV heads at head_dim 64 with rotary (bf16).
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_check_attention_sweep.sh
set -u
OUT=${OUT:-$PWD/gpu-out}; LOG=$OUT/logs; mkdir -p "$LOG"
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
cg() { python3 -m cusync_gen.cli "$@"; }
P=${P:-/tmp/sweep}; mkdir -p "$P"
spec() { printf 'name: %s\narch: sm90\ntarget: sm_90\ndtype: %s\nattention: {%s}\n' "$1" "$2" "$3" > "$P/$1.yaml"; }
spec nc fp16 "hidden: 2048, heads: 16, kv_heads: 4, head_dim: 112, causal: false"
spec g7h112 bf16 "hidden: 1568, heads: 14, kv_heads: 2, head_dim: 112, causal: true, rotary: true"
spec g4h48 fp16 "hidden: 1152, heads: 24, kv_heads: 6, head_dim: 48, causal: true"
spec g16 bf16 "hidden: 2048, heads: 32, kv_heads: 2, head_dim: 64, causal: true, rotary: true"
NAMES="nc g7h112 g4h48 g16"
for n in $NAMES; do cg generate "$P/$n.yaml" -o "$P/$n" > /dev/null || echo "generate $n failed"; done
for n in $NAMES; do (cg build "$P/$n" --jobs 4 > "$LOG/build-$n.txt" 2>&1; echo "build $n exit $? at ${SECONDS}s") & done
wait
CHECK="p:1x1+0 p:1x7+0 p:1x200+0 p:1x1000+4097 p:2x200+4097 p:3x7/200/1000+0 p:3x200/1/77+0/511/4097 p:2x7+1/0
       g:1+0 g:3+1 g:7+127 g:3+0/511/4097 g:64+16384"
for n in $NAMES; do
  b=$(ls "$P/$n"/build/*_bench | head -1)
  timeout 100 "$b" --check $CHECK > "$OUT/check-$n.jsonl" 2> "$LOG/check-$n.err"
  echo "check $n exit $? ($(grep -c '"ok": true' "$OUT/check-$n.jsonl") ok of $(wc -l < "$OUT/check-$n.jsonl")) at ${SECONDS}s"
  grep -v '"ok": true' "$OUT/check-$n.jsonl" | head -3; head -c 600 "$LOG/check-$n.err"
done
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs; ls
