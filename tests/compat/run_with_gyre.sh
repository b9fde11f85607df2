#!/bin/sh
# Runs a program linked against NVIDIA's libnccl.so.2 on gyre's instead, the
# way a user would: LD_LIBRARY_PATH. First checks that the dynamic linker
# really resolves the program's libnccl.so.2 to gyre's (its output then also
# carries gyre's version code, 22800, where NVIDIA's 2.28.9 says 22809).
# Usage: run_with_gyre.sh GYRE_NCCL_LIBDIR PROGRAM COMMAND...
#   PROGRAM is the NCCL program; COMMAND runs it (directly, or a launcher
#   with it), inheriting LD_LIBRARY_PATH.
set -eu
libdir=$1
program=$2
shift 2
LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
resolved=$(ldd "$program" | awk '$1 == "libnccl.so.2" { print $3 }')
if [ "$(readlink -f "$resolved")" != "$(readlink -f "$libdir/libnccl.so.2")" ]; then
  echo "libnccl.so.2 resolves to '$resolved', not gyre's in $libdir" >&2
  exit 1
fi
echo "libnccl.so.2 -> $resolved"
exec "$@"
