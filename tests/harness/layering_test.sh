#!/usr/bin/env bash
# The harness is a user of gyre's public C ABI (docs/harness.md): it compiles
# against a view holding only harness/ (cmake/Layers.cmake) and include/. So
# is the FlexSP planner (flexsp/, views/flexsp): the folder is the view's name.
# This fails when a harness header includes anything of src/, or when the
# view or the build's include path would let it: every header must compile
# alone with exactly the harness's include path, and a header of every layer
# of the library must be out of its reach.
#   layering_test.sh CXX SOURCE_DIR VIEW_DIR [BLAS_INCLUDE_DIR]   (VIEW_DIR: views/harness or views/flexsp)
set -euo pipefail
cxx=$1 src=$(realpath "$2") view=$(realpath "$3") blas=${4:-}
part=$(basename "$view")
flags=(-std=c++20 -fsyntax-only -I"$view" -I"$src/include")
[[ -n $blas ]] && flags+=(-isystem "$blas")
fail=0
cd "$(mktemp -d)"  # a quoted include from standard input looks here first
trap 'rmdir "$PWD"' EXIT

if grep -rn --include='*.h' --include='*.cc' -E '#include "(\.\./|src/)' "$src/$part"; then
  echo "FAIL: a $part file climbs out of $part/ or names src/ (above)"
  fail=1
fi

count=0
for h in $(find "$src/$part" -name '*.h' | sort); do
  count=$((count + 1))
  if ! out=$("$cxx" "${flags[@]}" -x c++ "$h" 2>&1); then
    echo "FAIL: $h does not compile against the $part view:"
    echo "$out" | head -5
    fail=1
  fi
done
echo "checked $count $part headers"

# The public header is in reach (so the probes below fail for the right reason)...
if ! echo '#include "gyre/gyre.h"' | "$cxx" "${flags[@]}" -x c++ - 2>/dev/null; then
  echo "FAIL: $part cannot include gyre/gyre.h"
  fail=1
fi
# ...and no layer of the library is, by its layer name or through src/.
for layer_dir in "$src"/src/*/ "$src/kernels/"; do
  layer=$(basename "$layer_dir")
  probe=$(cd "$layer_dir" && find . -name '*.h' | sort | head -1)
  [[ -z $probe ]] && continue
  probe=${probe#./}
  for inc in "$layer/$probe" "src/$layer/$probe" "$probe"; do
    if echo "#include \"$inc\"" | "$cxx" "${flags[@]}" -x c++ - 2>/dev/null; then
      echo "FAIL: $part can include \"$inc\""
      fail=1
    fi
  done
done
exit $fail
