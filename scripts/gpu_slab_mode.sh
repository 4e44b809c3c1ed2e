#!/usr/bin/env bash
# On the GPU machine (Hopper): run() mode stream's slab kernel (M <= 4, cusync/sm90/slab_chain.cuh) end to end in
# one call, on projects built where the repo was (build/slab/<project>: carry them; the specs and how they were
# generated are in benchmarks/NOTES.md d34). Per project:
#   check-*.jsonl    M = 1,2,3,4,5,17: every mode against the back-to-back run and the fp32 reference, run to run
#                    bitwise, overlap forced; mode stream is the slab kernel at M <= 4;
#   missing-*.jsonl  M = 1,3 with gemm1's last slab never posted: the run must time out and name it;
#   bench-*.jsonl    M = 1,2,3,4,8,16: every mode and cuBLAS / cuBLASLt in one binary (CUDA graphs, round robin),
#                    run() by its default rule (no autotune);
#   sanitizer-*      memcheck and synccheck of the slab kernel alone at M = 3 in the bench, racecheck through
#                    scripts/decode_probe/slab_race.cu (SANITIZE=1);
# then PyTorch eager and torch.compile on the same chains (PEERS=1; 2 s preheat; scripts/torch_peers.py).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
PROJECTS=${PROJECTS:-$(ls build/slab)}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv | tee "$OUT/gpu.txt"
for p in $PROJECTS; do
  b=./build/slab/$p/${p}_bench; [ -x "$b" ] || continue
  timeout 200 $b --m "${CHECK_MS:-1,2,3,4,5,17}" --policies spec --repeats 3 --warmup 1 --no-fallback \
    > "$OUT/check-$p.jsonl" 2> "$OUT/check-$p.err"; echo "check $p exit $? at ${SECONDS}s"; head -c 1200 "$OUT/check-$p.err"
  timeout 60 $b --m 1,3 --policies spec --repeats 1 --warmup 1 --timeout-ms 200 --inject-missing-posts 0 --no-fallback \
    > "$OUT/missing-$p.jsonl" 2> "$OUT/missing-$p.err"; echo "missing post $p exit $?"; head -c 600 "$OUT/missing-$p.err"
  timeout 300 $b --m "${MS:-1,2,3,4,8,16}" --policies spec --repeats "${REPEATS:-30}" --warmup 5 \
    > "$OUT/bench-$p.jsonl" 2> "$OUT/bench-$p.err"; echo "bench $p exit $? at ${SECONDS}s"; head -c 1200 "$OUT/bench-$p.err"
done
if [ "${SANITIZE:-1}" = 1 ]; then
  p=${SANITIZE_PROJECT:-llama_fused_cc_sm90}; b=./build/slab/$p/${p}_bench
  for tool in memcheck synccheck; do
    timeout 200 compute-sanitizer --tool $tool --print-limit 20 --kernel-name kns=slab_chain --error-exitcode 9 \
      $b --m 3 --policies spec --repeats 1 --warmup 1 --no-fallback > "$OUT/sanitizer-$tool.log" 2>&1
    echo "sanitizer $tool exit $?: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$OUT/sanitizer-$tool.log" | tr '\n' ' ') at ${SECONDS}s"
  done
  # racecheck fails inside the bench's cuBLAS peers: a driver of the slab kernel alone (compiled where the repo is:
  # the command is in its header), every gate kind and layout, M = 1 and 3, three epochs.
  if [ -x build/slab/slab_race ]; then
    timeout 250 compute-sanitizer --tool racecheck --print-limit 10 --error-exitcode 9 build/slab/slab_race \
      > "$OUT/sanitizer-racecheck.log" 2>&1
    echo "sanitizer racecheck exit $?: $(grep -h 'RACECHECK SUMMARY' "$OUT/sanitizer-racecheck.log")"
  fi
fi
if python3 -c "import torch" 2>/dev/null && [ "${PEERS:-1}" = 1 ]; then
  timeout 400 python3 scripts/torch_peers.py $(for p in $PROJECTS; do echo "${GEN_DIR:-.gen-slab}/$p"; done) \
    --m "${MS:-1,2,3,4,8,16}" --compile "${COMPILE_MS:-1,2,4}" > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
  echo "torch peers exit $? at ${SECONDS}s"; tail -3 "$OUT/torch.err"
fi
cd "$OUT" && tar czf slab-all.tgz *.jsonl *.err *.log gpu.txt 2>/dev/null; ls "$OUT" | head -5
