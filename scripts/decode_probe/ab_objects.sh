#!/usr/bin/env bash
# Here (no GPU needed): compile the probe once per kernel into build/decode_probe/<name>.o, so that a device call
# only links and runs them (scripts/decode_probe/ab_call.sh, ~10 s of build there instead of ~170): `landed` from
# the kernel as it is, and one object per patch of PATCHES (scripts/decode_probe/<patch>.patch applied to a copy
# of templates/sm90/include). The probe needs cuBLAS's headers: CUBLAS_INCLUDE, e.g. from
#   pip download --no-deps nvidia-cublas && unzip nvidia_cublas*.whl -d /tmp/cublas  (-> /tmp/cublas/nvidia/cu13/include)
# Then run(carry=["build/decode_probe"]): bash scripts/decode_probe/ab_call.sh
# VARIANTS adds objects of the kernel as it is built with other macros: "name=-DA=1 -DB=2;name2=...", on the
# kernel as it is or, with VARIANT_PATCH=<patch>, on it with that patch applied.
# Usage: CUBLAS_INCLUDE=... [PATCHES="name ..."] [VARIANTS="mma=-DCUSYNC_BULK_GMMA=0"] bash scripts/decode_probe/ab_objects.sh
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
B=$ROOT/build/decode_probe; mkdir -p "$B"; rm -f "$B"/*.o
INC=${CUBLAS_INCLUDE:?the directory of cublas_v2.h}
build() {  # name include-dir [macros...]
  local name=$1 inc=$2; shift 2
  nvcc -std=c++17 -O3 -gencode=arch=compute_90a,code=sm_90a -lineinfo "$@" -I"$ROOT/templates/runtime/include" -I"$inc" \
    -I"$INC" -c "$ROOT/scripts/decode_probe/main.cu" -o "$B/$name.o" > "$B/$name.log" 2>&1
  echo "$name rc=$?"
}
build landed "$ROOT/templates/sm90/include" &
# A patch whose header has a line "# base: <commit>" applies to that commit's templates/sm90/include (the kernel it
# was measured on), not to the working tree's.
include_of() {  # dir patch-file: dir/include, from the patch's base commit or from the working tree
  local base; base=$(sed -n 's/^# base: \([0-9a-f]\{7,40\}\).*/\1/p' "$2" | head -1)
  if [ -n "$base" ]; then
    git -C "$ROOT" archive "$base" templates/sm90/include | tar -x -C "$1" && mv "$1/templates/sm90/include" "$1/include"
  else
    cp -r "$ROOT/templates/sm90/include" "$1/"
  fi
}
for p in ${PATCHES:-}; do
  d=$(mktemp -d); include_of "$d" "$ROOT/scripts/decode_probe/$p.patch"
  (cd "$d" && patch -s --batch --forward -p3 < "$ROOT/scripts/decode_probe/$p.patch") || { echo "$p.patch does not apply"; exit 1; }
  build "$p" "$d/include" &
done
vinc=$ROOT/templates/sm90/include
if [ -n "${VARIANT_PATCH:-}" ]; then
  d=$(mktemp -d); include_of "$d" "$ROOT/scripts/decode_probe/$VARIANT_PATCH.patch"
  (cd "$d" && patch -s --batch --forward -p3 < "$ROOT/scripts/decode_probe/$VARIANT_PATCH.patch") || { echo "$VARIANT_PATCH.patch does not apply"; exit 1; }
  vinc=$d/include
fi
IFS=';' read -ra vs <<< "${VARIANTS:-}"
for v in "${vs[@]}"; do
  [ -n "$v" ] || continue
  # shellcheck disable=SC2086  # the macros are words
  build "${v%%=*}" "$vinc" ${v#*=} &
done
wait
