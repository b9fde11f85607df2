#!/usr/bin/env bash
# Installs a build into a fresh prefix and uses it as a user would:
#   check-install.sh BUILD_DIR [CMAKE [GENERATOR [CC]]]
# - cmake --install BUILD_DIR --prefix <tmp>; the layout (versioned SONAME
#   and its links, headers, static library, CMake package, gyre.pc, tools,
#   Python package) and no path into the build tree in what was installed;
# - tests/packaging/consumer built with find_package(gyre CONFIG), against
#   both gyre::gyre and gyre::gyre_static, and run;
# - the same program built with pkg-config (shared, and static from
#   Libs.private), and run;
# - the installed gyrerun running the installed Python package on 2 ranks,
#   with no GYRE_LIBRARY (it finds the library from where it is installed),
#   when python3 has numpy.
# Everything happens in a temporary folder, removed at the end.
set -euo pipefail
build=$(cd "$1" && pwd)
cmake=${2:-cmake}
generator=${3:-Ninja}
cc=${4:-cc}
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gyre-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fail() { echo "FAIL: $*" >&2; exit 1; }
# grep -q would stop reading early, failing the writer with SIGPIPE under pipefail.
has() { grep "$@" > /dev/null; }
step() { echo "== $*"; }

step "cmake --install $build --prefix $prefix"
"$cmake" --install "$build" --prefix "$prefix" > "$tmp/install.log" || { cat "$tmp/install.log"; fail "install"; }

so=$(find "$prefix" -name 'libgyre.so.0' | head -n 1)
[ -n "$so" ] || fail "no libgyre.so.0 installed"
libdir=$(dirname "$so")
echo "libdir: $libdir"
real=$(readlink "$libdir/libgyre.so.0")
[[ "$real" =~ ^libgyre\.so\.0\.[0-9]+\.[0-9]+$ ]] || fail "libgyre.so.0 -> '$real', not the versioned file"
[ "$(readlink "$libdir/libgyre.so")" = libgyre.so.0 ] || fail "libgyre.so is not a link to libgyre.so.0"
readelf -d "$libdir/$real" | has 'SONAME.*\[libgyre\.so\.0\]' || fail "SONAME is not libgyre.so.0"
for f in "$libdir/libgyre.a" "$prefix/include/gyre/gyre.h" "$libdir/pkgconfig/gyre.pc" \
         "$libdir/cmake/gyre/gyreConfig.cmake" "$libdir/cmake/gyre/gyreConfigVersion.cmake" \
         "$libdir/cmake/gyre/gyreTargets.cmake" "$prefix/bin/gyrerun" "$prefix/bin/gyre-topo"; do
  [ -f "$f" ] || fail "missing ${f#$prefix/}"
done
pydir=$(dirname "$(find "$prefix" -path '*/gyre/_install_paths.py' | head -n 1)")
[ -f "$pydir/__init__.py" ] || fail "the Python package is not installed"
if grep -rl -- "$build" "$libdir/cmake" "$libdir/pkgconfig" "$pydir" 2>/dev/null; then
  fail "installed files above refer to the build tree"
fi
grep -qx "prefix=$prefix" "$libdir/pkgconfig/gyre.pc" || fail "gyre.pc does not say prefix=$prefix"

step "find_package(gyre CONFIG): gyre::gyre and gyre::gyre_static"
"$cmake" -S "$here/consumer" -B "$tmp/consumer" -G "$generator" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_PREFIX_PATH="$prefix" > "$tmp/configure.log" 2>&1 || { cat "$tmp/configure.log"; fail "configure"; }
"$cmake" --build "$tmp/consumer" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "build"; }
"$tmp/consumer/consumer_shared" find_package-shared
"$tmp/consumer/consumer_static" find_package-static
ldd "$tmp/consumer/consumer_shared" | has "$libdir/libgyre.so.0" || fail "consumer_shared does not load the installed library"
! ldd "$tmp/consumer/consumer_static" | has libgyre || fail "consumer_static needs libgyre.so"

step "pkg-config"
export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion gyre)" = "$(sed -n 's/^Version: //p' "$libdir/pkgconfig/gyre.pc")" ] || fail "pkg-config --modversion"
# shellcheck disable=SC2046  # pkg-config's output is a list of flags
"$cc" "$here/consumer/consumer.c" $(pkg-config --cflags gyre) -o "$tmp/pc_shared" $(pkg-config --libs gyre) \
  -Wl,-rpath,"$libdir"
"$tmp/pc_shared" pkg-config-shared
# Static: libgyre.a by its file name, everything else from Libs.private.
# shellcheck disable=SC2046
"$cc" "$here/consumer/consumer.c" $(pkg-config --cflags gyre) -o "$tmp/pc_static" \
  $(pkg-config --static --libs gyre | sed 's/-lgyre\b/-l:libgyre.a/')
"$tmp/pc_static" pkg-config-static
! ldd "$tmp/pc_static" | has libgyre || fail "pc_static needs libgyre.so"

if [ -x "$prefix/bin/gyre-bench" ]; then
  step "installed gyre-bench finds libgyre through its RPATH"
  env -u LD_LIBRARY_PATH "$prefix/bin/gyre-bench" --help > /dev/null
fi
step "installed gyre-topo describes this machine"
"$prefix/bin/gyre-topo" --json | grep -q '"element": "system"' || fail "gyre-topo --json printed no system"

if "$python" -c 'import numpy' 2> /dev/null; then
  step "installed gyrerun + Python package, 2 ranks, no GYRE_LIBRARY"
  env -u GYRE_LIBRARY -u LD_LIBRARY_PATH PYTHONPATH="$(dirname "$pydir")" PYTHONDONTWRITEBYTECODE=1 \
    "$prefix/bin/gyrerun" -n 2 --timeout 30 "$python" -c "
import numpy as np, gyre
assert gyre.library_path.startswith('$libdir/'), gyre.library_path
with gyre.init() as comm:
    x = comm.allreduce(np.full(4, comm.rank + 1, np.int32))
    assert (x == 3).all(), x
    print('python: rank', comm.rank, 'loaded', gyre.library_path)
"
else
  echo "(python3 has no numpy: the Python package's run is left out)"
fi
echo "install checks passed"
