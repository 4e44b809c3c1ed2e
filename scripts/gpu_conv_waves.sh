#!/usr/bin/env bash
# ResNet / VGG blocks at the batches where a producer runs 1.48 waves (scripts/conv_waves.py: the points where
# tile sync has a partial last wave to fill), each at its own batches, in one GPU call: which of them the
# overlap wins over back to back, and whether run()'s autotune (cusync/time_modes.h) ranks the modes as the
# bench's own round-robin timing does.
# Here (pydantic): python3 scripts/conv_waves.py --batches 2,4,8,32 --write /tmp/cw --no-tiles, copy the
# blocks to .gen-convwaves/specs, and `cusync-gen generate` each into .gen-convwaves/proj/<name>.
# There, with third_party/cutlass carried: POINTS="name:b1,b2 ..." bash scripts/gpu_conv_waves.sh
# (builds every project, checks each at its batches, times ours and, unless TORCH=0, cuDNN; leaves $OUT/cw.tgz).
# DIR=.gen-other takes the projects and specs from another folder; CHECKS="name:b1,b2 ..." adds points only checked.
set -u
O=$OUT/cw; mkdir -p "$O"
D=${DIR:-.gen-convwaves}  # the projects (D/proj) and their specs (D/specs)
PROJECTS=$PWD/$D/proj OUT=$O PHASE=build JOBS=16 timeout 300 bash scripts/gpu_conv_sm90.sh > /dev/null 2>&1
grep "rc=" "$O/log.txt" | tail -20
for p in ${CHECKS:-}; do  # points only checked (CHECKS="name:b1,b2 ..."), not timed
  n=${p%%:*} b=${p#*:}
  timeout 60 build/conv-sm90/$n/build/${n}_bench --batch "$b" --check-only > "$O/check-$n.txt" 2>&1
  echo "check $n $b rc=$? $(tail -1 "$O/check-$n.txt")"
done
ALL=""
for p in $POINTS; do
  n=${p%%:*} b=${p#*:}; ALL="$ALL,$b"
  bin=build/conv-sm90/$n/build/${n}_bench
  timeout 60 "$bin" --batch "$b" --check-only > "$O/check-$n.txt" 2>&1
  echo "check $n $b rc=$? $(tail -1 "$O/check-$n.txt")"
  timeout 150 "$bin" --batch "$b" --repeats 100 --preheat 0.5 > "$O/bench-$n.txt" 2>&1
  echo "bench $n rc=$? (${SECONDS}s)"
  grep RESULT "$O/bench-$n.txt" | python3 -c '
import sys, json
for l in sys.stdin:
    r = json.loads(l.split("RESULT ", 1)[1])
    best = min(r["sequential_us"], r["chained_us"])
    print(r["chain"], r["batch"], "b2b", r["sequential_us"], "pdl", r["chained_us"], "overlap", r["overlap_us"],
          "over b2b %.3f" % (best / r["overlap_us"]), "| run", r["run_us"], r["run_mode"], "rule", r["rule"].split(":")[0],
          "bitwise", r["bitwise"])'
  grep -o "autotune on this GPU[^)]*" "$O/bench-$n.txt" | sort -u
done
[ "${TORCH:-1}" = 1 ] || { cd "$OUT" && tar czf cw.tgz cw && rm -rf cw; exit 0; }
BATCHES=$(echo "$ALL" | tr ',' '\n' | sort -un | grep . | paste -sd,)
timeout $(( 580 - SECONDS )) python3 scripts/conv_torch.py --specs "$D/specs" --batch "$BATCHES" --repeats 60 \
  --preheat 0.3 > "$O/torch.jsonl" 2> "$O/torch.err"
echo "torch rc=$? (${SECONDS}s)"
cd "$OUT" && tar czf cw.tgz cw && rm -rf cw
