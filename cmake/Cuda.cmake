# GYRE_CUDA=AUTO|ON|OFF: the CUDA kernels (kernels/cuda) and, with them, the
# device paths. AUTO builds them where nvcc is found (on PATH, CUDACXX, or
# the toolkit's usual /usr/local/cuda); ON insists; OFF is today's CPU
# build. The runtime is linked statically (libcudart_static), which opens
# the driver (libcuda.so.1) when first used: one libgyre.so serves hosts
# with and without a GPU or a driver.
#
# Device code: sm_90 (Hopper) machine code plus compute_90 PTX, which newer
# GPUs' drivers compile at load. One architecture keeps nvcc's share of a
# CI build small; CMAKE_CUDA_ARCHITECTURES overrides it.
set(GYRE_CUDA AUTO CACHE STRING "Build the CUDA kernels and device paths: AUTO, ON or OFF")
set_property(CACHE GYRE_CUDA PROPERTY STRINGS AUTO ON OFF)
set(GYRE_HAVE_CUDA OFF)
if(GYRE_CUDA STREQUAL "AUTO" AND GYRE_SANITIZE)
  # The sanitizers' flags are the host compiler's; nvcc and a sanitized
  # device runtime are another matter. The CPU path is what they check.
  message(STATUS "gyre: CUDA off in a sanitizer build (GYRE_CUDA=ON forces it)")
elseif(NOT GYRE_CUDA STREQUAL "OFF")
  if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
    set(ENV{CUDACXX} /usr/local/cuda/bin/nvcc)
  endif()
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
      set(CMAKE_CUDA_ARCHITECTURES 90-real 90-virtual)
    endif()
    set(CMAKE_CUDA_STANDARD 17)  # CMake 3.25 knows no CUDA20 for nvcc; the kernels need 17
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    # No runtime added behind our back: libgyre links the static one by path
    # (src/CMakeLists.txt), where a host linker cannot miss it.
    set(CMAKE_CUDA_RUNTIME_LIBRARY None)
    enable_language(CUDA)
    find_package(CUDAToolkit REQUIRED)
    set(GYRE_HAVE_CUDA ON)
  elseif(GYRE_CUDA STREQUAL "ON")
    message(FATAL_ERROR "GYRE_CUDA=ON, but no CUDA compiler was found: put nvcc on PATH or set CUDACXX")
  endif()
elseif(GYRE_CUDA STREQUAL "OFF")
  message(STATUS "gyre: CUDA off (GYRE_CUDA=OFF)")
endif()
if(NOT GYRE_HAVE_CUDA)
  # Its headers still serve the NCCL header checks (tests/compat).
  find_package(CUDAToolkit QUIET)
endif()
if(NOT GYRE_CUDA MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "GYRE_CUDA must be AUTO, ON or OFF, not '${GYRE_CUDA}'")
endif()
