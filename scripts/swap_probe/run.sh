#!/usr/bin/env bash
# Builds (unless $BIN is given) and runs the swap-AB split-K probe on a Hopper GPU.
# Usage: OUT=dir scripts/swap_probe/run.sh [MS] [CHAINS]   (CHAINS: N1:K1:N2:K2[:c],...)
# Env: REPEATS (31), AHEAD_L2 (16: weight boxes the weights-ahead gemm2 prefetches into L2), BUILD, CUTLASS_DIR,
# SANITIZE=1 (first memcheck, racecheck and synccheck at a small chain: sanitize*.txt/log under OUT).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$here/../..
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
B=${BUILD:-$root/build/swap_probe}; mkdir -p "$B"
if [ ! -x "$B/swap_probe" ]; then
  CUTLASS_DIR=${CUTLASS_DIR:-$root/third_party/cutlass}
  flags="-std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a --expt-relaxed-constexpr -DNDEBUG -DCUTLASS_ENABLE_GDC_FOR_SM90"
  inc="-I$CUTLASS_DIR/include -I$CUTLASS_DIR/tools/util/include -I$root/templates/sm90/include -I$root/templates/runtime/include"
  for nt in 16 32 64 128; do [ -f "$B/k$nt.o" ] || nvcc $flags $inc -DPROBE_NT=$nt -c "$here/kernel_tu.cu" -o "$B/k$nt.o" & done
  nvcc $flags -c "$here/main.cu" -o "$B/main.o" &
  wait
  nvcc -gencode=arch=compute_90a,code=sm_90a "$B"/*.o -lcublasLt -lcublas -o "$B/swap_probe"
fi
if [ "${SANITIZE:-0}" = 1 ]; then
  # The kernels under compute-sanitizer at a small chain (every tool; only the 16-token configurations): the
  # weights-ahead kernel's two producer warps on one barrier per stage, its L2 prefetch, its early trigger.
  for tool in memcheck racecheck synccheck; do
    compute-sanitizer --tool $tool --error-exitcode 9 "$B/swap_probe" --m 1,3 --chains 1024:2048:1024:1024 \
      --repeats 1 --only 128x16_ > "$OUT/sanitize-$tool.jsonl" 2> "$OUT/sanitize-$tool.log" \
      && echo "sanitize $tool: clean" || echo "sanitize $tool: FAILED (rc $?), see sanitize-$tool.log"
  done | tee "$OUT/sanitize.txt"
fi
"$B/swap_probe" --m "${1:-1,2,4,8,16,32,64,128}" --chains "${2:-6144:12288:12288:6144,5632:8192:8192:2816,28672:4096:4096:14336}" \
  --repeats "${REPEATS:-31}" --ahead-l2 "${AHEAD_L2:-16}" > "$OUT/swap_probe.jsonl"
python3 "$here/summary.py" "$OUT/swap_probe.jsonl" | tee "$OUT/swap_summary.txt"
