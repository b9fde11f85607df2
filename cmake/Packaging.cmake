# `cpack -G DEB` in the build folder: one Debian package, gyre, holding
# everything `cmake --install` installs (both components, and whatever other
# parts of the tree install). One package rather than a libgyre0/libgyre-dev
# split: gyre is used as a whole (the launcher and the Python binding need
# the library; programs built against it need the headers), there is no
# second consumer of the runtime alone yet, and a split would need every
# install rule in the tree to pick the right component, an Unspecified one
# turning into a package of its own. CPACK_DEB_COMPONENT_INSTALL ON gives the
# split from the same rules when it is wanted.
#
# tests/packaging/check-deb.sh checks the package (docs/install.md).
set(CPACK_PACKAGE_NAME gyre)
set(CPACK_PACKAGE_VENDOR gyre)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "${PROJECT_DESCRIPTION}")
set(CPACK_PACKAGE_DESCRIPTION
    "gyre is a collective communication library (AllReduce, AllGather, ReduceScatter,
AllToAll(v), Broadcast, Reduce, Send/Recv) over shared memory and TCP, used
through a stable C ABI or from Python. The package holds libgyre (shared and
static), its headers, a CMake package and gyre.pc, the gyrerun launcher,
gyre-bench, gyre-train (the bundled training harness), and the Python
binding.")
set(GYRE_PACKAGE_MAINTAINER "gyre maintainers <maintainers@users.noreply.a-seed-ee704ec8.example>"
    CACHE STRING "The Debian package's Maintainer field")
set(CPACK_PACKAGE_CONTACT "${GYRE_PACKAGE_MAINTAINER}")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${GYRE_PACKAGE_MAINTAINER}")
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_INSTALL_PREFIX /usr)
# Install with DESTDIR (CMAKE_INSTALL_PREFIX stays /usr): gyre.pc is written
# at install time from CMAKE_INSTALL_PREFIX and must say /usr, not the
# staging folder.
set(CPACK_SET_DESTDIR ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# Depends from the binaries themselves (dpkg-shlibdeps, from dpkg-dev).
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# A shlibs file, so that packages built against libgyre.so.0 get a Depends
# on gyre; CPack also adds the ldconfig calls for /usr/lib.
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
# The Python binding's needs: not a Depends, since the C library and tools
# work without Python.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "python3, python3-numpy")

# The PyTorch backend, where it is built, goes in a second package,
# gyre-torch: it needs torch (hundreds of MiB), which the library, the
# tools and the plain Python binding do not. Components grouped in two:
# gyre (runtime and development, as above) and gyre-torch (torch).
if(TARGET gyre_torch)
  set(CPACK_DEB_COMPONENT_INSTALL ON)
  set(CPACK_COMPONENTS_ALL runtime development torch)
  set(CPACK_COMPONENTS_GROUPING ONE_PER_GROUP)
  set(CPACK_COMPONENT_RUNTIME_GROUP gyre)
  set(CPACK_COMPONENT_DEVELOPMENT_GROUP gyre)
  set(CPACK_COMPONENT_TORCH_GROUP torch)
  set(CPACK_DEBIAN_GYRE_PACKAGE_NAME gyre)
  set(CPACK_DEBIAN_TORCH_PACKAGE_NAME gyre-torch)
  set(CPACK_DEBIAN_TORCH_PACKAGE_SECTION python)
  set(CPACK_DEBIAN_GYRE_DESCRIPTION "${CPACK_PACKAGE_DESCRIPTION}")
  set(CPACK_DEBIAN_TORCH_DESCRIPTION "gyre as a torch.distributed backend
The extension module of gyre.torch: import it, then pass the backend name
gyre to init_process_group. Built for Debian's python3-torch 1.13.")
  # Its Depends by hand: dpkg-shlibdeps would look for libgyre.so.0 in the
  # installed packages' records, where the gyre being built is not yet.
  set(CPACK_DEBIAN_TORCH_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_TORCH_PACKAGE_DEPENDS
      "gyre (= ${PROJECT_VERSION}), python3-torch (>= 1.13), python3-torch (<< 1.14), libtorch1.13, libc6, libstdc++6")
endif()
include(CPack)
