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
gyre-bench, and the Python binding.")
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
include(CPack)
