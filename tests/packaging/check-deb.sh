#!/usr/bin/env bash
# Builds the Debian package and checks that it installs cleanly:
#   check-deb.sh BUILD_DIR [CC]
# 1. cpack -G DEB in a temporary folder (dpkg-shlibdeps fills Depends).
# 2. dpkg-deb -I / -c: the control fields (name, version, a Depends that
#    shlibdeps wrote, the shlibs file) and the files (libgyre.so.0.x.y with
#    its SONAME links, libgyre.a, headers, gyre.pc saying prefix=/usr, the
#    CMake package, gyrerun, the Python package), and no path into the build
#    tree.
# 3. A real `dpkg -i` as on a fresh machine, but in a private mount namespace
#    where /usr, /etc and /var are overlays whose changes land in the
#    temporary folder: dpkg checks Depends against this machine's package
#    database, runs the maintainer scripts (ldconfig), and records the
#    package; then the installed files are used from their /usr places
#    (pkg-config and find_package with no search paths given, the Python
#    package with no PYTHONPATH or GYRE_LIBRARY); then `dpkg --purge` must
#    remove every file. When the namespace ends, the overlays vanish: the
#    machine's own /usr, /etc and /var are never written.
#    Also: every package named in Depends is one apt knows, so that an
#    `apt install ./gyre_*.deb` on a fresh Debian machine can satisfy it.
# Needs root (mounts, dpkg); exits 77 (skipped) otherwise, or without cpack,
# dpkg-deb, unshare or overlayfs.
set -euo pipefail
build=$(cd "$1" && pwd)
cc=${2:-cc}
here=$(cd "$(dirname "$0")" && pwd)
skip() { echo "skipped: $*"; exit 77; }
fail() { echo "FAIL: $*" >&2; exit 1; }
# grep -q would stop reading early, failing the writer with SIGPIPE under pipefail.
has() { grep "$@" > /dev/null; }
step() { echo "== $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (a private mount namespace and dpkg -i)"
for tool in cpack dpkg-deb dpkg dpkg-shlibdeps unshare readelf; do
  command -v "$tool" > /dev/null || skip "no $tool"
done
unshare --mount true 2> /dev/null || skip "cannot make a mount namespace here"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/gyre-deb.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

step "cpack -G DEB"
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/out" > "$tmp/cpack.log" 2>&1 ||
  { cat "$tmp/cpack.log"; fail "cpack"; }
debs=("$tmp"/out/gyre_*.deb)
[ ${#debs[@]} = 1 ] && [ -f "${debs[0]}" ] || fail "expected one gyre .deb, got: $(ls "$tmp"/out)"
deb=${debs[0]}
echo "package: $(basename "$deb")"
# The PyTorch backend's package, where the build has the backend.
torch_deb=
if [ -f "$build/pytorch/_c10d.so" ]; then
  torch_debs=("$tmp"/out/gyre-torch_*.deb)
  [ ${#torch_debs[@]} = 1 ] && [ -f "${torch_debs[0]}" ] || fail "expected a gyre-torch .deb, got: $(ls "$tmp"/out)"
  torch_deb=${torch_debs[0]}
  echo "package: $(basename "$torch_deb")"
fi
[ "$(ls "$tmp"/out/*.deb | wc -l)" = "$([ -n "$torch_deb" ] && echo 2 || echo 1)" ] || fail "stray packages: $(ls "$tmp"/out)"

step "dpkg-deb -I"
dpkg-deb -I "$deb" > "$tmp/info"
cat "$tmp/info"
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = gyre ] || fail "Package is not gyre"
[ "$(field Version)" = "$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")" ] ||
  fail "Version is not the project's"
[ "$(field Architecture)" = "$(dpkg --print-architecture)" ] || fail "Architecture"
[ -n "$(field Maintainer)" ] || fail "no Maintainer"
depends=$(field Depends)
[[ "$depends" == *libc6* && "$depends" == *libstdc++6* ]] || fail "Depends lacks what dpkg-shlibdeps finds: '$depends'"
dpkg-deb -I "$deb" shlibs | has '^libgyre 0 gyre' || fail "no shlibs entry for libgyre.so.0"

step "dpkg-deb -c"
dpkg-deb -c "$deb" > "$tmp/contents"
so_line=$(grep -E '\./usr/lib/([^/]+/)?libgyre\.so\.0 -> ' "$tmp/contents") || fail "no libgyre.so.0 link"
libdir=$(sed -E 's|.* \./(usr/lib(/[^/ ]+)?)/libgyre\.so\.0 -> .*|/\1|' <<< "$so_line")
echo "libdir: $libdir"
want=(
  "\.$libdir/libgyre\.so\.0\.[0-9]+\.[0-9]+$"
  "\.$libdir/libgyre\.so\.0 -> libgyre\.so\.0\.[0-9]+\.[0-9]+$"
  "\.$libdir/libgyre\.so -> libgyre\.so\.0$"
  "\.$libdir/libgyre\.a$"
  "\.$libdir/libgyre-net-socket\.so$"
  "\./usr/include/gyre/gyre\.h$"
  "\.$libdir/pkgconfig/gyre\.pc$"
  "\.$libdir/cmake/gyre/gyreConfig\.cmake$"
  "\.$libdir/cmake/gyre/gyreConfigVersion\.cmake$"
  "\.$libdir/cmake/gyre/gyreTargets\.cmake$"
  "\./usr/bin/gyrerun$"
  "\./usr/lib/python3/dist-packages/gyre/__init__\.py$"
  "\./usr/lib/python3/dist-packages/gyre/_install_paths\.py$"
)
# The training harness is built where OpenBLAS is (CI's setup installs it).
if [ -x "$build/harness/gyre-train" ]; then
  want+=("\./usr/bin/gyre-train$")
fi
for w in "${want[@]}"; do
  grep -Eq " $w" "$tmp/contents" || fail "the package lacks $w"
done
mkdir "$tmp/x"
dpkg-deb -x "$deb" "$tmp/x"
grep -qx 'prefix=/usr' "$tmp/x$libdir/pkgconfig/gyre.pc" || fail "gyre.pc does not say prefix=/usr"
if grep -rl -- "$build" "$tmp/x$libdir/cmake" "$tmp/x$libdir/pkgconfig" "$tmp/x/usr/lib/python3"; then
  fail "packaged files above refer to the build tree"
fi

if [ -n "$torch_deb" ]; then
  step "the gyre-torch package"
  dpkg-deb -I "$torch_deb" | sed -n '/Package/,/Description/p'
  [ "$(dpkg-deb -f "$torch_deb" Package)" = gyre-torch ] || fail "Package is not gyre-torch"
  torch_depends=$(dpkg-deb -f "$torch_deb" Depends)
  [[ "$torch_depends" == *"gyre (= $(field Version))"* && "$torch_depends" == *python3-torch* ]] ||
    fail "gyre-torch's Depends lacks gyre of this version or python3-torch: '$torch_depends'"
  dpkg-deb -c "$torch_deb" | grep -Eq ' \./usr/lib/python3/dist-packages/gyre/torch/_c10d\.so$' ||
    fail "gyre-torch lacks gyre/torch/_c10d.so"
  ! dpkg-deb -c "$deb" | grep -q '_c10d\.so' || fail "the gyre package holds the torch extension too"
  mkdir "$tmp/xt"
  dpkg-deb -x "$torch_deb" "$tmp/xt"
  runpath=$(readelf -d "$tmp/xt/usr/lib/python3/dist-packages/gyre/torch/_c10d.so" | sed -n 's/.*R\(UN\)\?PATH.*\[\(.*\)\]/\2/p')
  [[ "$runpath" == '$ORIGIN/'* && "$runpath" != *"$build"* ]] || fail "the extension's run path is '$runpath'"
  for dep in $(tr ',|' '\n\n' <<< "$torch_depends" | sed -E 's/\(.*\)//; s/:any//; s/ //g' | sort -u); do
    [ "$dep" = gyre ] || apt-cache show "$dep" > /dev/null 2>&1 || fail "gyre-torch's Depends names $dep, which apt does not know"
  done
fi

step "Depends are packages apt knows"
for dep in $(tr ',|' '\n\n' <<< "$depends" | sed -E 's/\(.*\)//; s/:any//; s/ //g' | sort -u); do
  apt-cache show "$dep" > /dev/null 2>&1 || fail "Depends names $dep, which apt does not know"
done

step "dpkg -i in a private mount namespace (overlays over /usr, /etc, /var)"
host_state() {
  dpkg-query -W -f='${Status}\n' gyre 2>&1 || true
  ls -l "$libdir"/libgyre* /usr/include/gyre /usr/bin/gyrerun /usr/lib/python3/dist-packages/gyre 2>&1 || true
  ldconfig -p | grep libgyre || true
}
before=$(host_state)
mkdir "$tmp/ov"
# gyre-torch installs where its Depends are met (python3-torch here).
with_torch=
if [ -n "$torch_deb" ] && dpkg-query -W -f='${Status}' python3-torch 2>/dev/null | grep -q "install ok installed"; then
  with_torch=$torch_deb
fi
export tmp deb libdir cc here with_torch
rc=0
unshare --mount --propagation private bash -euo pipefail -c '
  fail() { echo "FAIL: $*" >&2; exit 1; }
  has() { grep "$@" > /dev/null; }
  # The overlays write to a tmpfs (an overlay cannot write to an overlayfs,
  # as /tmp is in many containers); it vanishes with the namespace.
  mount -t tmpfs -o size=1g,mode=0700 gyre-deb-check "$tmp/ov" ||
    { echo "skipped: cannot mount a tmpfs here"; exit 77; }
  for d in usr etc var; do
    mkdir -p "$tmp/ov/$d/upper" "$tmp/ov/$d/work"
    mount -t overlay overlay -o "lowerdir=/$d,upperdir=$tmp/ov/$d/upper,workdir=$tmp/ov/$d/work" "/$d" ||
      { echo "skipped: cannot mount an overlay over /$d here"; exit 77; }
  done
  export DEBIAN_FRONTEND=noninteractive
  dpkg -i "$deb" $with_torch
  dpkg -s gyre | has "^Status: install ok installed" || fail "dpkg -s: not installed"
  # ldconfig may name it through /lib, a link to /usr/lib on a merged-/usr system.
  cached=$(ldconfig -p | sed -n "s/^\s*libgyre\.so\.0 .*=> //p")
  [ -n "$cached" ] && [ "$(readlink -f "$cached")" = "$(readlink -f "$libdir/libgyre.so.0")" ] ||
    fail "ldconfig does not know $libdir/libgyre.so.0 (it has: ${cached:-nothing})"

  echo "-- pkg-config and find_package with no search paths"
  env -u PKG_CONFIG_PATH pkg-config --exists gyre || fail "pkg-config does not find gyre"
  "$cc" "$here/consumer/consumer.c" $(env -u PKG_CONFIG_PATH pkg-config --cflags --libs gyre) -o "$tmp/pc_consumer"
  "$tmp/pc_consumer" deb-pkg-config
  env -u CMAKE_PREFIX_PATH cmake -S "$here/consumer" -B "$tmp/consumer" -DCMAKE_C_COMPILER="$cc" > "$tmp/cmake.log" 2>&1 ||
    { cat "$tmp/cmake.log"; fail "find_package(gyre) on the installed package"; }
  cmake --build "$tmp/consumer" > "$tmp/build.log" 2>&1 || { cat "$tmp/build.log"; fail "consumer build"; }
  "$tmp/consumer/consumer_shared" deb-find_package-shared
  "$tmp/consumer/consumer_static" deb-find_package-static

  if [ -x /usr/bin/gyre-train ]; then
    echo "-- /usr/bin/gyre-train trains two steps on two ranks"
    for i in $(seq 200); do echo "the installed harness trains on this line of text."; done > "$tmp/text.txt"
    TMPDIR="$tmp" /usr/bin/gyrerun -n 2 --timeout 60 /usr/bin/gyre-train --data "$tmp/text.txt" \
      --steps 2 --layers 1 --dim 16 --heads 2 --seq 16 --batch 4 --quiet ||
      fail "the installed gyre-train did not train"
  fi

  if /usr/bin/python3 -c "import numpy" 2> /dev/null; then
    echo "-- /usr/bin/gyrerun + the Python package, no PYTHONPATH or GYRE_LIBRARY"
    cd "$tmp"
    env -u PYTHONPATH -u GYRE_LIBRARY -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 \
      /usr/bin/gyrerun -n 2 --timeout 30 /usr/bin/python3 -c "
import numpy as np, gyre
assert gyre.__file__.startswith(\"/usr/lib/python3/dist-packages/\"), gyre.__file__
with gyre.init() as comm:
    x = comm.allreduce(np.full(4, comm.rank + 1, np.int32))
    assert (x == 3).all(), x
    print(\"python: rank\", comm.rank, \"loaded\", gyre.library_path)
"
    echo "-- the socket plugin by name (GYRE_NET_PLUGIN=socket finds libgyre-net-socket.so where libgyre is)"
    env -u PYTHONPATH -u GYRE_LIBRARY -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 GYRE_TRANSPORT=net \
      GYRE_NET_PLUGIN=socket GYRE_DEBUG=INFO \
      /usr/bin/gyrerun -n 2 --timeout 30 /usr/bin/python3 -c "
import numpy as np, gyre
with gyre.init() as comm:
    x = comm.allreduce(np.full(4, comm.rank + 1, np.int32))
    assert (x == 3).all(), x
" > "$tmp/net.log" 2>&1 || { cat "$tmp/net.log"; fail "the installed socket plugin"; }
    has "net: plugin gyre-socket (v12, libgyre-net-socket.so) loaded" "$tmp/net.log" ||
      { cat "$tmp/net.log"; fail "the installed socket plugin was not loaded by name"; }
  fi

  if [ -n "$with_torch" ]; then
    echo "-- the PyTorch backend from the packages, no PYTHONPATH, GYRE_LIBRARY or GYRE_TORCH_EXTENSION"
    cd "$tmp"
    env -u PYTHONPATH -u GYRE_LIBRARY -u GYRE_TORCH_EXTENSION -u LD_LIBRARY_PATH PYTHONDONTWRITEBYTECODE=1 \
      /usr/bin/gyrerun -n 2 --timeout 60 /usr/bin/python3 -c "
import os, torch, torch.distributed as dist, gyre.torch
assert gyre.torch.__file__.startswith(\"/usr/lib/python3/dist-packages/\"), gyre.torch.__file__
dist.init_process_group(\"gyre\", init_method=\"file://$tmp/torch-store\", rank=int(os.environ[\"GYRE_RANK\"]), world_size=2)
t = torch.full((4,), dist.get_rank() + 1.0)
dist.all_reduce(t)
assert torch.equal(t, torch.full((4,), 3.0)), t
print(\"torch: rank\", dist.get_rank(), \"ok\")
dist.destroy_process_group()
"
    dpkg --purge gyre-torch
  fi

  echo "-- dpkg --purge"
  dpkg --purge gyre
  ! dpkg -s gyre > /dev/null 2>&1 || dpkg -s gyre | has "^Status: deinstall ok not-installed" || fail "still installed"
  for f in $libdir/libgyre.so.0 $libdir/libgyre.a /usr/include/gyre/gyre.h /usr/bin/gyrerun \
           /usr/lib/python3/dist-packages/gyre/__init__.py $libdir/pkgconfig/gyre.pc; do
    [ ! -e "$f" ] || fail "$f is left after purge"
  done
  ! ldconfig -p | has libgyre.so.0 || fail "ldconfig still lists libgyre.so.0"
' || rc=$?
[ "$rc" != 77 ] || exit 77
[ "$rc" = 0 ] || fail "the install in the namespace (status $rc)"
# Nothing of it reached the machine itself.
[ "$(host_state)" = "$before" ] || fail "the machine's own files or package database changed"
echo "debian package checks passed"
