#!/usr/bin/env bash
# Device call A (2026-12-02, NOTES h17): uniform wgmma descriptors in the synced kernels. Builds the gpt3 shard on
# 128x128 ping-pong tiles with the new runtime (pp_new) and with HEAD's (pp_orig), plus the shipped gpt3/llama sm90
# examples (new runtime); checks, sanitizers, then times ours (sync off and overlapped) against CUTLASS's ping-pong.
set -uo pipefail
cd "$(dirname "$0")"
C=$PWD/../third_party/cutlass; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader | tee $OUT/gpu.txt; date -u | tee -a $OUT/gpu.txt
mkdir -p build
for p in pp_new pp_orig ../generated/gpt3_mlp_sm90 ../generated/llama_mlp_sm90; do
  b=build/$(basename $p)
  (cmake -S $p -B $b -G Ninja -DCUTLASS_DIR=$C -DCMAKE_CUDA_ARCHITECTURES=90a > $OUT/cfg-$(basename $p).log 2>&1 \
    && cmake --build $b -j 5 > $OUT/build-$(basename $p).log 2>&1; echo "build $p exit $? at $(( $(date +%s) - t0 )) s") &
done; wait
B=build/pp_new/gpt3_mlp_sm90_pp_bench; O=build/pp_orig/gpt3_mlp_sm90_pp_bench
timeout 60 $B --m 1,200,1000,1536,3000 --policies spec,tile --repeats 2 --warmup 1 --no-fallback > $OUT/check-pp_new.jsonl 2>&1; echo "check exit $?"
for tool in racecheck memcheck; do
  timeout 100 compute-sanitizer --tool $tool --print-limit 20 $B --m 200 --policies spec --repeats 1 --warmup 1 --no-reference --no-fallback --no-baselines > $OUT/san-$tool.log 2>&1
  echo "$tool exit $?: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/san-$tool.log | tail -2 | tr '\n' ' ') at $(( $(date +%s) - t0 )) s"
done
for p in new orig new orig; do
  bin=build/pp_$p/gpt3_mlp_sm90_pp_bench
  timeout 90 $bin --m 1024,1536,2048,4096 --policies spec --orders spec,column_banded --repeats 20 --warmup 3 --no-fallback --no-reference >> $OUT/pp-$p.jsonl 2>> $OUT/pp-$p.err
  echo "pp $p exit $? at $(( $(date +%s) - t0 )) s"
done
for e in gpt3_mlp_sm90 llama_mlp_sm90; do
  timeout $(( 560 - ($(date +%s) - t0) > 200 ? 200 : 560 - ($(date +%s) - t0) )) build/$e/${e}_bench --m 256,512,1024,1536,2048,3072,4096,8192 --policies spec,tile --orders spec \
    --repeats 20 --warmup 3 --autotune 10 > $OUT/bench-$e.jsonl 2> $OUT/bench-$e.err; echo "bench $e exit $? at $(( $(date +%s) - t0 )) s"
done
python3 - $OUT <<'PY'
import json, sys, glob
for f in sorted(glob.glob(sys.argv[1] + "/pp-*.jsonl")) + [sys.argv[1] + "/check-pp_new.jsonl"]:
    for line in open(f):
        if not line.startswith("{") or '"m"' not in line: continue
        r = json.loads(line)
        print(f.split("/")[-1], r["m"], r.get("order"), r.get("policy"), "sync-off %s overlap %s | cutlass pp %s | ok %s %s" % (
            r.get("sequential_us"), r.get("overlapped_us"), r.get("pingpong_us"), r.get("bitwise_equal"), r.get("graph_ok")))
PY
cd $OUT && tar czf logs.tgz *.log *.err 2>/dev/null; echo "total $(( $(date +%s) - t0 )) s"
