#!/usr/bin/env bash
# On the GPU machine: build the committed generated/ projects for this GPU, run the GPU test tier, then
# the benches (check + timing) of the shipped examples. Logs and JSON rows go to $OUT (or ./gpu-out).
# Usage: scripts/gpu_check.sh [MS] [REPEATS]      e.g. scripts/gpu_check.sh 1,256,1024,2048 50
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
MS=${1:-1,256,1024,2048}
REPEATS=${2:-50}
if [ -d .whl ]; then  # the GPU machine has no pydantic: carried wheels (see README)
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site:$PWD
fi
export CUTLASS_DIR=${CUTLASS_DIR:-$PWD/third_party/cutlass}
ARCH=$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader | head -1 | tr -d .)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for e in two_gemm gpt3_mlp llama_mlp llama_mlp_split; do
  cmake -S generated/$e -B build/gpu/$e -G Ninja -DCUTLASS_DIR="$CUTLASS_DIR" -DCMAKE_CUDA_ARCHITECTURES=$ARCH >/dev/null
done
for e in two_gemm gpt3_mlp llama_mlp llama_mlp_split; do
  cmake --build build/gpu/$e -j "$(nproc)" 2>&1 | tail -2
done
if [ "${SKIP_PYTEST:-0}" != 1 ]; then
  CUSYNC_GPU_ARCH=$ARCH python3 -m pytest -q -m gpu -p no:cacheprovider 2>&1 | tee "$OUT/pytest-gpu.log" | tail -15
fi
for e in two_gemm gpt3_mlp llama_mlp llama_mlp_split; do
  ./build/gpu/$e/${e}_bench --m "$MS" --policies "${POLICIES:-spec,row,tile}" --orders "${ORDERS:-spec}" --repeats "$REPEATS" --warmup 10 ${BENCH_ARGS:-} > "$OUT/bench-$e.jsonl" 2> "$OUT/bench-$e.err"
  echo "$e exit $?"; cat "$OUT/bench-$e.err"; [ -s "$OUT/bench-$e.err" ] || rm -f "$OUT/bench-$e.err"
done
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
print(f"{'chain':10} {'M':>5} {'variant':12} {'seq us':>9} {'ovl us':>9} {'speedup':>7} {'bitwise':>7} {'graph':>5} {'ref err':>9} {'hooks us':>8} run() sync_error")
for f in sorted(out.glob("bench-*.jsonl")):
    for line in f.read_text().splitlines():
        if line.startswith("{"):
            r = json.loads(line)
            print(f"{r['chain']:10} {r['m']:>5} {r['policy']+'/'+r.get('order','spec'):12} {r['sequential_us']:>9.1f} {r['overlapped_us']:>9.1f} {r['speedup']:>7.3f} {str(r['bitwise_equal']):>7} {str(r['graph_ok']):>5} {r['ref_rel_err']:>9.2e} {r.get('hooks_serial_us', 0):>8.1f} {'ovl' if r.get('overlaps', True) else 'seq'} {r['sync_error']}")
PY
