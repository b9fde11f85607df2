#!/usr/bin/env bash
# Installs what building, testing and benchmarking gyre need, from Debian's
# archive. Safe to run again: apt-get skips what is already there.
set -euo pipefail
packages=(
  build-essential cmake ninja-build pkg-config   # the build
  libgtest-dev libbenchmark-dev                  # tests and micro-benchmarks
  openmpi-bin libopenmpi-dev libgloo-dev         # the peers we measure against
  python3                                        # tools/compare.py
  valgrind                                       # tools/call_instructions.py (callgrind)
  python3-numpy python3-pytest                   # the Python binding's tests and example
  python3-torch libtorch-dev pybind11-dev        # the PyTorch backend (pytorch/), its tests and benchmark
  dpkg-dev                                       # cpack -G DEB (dpkg-shlibdeps) and its check
  libhwloc-dev nlohmann-json3-dev libcli11-dev    # topology discovery, its JSON files, gyre-topo's options
  libucx-dev                                     # the ucx transport (GYRE_TRANSPORT=ucx)
  libibverbs-dev rdma-core ibverbs-providers     # the verbs transport (GYRE_TRANSPORT=verbs)
  ibverbs-utils                                  # ibv_devinfo, for looking at a device by hand
  qemu-system-x86 linux-image-amd64              # the Soft-RoCE VM test (tests/verbs/softroce_vm.sh):
  busybox-static cpio kmod                       #   a guest kernel with rdma_rxe and an initramfs
  iproute2 procps                                # network namespaces, process tools
  librsvg2-bin                                   # gyre-bench --plot FILE.png (rsvg-convert)
  libopenblas-dev                                # the training harness's matrix products (harness/)
  libglpk-dev                                    # the FlexSP planner's MIP solver (flexsp/; greedy without it)
  clang libclang-rt-14-dev                       # tools/fuzz.sh: the libFuzzer targets (clang, libclang_rt.fuzzer)
  vim-runtime                                    # real text for gyre-train (/usr/share/vim/vim90/doc/usr_*.txt)
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "setup: missing packages: ${missing[*]} (run as root, or install them)" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends "${missing[@]}"
fi
