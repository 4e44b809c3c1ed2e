#!/usr/bin/env bash
# Tile traces of conv chains on a GPU, in one call: build the projects in $DIR/proj (generated here; DIR default
# .gen-trace), then at each point of POINTS="name:b1,b2 ..." and for each bench variant of VARIANTS
# ("tag:flag+flag ...", default "base:": the bench as it is) record RUNS (2) traces of each mode (bench
# --check-only --trace: back to back, chained with PDL, the overlap, each the last of five graph replays; checked
# first) and, unless TIME=0, time the modes (bench --repeats 100 --preheat 0.5). Draw a trace here:
# cusync-gen trace FILE.jsonl --batch B -o FILE.png. Leaves $OUT/ct.tgz.
set -u
O=$OUT/ct; mkdir -p "$O"
D=${DIR:-.gen-trace}
PROJECTS=$PWD/$D/proj OUT=$O PHASE=build JOBS=16 timeout 360 bash scripts/gpu_conv_sm90.sh > /dev/null 2>&1
grep "rc=" "$O/log.txt" | tail -20
for p in $POINTS; do
  n=${p%%:*} bs=${p#*:}
  bin=build/conv-sm90/$n/build/${n}_bench
  for v in ${VARIANTS:-base:}; do
    tag=${v%%:*} flags=${v#*:}; flags=${flags//+/ }
    for b in ${bs//,/ }; do
      for r in $(seq 1 "${RUNS:-2}"); do
        f=$O/trace-$n-b$b-$tag-r$r
        timeout 60 "$bin" --batch "$b" --check-only $flags --trace "$f.jsonl" > "$f.txt" 2>&1
        echo "trace $n $b $tag run $r rc=$? $(tail -1 "$f.txt") lines $(wc -l < "$f.jsonl" 2>/dev/null)"
      done
    done
    [ "${TIME:-1}" = 1 ] || continue
    timeout 150 "$bin" --batch "$bs" --repeats 100 --preheat 0.5 $flags > "$O/bench-$n-$tag.txt" 2>&1
    echo "bench $n $tag rc=$? (${SECONDS}s)"
    grep "^batch .*back-to-back [0-9]" "$O/bench-$n-$tag.txt" | sed 's/, overlap in block order.*//'
  done
done
cd "$OUT" && tar czf ct.tgz ct && rm -rf ct
