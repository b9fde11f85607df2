# The installed tree and the Debian package, used as a user would
# (docs/install.md). Both install the whole build, so they run after it.
#
# Not registered in a sanitizer build: the installed libgyre is then
# instrumented, but the exported targets and gyre.pc (rightly) carry no
# -fsanitize flags, so a consumer built from them cannot link libgyre.a
# (the __asan_* symbols are missing) nor run against libgyre.so (ASan must be
# the first library in the process). Packages are built without sanitizers.
if(GYRE_SANITIZE)
  return()
endif()

add_test(NAME install_consumer
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/check-install.sh ${PROJECT_BINARY_DIR} ${CMAKE_COMMAND}
          ${CMAKE_GENERATOR} ${CMAKE_C_COMPILER})
set_tests_properties(install_consumer PROPERTIES TIMEOUT 180 PROCESSORS 2)

# Root only (a mount namespace with overlays, dpkg -i); skipped otherwise.
add_test(NAME debian_package COMMAND ${CMAKE_CURRENT_LIST_DIR}/check-deb.sh ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER})
set_tests_properties(debian_package PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77 PROCESSORS 2)
