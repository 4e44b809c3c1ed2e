#!/usr/bin/env bash
# The tile trace's five words and the benches' shared line writer (NOTES c18) on the GPU machine, in one call:
# build the golden projects of PROJECTS (sm80 ones for their own target, sm90 ones for sm_90a), then run each
# bench's checks with --trace (GEMM chains: --m 256 --repeats 3; conv chains: --batch 1,8 --check-only).
# Leaves $OUT/tv.tgz (the traces and the benches' output).
set -u
O=$OUT/tv; mkdir -p "$O/logs"
B=$PWD/build/trace-verify; mkdir -p "$B"
CUT=$PWD/third_party/cutlass
GEN=""; command -v ninja > /dev/null && GEN="-G Ninja"
for n in ${PROJECTS:-gpt3_mlp gpt3_mlp_sm90 resnet_block resnet_block_sm90}; do
  rm -rf "$B/$n"; cp -r "generated/$n" "$B/$n"; rm -rf "$B/$n/build"
  arch=""; [[ $n == *sm90* ]] && arch="-DCMAKE_CUDA_ARCHITECTURES=90a"
  (cmake -S "$B/$n" -B "$B/$n/build" $GEN -DCMAKE_BUILD_TYPE=Release $arch -DCUTLASS_DIR="$CUT" > "$O/logs/build-$n.log" 2>&1 \
   && cmake --build "$B/$n/build" -j 16 >> "$O/logs/build-$n.log" 2>&1; echo "build $n rc=$? (${SECONDS}s)") &
done
wait
for n in ${PROJECTS:-gpt3_mlp gpt3_mlp_sm90 resnet_block resnet_block_sm90}; do
  args="--m 256 --repeats 3"; grep -q '"op": "conv"\|op: conv' "generated/$n/manifest.json" 2>/dev/null && args="--batch 1,8 --check-only"
  [[ $n == resnet* || $n == vgg* || $n == bottleneck* ]] && args="--batch 1,8 --check-only"
  timeout 120 "$B/$n/build/${n}_bench" $args --trace "$O/trace-$n.jsonl" > "$O/bench-$n.txt" 2>&1
  echo "run $n rc=$? lines $(wc -l < "$O/trace-$n.jsonl") ready $(grep -c ready_us "$O/trace-$n.jsonl") :: $(tail -1 "$O/bench-$n.txt" | cut -c1-200)"
done
cd "$OUT" && tar czf tv.tgz tv && rm -rf tv
