#!/usr/bin/env bash
# Device call 6 (2026-12-02): our synced ping-pong kernel (gpt3 shard, 128x128) with sync off in the banded, column-major and new column-banded orders, against CUTLASS's ping-pong kernel, one binary built off the GPU machine.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=$PWD:${LD_LIBRARY_PATH:-}
nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.limit --format=csv,noheader; date -u
timeout 140 ./gpt3_mlp_sm90_pp_bench --m 1024,1536,2048,4096 --orders spec,column_major,column_banded --policies spec \
  --repeats 20 --warmup 3 --no-fallback --no-reference > "$OUT/orders.jsonl" 2> "$OUT/orders.err"; echo "bench exit $?"
python3 - "$OUT/orders.jsonl" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    if not line.startswith("{") or '"m"' not in line: continue
    r = json.loads(line)
    print(r["m"], r["order"], "ours sync-off %.1f overlap %.1f | CUTLASS pingpong %.1f stock %.1f | ok %s" % (
        r["sequential_us"], r["overlapped_us"], r["pingpong_us"], r["stock_us"], r["bitwise_equal"] and r["graph_ok"]))
PY
