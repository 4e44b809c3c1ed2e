#!/usr/bin/env bash
# One device call for the decode results file (issue 27's H200 table) and NOTES d37, on binaries built where the
# repo is and carried in build/carry/: the project benches (<project>_bench), slab_product (d37's slabs of one
# hidden column), slab_product_base (the kernel before d37) and slab_race. Steps (STEPS, comma-separated):
#   probe    d37's A/B: slab_product_base and slab_product alternately (PROBE_ROUNDS rounds), both weights column-major
#            (the shipped decode example's layout), each beside the cuBLASLt chain and a streaming read of the
#            same bytes (the read bandwidth of the results file);
#   check    per project: every mode at CHECK_MS (overlap forced, policies spec and tile, against the fp32
#            reference and the back-to-back run, mode stream bitwise run to run), then a missing post at M = 1, 3;
#   bench    per project: every mode, cuBLAS and cuBLASLt in one binary at MS (or SHORT_MS for SHORT projects),
#            CUDA graphs, round robin, each M preheated PREHEAT_MS first;
#   ab       AB_PROJECTS' benches alternately (ROUNDS rounds) at AB_MS, every mode, each M preheated (an A/B of two
#            builds of one chain, e.g. d37's gated chain against the kernel before it: ab-<project>-r<round>.jsonl);
#   san      racecheck, memcheck and synccheck of slab_race (every gate kind, both layouts of each weight);
#   torch    PyTorch eager and torch.compile max-autotune (scripts/torch_peers.py) on TORCH projects at TORCH_MS,
#            compile at COMPILE_MS, 2 s preheat per M;
# each only while DEADLINE (s) leaves time; everything ends in one tarball, table.tgz.
set -u
cd "$(dirname "$0")/../.."
OUT=${OUT:-$PWD/gpu-out}; mkdir -p "$OUT"
C=${CARRY:-build/carry}
D=${DEADLINE:-560}
STEPS=${STEPS:-probe,check,bench}
# H200_STEPS: steps added where the GPU is an H200 (the results file's machine), e.g. after an A/B on any Hopper.
if [ -n "${H200_STEPS:-}" ] && nvidia-smi --query-gpu=name --format=csv,noheader | grep -q H200; then STEPS=$STEPS,$H200_STEPS; fi
PROJECTS=${PROJECTS:-"gpt3_mlp_decode_sm90 llama_mlp_fused_sm90 llama_mlp_sm90 gpt3_mlp_sm90 llama_fused_cc_sm90 gpt3_colrow_sm90"}
SHORT=${SHORT:-"llama_fused_cc_sm90 gpt3_colrow_sm90"}
MS=${MS:-1,2,4,8,16,32,64,128,256,1024,4096}
SHORT_MS=${SHORT_MS:-1,2,3,4}
LT=$(find /usr/local/cuda*/ /usr/lib /opt /usr/local/lib -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,clocks.mem --format=csv | tee "$OUT/gpu.txt"
has() { case ",$STEPS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }
left() { echo $(( D - SECONDS )); }
log() { echo "$*" | tee -a "$OUT/log.txt"; }
cap() { local want=$1 l; l=$(( $(left) - 15 )); [ "$l" -lt "$want" ] && want=$l; echo $(( want > 1 ? want : 1 )); }

if has probe; then
  for r in $(seq 1 "${PROBE_ROUNDS:-2}"); do
    for v in base unit1; do
      b=$C/slab_product_base; [ $v = unit1 ] && b=$C/slab_product
      [ "$(left)" -gt 60 ] || break 2
      SLAB_ROWS=0 SLAB_W2COL=1 timeout "$(cap 90)" "$b" "${REPS:-100}" > "$OUT/probe-$v-r$r.txt" 2>&1
      log "probe $v round $r exit $? at ${SECONDS}s"; grep -E "^RESULT|FAIL|refused|rror" "$OUT/probe-$v-r$r.txt" | head -8
    done
  done
fi
if has ab; then
  for r in $(seq 1 "${ROUNDS:-2}"); do
    for p in ${AB_PROJECTS:-}; do
      [ "$(left)" -gt 40 ] || break 2
      timeout "$(cap 60)" "$C/${p}_bench" --m "${AB_MS:-1,2}" --policies spec --repeats "${REPEATS:-30}" --warmup 5 \
        --preheat-ms "${PREHEAT_MS:-2000}" > "$OUT/ab-$p-r$r.jsonl" 2> "$OUT/ab-$p-r$r.err"; log "ab $p round $r exit $? at ${SECONDS}s"
    done
  done
fi
if has check; then
  for p in $PROJECTS; do
    b=$C/${p}_bench; [ -x "$b" ] || { log "no $b"; continue; }
    [ "$(left)" -gt 40 ] || break
    ms=${CHECK_MS:-1,2,3,4,17,100,127}
    timeout "$(cap 120)" "$b" --m "$ms" --policies spec,tile --repeats 3 --warmup 1 --no-fallback \
      > "$OUT/check-$p.jsonl" 2> "$OUT/check-$p.err"; log "check $p exit $? at ${SECONDS}s"; head -c 800 "$OUT/check-$p.err"
    timeout "$(cap 40)" "$b" --m 1,3 --policies spec --repeats 1 --warmup 1 --timeout-ms 200 --inject-missing-posts 0 \
      --no-fallback > "$OUT/missing-$p.jsonl" 2> "$OUT/missing-$p.err"; log "missing post $p exit $?"; head -c 400 "$OUT/missing-$p.err"
  done
fi
if has bench; then
  for p in $PROJECTS; do
    b=$C/${p}_bench; [ -x "$b" ] || continue
    [ "$(left)" -gt 40 ] || break
    ms=$MS; case " $SHORT " in *" $p "*) ms=$SHORT_MS ;; esac
    timeout "$(cap 240)" "$b" --m "$ms" --policies spec --repeats "${REPEATS:-30}" --warmup 5 --preheat-ms "${PREHEAT_MS:-2000}" \
      > "$OUT/bench-$p.jsonl" 2> "$OUT/bench-$p.err"; log "bench $p exit $? at ${SECONDS}s"; head -c 800 "$OUT/bench-$p.err"
  done
fi
if has san && [ -x "$C/slab_race" ]; then
  for tool in racecheck memcheck synccheck; do
    [ "$(left)" -gt 40 ] || break
    timeout "$(cap 120)" compute-sanitizer --tool $tool --print-limit 10 --error-exitcode 9 "$C/slab_race" > "$OUT/$tool.log" 2>&1
    log "$tool exit $?: $(grep -h 'SUMMARY' "$OUT/$tool.log" | tr '\n' ' ') $(grep -h 'race driver' "$OUT/$tool.log") at ${SECONDS}s"
  done
fi
if has torch && python3 -c "import torch" 2>/dev/null && [ "$(left)" -gt 60 ]; then
  timeout "$(cap 500)" python3 scripts/torch_peers.py ${TORCH:-generated/gpt3_mlp_decode_sm90} --m "${TORCH_MS:-1,2,4,8,16,32,64,128}" \
    --compile "${COMPILE_MS:-1,2}" > "$OUT/torch.jsonl" 2> "$OUT/torch.err"
  log "torch peers exit $? at ${SECONDS}s"; tail -3 "$OUT/torch.err"
fi
cd "$OUT" && tar czf ../table.tgz . && rm -rf ./* && mv ../table.tgz . && ls -la
