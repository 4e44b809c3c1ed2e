#!/usr/bin/env bash
# One GPU call after a change to the runtime's time_modes (cusync/time_modes.h) and the conv rule: the conv
# blocks of scripts/gpu_conv_waves.sh (POINTS), the conv correctness chains of scripts/gpu_conv_sm90.sh's check
# phase (.gen-conv), and an sm90 GEMM chain's autotune (generated/two_gemm_sm90, --autotune) through the moved
# timing. Leaves $OUT/cw.tgz and $OUT/chk.tgz.
set -u
CUT=$PWD/third_party/cutlass
(cmake -S generated/two_gemm_sm90 -B build/tg -G Ninja -DCUTLASS_DIR="$CUT" -DCMAKE_CUDA_ARCHITECTURES=90a > /dev/null 2>&1 \
  && cmake --build build/tg -j 6 > build-tg.log 2>&1; echo "two_gemm build rc=$?") &
TORCH=0 bash scripts/gpu_conv_waves.sh 2>&1
PROJECTS=$PWD/.gen-conv OUT=$OUT/chk PHASE=build,check JOBS=10 bash scripts/gpu_conv_sm90.sh > /dev/null 2>&1
grep -E "^== |rc=|passed|FAIL|timeout|timed out" "$OUT/chk/log.txt" | grep -v "^== build\|^== built" | paste - - | cut -c1-220
wait
timeout 120 build/tg/two_gemm_sm90_bench --m 64,1024 --autotune 10 --repeats 10 > "$OUT/chk/two_gemm.txt" 2>&1
echo "two_gemm bench rc=$?"; grep -i "autotune\|mode\|check\|OK\|FAIL" "$OUT/chk/two_gemm.txt" | head -20
cd "$OUT" && tar czf chk.tgz chk && rm -rf chk
