#!/usr/bin/env bash
# One device call for the overlap's per-tile costs, with prebuilt benches: checks (lean hooks, the first hooks,
# the plain kernels, two streams, missing posts, memcheck), the table (ours with autotune, then cuDNN and
# torch.compile through PyTorch), each stage alone with the hooks taken out part by part (--profile-hooks), and
# ncu of one batch-8 point of two chains. From the repository root:
#   BIN=dir-of-<name>_bench SRC=dir-of-generated-projects bash scripts/conv_gpu_profile.sh
# If a bench does not start (built elsewhere), it is tried with LIB (a CUDA runtime) on LD_LIBRARY_PATH, then every
# project is rebuilt from SRC (CUTLASS_DIR, JOBS).
# Env: BATCHES (1,8,32), REPEATS (100), PREHEAT (0.5), DEADLINE_S (400): later steps are skipped past it;
# SCRIPTS (scripts): the folder of conv_results.py, conv_profile.py and conv_torch.py.
set -u
OUT=${OUT:-$PWD/gpu-out}
mkdir -p "$OUT"
BIN=${BIN:?BIN: the folder of the prebuilt benches}
SRC=${SRC:-}
BATCHES=${BATCHES:-1,8,32}
REPEATS=${REPEATS:-100}
PREHEAT=${PREHEAT:-0.5}
DEADLINE_S=${DEADLINE_S:-400}
SCRIPTS=${SCRIPTS:-scripts}
CHAINS="resnet_block vgg_block bottleneck_block"
LOG="$OUT/log.txt"
say() { echo "== $* ($(date +%T), ${SECONDS}s)" | tee -a "$LOG"; }
left() { echo $(( DEADLINE_S - SECONDS )); }
nvidia-smi -L >> "$LOG" 2>&1
nvidia-smi --query-gpu=clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv >> "$LOG" 2>&1

if ! "$BIN/conv_mix_bench" --batch 1 --check-only > "$OUT/probe.txt" 2>&1 && [ -d "${LIB:-/nonexistent}" ]; then
  export LD_LIBRARY_PATH="$LIB${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # the CUDA runtime the benches were linked with
  say "retrying with LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  "$BIN/conv_mix_bench" --batch 1 --check-only > "$OUT/probe.txt" 2>&1 || unset LD_LIBRARY_PATH
fi
if ! "$BIN/conv_mix_bench" --batch 1 --check-only > "$OUT/probe.txt" 2>&1; then
  say "prebuilt benches do not run ($(tail -2 "$OUT/probe.txt" | tr '\n' ' ')): rebuilding from $SRC"
  NEW=/tmp/conv-build; mkdir -p "$NEW"
  GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
  for d in "$SRC"/*/; do
    n=$(basename "$d")
    (cmake -S "$d" -B "$NEW/$n" $GEN -DCMAKE_CUDA_ARCHITECTURES=90a -DCUTLASS_DIR="${CUTLASS_DIR:-$PWD/third_party/cutlass}" \
       > "$OUT/build-$n.log" 2>&1 && cmake --build "$NEW/$n" -j "${JOBS:-16}" >> "$OUT/build-$n.log" 2>&1; echo "build $n rc=$?" >> "$LOG") &
  done
  wait
  mkdir -p /tmp/conv-bin; cp "$NEW"/*/*_bench /tmp/conv-bin/ 2>/dev/null; BIN=/tmp/conv-bin
  say "rebuilt"
fi

run() {  # run NAME TIMEOUT ARGS...
  local n=$1 t=$2; shift 2
  say "$n $*"
  timeout "$t" "$BIN/${n}_bench" "$@" >> "$LOG" 2>&1
  echo "rc=$?" | tee -a "$LOG"
}

say "checks"
run conv_mix 60 --batch 1,3 --check-only
run conv_mix 60 --batch 1,3 --check-only --hooks 0
run conv_mix 60 --batch 1,3 --check-only --hooks 7
run conv_mix 60 --batch 1,3 --check-only --plain-kernels
run conv_mix 60 --batch 1,3 --check-only --two-streams
run conv_mix 60 --batch 1,3 --check-only --two-streams --always-wait
run conv_mix 60 --batch 1,3 --check-only --two-streams --hooks 0
run conv_mix_bf16 60 --batch 1,3 --check-only
run conv_mix_bf16 60 --batch 3 --check-only --two-streams
for chain in $CHAINS; do run "$chain" 120 --batch 1,3,32 --check-only; done
run bottleneck_block 120 --batch 3,32 --check-only --hooks 0 --plain-kernels
run bottleneck_block 120 --batch 3 --check-only --two-streams
run resnet_block 60 --batch 1 --missing-post conv1
run bottleneck_block 60 --batch 3 --missing-post conv2
run conv_mix 60 --batch 3 --missing-post s2
run conv_mix 60 --batch 3 --missing-post s2 --two-streams
if command -v compute-sanitizer > /dev/null; then
  say "memcheck conv_mix (batch 3) and bottleneck_block (batch 1), lean hooks, bounded kernels"
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/conv_mix_bench" --batch 3 --check-only > "$OUT/sanitizer.log" 2>&1
  echo "rc=$?" | tee -a "$LOG"; tail -2 "$OUT/sanitizer.log" >> "$LOG"
  timeout 90 compute-sanitizer --tool memcheck --error-exitcode 9 "$BIN/bottleneck_block_bench" --batch 1 --check-only >> "$OUT/sanitizer.log" 2>&1
  echo "rc=$?" | tee -a "$LOG"; tail -2 "$OUT/sanitizer.log" >> "$LOG"
fi

for chain in $CHAINS; do
  say "bench $chain"
  timeout 150 "$BIN/${chain}_bench" --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" > "$OUT/bench-$chain.txt" 2>&1
  echo "rc=$?" | tee -a "$LOG"; grep "^batch\|^kernels" "$OUT/bench-$chain.txt" >> "$LOG"
done
for chain in $CHAINS; do
  say "profile $chain"
  timeout 60 "$BIN/${chain}_bench" --batch "$BATCHES" --repeats 50 --warmup 20 --profile-hooks > "$OUT/profile-$chain.txt" 2>&1
  echo "rc=$?" | tee -a "$LOG"
done
python3 "$SCRIPTS"/conv_profile.py "$OUT" > "$OUT/profile.md" 2>&1
python3 "$SCRIPTS"/conv_results.py "$OUT" > "$OUT/results.md" 2>&1

if [ "$(left)" -gt 60 ]; then
  say "torch"
  timeout $(( $(left) - 40 )) python3 "$SCRIPTS"/conv_torch.py --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" \
    --chains "${CHAINS// /,}" > "$OUT/torch.jsonl" 2>> "$LOG"
  echo "rc=$?" | tee -a "$LOG"
  python3 "$SCRIPTS"/conv_results.py "$OUT" > "$OUT/results.md" 2>&1
fi
if command -v ncu > /dev/null; then
  for spec in "resnet_block 4" "bottleneck_block 6"; do
    set -- $spec
    [ "$(left)" -gt 25 ] || break
    say "ncu $1 batch 8 (back to back, then the overlap: ${2} kernels)"
    timeout $(( $(left) - 10 < 60 ? $(left) - 10 : 60 )) ncu --clock-control none --section SpeedOfLight --section Occupancy \
      --section WarpStateStats --section LaunchStats -k regex:tile_synced -c "$2" "$BIN/${1}_bench" --batch 8 --check-only \
      > "$OUT/ncu-$1.txt" 2>&1
    echo "rc=$?" | tee -a "$LOG"
  done
fi
if [ "$(left)" -gt 45 ]; then
  say "torch.compile"
  timeout $(( $(left) - 8 )) python3 "$SCRIPTS"/conv_torch.py --compile --batch "$BATCHES" --repeats "$REPEATS" --preheat "$PREHEAT" \
    --chains "${CHAINS// /,}" > "$OUT/compile.jsonl" 2>> "$OUT/compile.err"
  echo "rc=$?" | tee -a "$LOG"
  python3 "$SCRIPTS"/conv_results.py "$OUT" > "$OUT/results.md" 2>&1
fi
say "done"
cd "$OUT" && tar czf all.tgz --exclude all.tgz --exclude results.md --exclude profile.md --exclude log.txt * 2>/dev/null
find . -maxdepth 1 -type f ! -name all.tgz ! -name results.md ! -name profile.md ! -name log.txt -delete
cat profile.md results.md
