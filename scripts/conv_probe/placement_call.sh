#!/usr/bin/env bash
# Does where a conv tile runs (which SM, next to which tiles) set its speed? (benchmarks/NOTES.md c18)
# On the GPU machine, in one call: build the projects in $DIR/proj (generated here) and, for each project named
# in SCRAMBLE, a copy whose one-tile kernels take their tiles in a scrambled order (linear * 37 mod tiles: a
# block's neighbours in launch order no longer share its pixel row), plus scripts/pdl_probe; then traces (with the
# tiles' ready times) and timings of POINTS="name:b1,b2 ...", the scrambled copies at the first batch of their
# point, ncu's L2 counters of the first NCU_LAUNCHES conv kernels of one checked run of base and scrambled, and the
# probe. Leaves $OUT/pc.tgz.
set -u
O=$OUT/pc; mkdir -p "$O/logs"
D=${DIR:-.gen-trace}
B=$PWD/build/conv-probe; mkdir -p "$B"
CUT=$PWD/third_party/cutlass
GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
for s in ${SCRAMBLE:-}; do
  rm -rf "$D/proj/${s}_scr"; cp -r "$D/proj/$s" "$D/proj/${s}_scr"
  sed -i 's|  uint32_t const linear = blockIdx.x + gridDim.x \* blockIdx.y;|  uint32_t const linear = (blockIdx.x + gridDim.x * blockIdx.y) * 37u % (gridDim.x * gridDim.y);|' \
    "$D/proj/${s}_scr/include/cusync/conv/conv_sm90.cuh"
  grep -c "37u %" "$D/proj/${s}_scr/include/cusync/conv/conv_sm90.cuh"
done
(nvcc -O3 -arch=sm_90a -o "$B/pdl_probe" scripts/pdl_probe/pdl_probe.cu -lcuda > "$O/logs/probe-build.log" 2>&1; echo "probe build rc=$?") &
for d in "$D"/proj/*/; do
  n=$(basename "$d"); rm -rf "$B/$n"; cp -r "$d" "$B/$n"
  (cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90a -DCUTLASS_DIR="$CUT" \
     > "$O/logs/build-$n.log" 2>&1 && cmake --build "$B/$n/build" -j 16 >> "$O/logs/build-$n.log" 2>&1; echo "build $n rc=$? (${SECONDS}s)") &
done
wait
bin() { ls "$B/$1"/build/*_bench | head -1; }
for p in $POINTS; do
  n=${p%%:*} bs=${p#*:}
  for b in ${bs//,/ }; do
    for r in 1 2; do
      f=$O/trace-$n-b$b-r$r
      timeout 60 "$(bin $n)" --batch "$b" --check-only --trace "$f.jsonl" > "$f.txt" 2>&1
      echo "trace $n $b run $r rc=$? $(tail -1 "$f.txt")"
    done
  done
  timeout 150 "$(bin $n)" --batch "$bs" --repeats 100 --preheat 0.5 > "$O/bench-$n.txt" 2>&1
  echo "bench $n rc=$? (${SECONDS}s)"; grep "^batch .*back-to-back [0-9]" "$O/bench-$n.txt" | sed 's/, overlap in block order.*//'
done
for s in ${SCRAMBLE:-}; do
  b=$(for p in $POINTS; do [ "${p%%:*}" = "$s" ] && echo "${p#*:}"; done | cut -d, -f1)
  f=$O/trace-${s}_scr-b$b
  timeout 60 "$(bin ${s}_scr)" --batch "$b" --check-only --trace "$f.jsonl" > "$f.txt" 2>&1
  echo "trace ${s}_scr $b rc=$? $(tail -1 "$f.txt")"
  timeout 150 "$(bin ${s}_scr)" --batch "$b" --repeats 100 --preheat 0.5 > "$O/bench-${s}_scr.txt" 2>&1
  echo "bench ${s}_scr rc=$?"; grep "^batch .*back-to-back [0-9]" "$O/bench-${s}_scr.txt" | sed 's/, overlap in block order.*//'
  timeout 60 "$(bin $s)" --batch "$b" --repeats 100 --preheat 0.5 > "$O/bench-${s}-again.txt" 2>&1
  echo "bench $s again rc=$?"; grep "^batch .*back-to-back [0-9]" "$O/bench-${s}-again.txt" | sed 's/, overlap in block order.*//'
  if command -v ncu > /dev/null; then
    for v in "$s" "${s}_scr"; do
      timeout 120 ncu -k regex:synced_conv --launch-count "${NCU_LAUNCHES:-4}" --csv --metrics \
        gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sectors_srcunit_tex.sum,sm__cycles_active.avg \
        "$(bin $v)" --batch "$b" --check-only > "$O/ncu-$v.csv" 2> "$O/ncu-$v.err"
      echo "ncu $v rc=$?"; grep -v "^==" "$O/ncu-$v.csv" | cut -d, -f1,5,13- | sed 's/"//g' | tail -n 21
    done
  fi
done
[ -x "$B/pdl_probe" ] && { timeout 120 "$B/pdl_probe" 124 20 | tee "$O/probe-124.txt"; }
cd "$OUT" && tar czf pc.tgz pc && rm -rf pc
