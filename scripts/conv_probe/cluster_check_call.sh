#!/usr/bin/env bash
# The overlap's cluster kernels (NOTES c18, c19), on the GPU machine in one call: build every project in $DIR/proj
# (default .gen-conv; generated here) unless its bench is already there (build/conv-ck/<name>/build, carried from an
# earlier call: BINS=1 leaves them in $OUT/bins.tgz to carry), check CHECKS="name:b1,b2 ..." (bench --check-only:
# every mode bitwise equal to back to back and within tolerance of the reference conv; the overlap runs the cluster
# kernels) with and without --no-clusters, MISSING="name:batch:stage ..." (a skipped post times out naming the tile),
# memcheck and racecheck on SAN="name:batch ...", then time TIMES="name:b1,b2 ..." twice in the same binary: as
# built, and with --no-clusters (the overlap on the kernels the other modes run). Leaves $OUT/ck.tgz.
set -u
O=$OUT/ck; mkdir -p "$O/logs"
D=${DIR:-.gen-conv}
B=$PWD/build/conv-ck; mkdir -p "$B"
CUT=$PWD/third_party/cutlass
GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
for d in "$D"/proj/*/; do
  n=$(basename "$d")
  [ -x "$B/$n/build/${n}_bench" ] && { echo "build $n: carried"; continue; }
  rm -rf "$B/$n"; cp -r "$d" "$B/$n"
  (cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DCUTLASS_DIR="$CUT" \
     > "$O/logs/build-$n.log" 2>&1 && cmake --build "$B/$n/build" -j 16 >> "$O/logs/build-$n.log" 2>&1
   echo "build $n rc=$? (${SECONDS}s)") &
done
wait
[ -n "${BINS:-}" ] && (cd "$PWD" && tar czf "$OUT/bins.tgz" build/conv-ck/*/build/*_bench && echo "bins: $(du -h "$OUT/bins.tgz" | cut -f1)")
bin() { echo "$B/$1/build/$1_bench"; }
for c in ${CHECKS:-}; do
  n=${c%%:*} bs=${c#*:}
  for flag in "" --no-clusters; do
    timeout 120 "$(bin $n)" --batch "$bs" --check-only $flag > "$O/check-$n${flag}.txt" 2>&1
    echo "check $n $bs $flag rc=$? $(grep -c 'bitwise yes' "$O/check-$n${flag}.txt") bitwise lines; $(tail -1 "$O/check-$n${flag}.txt")"
  done
done
for m in ${MISSING:-}; do
  IFS=: read -r n b s <<< "$m"
  timeout 60 "$(bin $n)" --batch "$b" --missing-post "$s" > "$O/missing-$n-$s.txt" 2>&1
  echo "missing $n $b $s rc=$? $(grep -m1 -i 'timeout\|timed out' "$O/missing-$n-$s.txt" | cut -c1-220)"
done
for r in ${SAN:-}; do
  n=${r%%:*} b=${r#*:}
  for tool in memcheck racecheck; do
    timeout ${SAN_TMO:-150} compute-sanitizer --tool $tool --print-limit 10 "$(bin $n)" --batch "$b" --check-only > "$O/logs/san-$n-$b-$tool.log" 2>&1
    echo "$tool $n $b rc=$? $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' "$O/logs/san-$n-$b-$tool.log" | tr '\n' ' ') (${SECONDS}s)"
  done
done
for t in ${TIMES:-}; do
  n=${t%%:*} bs=${t#*:}
  for flag in "" --no-clusters; do
    [ $SECONDS -lt 540 ] || { echo "skip $n $flag (time)"; continue; }
    timeout 90 "$(bin $n)" --batch "$bs" --repeats 100 --preheat 0.5 $flag > "$O/bench-$n${flag}.txt" 2>&1
    echo "bench $n $flag rc=$? (${SECONDS}s)"
    grep "^batch .*back-to-back [0-9]" "$O/bench-$n${flag}.txt" | sed 's/, two streams.*back to back + PDL/, PDL/; s/, overlap in block order.*run()/, run()/; s/: autotune on this GPU.*//'
  done
done
cd "$OUT" && tar czf ck.tgz ck && rm -rf ck
