#!/usr/bin/env bash
# On the GPU machine: build the committed attention projects with every core, check them at small and
# ragged shapes (and the timeout path), then benchmark the prompt and generation phases against
# back-to-back and PyTorch (SDPA + matmuls, scripts/attention_torch.py, where torch is installed).
# Results go to $OUT (or ./gpu-out): check-<example>.jsonl, bench-<example>.jsonl (ours, then PyTorch's
# rows, which have "torch_us"), log.txt (everything printed on stderr), gpu.txt.
# Env: EXAMPLES (default: gpt3_attention llama_attention), REPEATS (50), ARCH (90), SANITIZE=1.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
LOG=$OUT/log.txt
EXAMPLES=${EXAMPLES:-gpt3_attention llama_attention}
REPEATS=${REPEATS:-50}
export CUTLASS_DIR=${CUTLASS_DIR:-$PWD/third_party/cutlass}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
for e in $EXAMPLES; do
  (cmake -S generated/$e -B build/gpu/$e -G Ninja -DCUTLASS_DIR="$CUTLASS_DIR" -DCMAKE_CUDA_ARCHITECTURES="${ARCH:-90}" >/dev/null &&
   cmake --build build/gpu/$e -j "$(( $(nproc) / 2 ))" > "build/gpu/$e.log" 2>&1 || { echo "BUILD FAILED: $e"; tail -c 3000 "build/gpu/$e.log"; }) &
done
wait
echo "build: $(( $(date +%s) - start )) s"
PROMPT="--m 512,1024,2048"
GENERATION="--m 1 --batch 1,2,4 --cache 511,1023,2047"
for e in $EXAMPLES; do
  b=./build/gpu/$e/${e}_bench
  echo "== $e" >> "$LOG"
  {  # correctness, overlap forced on: ragged prompts with and without a cache, odd generation batches
    $b --m 8 --repeats 2 --warmup 1 --no-fallback
    $b --m 200 --cache 8 --repeats 2 --warmup 1 --no-fallback
    $b --m 1000 --cache 24 --repeats 2 --warmup 1 --no-fallback
    $b --m 1 --batch 1,3,4 --cache 7,263 --repeats 2 --warmup 1 --no-fallback
  } > "$OUT/check-$e.jsonl" 2>> "$LOG"
  echo "check $e exit $?"
  # the timeout path: scores stops posting, so softmax's waits must time out and name the tile
  $b --m 256 --repeats 1 --warmup 1 --timeout-ms 200 --inject-missing-posts 1 --no-fallback >> "$OUT/check-$e.jsonl" 2>> "$LOG"
  echo "timeout $e exit $? (want 4): $(tail -n 1 "$LOG")"
  # the benchmark: overlap forced on (what tile sync does at every shape; BENCH_ARGS= for run() as is)
  $b $PROMPT --repeats "$REPEATS" --warmup 5 ${BENCH_ARGS---no-fallback} > "$OUT/bench-$e.jsonl" 2>> "$LOG"
  echo "bench prompt $e exit $?"
  $b $GENERATION --repeats "$REPEATS" --warmup 5 ${BENCH_ARGS---no-fallback} >> "$OUT/bench-$e.jsonl" 2>> "$LOG"
  echo "bench generation $e exit $?"
  if python3 -c "import torch" 2>/dev/null; then
    python3 scripts/attention_torch.py --chain $e $PROMPT --repeats "$REPEATS" >> "$OUT/bench-$e.jsonl" 2>> "$LOG"
    python3 scripts/attention_torch.py --chain $e $GENERATION --repeats "$REPEATS" >> "$OUT/bench-$e.jsonl" 2>> "$LOG"
    echo "torch $e exit $?"
  fi
  if [ "${SANITIZE:-0}" = 1 ] && command -v compute-sanitizer >/dev/null; then
    for args in "--m 136 --cache 8" "--m 1 --batch 3 --cache 263"; do
      timeout 300 compute-sanitizer --tool memcheck $b $args --repeats 1 --warmup 1 > "$OUT/memcheck.tmp" 2>&1
      echo "memcheck $e $args exit $?: $(grep -h "ERROR SUMMARY" "$OUT/memcheck.tmp")" | tee -a "$LOG"
    done
    rm -f "$OUT/memcheck.tmp"
  fi
done
