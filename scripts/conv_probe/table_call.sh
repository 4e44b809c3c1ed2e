#!/usr/bin/env bash
# The conv results table's runs (NOTES c19), on the GPU machine in one call, with the shipped sm90 examples' benches
# carried (build/conv-ck/<name>/build/<name>_bench, built here from `cusync-gen generate <name> -o .gen-conv/proj/<name>`
# as scripts/conv_probe/cluster_check_call.sh does): each at BATCHES (1,8,32) as built, the examples with cluster
# kernels again with --no-clusters, then cuDNN through PyTorch (scripts/conv_torch.py) right after, then PROFILE="name:batch
# ..." (--profile-hooks: each stage alone, plain and synced part by part). Leaves $OUT/tb.tgz;
# the table: `python3 scripts/conv_results.py OUTDIR _sm90` on the unpacked folder. TRACE=1 adds a tile trace of
# VGG 28 x 28 x 512 at batch 8 with and without the cluster kernels (its bench carried too). A step that would start
# after BUDGET seconds (default 500) is skipped, so the call always leaves its tarball. BENCHES="" NOCL="" NO_TORCH=1
# leave only the profile (and trace).
set -u
left() { [ "$SECONDS" -lt "${BUDGET:-500}" ] || { echo "skipped $1: ${SECONDS}s used"; return 1; }; }
O=$OUT/tb; mkdir -p "$O"
B=$PWD/build/conv-ck
BATCHES=${BATCHES:-1,8,32}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader | tee "$O/gpu.txt"
for n in ${BENCHES-resnet_block_sm90 bottleneck_block_sm90 vgg_block_sm90}; do
  left "bench $n" || continue
  timeout 200 "$B/$n/build/${n}_bench" --batch "$BATCHES" --repeats "${REPEATS:-60}" --preheat 0.5 > "$O/bench-$n.txt" 2>&1
  echo "bench $n rc=$? (${SECONDS}s)"; grep "^batch .*back-to-back [0-9]" "$O/bench-$n.txt" | cut -c1-260
done
for n in ${NOCL-bottleneck_block_sm90 vgg_block_sm90}; do
  left "bench $n --no-clusters" || continue
  timeout 200 "$B/$n/build/${n}_bench" --batch "$BATCHES" --repeats "${REPEATS:-60}" --preheat 0.5 --no-clusters > "$O/nocl-$n.txt" 2>&1
  echo "bench $n --no-clusters rc=$? (${SECONDS}s)"; grep "^batch .*back-to-back [0-9]" "$O/nocl-$n.txt" | cut -c1-260
done
if [ -z "${NO_TORCH:-}" ] && left torch; then
  timeout 200 python3 scripts/conv_torch.py --batch "$BATCHES" --repeats "${REPEATS:-60}" --preheat 0.5 \
    --chains vgg_block,resnet_block,bottleneck_block > "$O/torch.jsonl" 2> "$O/torch.err"
  echo "torch rc=$? (${SECONDS}s)"; cut -c1-200 "$O/torch.jsonl"
fi
for p in ${PROFILE:-}; do  # name:batch: each stage alone, plain and synced part by part (--profile-hooks)
  n=${p%%:*} b=${p#*:}
  left "profile $p" || continue
  timeout 120 "$B/$n/build/${n}_bench" --batch "$b" --profile-hooks --repeats 40 --preheat 0.5 > "$O/profile-$n-$b.txt" 2>&1
  echo "profile $n $b rc=$? (${SECONDS}s)"; grep "^PROFILE" "$O/profile-$n-$b.txt" | cut -c1-400
done
for f in ${TRACE:+"" --no-clusters}; do
  left "trace $f" || continue
  timeout 40 "$B/vgg19_28x28x512/build/vgg19_28x28x512_bench" --batch 8 --check-only --trace "$O/trace$f.jsonl" $f > "$O/trace$f.txt" 2>&1
  echo "trace $f rc=$? $(tail -1 "$O/trace$f.txt")"
done
cd "$OUT" && tar czf tb.tgz tb && rm -rf tb
