# Compiler flags shared by every gyre target, applied through gyre_flags.
add_library(gyre_flags INTERFACE)
target_compile_options(gyre_flags INTERFACE
  $<$<COMPILE_LANGUAGE:CXX,C>:-Wall -Wextra -Wshadow -Wno-unused-parameter>
  $<$<COMPILE_LANGUAGE:CXX>:-Wnon-virtual-dtor>)
# GCC 12 reports -Wrestrict on ordinary std::string concatenation at -O3
# (GCC bug 105329), a false positive.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13)
  target_compile_options(gyre_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-restrict>)
endif()
if(GYRE_WERROR)
  target_compile_options(gyre_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX,C>:-Werror>)
endif()
if(GYRE_SANITIZE)
  target_compile_options(gyre_flags INTERFACE
    -fsanitize=${GYRE_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  target_link_options(gyre_flags INTERFACE -fsanitize=${GYRE_SANITIZE})
endif()
# libFuzzer (tests/fuzz): the library carries the coverage the fuzzers steer
# by; only the fuzz targets themselves link libFuzzer's main.
if(GYRE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "GYRE_FUZZ needs clang (CC=clang CXX=clang++; tools/fuzz.sh)")
  endif()
  target_compile_options(gyre_flags INTERFACE -fsanitize=fuzzer-no-link)
endif()

# GCC warns that ThreadSanitizer does not model std::atomic_thread_fence.
# gyre's two fences order memory for another process (the shm doorbell) or a
# device's DMA engine, which TSan cannot see either way; what threads of one
# process share is ordered by atomics and locks that TSan does model.
if(GYRE_SANITIZE MATCHES "thread" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  target_compile_options(gyre_flags INTERFACE $<$<COMPILE_LANGUAGE:CXX>:-Wno-tsan>)
endif()
