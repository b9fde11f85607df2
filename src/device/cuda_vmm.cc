#include "device/cuda_vmm.h"

#include <cuda.h>
#include <cuda_runtime.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "base/error.h"

namespace gyre::device {

namespace {

// What travels: a mark telling it from a cudaIpc handle (an opaque 64
// bytes of the driver's: a collision with the mark is not a practical
// concern), the owner's pid and descriptor, the allocation's length, and
// its number in the owner (a later allocation that gets a freed one's
// descriptor number must not be taken for it: peers keep what they opened
// by the handle's bytes).
constexpr uint64_t kVmmMagic = 0x67797265'766d6d31ULL;  // "gyrevmm1"
struct VmmHandle {
  uint64_t magic;
  int64_t pid;
  int64_t fd;
  uint64_t bytes;
  int64_t device;
  uint64_t serial;
};
static_assert(sizeof(VmmHandle) <= sizeof(IpcHandle));

template <class F>
F entry(const char* name) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult q{};
  if (cudaGetDriverEntryPointByVersion(name, &fn, 12000, cudaEnableDefault, &q) != cudaSuccess ||
      q != cudaDriverEntryPointSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return reinterpret_cast<F>(fn);
}

void cu(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS)
    throwError(gyreSystemError, std::string("CUDA: ") + what + " failed (CUresult " +
                                    std::to_string(static_cast<int>(r)) + ")");
}

CUmemAllocationProp propertiesFor(int device) {
  CUmemAllocationProp p{};
  p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  p.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  p.location.id = device;
  p.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  return p;
}

}  // namespace

struct CudaVmm::Api {
  CUresult (*create)(CUmemGenericAllocationHandle*, size_t, const CUmemAllocationProp*, unsigned long long) =
      entry<decltype(create)>("cuMemCreate");
  CUresult (*reserve)(CUdeviceptr*, size_t, size_t, CUdeviceptr, unsigned long long) =
      entry<decltype(reserve)>("cuMemAddressReserve");
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long) =
      entry<decltype(map)>("cuMemMap");
  CUresult (*setAccess)(CUdeviceptr, size_t, const CUmemAccessDesc*, size_t) =
      entry<decltype(setAccess)>("cuMemSetAccess");
  CUresult (*unmap)(CUdeviceptr, size_t) = entry<decltype(unmap)>("cuMemUnmap");
  CUresult (*addressFree)(CUdeviceptr, size_t) = entry<decltype(addressFree)>("cuMemAddressFree");
  CUresult (*release)(CUmemGenericAllocationHandle) = entry<decltype(release)>("cuMemRelease");
  CUresult (*exportHandle)(void*, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long) =
      entry<decltype(exportHandle)>("cuMemExportToShareableHandle");
  CUresult (*importHandle)(CUmemGenericAllocationHandle*, void*, CUmemAllocationHandleType) =
      entry<decltype(importHandle)>("cuMemImportFromShareableHandle");
  CUresult (*granularity)(size_t*, const CUmemAllocationProp*, CUmemAllocationGranularity_flags) =
      entry<decltype(granularity)>("cuMemGetAllocationGranularity");
  CUresult (*attribute)(int*, CUdevice_attribute, CUdevice) = entry<decltype(attribute)>("cuDeviceGetAttribute");

  bool complete() const {
    return create && reserve && map && setAccess && unmap && addressFree && release && exportHandle &&
           importHandle && granularity && attribute;
  }
};

CudaVmm::CudaVmm() : api_(std::make_unique<Api>()) {}

CudaVmm::~CudaVmm() = default;  // what is still allocated or open goes with the process

bool CudaVmm::usable(int device) const {
  if (!api_->complete() || device < 0) return false;
  int vmm = 0, fd = 0;
  if (api_->attribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, device) != CUDA_SUCCESS ||
      api_->attribute(&fd, CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, device) != CUDA_SUCCESS)
    return false;
  return vmm && fd;
}

void* CudaVmm::allocate(size_t bytes, int device) {
  const CUmemAllocationProp prop = propertiesFor(device);
  size_t gran = 0;
  cu(api_->granularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED), "cuMemGetAllocationGranularity");
  if (!gran) gran = size_t{2} << 20;
  const size_t size = ((bytes ? bytes : 1) + gran - 1) / gran * gran;
  CUmemGenericAllocationHandle h = 0;
  cu(api_->create(&h, size, &prop, 0), "cuMemCreate (device memory with a shareable handle)");
  CUdeviceptr va = 0;
  int fd = -1;
  try {
    cu(api_->reserve(&va, size, gran, 0, 0), "cuMemAddressReserve");
    if (CUresult r = api_->map(va, size, 0, h, 0); r != CUDA_SUCCESS) {
      api_->addressFree(va, size);
      cu(r, "cuMemMap");
    }
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = api_->setAccess(va, size, &access, 1); r != CUDA_SUCCESS) {
      api_->unmap(va, size);
      api_->addressFree(va, size);
      cu(r, "cuMemSetAccess");
    }
    if (CUresult r = api_->exportHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0); r != CUDA_SUCCESS) {
      api_->unmap(va, size);
      api_->addressFree(va, size);
      cu(r, "cuMemExportToShareableHandle");
    }
  } catch (...) {
    api_->release(h);
    throw;
  }
  std::lock_guard<std::mutex> l(mu_);
  own_[static_cast<uintptr_t>(va)] = Allocation{size, device, fd, static_cast<unsigned long long>(h), ++serials_};
  return reinterpret_cast<void*>(static_cast<uintptr_t>(va));
}

bool CudaVmm::free(void* p) {
  Allocation a;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = own_.find(reinterpret_cast<uintptr_t>(p));
    if (it == own_.end()) return false;
    a = it->second;
    own_.erase(it);
  }
  const auto va = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(p));
  // A peer that still maps it keeps the memory; ours goes.
  cu(api_->unmap(va, a.bytes), "cuMemUnmap");
  api_->addressFree(va, a.bytes);
  api_->release(static_cast<CUmemGenericAllocationHandle>(a.handle));
  ::close(a.fd);
  return true;
}

bool CudaVmm::exportMemory(const void* p, ExportedMemory& out) const {
  const auto at = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> l(mu_);
  auto it = own_.upper_bound(at);
  if (it == own_.begin()) return false;
  --it;
  if (at >= it->first + it->second.bytes) return false;
  const VmmHandle h{kVmmMagic, getpid(), it->second.fd, it->second.bytes, it->second.device, it->second.serial};
  out = ExportedMemory{};
  std::memcpy(out.handle.bytes, &h, sizeof h);
  out.offset = at - it->first;
  out.bytes = it->second.bytes;
  return true;
}

bool CudaVmm::isVmmHandle(const IpcHandle& h) {
  uint64_t magic = 0;
  std::memcpy(&magic, h.bytes, sizeof magic);
  return magic == kVmmMagic;
}

void* CudaVmm::open(const IpcHandle& handle) {
  VmmHandle h;
  std::memcpy(&h, handle.bytes, sizeof h);
  if (h.pid == getpid())
    throwError(gyreInvalidArgument, "CUDA: a memory handle cannot be opened in the process that made it");
  if (!api_->complete()) throwError(gyreSystemError, "CUDA: this driver lacks the virtual memory functions");
  // The owner's descriptor, duplicated into this process.
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, static_cast<pid_t>(h.pid), 0));
  if (pidfd < 0)
    throwError(gyreSystemError, "cannot reach process " + std::to_string(h.pid) + " that owns the device memory (" +
                                    std::strerror(errno) + ")");
  const int fd = static_cast<int>(syscall(SYS_pidfd_getfd, pidfd, static_cast<int>(h.fd), 0));
  const int err = errno;
  ::close(pidfd);
  if (fd < 0)
    throwError(gyreSystemError, "cannot take process " + std::to_string(h.pid) + "'s device memory handle (" +
                                    std::strerror(err) + "; it needs the permission process_vm_readv needs)");
  CUmemGenericAllocationHandle mh = 0;
  const CUresult imported =
      api_->importHandle(&mh, reinterpret_cast<void*>(static_cast<uintptr_t>(fd)), CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  ::close(fd);  // the imported handle keeps the memory
  cu(imported, "cuMemImportFromShareableHandle");
  CUdeviceptr va = 0;
  try {
    cu(api_->reserve(&va, h.bytes, 0, 0, 0), "cuMemAddressReserve");
    if (CUresult r = api_->map(va, h.bytes, 0, mh, 0); r != CUDA_SUCCESS) {
      api_->addressFree(va, h.bytes);
      cu(r, "cuMemMap");
    }
    int dev = 0;
    cudaGetDevice(&dev);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = dev;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = api_->setAccess(va, h.bytes, &access, 1); r != CUDA_SUCCESS) {
      api_->unmap(va, h.bytes);
      api_->addressFree(va, h.bytes);
      cu(r, "cuMemSetAccess (a peer's memory for this GPU)");
    }
  } catch (...) {
    api_->release(mh);
    throw;
  }
  api_->release(mh);  // the mapping keeps it
  std::lock_guard<std::mutex> l(mu_);
  opened_[static_cast<uintptr_t>(va)] = h.bytes;
  return reinterpret_cast<void*>(static_cast<uintptr_t>(va));
}

bool CudaVmm::close(void* base) noexcept {
  size_t bytes = 0;
  {
    std::lock_guard<std::mutex> l(mu_);
    auto it = opened_.find(reinterpret_cast<uintptr_t>(base));
    if (it == opened_.end()) return false;
    bytes = it->second;
    opened_.erase(it);
  }
  const auto va = static_cast<CUdeviceptr>(reinterpret_cast<uintptr_t>(base));
  api_->unmap(va, bytes);
  api_->addressFree(va, bytes);
  return true;
}

}  // namespace gyre::device
