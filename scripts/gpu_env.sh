# Sourced by the device scripts (from the repo root): OUT (what comes back) and LOG (tarred by the caller),
# pydantic from .whl/ where the device lacks it, this checkout on PYTHONPATH, cuBLASLt's folder on
# LD_LIBRARY_PATH, and the helpers cg (the CLI), bench (a built project's bench under $P), build_all and
# check_all (projects under $P, in parallel / one after another at the shapes in $CHECK).
OUT=${OUT:-$PWD/gpu-out}; LOG=$OUT/logs; mkdir -p "$LOG"
if ! python3 -c "import pydantic" 2>/dev/null; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl \
    && export PYTHONPATH=/tmp/site
fi
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
LT=$(find /usr/local/cuda*/ /usr/lib /opt -name 'libcublasLt.so.13*' 2>/dev/null | head -1)
[ -n "$LT" ] && export LD_LIBRARY_PATH=$(dirname "$LT"):${LD_LIBRARY_PATH:-}
cg() { python3 -m cusync_gen.cli "$@"; }
bench() { ls "$P/$1"/build/*_bench | head -1; }
build_all() {
  for n in "$@"; do (cg build "$P/$n" --jobs "${JOBS:-4}" > "$LOG/build-$n.txt" 2>&1; echo "build $n exit $? at ${SECONDS}s") & done
  wait
}
check_all() {
  for n in "$@"; do
    timeout 120 "$(bench "$n")" --check $CHECK > "$OUT/check-$n.jsonl" 2> "$LOG/check-$n.err"
    echo "check $n exit $? ($(grep -c '"ok": true' "$OUT/check-$n.jsonl") ok of $(wc -l < "$OUT/check-$n.jsonl")) at ${SECONDS}s"
    grep -v '"ok": true' "$OUT/check-$n.jsonl" | head -3; head -c 600 "$LOG/check-$n.err"
  done
}
# compute-sanitizer memcheck and racecheck on one project's bench at small shapes: sanitize NAME SHAPE...
sanitize() {
  local n=$1; shift
  for tool in memcheck racecheck; do
    timeout 90 compute-sanitizer --tool $tool --print-limit 10 "$(bench "$n")" --check "$@" > "$LOG/san-$tool.log" 2>&1
    echo "sanitizer $tool exit $?: $(grep -h 'ERROR SUMMARY' "$LOG/san-$tool.log" | tr '\n' ' ') at ${SECONDS}s"
  done
}
# Our layer then its PyTorch peer at the shapes in $TIME: time_vs_torch "NAME attention_torch.py-args" ...
time_vs_torch() {
  local spec n args
  for spec in "$@"; do
    n=${spec%% *}; args=${spec#* }
    [ $SECONDS -lt 420 ] || { echo "skip time $n at ${SECONDS}s"; continue; }
    timeout 100 "$(bench "$n")" --time --repeats 30 $TIME > "$OUT/time-$n.jsonl" 2> "$LOG/time-$n.err"
    echo "time $n exit $? at ${SECONDS}s"
    timeout 90 python3 scripts/attention_torch.py --sm90 $args --repeats 30 --shapes "$(echo $TIME | tr ' ' ',')" \
      > "$OUT/torch-$n.jsonl" 2> "$LOG/torch-$n.err"; echo "torch $n exit $? at ${SECONDS}s"; tail -c 300 "$LOG/torch-$n.err"
  done
}
