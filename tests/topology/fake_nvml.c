/* A stand-in for NVIDIA's libnvidia-ml.so.1, built for the topology tests:
 * the NVML entry points gyre's detector calls (src/topology/detect_gpu.cc),
 * with nvml.h's ABI (types and layouts as in the nvml.h of CUDA 12 and 13),
 * answering for the machine of fake_dgx.h.
 *
 * Set in the environment before nvmlInit_v2:
 *   GYRE_FAKE_NVML_INIT_ERROR=n  nvmlInit_v2 fails with n (9: driver not loaded)
 *   GYRE_FAKE_NVML_SHAPE=pairs   no NVSwitches: GPUs bridged in pairs (bus
 *                                order 0-1, 2-3, ...), 12 lanes each, compute
 *                                capability 8.0 (A100 PCIe boards)
 * and, for the tests that hold the library open, gyreFakeNvmlInits/Shutdowns
 * (successful calls) and gyreFakeNvmlMisuse (calls while not initialized or
 * with arguments NVML would refuse). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_dgx.h"

#define EXPORT __attribute__((visibility("default")))

/* From nvml.h. */
typedef enum nvmlReturn_enum {
  NVML_SUCCESS = 0,
  NVML_ERROR_UNINITIALIZED = 1,
  NVML_ERROR_INVALID_ARGUMENT = 2,
} nvmlReturn_t;
typedef enum nvmlEnableState_enum {
  NVML_FEATURE_DISABLED = 0,
  NVML_FEATURE_ENABLED = 1
} nvmlEnableState_t;
typedef enum nvmlIntNvLinkDeviceType_enum {
  NVML_NVLINK_DEVICE_TYPE_GPU = 0x00,
  NVML_NVLINK_DEVICE_TYPE_IBMNPU = 0x01,
  NVML_NVLINK_DEVICE_TYPE_SWITCH = 0x02,
  NVML_NVLINK_DEVICE_TYPE_UNKNOWN = 0xFF
} nvmlIntNvLinkDeviceType_t;
typedef struct nvmlPciInfo_st {
  char busIdLegacy[16]; /* NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE */
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pciDeviceId; /* device id << 16 | vendor id */
  unsigned int pciSubSystemId;
  char busId[32]; /* NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE */
} nvmlPciInfo_t;
_Static_assert(sizeof(nvmlPciInfo_t) == 68 && offsetof(nvmlPciInfo_t, busId) == 36,
               "nvmlPciInfo_t as in nvml.h");
typedef struct nvmlDevice_st* nvmlDevice_t;

struct nvmlDevice_st {
  int index;
};
static struct nvmlDevice_st devices[kFakeGpus];
static int refs; /* NVML counts nvmlInit_v2 calls; nvmlShutdown undoes one */
static int pairs;
static int inits, shutdowns, misuse;

EXPORT int gyreFakeNvmlInits(void) { return inits; }
EXPORT int gyreFakeNvmlShutdowns(void) { return shutdowns; }
EXPORT int gyreFakeNvmlMisuse(void) { return misuse; }

static nvmlReturn_t refuse(nvmlReturn_t r) {
  ++misuse;
  return r;
}

/* Checks what every device query checks; the index of the device or -1. */
static int deviceIndex(nvmlDevice_t device) {
  if (!refs) return -1;
  for (int i = 0; i < kFakeGpus; ++i)
    if (device == &devices[i]) return i;
  return -1;
}

static void fillPci(nvmlPciInfo_t* pci, unsigned bus, unsigned deviceId) {
  memset(pci, 0, sizeof(*pci));
  pci->domain = 0;
  pci->bus = bus;
  pci->device = 0;
  pci->pciDeviceId = deviceId << 16 | 0x10de;
  pci->pciSubSystemId = 0x16c110de;
  /* As NVML writes them: upper case, the domain in 4 and 8 digits. */
  snprintf(pci->busIdLegacy, sizeof(pci->busIdLegacy), "%04X:%02X:%02X.0", 0u, bus, 0u);
  snprintf(pci->busId, sizeof(pci->busId), "%08X:%02X:%02X.0", 0u, bus, 0u);
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
  const char* fail = getenv("GYRE_FAKE_NVML_INIT_ERROR");
  if (fail && atoi(fail) != 0) return (nvmlReturn_t)atoi(fail);
  const char* shape = getenv("GYRE_FAKE_NVML_SHAPE");
  pairs = shape && strcmp(shape, "pairs") == 0;
  for (int i = 0; i < kFakeGpus; ++i) devices[i].index = i;
  ++refs;
  ++inits;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlShutdown(void) {
  if (!refs) return refuse(NVML_ERROR_UNINITIALIZED);
  --refs;
  ++shutdowns;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int* deviceCount) {
  if (!refs) return refuse(NVML_ERROR_UNINITIALIZED);
  if (!deviceCount) return refuse(NVML_ERROR_INVALID_ARGUMENT);
  *deviceCount = kFakeGpus;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t* device) {
  if (!refs) return refuse(NVML_ERROR_UNINITIALIZED);
  if (index >= kFakeGpus || !device) return refuse(NVML_ERROR_INVALID_ARGUMENT);
  *device = &devices[index];
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t* pci) {
  const int i = deviceIndex(device);
  if (i < 0 || !pci) return refuse(refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED);
  fillPci(pci, kFakeGpuBus[i], pairs ? 0x20f1 : 0x2330);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t device, int* major,
                                                       int* minor) {
  if (deviceIndex(device) < 0 || !major || !minor)
    return refuse(refs ? NVML_ERROR_INVALID_ARGUMENT : NVML_ERROR_UNINITIALIZED);
  *major = pairs ? 8 : 9;
  *minor = 0;
  return NVML_SUCCESS;
}

/* NVML answers INVALID_ARGUMENT for a link past the device's last one: the
 * detector asks up to NVML_NVLINK_MAX_LINKS, which is not an error. */
static int linkQuery(nvmlDevice_t device, unsigned int link, const void* out) {
  const int i = deviceIndex(device);
  if (i < 0 || !out) {
    ++misuse;
    return -1;
  }
  return link < kFakeLinks ? i : -1;
}

static int linkActive(unsigned int link) { return pairs ? link < 12 : 1; }

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkState(nvmlDevice_t device, unsigned int link,
                                             nvmlEnableState_t* isActive) {
  if (!refs) return refuse(NVML_ERROR_UNINITIALIZED);
  if (linkQuery(device, link, isActive) < 0) return NVML_ERROR_INVALID_ARGUMENT;
  *isActive = linkActive(link) ? NVML_FEATURE_ENABLED : NVML_FEATURE_DISABLED;
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemotePciInfo_v2(nvmlDevice_t device, unsigned int link,
                                                        nvmlPciInfo_t* pci) {
  if (!refs) return refuse(NVML_ERROR_UNINITIALIZED);
  const int i = linkQuery(device, link, pci);
  if (i < 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (!linkActive(link)) return refuse(NVML_ERROR_INVALID_ARGUMENT); /* asked about a dark link */
  if (pairs)
    fillPci(pci, kFakeGpuBus[i ^ 1], 0x20f1);
  else
    fillPci(pci, kFakeSwitchBus[kFakeLinkSwitch[link]], 0x22a3);
  return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetNvLinkRemoteDeviceType(nvmlDevice_t device, unsigned int link,
                                                        nvmlIntNvLinkDeviceType_t* type) {
  if (!refs) return refuse(NVML_ERROR_UNINITIALIZED);
  if (linkQuery(device, link, type) < 0) return NVML_ERROR_INVALID_ARGUMENT;
  if (!linkActive(link)) return refuse(NVML_ERROR_INVALID_ARGUMENT);
  *type = pairs ? NVML_NVLINK_DEVICE_TYPE_GPU : NVML_NVLINK_DEVICE_TYPE_SWITCH;
  return NVML_SUCCESS;
}
