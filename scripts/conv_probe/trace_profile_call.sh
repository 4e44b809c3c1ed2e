#!/usr/bin/env bash
# NOTES c19's next measurements, on the GPU machine in one short call with the benches carried
# (build/conv-ck/<name>/build/<name>_bench): a tile trace of VGG 28 x 28 x 512 at batch 8 with and without the
# cluster kernels (`--check-only --trace`; read here with `cusync-gen trace FILE --batch 8`), then vgg_block_sm90's
# stages alone at batch 32, plain and synced part by part (`--profile-hooks`). Leaves $OUT/t.tgz.
set -u
B=$PWD/build/conv-ck
O=$OUT/t; mkdir -p "$O"
for f in "" --no-clusters; do
  timeout 40 "$B/vgg19_28x28x512/build/vgg19_28x28x512_bench" --batch 8 --check-only --trace "$O/trace$f.jsonl" $f > "$O/trace$f.txt" 2>&1
  echo "trace $f rc=$? $(tail -1 "$O/trace$f.txt")"
done
timeout 100 "$B/vgg_block_sm90/build/vgg_block_sm90_bench" --batch 32 --profile-hooks --repeats 30 --preheat 0.3 > "$O/profile.txt" 2>&1
echo "profile rc=$?"; grep "^PROFILE" "$O/profile.txt" | cut -c1-420
cd "$OUT" && tar czf t.tgz t && rm -rf t
