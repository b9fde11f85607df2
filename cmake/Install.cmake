# What `cmake --install` puts where (docs/install.md), and the Debian package
# (cmake/Packaging.cmake). Three components:
#   runtime      libgyre.so.0, gyrerun, gyre-topo, gyre-bench, the Python package
#   development  headers, libgyre.so (the link-time name), libgyre.a, the CMake
#                package (find_package(gyre CONFIG)), gyre.pc
#   torch        the PyTorch backend's extension module (when it is built)
# Other parts of the tree (src/compat, tools) add their own install() rules
# with the same component names; everything here only adds to them.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(GYRE_INSTALL_CMAKEDIR ${CMAKE_INSTALL_LIBDIR}/cmake/gyre CACHE STRING
    "Where gyreConfig.cmake goes (relative to the prefix)")
# Debian's python3 reads /usr/lib/python3/dist-packages, so a /usr install (the
# Debian package's) is importable with no setup; elsewhere set PYTHONPATH.
set(GYRE_INSTALL_PYTHONDIR lib/python3/dist-packages CACHE STRING
    "Where the gyre Python package goes (relative to the prefix)")

install(TARGETS gyre EXPORT gyreTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT runtime NAMELINK_COMPONENT development)
install(TARGETS gyre_static EXPORT gyreTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} COMPONENT development)
install(DIRECTORY ${PROJECT_SOURCE_DIR}/include/gyre DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
  COMPONENT development FILES_MATCHING PATTERN "*.h")

# The path from installed folder `from` to installed folder `to`: relative
# when both are (so the prefix may move), else `to` as an absolute path.
function(gyre_install_path_between out from to)
  if(IS_ABSOLUTE "${from}" OR IS_ABSOLUTE "${to}")
    if(NOT IS_ABSOLUTE "${to}")
      set(to "${CMAKE_INSTALL_PREFIX}/${to}")
    endif()
    set(${out} "${to}" PARENT_SCOPE)
  else()
    file(RELATIVE_PATH rel /_prefix/${from} /_prefix/${to})
    set(${out} "${rel}" PARENT_SCOPE)
  endif()
endfunction()

# Installed programs find libgyre.so.0 from where they are, whatever the
# prefix (gyrerun links the static library and needs none).
gyre_install_path_between(_gyre_bin_to_lib ${CMAKE_INSTALL_BINDIR} ${CMAKE_INSTALL_LIBDIR})
if(NOT IS_ABSOLUTE "${_gyre_bin_to_lib}")
  set(_gyre_bin_to_lib "$ORIGIN/${_gyre_bin_to_lib}")
endif()
set(_gyre_programs gyrerun)
if(TARGET gyre-topo)
  list(APPEND _gyre_programs gyre-topo)  # static, like gyrerun
endif()
if(TARGET gyre-bench)
  list(APPEND _gyre_programs gyre-bench)
  set_target_properties(gyre-bench PROPERTIES INSTALL_RPATH "${_gyre_bin_to_lib}")
endif()
if(TARGET gyre-train)  # the training harness's command line (docs/harness.md)
  list(APPEND _gyre_programs gyre-train)
  set_target_properties(gyre-train PROPERTIES INSTALL_RPATH "${_gyre_bin_to_lib}")
endif()
install(TARGETS ${_gyre_programs} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT runtime)

# The CMake package: gyre::gyre (shared) and gyre::gyre_static.
install(EXPORT gyreTargets NAMESPACE gyre:: DESTINATION ${GYRE_INSTALL_CMAKEDIR} COMPONENT development)
# The C++ runtime libgyre.a needs when a C compiler driver links it (GCC's
# and, on Debian, Clang's default library).
set(GYRE_CXX_RUNTIME_LIBS stdc++ m)
if(GYRE_HAVE_HWLOC)
  set(GYRE_CONFIG_HAVE_HWLOC TRUE)
  set(GYRE_CONFIG_HWLOC_NOTE ", hwloc")
else()
  set(GYRE_CONFIG_HAVE_HWLOC FALSE)
  set(GYRE_CONFIG_HWLOC_NOTE "")
endif()
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/gyreConfig.cmake.in
  ${PROJECT_BINARY_DIR}/install/gyreConfig.cmake INSTALL_DESTINATION ${GYRE_INSTALL_CMAKEDIR})
# 0.x releases promise nothing across minor versions; from 1.0 on, the major
# version is the ABI (the SONAME's number).
if(PROJECT_VERSION_MAJOR EQUAL 0)
  set(_gyre_compat SameMinorVersion)
else()
  set(_gyre_compat SameMajorVersion)
endif()
write_basic_package_version_file(${PROJECT_BINARY_DIR}/install/gyreConfigVersion.cmake
  COMPATIBILITY ${_gyre_compat})
install(FILES ${PROJECT_BINARY_DIR}/install/gyreConfig.cmake ${PROJECT_BINARY_DIR}/install/gyreConfigVersion.cmake
  DESTINATION ${GYRE_INSTALL_CMAKEDIR} COMPONENT development)

# gyre.pc. Its prefix is the one in force when installing (cmake --install
# --prefix, or /usr inside the Debian package), not the configure-time one,
# so the file is written at install time from a half-filled template. (A
# prefix relative to ${pcfiledir} would also move with the tree, but would
# give -I/usr/lib/pkgconfig/../../include for a /usr install: an explicit
# system include directory, which breaks C++'s #include_next.)
set(_gyre_pc_libs -lpthread -lrt)
foreach(l IN LISTS CMAKE_DL_LIBS)
  list(APPEND _gyre_pc_libs -l${l})
endforeach()
if(GYRE_HAVE_HWLOC)
  # -lhwloc, not Requires.private: that would make every pkg-config query
  # (for shared linking too) fail on a machine without libhwloc-dev.
  list(APPEND _gyre_pc_libs -lhwloc)
endif()
if(GYRE_HAVE_UCX)
  foreach(l IN LISTS UCX_LIBRARIES)
    list(APPEND _gyre_pc_libs -l${l})
  endforeach()
endif()
if(GYRE_HAVE_VERBS)
  list(APPEND _gyre_pc_libs -libverbs)
endif()
if(GYRE_HAVE_CUDA)
  # The CUDA runtime, static as libgyre.so links it (it opens the driver).
  list(APPEND _gyre_pc_libs -L${CUDAToolkit_LIBRARY_DIR} -lcudart_static)
endif()
# libgyre.a is C++: a C program linking it statically needs the C++ runtime.
foreach(l IN LISTS GYRE_CXX_RUNTIME_LIBS)
  list(APPEND _gyre_pc_libs -l${l})
endforeach()
list(JOIN _gyre_pc_libs " " GYRE_PC_LIBS_PRIVATE)
set(GYRE_PC_PREFIX "@GYRE_PC_PREFIX@")  # left for install time
configure_file(${PROJECT_SOURCE_DIR}/cmake/gyre.pc.in ${PROJECT_BINARY_DIR}/install/gyre.pc.in @ONLY)
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}")
  set(_gyre_pc_dir "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
else()
  set(_gyre_pc_dir "\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
endif()
# Written straight to its destination: each install has its own prefix, and
# two installs at once (the tests run cmake --install and cpack) must not
# share an intermediate file.
install(CODE "
  set(GYRE_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(_gyre_pc \"\$ENV{DESTDIR}${_gyre_pc_dir}/gyre.pc\")
  message(STATUS \"Installing: \${_gyre_pc}\")
  configure_file(\"${PROJECT_BINARY_DIR}/install/gyre.pc.in\" \"\${_gyre_pc}\" @ONLY)
  list(APPEND CMAKE_INSTALL_MANIFEST_FILES \"\${_gyre_pc}\")
" COMPONENT development)

# The Python package, and where it finds libgyre.so.0 once installed: a path
# relative to the package, so that a moved prefix keeps working.
install(DIRECTORY ${PROJECT_SOURCE_DIR}/python/gyre DESTINATION ${GYRE_INSTALL_PYTHONDIR}
  COMPONENT runtime FILES_MATCHING PATTERN "*.py" PATTERN "__pycache__" EXCLUDE)
gyre_install_path_between(GYRE_PY_LIBDIR ${GYRE_INSTALL_PYTHONDIR}/gyre ${CMAKE_INSTALL_LIBDIR})
file(WRITE ${PROJECT_BINARY_DIR}/install/_install_paths.py
  "# Written by cmake --install: libgyre's folder, relative to this package.\nLIBDIR = \"${GYRE_PY_LIBDIR}\"\n")
install(FILES ${PROJECT_BINARY_DIR}/install/_install_paths.py DESTINATION ${GYRE_INSTALL_PYTHONDIR}/gyre
  COMPONENT runtime)

# The PyTorch backend's extension (docs/pytorch.md) inside the Python
# package, finding the installed libgyre from there. A component of its own
# (and, in the Debian package, a package of its own: gyre-torch), since it
# needs torch and the rest of gyre does not.
if(TARGET gyre_torch)
  gyre_install_path_between(_gyre_torch_to_lib ${GYRE_INSTALL_PYTHONDIR}/gyre/torch ${CMAKE_INSTALL_LIBDIR})
  if(NOT IS_ABSOLUTE "${_gyre_torch_to_lib}")
    set(_gyre_torch_to_lib "$ORIGIN/${_gyre_torch_to_lib}")
  endif()
  set_target_properties(gyre_torch PROPERTIES INSTALL_RPATH "${_gyre_torch_to_lib}")
  install(TARGETS gyre_torch LIBRARY DESTINATION ${GYRE_INSTALL_PYTHONDIR}/gyre/torch COMPONENT torch)
endif()

include(${CMAKE_CURRENT_LIST_DIR}/Packaging.cmake)
