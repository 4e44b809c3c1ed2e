#!/usr/bin/env bash
# One device call that answers the open questions of issue 10 on a Hopper GPU (the H200), from the
# committed generated/ projects plus the variants in $PROBE (generated on the dev machine):
#   1. the epoch wrap (tests/runtime/epoch_wrap.cu) on two_gemm (sm80 kernels) and two_gemm_sm90;
#   2. every sm90 chain's bench at MS: ours (sequential, overlapped), CUTLASS stock / +PDL / stream-K, cuBLAS;
#   3. ncu of our GEMM kernels against CUTLASS's stock ones (llama_mlp_sm90 at M = NCU_M).
# Usage: OUT=dir PROBE=dir scripts/h200_probe.sh [MS] [REPEATS]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
MS=${1:-256,512,1024,1536,2048,4096}
REPEATS=${2:-20}
NCU_M=${NCU_M:-1024}
export CUTLASS_DIR=${CUTLASS_DIR:-$PWD/third_party/cutlass}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
SM90=${SM90:-two_gemm_sm90 gpt3_mlp_sm90 llama_mlp_sm90}
declare -A SRC
for e in $SM90; do SRC[$e]=generated/$e; done
for d in ${PROBE:+$PROBE/*}; do [ -d "$d" ] && SRC[$(basename "$d")]=$d; done
SRC[two_gemm]=generated/two_gemm
start=$(date +%s)
for e in "${!SRC[@]}"; do
  arch=90a; [ "$e" = two_gemm ] && arch=90
  cmake -S "${SRC[$e]}" -B build/gpu/$e -G Ninja -DCUTLASS_DIR="$CUTLASS_DIR" -DCMAKE_CUDA_ARCHITECTURES=$arch >/dev/null
  (cmake --build build/gpu/$e -j 6 > "$OUT/build-$e.log" 2>&1 || echo "BUILD FAILED: $e") &
done
wait
echo "build: $(( $(date +%s) - start )) s"; grep -h "FAILED\|error:" "$OUT"/build-*.log | head -20
# 1. The epoch wrap.
for e in two_gemm two_gemm_sm90; do
  inc=build/gpu/$e-inc; mkdir -p $inc
  arch=90a; [ "$e" = two_gemm ] && arch=90
  python3 - "$e" "$inc" <<'PY'
import json, sys
e, inc = sys.argv[1], sys.argv[2]
m = json.load(open(f"generated/{e}/manifest.json"))
g1, g2 = m["stages"]
open(f"{inc}/chain_under_test.h", "w").write(
    f'#include "{e}.h"\n#define CHAIN_NS {e}\n#define CHAIN_CLASS {m["class_name"]}\n'
    f'#define INPUT_WIDTH {g1["k"]}\n#define GEMM1_N {g1["n"]}\n#define GEMM2_N {g2["n"]}\n')
PY
  nvcc -std=c++17 -gencode=arch=compute_$arch,code=sm_$arch -Igenerated/$e/include -I$inc tests/runtime/epoch_wrap.cu \
    build/gpu/$e/lib$e.a -o build/gpu/$e-epoch_wrap 2> "$OUT/epoch-$e.err" && timeout 120 ./build/gpu/$e-epoch_wrap | tee "$OUT/epoch-$e.json"
  echo "epoch wrap $e exit $?"
done
# 2. Benches.
for e in "${!SRC[@]}"; do
  [ "$e" = two_gemm ] && continue
  pol=spec; [ "$e" != two_gemm_sm90 ] && pol=spec,tile
  timeout 600 ./build/gpu/$e/${e}_bench --m "$MS" --policies "$pol" --repeats "$REPEATS" --warmup 5 ${BENCH_ARGS:-} \
    > "$OUT/bench-$e.jsonl" 2> "$OUT/bench-$e.err"
  echo "bench $e exit $?"; head -c 1500 "$OUT/bench-$e.err"
done
# 3. ncu: ours (sync off, static tiles) against stock, both GEMMs (the first four CUTLASS kernels the bench launches).
if command -v ncu >/dev/null && [ -x build/gpu/llama_mlp_sm90/llama_mlp_sm90_bench ]; then
  timeout 300 ncu --clock-control none -k regex:device_kernel --launch-count 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --csv --page details \
    ./build/gpu/llama_mlp_sm90/llama_mlp_sm90_bench --m "$NCU_M" --policies spec --repeats 1 --warmup 1 --no-reference \
    > "$OUT/ncu-llama.csv" 2> "$OUT/ncu-llama.err"
  echo "ncu exit $?"
fi
python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"{'chain':22} {'M':>5} {'pol':5} {'seq':>7} {'ovl':>7} {'stock':>7} {'pdl':>7} {'strK':>7} {'cublas':>7} {'sK diff':>8} ok")
for f in sorted(out.glob("bench-*.jsonl")):
    for line in f.read_text().splitlines():
        if not line.startswith("{") or '"m"' not in line:
            continue
        r = json.loads(line)
        ok = r["bitwise_equal"] and r["graph_ok"] and r["sync_error"] is None and r.get("stock_bitwise", True)
        print(f"{f.stem[6:]:22} {r['m']:>5} {r['policy']:5} {r['sequential_us']:>7.1f} {r['overlapped_us']:>7.1f} "
              f"{r.get('stock_us', 0):>7.1f} {r.get('stock_pdl_us', 0):>7.1f} {r.get('streamk_us', 0):>7.1f} "
              f"{r.get('cublas_us', 0):>7.1f} {r.get('streamk_rel_diff', 0):>8.1e} {ok}")
PY
