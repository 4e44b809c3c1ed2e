#!/usr/bin/env bash
# One device call for prompts whose sequences bring different numbers of new tokens (varlen) and hold
# different caches: build the shipped llama (one KV head), llama3 (8 KV heads) and gpt3 (G = 1) layers and a
# written G = 3 head_dim 64 fp16 layer, check each at varlen, ragged and uniform shapes (fp32 references,
# bitwise, graph replay), memcheck at small varlen shapes, and time the cost of one FMHA launch per sequence:
# p:4x1024+0 (one launch where the layout allows) against p:4x1023/1024/1024/1025+0 (four launches).
# Usage (repo root, .whl/ holding pydantic's wheels where it is missing):  OUT=out bash scripts/gpu_check_attention_varlen.sh
set -u
. "$(dirname "$0")/gpu_env.sh"
P=${P:-/tmp/varlen}; mkdir -p "$P"
printf 'name: g3\narch: sm90\ntarget: sm_90\ndtype: fp16\nattention: {hidden: 1536, heads: 12, kv_heads: 4, head_dim: 64, causal: true}\n' > "$P/g3.yaml"
cg generate "$P/g3.yaml" -o "$P/g3" > /dev/null
for n in llama llama3 gpt3; do cg generate ${n}_attention_sm90 -o "$P/$n" > /dev/null; done
NAMES="llama llama3 gpt3 g3"
JOBS=4 build_all $NAMES
CHECK="p:3x7/200/1000+0 p:2x1/130+4097 p:3x200/1/77+0/511/4097 p:4x129/128/1/300+7/0/1/130 p:1x200+511
       p:3x200+0/511/4097 p:2x7+1/0 g:3+0/511/4097 g:5+511"
check_all $NAMES
for n in llama g3; do
  timeout 90 compute-sanitizer --tool memcheck --print-limit 10 "$(bench $n)" --check p:3x7/130/1+0/5/1 p:2x1/9+3/0 > "$LOG/san-$n.log" 2>&1
  echo "memcheck $n exit $?: $(grep -h 'ERROR SUMMARY' "$LOG/san-$n.log") at ${SECONDS}s"
done
for n in gpt3 llama3 llama; do
  timeout 60 "$(bench $n)" --time --repeats 30 p:4x1024+0 p:4x1023/1024/1024/1025+0 p:8x512+0 p:8x511/512/512/512/512/512/512/513+0 \
    > "$OUT/time-$n.jsonl" 2> "$LOG/time-$n.err"
  echo "time $n exit $? at ${SECONDS}s"
done
cd "$OUT" && tar czf logs.tgz logs && rm -rf logs; ls
