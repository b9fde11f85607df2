# Required: pthreads. Everything else is optional and reported in the summary.
set(THREADS_PREFER_PTHREAD_FLAG ON)
find_package(Threads REQUIRED)
find_package(PkgConfig QUIET)

# CUDA: the kernels and device paths where the toolkit is (cmake/Cuda.cmake);
# the CPU build never needs it.
include(${CMAKE_CURRENT_LIST_DIR}/Cuda.cmake)

if(PkgConfig_FOUND)
  pkg_check_modules(UCX QUIET IMPORTED_TARGET ucx)
  pkg_check_modules(HWLOC QUIET IMPORTED_TARGET hwloc)
endif()
set(GYRE_HAVE_UCX ${UCX_FOUND})
set(GYRE_HAVE_HWLOC ${HWLOC_FOUND})

find_library(IBVERBS_LIBRARY ibverbs)
find_path(IBVERBS_INCLUDE_DIR infiniband/verbs.h)
if(IBVERBS_LIBRARY AND IBVERBS_INCLUDE_DIR)
  set(GYRE_HAVE_VERBS TRUE)
else()
  set(GYRE_HAVE_VERBS FALSE)
endif()

# OpenBLAS, for the training harness's matrix products (harness/). Found by
# its own config header: Debian's cblas.h alternative may be the reference
# BLAS's, which lacks openblas_set_num_threads (the harness's determinism).
find_library(OPENBLAS_LIBRARY openblas)
find_path(OPENBLAS_INCLUDE_DIR openblas_config.h
          PATH_SUFFIXES openblas-pthread openblas-openmp openblas-serial openblas)
if(OPENBLAS_LIBRARY AND OPENBLAS_INCLUDE_DIR AND EXISTS ${OPENBLAS_INCLUDE_DIR}/cblas.h)
  set(GYRE_HAVE_OPENBLAS TRUE)
else()
  set(GYRE_HAVE_OPENBLAS FALSE)
endif()

# GLPK, the FlexSP planner's MIP solver (flexsp/solver_glpk.cc). Optional:
# without it the planner plans greedily and says so.
option(GYRE_FLEXSP_GLPK "Solve the FlexSP planner's MIP with GLPK where it is found" ON)
set(GYRE_HAVE_GLPK FALSE)
if(GYRE_FLEXSP_GLPK)
  find_library(GLPK_LIBRARY glpk)
  find_path(GLPK_INCLUDE_DIR glpk.h)
  if(GLPK_LIBRARY AND GLPK_INCLUDE_DIR)
    set(GYRE_HAVE_GLPK TRUE)
  endif()
endif()

set(GYRE_GTEST_SOURCE "" CACHE PATH
    "GoogleTest's sources to build the tests with, where no installed GoogleTest is (tools/gpu-check.sh)")
if(GYRE_BUILD_TESTS AND GYRE_GTEST_SOURCE)
  set(INSTALL_GTEST OFF CACHE BOOL "" FORCE)
  add_subdirectory(${GYRE_GTEST_SOURCE} ${PROJECT_BINARY_DIR}/googletest EXCLUDE_FROM_ALL SYSTEM)
  foreach(t gtest gtest_main gmock)
    if(NOT TARGET GTest::${t})  # googletest 1.11+ makes them itself
      add_library(GTest::${t} ALIAS ${t})
    endif()
  endforeach()
  set(GTest_FOUND TRUE)
elseif(GYRE_BUILD_TESTS)
  find_package(GTest QUIET)
  if(NOT GTest_FOUND)
    message(FATAL_ERROR "GoogleTest not found: apt-get install libgtest-dev, or -DGYRE_BUILD_TESTS=OFF")
  endif()
endif()
if(GYRE_BUILD_BENCH)
  find_package(benchmark QUIET)
  find_package(MPI QUIET COMPONENTS C)
  find_package(Gloo QUIET CONFIG)
endif()
