#!/usr/bin/env bash
# The build enforces the layers (cmake/Layers.cmake): every header of a layer
# must compile on its own against that layer's view, which holds only the
# layers below it, and a header of any layer above must be out of reach. So
# this fails when someone adds an upward include, even one in a header that
# no file of its own layer includes yet, or a relative include that climbs
# out of the layer's folder.
#   layering_test.sh CXX SOURCE_DIR VIEWS_DIR [CXXFLAGS...]
set -euo pipefail
cxx=$1 src=$2 views=$3
shift 3
# GYRE_KERNELS_ISA: the one header meant to be included by each instruction
# set's file after naming that set (kernels/cpu/reduce_impl.h).
flags=(-std=c++20 -fsyntax-only -DGYRE_KERNELS_ISA=scalar "$@")
layers=(base kernels topology bootstrap transport collectives sim core)
dir_of() { case $1 in kernels | sim) echo "$src/$1" ;; *) echo "$src/src/$1" ;; esac; }
fail=0
# A quoted include from standard input looks in the working directory first:
# work where no layer's folder is.
cd "$(mktemp -d)"
trap 'rmdir "$PWD"' EXIT

# Relative includes would step around the views.
if grep -rn --include='*.h' --include='*.cc' '#include "\.\./' "$src/src" "$src/kernels" "$src/sim"; then
  echo "FAIL: a relative include climbs out of its layer's folder (above)"
  fail=1
fi

# Every header alone, against its own layer's view.
jobs=()
for layer in "${layers[@]}"; do
  for h in $(find "$(dir_of "$layer")" -name '*.h' | sort); do
    jobs+=("$layer $h")
  done
done
check_header() {
  local layer=$1 h=$2
  if ! out=$("$cxx" "${flags[@]}" -I"$views/$layer" -I"$src/include" -x c++ "$h" 2>&1); then
    echo "FAIL: $h does not compile against the $layer layer's view:"
    echo "$out" | head -5
    return 1
  fi
}
export -f check_header
export cxx src views
flagstr="${flags[*]}"
printf '%s\n' "${jobs[@]}" |
  xargs -P "$(nproc)" -L 1 bash -c 'flags=('"$flagstr"'); check_header "$0" "$1"' || fail=1
echo "checked ${#jobs[@]} headers against their layers' views"

# Each layer reaches no layer above it (the first header of each is enough:
# the view holds the folder or not).
for ((i = 0; i < ${#layers[@]}; ++i)); do
  for ((j = i + 1; j < ${#layers[@]}; ++j)); do
    lower=${layers[i]} upper=${layers[j]}
    probe=$(cd "$(dir_of "$upper")" && find . -name '*.h' | sort | head -1)
    probe=$upper/${probe#./}
    if [[ -e "$views/$lower/$upper" ]] ||
      echo "#include \"$probe\"" | "$cxx" "${flags[@]}" -I"$views/$lower" -I"$src/include" -x c++ - 2>/dev/null; then
      echo "FAIL: the $lower layer can include $probe, from the $upper layer above it"
      fail=1
    fi
  done
done
# Pairs the order above cannot express: kernels and topology sit side by
# side (topology must not reach the kernels either), collectives build on
# transports without seeing how they bootstrap, and neither they nor the
# topology see the device backend (the transports do, for device memory);
# the simulator (sim/) sees what the collectives see, and them.
for pair in "topology kernels/cpu/reduce.h" "collectives bootstrap/bootstrap.h" "collectives device/backend.h" \
  "topology device/backend.h" "sim bootstrap/bootstrap.h" "sim device/backend.h"; do
  read -r lower probe <<<"$pair"
  if echo "#include \"$probe\"" | "$cxx" "${flags[@]}" -I"$views/$lower" -I"$src/include" -x c++ - 2>/dev/null; then
    echo "FAIL: the $lower layer can include $probe"
    fail=1
  fi
done
exit $fail
