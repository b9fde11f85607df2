/* A stand-in for the CUDA runtime (libcudart.so.12), built for the topology
 * tests: the four calls gyre makes (src/topology/detect_gpu.cc), with
 * cuda_runtime_api.h's signatures, for the GPUs of fake_dgx.h numbered in
 * REVERSE bus order (device 0 is the last GPU on the bus), so that a test
 * can tell CUDA's numbering from the bus-order fallback.
 *
 * GYRE_FAKE_CUDA_ERROR=n in the environment makes cudaGetDeviceCount fail
 * with n (35: the driver is older than the runtime), as a runtime installed
 * without a usable driver does. */
#include <stdio.h>
#include <stdlib.h>

#include "fake_dgx.h"

#define EXPORT __attribute__((visibility("default")))

/* From driver_types.h. */
typedef enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorInvalidDevice = 101,
} cudaError_t;

static _Thread_local int current; /* the runtime's current device is per thread */

static int countError(void) {
  const char* e = getenv("GYRE_FAKE_CUDA_ERROR");
  return e ? atoi(e) : 0;
}

EXPORT cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return cudaErrorInvalidValue;
  if (countError()) return (cudaError_t)countError();
  *count = kFakeGpus;
  return cudaSuccess;
}

EXPORT cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device) {
  if (device < 0 || device >= kFakeGpus) return cudaErrorInvalidDevice;
  /* The runtime writes "0000:B9:00.0": 13 bytes with the NUL. */
  if (!pciBusId || len < 13) return cudaErrorInvalidValue;
  snprintf(pciBusId, (size_t)len, "%04X:%02X:%02X.0", 0u, kFakeGpuBus[kFakeGpus - 1 - device], 0u);
  return cudaSuccess;
}

EXPORT cudaError_t cudaGetDevice(int* device) {
  if (!device) return cudaErrorInvalidValue;
  *device = current;
  return cudaSuccess;
}

EXPORT cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= kFakeGpus) return cudaErrorInvalidDevice;
  current = device;
  return cudaSuccess;
}
