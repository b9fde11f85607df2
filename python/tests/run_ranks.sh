#!/bin/sh
# Runs a Python program on N ranks under gyrerun, for ctest:
#   run_ranks.sh GYRERUN PYTHON N MODULES ARGS...
# GYRERUN "-" runs PYTHON once, without gyrerun (for tests that start their
# own processes; ctest's TIMEOUT bounds them).
# MODULES (comma-separated) must import in PYTHON, or the test is skipped
# with status 77 (ctest's SKIP_RETURN_CODE): numpy and pytest are Debian
# packages (python3-numpy, python3-pytest) that a build machine may lack.
set -eu
gyrerun=$1 python=$2 n=$3 modules=$4
shift 4
if ! "$python" -c "import $modules" 2>/dev/null; then
  echo "skipped: $python cannot import $modules (apt-get install python3-numpy python3-pytest)"
  exit 77
fi
if [ "$gyrerun" = - ]; then
  exec "$python" "$@"
fi
exec "$gyrerun" -n "$n" --timeout 60 "$python" "$@"
