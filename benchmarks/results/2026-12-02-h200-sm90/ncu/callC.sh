#!/usr/bin/env bash
# Device call C (2026-12-02, NOTES h18): Nsight Compute of our synced ping-pong kernels with sync off against CUTLASS's
# ping-pong kernels (gpt3 shard, 128x128, column_banded = CUTLASS's raster along M with swizzle 4), M = 2048; then
# compute-sanitizer on the cooperative synced kernels (two_gemm_sm90, M = 200).
set -uo pipefail
cd "$(dirname "$0")"
mkdir -p $OUT/l; C=$PWD/../third_party/cutlass; t0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader; ncu --version | tail -1
for p in ppcb ../generated/two_gemm_sm90; do b=build/$(basename $p)
  (cmake -S $p -B $b -G Ninja -DCUTLASS_DIR=$C -DCMAKE_CUDA_ARCHITECTURES=90a > $OUT/l/cfg-$(basename $p).log 2>&1 && cmake --build $b -j 8 > $OUT/l/build-$(basename $p).log 2>&1; echo "build $p exit $? at $(( $(date +%s) - t0 )) s") &
done; wait
B=build/ppcb/gpt3_mlp_sm90_ppcb_bench; A="--m 2048 --policies spec --repeats 1 --warmup 1 --no-reference --no-fallback"
timeout 200 ncu --clock-control none --set full --kernel-name-base mangled --kernel-name 'regex:.*WaitingMainloop.*' --launch-count 2 -o $OUT/ours $B $A > $OUT/l/ncu-ours.log 2>&1; echo "ncu ours $? at $(( $(date +%s) - t0 )) s"
timeout 200 ncu --clock-control none --set full --kernel-name-base mangled --kernel-name 'regex:^((?!WaitingMainloop).)*Pingpong.*PersistentScheduler.*' --launch-count 2 -o $OUT/stock $B $A > $OUT/l/ncu-stock.log 2>&1; echo "ncu stock $? at $(( $(date +%s) - t0 )) s"
for r in ours stock; do ncu -i $OUT/$r.ncu-rep --page details --print-units base > $OUT/details-$r.txt 2>&1; done
grep -E "^  [a-z_]|Duration|Elapsed Cycles|Registers Per|Executed Ipc A|Issue Slots Busy|L2 Hit Rate|DRAM Throughput|Compute \(SM\) Throughput|Memory Throughput|No Eligible|Warp Cycles Per Issued|Executed Instructions  |Dynamic Shared|Grid Size" $OUT/details-ours.txt $OUT/details-stock.txt | cut -c1-150
for tool in racecheck memcheck; do
  timeout 100 compute-sanitizer --tool $tool --print-limit 20 build/two_gemm_sm90/two_gemm_sm90_bench --m 200 --policies spec,tile --repeats 1 --warmup 1 --no-reference --no-fallback --no-baselines > $OUT/l/san-coop-$tool.log 2>&1
  echo "$tool exit $?: $(grep -h 'ERROR SUMMARY\|RACECHECK SUMMARY' $OUT/l/san-coop-$tool.log | tail -2 | tr '\n' ' ')"
done
cd $OUT && tar czf rest.tgz l && rm -rf l; ls -la; echo "total $(( $(date +%s) - t0 )) s"
