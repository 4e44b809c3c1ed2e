#!/usr/bin/env bash
# On the GPU machine (Hopper): build the committed sm90 generated/ projects with every core, then run
# their benches (checks + timing + baselines). JSON rows and logs go to $OUT (or ./gpu-out).
# Usage: scripts/gpu_check_sm90.sh [MS] [REPEATS]     e.g. scripts/gpu_check_sm90.sh 1,128,1024 20
# First a correctness pass (check-*.jsonl: every M in CHECK_MS, overlap forced on, every policy), then
# the benchmark (bench-*.jsonl: run() as the library runs it, with all baselines, interleaved timing).
# Env: EXAMPLES (default: the three sm90 examples), POLICIES (spec,row,tile), BENCH_ARGS (extra flags),
#      CHECK_MS, SKIP_CHECK=1, SKIP_BENCH=1, SANITIZE=1 (also compute-sanitizer racecheck and memcheck at a
#      small M), GEN_DIR (where the projects are: generated/ by default; e.g. .gen-odd/ for the residue chains
#      tests/data/gemm_odd_sm90.yaml and gemm_odd.yaml (its sm80 twin, built for 90a too), generated there
#      first, since the GPU machine has no pydantic:
#        for n in gemm_odd_sm90 gemm_odd; do cusync-gen generate tests/data/$n.yaml -o .gen-odd/$n; done
#      then GEN_DIR=.gen-odd EXAMPLES="gemm_odd_sm90 gemm_odd" POLICIES=spec,row,tile SKIP_BENCH=1 SANITIZE=1
#      CHECK_MS=1,3,17,77,100,127,128,255,1000,4097).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
MS=${1:-256,512,1024,1536,2048,3072,4096,8192}
REPEATS=${2:-50}
EXAMPLES=${EXAMPLES:-two_gemm_sm90 gpt3_mlp_sm90 llama_mlp_sm90}
export CUTLASS_DIR=${CUTLASS_DIR:-$PWD/third_party/cutlass}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for e in $EXAMPLES; do
  cmake -S "${GEN_DIR:-generated}/$e" -B build/gpu/$e -G Ninja -DCUTLASS_DIR="$CUTLASS_DIR" -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null
done
start=$(date +%s)
for e in $EXAMPLES; do  # the projects build side by side: each has only a few heavy CUTLASS units
  (cmake --build build/gpu/$e -j "$(( $(nproc) / 2 ))" > "$OUT/build-$e.log" 2>&1 || echo "BUILD FAILED: $e") &
done
wait
echo "build: $(( $(date +%s) - start )) s"; grep -h "FAILED\|error" "$OUT"/build-*.log | head -20
policies_of() {  # every policy the example's GEMM edges allow
  case $1 in llama_mlp_sm90) echo "${POLICIES_LLAMA:-spec,tile}" ;; two_gemm_sm90) echo "${POLICIES_TWO:-spec,row}" ;;
    *) echo "${POLICIES:-spec,tile}" ;; esac
}
if [ "${SKIP_CHECK:-0}" != 1 ]; then
  # Correctness at every M with overlap forced on (no single-wave fallback), every policy, few repeats.
  for e in $EXAMPLES; do
    timeout 900 ./build/gpu/$e/${e}_bench --m "${CHECK_MS:-1,128,256,1000,1024,2048,4096,8192}" --policies "$(policies_of $e)" \
      --repeats 3 --warmup 1 --no-fallback --no-baselines > "$OUT/check-$e.jsonl" 2> "$OUT/check-$e.err"
    echo "check $e exit $?"; head -c 2000 "$OUT/check-$e.err"; [ -s "$OUT/check-$e.err" ] || rm -f "$OUT/check-$e.err"
  done
fi
for e in $([ "${SKIP_BENCH:-0}" = 1 ] || echo $EXAMPLES); do  # the benchmark: run() as the library does it, all baselines, interleaved timing
  timeout 900 ./build/gpu/$e/${e}_bench --m "$MS" --policies "$(policies_of $e)" --repeats "$REPEATS" --warmup 5 ${BENCH_ARGS:-} \
    > "$OUT/bench-$e.jsonl" 2> "$OUT/bench-$e.err"
  echo "bench $e exit $?"; head -c 2000 "$OUT/bench-$e.err"; [ -s "$OUT/bench-$e.err" ] || rm -f "$OUT/bench-$e.err"
done
if [ "${SANITIZE:-0}" = 1 ]; then
  for tool in racecheck memcheck; do
    for e in $EXAMPLES; do
      timeout 900 compute-sanitizer --tool $tool --print-limit 20 ./build/gpu/$e/${e}_bench --m 200 --policies spec \
        --repeats 1 --warmup 1 --no-baselines --no-fallback > "$OUT/sanitizer-$tool-$e.log" 2>&1
      echo "sanitizer $tool $e exit $?: $(tail -1 "$OUT/sanitizer-$tool-$e.log")"
    done
  done
fi
python3 - "$OUT" <<'PY'
import json, pathlib, sys
bad = 0
for f in sorted(pathlib.Path(sys.argv[1]).glob("check-*.jsonl")):
    rows = [json.loads(l) for l in f.read_text().splitlines() if l.startswith("{") and '"m"' in l]
    fails = [r for r in rows if not (r["bitwise_equal"] and r["graph_ok"] and r["sync_error"] is None and r["ref_rel_err"] < 1e-2)]
    bad += len(fails)
    worst = max((r["ref_rel_err"] for r in rows), default=0)
    print(f"{f.name}: {len(rows)} rows, {len(fails)} failed, worst ref err {worst:.1e}, M {sorted({r['m'] for r in rows})}")
    for r in fails[:5]: print("  FAIL", r)
print("correctness:", "ALL OK" if bad == 0 else f"{bad} FAILED")
PY
python3 scripts/results_table.py --sm90 "$OUT"/bench-*.jsonl 2>/dev/null || true
