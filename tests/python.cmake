# The Python binding (python/gyre) and its example, run by Debian's python3
# under gyrerun as a user would. Skipped (77) where python3 lacks numpy or
# pytest.
#
# Not registered in a sanitizer build: libgyre is then instrumented with
# ASan/UBSan, and ctypes cannot load it into an uninstrumented python3 (the
# ASan runtime must come first in the process, so the load fails or
# LD_PRELOAD'ing the runtime reports python's own allocations as leaks).
# The C tests cover the library under the sanitizers; these cover the binding.
if(GYRE_SANITIZE)
  return()
endif()

# Debian's interpreter, which python3-numpy and python3-pytest install into;
# a pyenv or venv python3 earlier on PATH would not have them.
set(GYRE_PYTHON /usr/bin/python3 CACHE FILEPATH "Python interpreter for the binding's tests")

set(_gyre_py_runner ${PROJECT_SOURCE_DIR}/python/tests/run_ranks.sh)
set(_gyre_py_env
  GYRE_LIBRARY=$<TARGET_FILE:gyre>
  PYTHONPATH=${PROJECT_SOURCE_DIR}/python
  PYTHONDONTWRITEBYTECODE=1   # leave no __pycache__ in the source tree
  GYRE_TIMEOUT_MS=20000)      # a stuck call fails well inside gyrerun's 60 s

foreach(n 2 3 4)
  add_test(NAME python_binding_n${n}
    COMMAND ${_gyre_py_runner} $<TARGET_FILE:gyrerun> ${GYRE_PYTHON} ${n} numpy,pytest
            -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/python/tests
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(python_binding_n${n} PROPERTIES
    ENVIRONMENT "${_gyre_py_env}" TIMEOUT 90 SKIP_RETURN_CODE 77 PROCESSORS ${n})
endforeach()

# Device arrays (__cuda_array_interface__, DLPack) and streams, on the
# host-emulated GPU.
add_test(NAME python_device_arrays_n2
  COMMAND ${_gyre_py_runner} $<TARGET_FILE:gyrerun> ${GYRE_PYTHON} 2 numpy,pytest
          -m pytest -q -p no:cacheprovider ${PROJECT_SOURCE_DIR}/python/tests_device
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python_device_arrays_n2 PROPERTIES
  ENVIRONMENT "${_gyre_py_env};GYRE_DEVICE_BACKEND=emulated" TIMEOUT 90 SKIP_RETURN_CODE 77 PROCESSORS 2)

# The data-parallel example: it asserts that the loss falls and that every
# rank ends with the same parameters, and exits non-zero otherwise.
add_test(NAME python_example_dp_numpy
  COMMAND ${_gyre_py_runner} $<TARGET_FILE:gyrerun> ${GYRE_PYTHON} 2 numpy
          ${PROJECT_SOURCE_DIR}/examples/python/dp_numpy.py
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python_example_dp_numpy PROPERTIES
  ENVIRONMENT "${_gyre_py_env}" TIMEOUT 90 SKIP_RETURN_CODE 77 PROCESSORS 2)

# The convergence experiment cut short (examples/python/convergence.py
# --short): a small MLP trained on 4 ranks with each codec and each
# decentralized mode must end within the issue's bars of full-precision
# AllReduce (2% for fp16, bf16, int8; 5% for 1-bit with error feedback and
# for peer averaging), and 1-bit without error feedback clearly worse.
add_test(NAME python_convergence_n4
  COMMAND ${_gyre_py_runner} $<TARGET_FILE:gyrerun> ${GYRE_PYTHON} 4 numpy
          ${PROJECT_SOURCE_DIR}/examples/python/convergence.py --short --check
  WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(python_convergence_n4 PROPERTIES
  ENVIRONMENT "${_gyre_py_env}" TIMEOUT 90 SKIP_RETURN_CODE 77 PROCESSORS 4)

# The PyTorch backend (pytorch/, python/gyre/torch): every torch.distributed
# collective against gloo's result in the same job, async Works and
# futures, DDP against gloo, the compression hooks, errors. Registered when
# the backend is built (libtorch-dev found).
if(GYRE_HAVE_TORCH)
  set(_gyre_torch_env "${_gyre_py_env};GYRE_TORCH_EXTENSION=$<TARGET_FILE:gyre_torch>")
  foreach(n 2 3 4)
    add_test(NAME python_torch_n${n}
      COMMAND ${_gyre_py_runner} $<TARGET_FILE:gyrerun> ${GYRE_PYTHON} ${n} torch,pytest
              -m pytest -q -p no:cacheprovider -W ignore::UserWarning ${PROJECT_SOURCE_DIR}/python/tests_torch
      WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(python_torch_n${n} PROPERTIES
      ENVIRONMENT "${_gyre_torch_env}" TIMEOUT 120 SKIP_RETURN_CODE 77 PROCESSORS ${n})
  endforeach()
  # Jobs the tests start themselves: failures (a killed rank, a stalled
  # one, a mismatch) that gyrerun would cut short, every init method, and
  # torchrun running a gloo script on gyre.
  add_test(NAME python_torch_jobs
    COMMAND ${_gyre_py_runner} - ${GYRE_PYTHON} 1 torch,pytest
            -m pytest -q -p no:cacheprovider -W ignore::UserWarning ${PROJECT_SOURCE_DIR}/python/tests_torch_jobs
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
  set_tests_properties(python_torch_jobs PROPERTIES
    ENVIRONMENT "${_gyre_torch_env}" TIMEOUT 300 SKIP_RETURN_CODE 77 PROCESSORS 3)
endif()
