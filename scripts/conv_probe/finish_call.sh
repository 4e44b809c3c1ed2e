#!/usr/bin/env bash
# NOTES c20-c21 on the GPU machine in one call, with the three sm90 examples' benches carried
# (build/conv-ck/<name>/build/<name>_bench, generated and built here): a sink's finish count by the poll warp
# (kHookEarlyFinish in the persistent kernel). Checks at 1, 3, 8, 32 (every mode bitwise equal to back to back and
# within tolerance of the reference conv), a skipped post in front of a persistent sink (it must time out and name
# the tile), then the examples (TIMES) at 8 and 32 timed with the default hooks and with --hooks 109 (the same
# without kHookEarlyFinish: the count in the math warp groups), the profile at batch 8, and memcheck on
# resnet_block_sm90 at 8. Leaves $OUT/fc.tgz. A step that would start after BUDGET seconds (default 400) is skipped.
set -u
left() { [ "$SECONDS" -lt "${BUDGET:-400}" ] || { echo "skipped $1: ${SECONDS}s used"; return 1; }; }
O=$OUT/fc; mkdir -p "$O"
B=$PWD/build/conv-ck
bin() { echo "$B/$1/build/$1_bench"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
for n in resnet_block_sm90 bottleneck_block_sm90 vgg_block_sm90; do
  left "check $n" || continue
  timeout 120 "$(bin $n)" --batch 1,3,8,32 --check-only > "$O/check-$n.txt" 2>&1
  echo "check $n rc=$? $(grep -c 'bitwise yes' "$O/check-$n.txt") bitwise lines; $(tail -1 "$O/check-$n.txt")"
done
for m in resnet_block_sm90:32:conv1 bottleneck_block_sm90:8:conv2; do
  IFS=: read -r n b s <<< "$m"
  left "missing $m" || continue
  timeout 60 "$(bin $n)" --batch "$b" --missing-post "$s" > "$O/missing-$n-$s.txt" 2>&1
  echo "missing $m rc=$? $(grep -E 'missing-post check' "$O/missing-$n-$s.txt")"
done
for n in ${TIMES-resnet_block_sm90 bottleneck_block_sm90 vgg_block_sm90}; do
  for h in "" 109; do
    left "time $n $h" || continue
    timeout 150 "$(bin $n)" --batch 8,32 --repeats "${REPEATS:-60}" --preheat 0.5 ${h:+--hooks $h} > "$O/bench-$n${h:+-h$h}.txt" 2>&1
    echo "time $n ${h:-default} rc=$? (${SECONDS}s)"; grep "^batch .*back-to-back [0-9]" "$O/bench-$n${h:+-h$h}.txt" | cut -c1-200
  done
done
for p in resnet_block_sm90:8 bottleneck_block_sm90:8; do
  n=${p%%:*} b=${p#*:}
  left "profile $p" || continue
  timeout 60 "$(bin $n)" --batch "$b" --profile-hooks --repeats 40 --preheat 0.5 > "$O/profile-$n-$b.txt" 2>&1
  echo "profile $n $b rc=$?"; grep "^PROFILE" "$O/profile-$n-$b.txt" | cut -c1-420
done
if left memcheck; then
  timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 "$(bin resnet_block_sm90)" --batch 8 --check-only > "$O/memcheck.txt" 2>&1
  echo "memcheck rc=$? $(tail -1 "$O/memcheck.txt")"
fi
cd "$OUT" && tar czf fc.tgz fc && rm -rf fc
