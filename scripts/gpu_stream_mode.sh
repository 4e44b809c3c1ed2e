#!/usr/bin/env bash
# On the GPU machine (Hopper): run() mode stream (optimizations.stream_weights) end to end in one call. Builds the
# projects scripts/stream_specs.py generated here (GEN_DIR, default .gen-stream: decode_stream_sm90 and the shipped
# MLP chains with the key), then per project:
#   check-*.jsonl  M = 1,3,17,64,65: run() takes stream at M <= 64 (within tolerance of the back-to-back run and the
#                  fp32 reference, bitwise equal run to run), another mode at 65; overlap forced, every check on;
#   bench-*.jsonl  M = 1..128: every mode timed in one binary (CUDA graphs, round robin) with cuBLAS and cuBLASLt,
#                  after autotune (which preheats and picks per M);
#   sanitizer-*    memcheck and synccheck of the stream kernel alone (decode_stream_sm90, M = 3) in the bench;
#                  racecheck through scripts/decode_probe/stream_race.cu, a driver with no cuBLAS kernel (racecheck
#                  fails inside the bench's cuBLAS peers), on decode_stream_sm90 and llama_mlp_sm90_stream (whose
#                  ring slots are reused);
# then the peers (PyTorch eager, torch.compile; 2 s preheat) on the same projects if torch is there.
# Usage: python3 scripts/stream_specs.py .gen-stream (here); on the GPU: OUT=... bash scripts/gpu_stream_mode.sh
# Four projects do not fit one 10-minute call (each builds its CUTLASS units too): split them, e.g.
#   PROJECTS="decode_stream_sm90 llama_mlp_sm90_stream" PEERS=0 bash scripts/gpu_stream_mode.sh
#   PROJECTS="gpt3_mlp_sm90_stream llama_mlp_fused_sm90_stream" SANITIZE=0 bash scripts/gpu_stream_mode.sh
# (build/stream/ is ignored by git, so a warm machine keeps what the first call built).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
GEN=${GEN_DIR:-.gen-stream}
export CUTLASS_DIR=${CUTLASS_DIR:-$PWD/third_party/cutlass}
PROJECTS=${PROJECTS:-$(ls "$GEN")}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
start=$(date +%s)
for p in $PROJECTS; do
  [ -f "$GEN/$p/CMakeLists.txt" ] || continue
  cmake -S "$GEN/$p" -B build/stream/$p -G Ninja -DCUTLASS_DIR="$CUTLASS_DIR" -DCMAKE_CUDA_ARCHITECTURES=90a >/dev/null &&
    (cmake --build build/stream/$p -j "$(( $(nproc) / 2 ))" > "$OUT/build-$p.log" 2>&1 || echo "BUILD FAILED: $p") &
done
wait
echo "build: $(( $(date +%s) - start )) s"; grep -h "FAILED\|error" "$OUT"/build-*.log | head -20
for p in $PROJECTS; do
  b=./build/stream/$p/${p}_bench; [ -x "$b" ] || continue
  timeout 300 $b --m "${CHECK_MS:-1,3,17,64,65}" --policies spec --repeats 3 --warmup 1 --no-fallback \
    > "$OUT/check-$p.jsonl" 2> "$OUT/check-$p.err"; echo "check $p exit $?"; head -c 1500 "$OUT/check-$p.err"
  timeout 420 $b --m "${MS:-1,2,4,8,16,32,64,128}" --policies spec --repeats "${REPEATS:-30}" --warmup 5 --autotune "${AUTOTUNE:-10}" \
    > "$OUT/bench-$p.jsonl" 2> "$OUT/bench-$p.err"; echo "bench $p exit $?"; head -c 1500 "$OUT/bench-$p.err"
done
if [ "${SANITIZE:-1}" = 1 ] && [ -x ./build/stream/decode_stream_sm90/decode_stream_sm90_bench ]; then
  for tool in memcheck synccheck; do
    timeout 300 compute-sanitizer --tool $tool --print-limit 20 --kernel-name kns=bulk_chain \
      --error-exitcode 9 ./build/stream/decode_stream_sm90/decode_stream_sm90_bench --m 3 --policies spec --repeats 1 \
      --warmup 1 --no-fallback > "$OUT/sanitizer-$tool.log" 2>&1
    echo "sanitizer $tool exit $?: $(tail -1 "$OUT/sanitizer-$tool.log")"
  done
  for p in decode_stream_sm90 llama_mlp_sm90_stream; do
    [ -f "build/stream/$p/lib$p.a" ] || continue
    def=""; [ "$p" = llama_mlp_sm90_stream ] && def=-DSTREAM_RACE_LLAMA
    nvcc -std=c++17 -O2 -arch=sm_90a -cudart shared $def -I"$GEN/$p/include" scripts/decode_probe/stream_race.cu \
      "build/stream/$p/lib$p.a" -lcublasLt -lcuda -o "build/stream/$p/stream_race" > "$OUT/race-build-$p.log" 2>&1 || continue
    timeout 300 compute-sanitizer --tool racecheck --print-limit 20 --kernel-name kns=bulk_chain --error-exitcode 9 \
      "build/stream/$p/stream_race" 1,9 > "$OUT/sanitizer-racecheck-$p.log" 2>&1
    echo "sanitizer racecheck $p exit $?: $(grep -h "RACECHECK SUMMARY" "$OUT/sanitizer-racecheck-$p.log")"
  done
fi
python3 scripts/stream_check_summary.py "$OUT" "stream mode"
if python3 -c "import torch" 2>/dev/null && [ "${PEERS:-1}" = 1 ]; then
  timeout 400 python3 scripts/torch_peers.py $(for p in $PROJECTS; do echo "$GEN/$p"; done) --m "${MS:-1,2,4,8,16,32,64,128}" \
    --compile "${COMPILE_MS:-1,16,64}" > "$OUT/peers.jsonl" 2> "$OUT/peers.err"; echo "peers exit $?"
fi
