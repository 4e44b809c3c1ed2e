#!/usr/bin/env bash
# Run 7: correctness after the poison fix at every M, tile orders compared, compute-sanitizer, SASS spills.
set -uo pipefail
OUT=$OUT SKIP_CHECK=0 BENCH_ARGS="--orders spec,banded,row_major,column_major --no-baselines" \
  EXAMPLES="two_gemm_sm90 gpt3_mlp_sm90 llama_mlp_sm90" POLICIES=spec POLICIES_LLAMA=spec POLICIES_TWO=spec \
  bash scripts/gpu_check_sm90.sh 512,1024,1536,4096 20 2>&1 | grep -v "^|" | tail -12
python3 - "$OUT" <<'PY'
import json, pathlib, sys
for f in sorted(pathlib.Path(sys.argv[1]).glob("bench-*.jsonl")):
    for l in f.read_text().splitlines():
        r = json.loads(l)
        if "m" in r:
            print(f"{r['chain'][:10]:10} {r['m']:5} {r['order']:12} seq {r['sequential_us']:8.1f} ovl {r['overlapped_us']:8.1f}")
PY
which cuobjdump compute-sanitizer
o=build/gpu/llama_mlp_sm90/CMakeFiles/llama_mlp_sm90.dir/src/stage_gemm2.cu.o
cuobjdump -sass $o > $OUT/gemm2.sass 2>/dev/null && grep -c "STL\|LDL" $OUT/gemm2.sass
grep -n -B3 -A1 "STL" $OUT/gemm2.sass | head -60 > $OUT/spills.txt; rm -f $OUT/gemm2.sass
for e in two_gemm_sm90 llama_mlp_sm90; do
  for tool in memcheck racecheck; do
    timeout 200 compute-sanitizer --tool $tool --print-limit 10 ./build/gpu/$e/${e}_bench --m 200 --policies spec \
      --repeats 1 --warmup 1 --no-baselines --no-fallback > $OUT/sanitizer-$tool-$e.log 2>&1
    echo "sanitizer $tool $e exit $?: $(grep -a "ERROR SUMMARY\|RACECHECK SUMMARY" $OUT/sanitizer-$tool-$e.log | tail -2 | tr '\n' ' ')"
  done
done
