#!/usr/bin/env bash
# Device calls for issue 10 on a Hopper GPU (the H200): what limits our sm90 chains, measured in one run.
#   PHASE=build: build two_gemm (sm80 kernels), two_gemm_sm90, gpt3_mlp_sm90, llama_mlp_sm90 side by side,
#                then the epoch wrap (tests/runtime/epoch_wrap.cu) and the API smoke test (C ABI, moves:
#                tests/runtime/api_smoke.cu) on both two_gemm chains;
#   PHASE=bench: every sm90 MLP chain's bench at MS with orders ORDERS: ours (sequential and overlapped,
#                each in every order), CUTLASS stock / +PDL / stream-K, cuBLAS, all interleaved;
#   PHASE=altblas: the same benches at ALT_MS with PyTorch's own cuBLAS (its wheel's libcublas/libcublasLt
#                first on LD_LIBRARY_PATH) instead of the toolkit's: is a peer faster by its cuBLAS version?
#   PHASE=check: every sm90 bench at M = 1, 200, 1000, 3000 (every mode checked against our back-to-back run);
#   PHASE=ncu:   ncu of our GEMM kernels (synchronization off, static tiles) against CUTLASS's stock ones
#                (llama_mlp_sm90 at M = NCU_M: the first four CUTLASS kernels the bench launches);
#   PHASE=torch: scripts/torch_peers.py (PyTorch eager and torch.compile max-autotune) on the same chains;
#   PHASE=sanitize: compute-sanitizer memcheck and racecheck of every kernel kind (ours overlapped, CUTLASS's
#                stock, stream-K and 2x1-cluster kernels) on two_gemm_sm90 at M = 200;
#   PHASE=pytest: `pytest -m gpu` (GPU_TESTS selects with -k; the GPU machine has no pydantic: .whl carried).
# Usage: OUT=dir PHASE=build,bench scripts/h200_probe.sh [MS] [REPEATS]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
MS=${1:-256,512,1024,1536,2048,3072,4096,8192}
REPEATS=${2:-10}
PHASE=${PHASE:-build,bench}
CHAINS=${CHAINS:-gpt3_mlp_sm90 llama_mlp_sm90}
export CUTLASS_DIR=${CUTLASS_DIR:-$PWD/third_party/cutlass}
has() { [[ ",$PHASE," == *",$1,"* ]]; }
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader | tee -a "$OUT/gpu.txt"
if has build; then
  start=$(date +%s)
  for e in two_gemm two_gemm_sm90 $CHAINS; do
    arch=90a; [ "$e" = two_gemm ] && arch=90
    cmake -S generated/$e -B build/gpu/$e -G Ninja -DCUTLASS_DIR="$CUTLASS_DIR" -DCMAKE_CUDA_ARCHITECTURES=$arch >/dev/null
    (cmake --build build/gpu/$e -j 16 > "$OUT/build-$e.log" 2>&1 || echo "BUILD FAILED: $e") &
  done
  wait
  echo "build: $(( $(date +%s) - start )) s"; grep -h "FAILED\|error:" "$OUT"/build-*.log | head -20
  for e in two_gemm two_gemm_sm90; do
    inc=build/gpu/$e-inc; mkdir -p $inc
    arch=90a; [ "$e" = two_gemm ] && arch=90
    python3 - "$e" "$inc" <<'PY'
import json, sys
e, inc = sys.argv[1], sys.argv[2]
m = json.load(open(f"generated/{e}/manifest.json"))
g1, g2 = m["stages"]
open(f"{inc}/chain_under_test.h", "w").write(
    f'#include "{e}_testing.h"\n#include "{e}_c.h"\n#define CHAIN_NS {e}\n#define CHAIN_CLASS {m["class_name"]}\n'
    f'#define INPUT_WIDTH {g1["k"]}\n#define GEMM1_N {g1["n"]}\n#define GEMM2_N {g2["n"]}\n#define C_FN(x) {e}_##x\n'
    + ('#define CHAIN_SM90 1\n' if m["arch"] == "sm90" else ''))
PY
    # a hand-written link needs what CMake adds for its own targets: cuBLASLt where the sm90 library has it
    lt=$(grep -q CUSYNC_HAVE_CUBLASLT build/gpu/$e/build.ninja 2>/dev/null && echo -lcublasLt)
    nvcc -std=c++17 -gencode=arch=compute_$arch,code=sm_$arch -Igenerated/$e/include -I$inc tests/runtime/epoch_wrap.cu \
      build/gpu/$e/lib$e.a $lt -o build/gpu/$e-epoch_wrap 2> "$OUT/epoch-$e.err" && timeout 120 ./build/gpu/$e-epoch_wrap | tee "$OUT/epoch-$e.json"
    echo "epoch wrap $e exit $?"
    # The public API: C ABI and the move-only class (tests/runtime/api_smoke.cu).
    nvcc -std=c++17 -gencode=arch=compute_$arch,code=sm_$arch -Igenerated/$e/include -I$inc tests/runtime/api_smoke.cu \
      build/gpu/$e/lib$e.a $lt -o build/gpu/$e-api_smoke 2> "$OUT/api-$e.err" && timeout 120 ./build/gpu/$e-api_smoke | tee "$OUT/api-$e.json"
    echo "api smoke $e exit $?"
  done
fi
if has bench; then
  for e in $CHAINS; do
    timeout 500 ./build/gpu/$e/${e}_bench --m "$MS" --policies spec --orders "${ORDERS:-spec,column_major}" --repeats "$REPEATS" \
      --warmup 3 ${BENCH_ARGS:-} > "$OUT/bench-$e.jsonl" 2> "$OUT/bench-$e.err"
    echo "bench $e exit $?"; head -c 1500 "$OUT/bench-$e.err"
  done
  python3 - "$OUT" <<'PY'
import json, pathlib, sys
out = pathlib.Path(sys.argv[1])
print(f"{'chain':15} {'M':>5} {'order':12} {'seq':>7} {'ovl':>7} {'stock':>7} {'pdl':>7} {'strK':>7} {'cublas':>7} {'sK diff':>8} ok")
for f in sorted(out.glob("bench-*.jsonl")):
    for line in f.read_text().splitlines():
        if not line.startswith("{") or '"m"' not in line:
            continue
        r = json.loads(line)
        ok = r["bitwise_equal"] and r["graph_ok"] and r["sync_error"] is None and r.get("stock_bitwise", True)
        print(f"{r['chain'][:15]:15} {r['m']:>5} {r['order']:12} {r['sequential_us']:>7.1f} {r['overlapped_us']:>7.1f} "
              f"{r.get('stock_us', 0):>7.1f} {r.get('stock_pdl_us', 0):>7.1f} {r.get('streamk_us', 0):>7.1f} "
              f"{r.get('cublas_us', 0):>7.1f} {r.get('streamk_rel_diff', 0):>8.1e} {ok}")
PY
fi
if has altblas; then
  site=$(python3 -c 'import site; print(site.getsitepackages()[0])')
  lib=$(dirname "$(find "$site/nvidia" -name 'libcublasLt.so*' 2>/dev/null | head -1)")
  echo "PyTorch's cuBLAS: $lib: $(ls "$lib" | grep -i cublas | tr '\n' ' ')"
  echo "toolkit cuBLAS: $(ls /usr/local/cuda/lib64/ 2>/dev/null | grep -i 'cublasLt.so' | tr '\n' ' ')"
  for e in $CHAINS; do
    LD_LIBRARY_PATH="$lib:${LD_LIBRARY_PATH:-}" timeout 200 ./build/gpu/$e/${e}_bench --m "${ALT_MS:-2048,4096}" --policies spec \
      --repeats "$REPEATS" --warmup 3 > "$OUT/altblas-$e.jsonl" 2> "$OUT/altblas-$e.err"
    echo "altblas $e exit $?"
  done
fi
if has check; then
  for e in two_gemm_sm90 $CHAINS; do
    timeout 200 ./build/gpu/$e/${e}_bench --m 1,200,1000,3000 --policies spec,tile --repeats 2 --warmup 1 > "$OUT/check-$e.jsonl" 2>&1
    echo "check $e exit $?: $(grep -c '"m"' "$OUT/check-$e.jsonl") rows, modes: $(grep -o '"mode": "[a-z]*"' "$OUT/check-$e.jsonl" | sort | uniq -c | tr '\n' ' ')"
  done
fi
if has ncu; then
  timeout 300 ncu --clock-control none -k regex:device_kernel --launch-count 4 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats --section SchedulerStats \
    --section Occupancy --section LaunchStats --csv --page details \
    ./build/gpu/llama_mlp_sm90/llama_mlp_sm90_bench --m "${NCU_M:-1024}" --policies spec --repeats 1 --warmup 1 --no-reference \
    > "$OUT/ncu-llama.csv" 2> "$OUT/ncu-llama.err"
  echo "ncu exit $?"
  python3 - "$OUT/ncu-llama.csv" <<'PY'
import csv, sys
rows = list(csv.DictReader(l for l in open(sys.argv[1]) if l.startswith('"')))
want = ("Duration", "Compute (SM) Throughput", "Memory Throughput", "L2 Hit Rate", "DRAM Throughput", "L1/TEX Hit Rate",
        "Registers Per Thread", "Issued Warp Per Scheduler", "No Eligible", "Warp Cycles Per Issued Instruction",
        "Theoretical Occupancy", "Dynamic Shared Memory Per Block", "Grid Size", "Mem Busy", "Max Bandwidth")
seen = {}
for r in rows:
    key = (r["ID"], r["Kernel Name"][:60].replace("cutlass::device_kernel<cutlass::gemm::kernel::GemmUniversal<", ""))
    if any(w == r["Metric Name"] for w in want):
        seen.setdefault(key, {})[r["Metric Name"]] = r["Metric Value"] + " " + r["Metric Unit"]
for (i, name), metrics in seen.items():
    print(i, name)
    for k in want:
        if k in metrics: print(f"   {k}: {metrics[k]}")
PY
fi
if has sanitize; then
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --print-limit 20 ./build/gpu/two_gemm_sm90/two_gemm_sm90_bench --m 200 \
      --policies spec --repeats 1 --warmup 1 --no-reference > "$OUT/sanitizer-$tool.log" 2>&1
    echo "sanitizer $tool exit $?: $(grep -h "ERROR SUMMARY\|RACECHECK SUMMARY" "$OUT/sanitizer-$tool.log" | tail -2 | tr '\n' ' ')"
  done
fi
if has pytest; then
  if [ -d .whl ]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
      && export PYTHONPATH=/tmp/site:$PWD
  fi
  CUSYNC_GPU_EXAMPLES=${GPU_EXAMPLES:-} timeout ${PYTEST_TIMEOUT:-560} python3 -m pytest -q -m gpu -p no:cacheprovider \
    ${GPU_TESTS:+-k "$GPU_TESTS"} 2>&1 | tee "$OUT/pytest-gpu.log" | tail -25
fi
if has torch; then
  export TORCHINDUCTOR_CACHE_DIR=${TORCHINDUCTOR_CACHE_DIR:-$PWD/build/inductor-cache}
  [ -f "${INDUCTOR_TAR:-}" ] && mkdir -p "$TORCHINDUCTOR_CACHE_DIR" && tar xzf "$INDUCTOR_TAR" -C "$TORCHINDUCTOR_CACHE_DIR"
  timeout ${TORCH_TIMEOUT:-500} python3 scripts/torch_peers.py $(for e in $CHAINS; do echo generated/$e; done) --m "$MS" \
    --compile "${COMPILE_MS:-256,1024,4096}" --repeats 30 ${TORCH_ARGS:-} | tee "$OUT/torch.jsonl"
  echo "torch exit $?"
  tar czf "$OUT/inductor-cache.tgz" -C "$TORCHINDUCTOR_CACHE_DIR" . 2>/dev/null; ls -la "$OUT/inductor-cache.tgz"
fi
