#include "topology/detect_gpu.h"

#include <dlfcn.h>

#include <algorithm>
#include <cstddef>
#include <cstdio>
#include <cstring>

namespace gyre::topology {

namespace {

// The parts of nvml.h used here, declared locally so that building never
// needs the driver's headers. Layouts follow NVML's stable ABI (the _v2/_v3
// entry points; nvmlPciInfo_t as nvmlDeviceGetPciInfo_v3 and
// nvmlDeviceGetNvLinkRemotePciInfo_v2 fill it; nvmlEnableState_t and
// nvmlIntNvLinkDeviceType_t are C enums, passed as int).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
static_assert(sizeof(NvmlPciInfo) == 68 && offsetof(NvmlPciInfo, busId) == 36,
              "nvmlPciInfo_t's layout");
// NVML_NVLINK_MAX_LINKS: 36 in the nvml.h of CUDA 13.3, 18 before. Asking
// past a device's last link is answered NVML_ERROR_INVALID_ARGUMENT, so the
// larger bound costs older drivers nothing.
constexpr unsigned kNvmlMaxLinks = 36;
constexpr int kNvmlLinkToSwitch = 2;  // nvmlIntNvLinkDeviceType_t: NVSWITCH

struct Nvml {
  void* lib = nullptr;
  nvmlReturn_t (*init)() = nullptr;
  nvmlReturn_t (*shutdown)() = nullptr;
  nvmlReturn_t (*count)(unsigned*) = nullptr;
  nvmlReturn_t (*byIndex)(unsigned, nvmlDevice_t*) = nullptr;
  nvmlReturn_t (*pciInfo)(nvmlDevice_t, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*capability)(nvmlDevice_t, int*, int*) = nullptr;
  nvmlReturn_t (*linkState)(nvmlDevice_t, unsigned, int*) = nullptr;
  nvmlReturn_t (*remotePci)(nvmlDevice_t, unsigned, NvmlPciInfo*) = nullptr;
  nvmlReturn_t (*remoteType)(nvmlDevice_t, unsigned, int*) = nullptr;

  template <typename F>
  void bind(F& f, const char* name) {
    f = reinterpret_cast<F>(dlsym(lib, name));
  }
  bool open(const std::string& name) {
    lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) return false;
    bind(init, "nvmlInit_v2");
    bind(shutdown, "nvmlShutdown");
    bind(count, "nvmlDeviceGetCount_v2");
    bind(byIndex, "nvmlDeviceGetHandleByIndex_v2");
    bind(pciInfo, "nvmlDeviceGetPciInfo_v3");
    bind(capability, "nvmlDeviceGetCudaComputeCapability");
    bind(linkState, "nvmlDeviceGetNvLinkState");
    bind(remotePci, "nvmlDeviceGetNvLinkRemotePciInfo_v2");
    bind(remoteType, "nvmlDeviceGetNvLinkRemoteDeviceType");
    if (!init || !count || !byIndex || !pciInfo || init() != 0) {
      dlclose(lib);
      lib = nullptr;
      return false;
    }
    return true;
  }
  Nvml() = default;
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;
  ~Nvml() {
    if (!lib) return;
    if (shutdown) shutdown();
    dlclose(lib);
  }
};

// NVML writes "00000000:17:00.0", CUDA "0000:17:00.0" (both in upper
// case); sysfs "0000:17:00.0", its domain with at least 4 digits. Parsed and
// written again rather than cut, so that a domain above 0xffff (VMD) keeps
// its leading digit.
template <size_t N>
std::string normalBusId(const char (&s)[N]) {
  const std::string text(s, strnlen(s, N));  // the driver's buffer, not trusted to end
  unsigned domain = 0, bus = 0, device = 0, function = 0;
  if (std::sscanf(text.c_str(), "%x:%x:%x.%x", &domain, &bus, &device, &function) != 4) return {};
  char out[32];
  std::snprintf(out, sizeof(out), "%04x:%02x:%02x.%x", domain, bus, device, function);
  return out;
}

void addNvLinks(Graph& g, Nvml& nvml) {
  unsigned n = 0;
  if (nvml.count(&n) != 0) return;
  for (unsigned i = 0; i < n; ++i) {
    nvmlDevice_t dev = nullptr;
    NvmlPciInfo pci{};
    if (nvml.byIndex(i, &dev) != 0 || nvml.pciInfo(dev, &pci) != 0) continue;
    const int gpu = g.findBusId(normalBusId(pci.busId));
    if (gpu < 0 || g.nodes[gpu].kind != NodeKind::Gpu) continue;
    int major = 0, minor = 0;
    if (nvml.capability && nvml.capability(dev, &major, &minor) == 0)
      g.nodes[gpu].sm = major * 10 + minor;
    if (!nvml.linkState || !nvml.remotePci) continue;
    for (unsigned link = 0; link < kNvmlMaxLinks; ++link) {
      int active = 0;
      NvmlPciInfo remote{};
      if (nvml.linkState(dev, link, &active) != 0 || !active) continue;
      if (nvml.remotePci(dev, link, &remote) != 0) continue;
      int type = -1;
      if (nvml.remoteType) nvml.remoteType(dev, link, &type);
      const std::string target = normalBusId(remote.busId);
      int t = g.findBusId(target);
      if (t < 0 && type == kNvmlLinkToSwitch && !target.empty()) {
        Node s;
        s.kind = NodeKind::NvSwitch;
        s.busId = target;
        s.pciClass = "0x068000";
        t = g.add(s);
      }
      // NVLink ends only at GPUs and NVSwitches here (not at a bridge or
      // NIC that happens to share an address, nor at a POWER CPU).
      if (t < 0 || t == gpu ||
          (g.nodes[t].kind != NodeKind::Gpu && g.nodes[t].kind != NodeKind::NvSwitch))
        continue;
      bool merged = false;
      for (Link& l : g.links)
        if ((l.a == gpu && l.b == t) || (l.a == t && l.b == gpu)) {
          // Each GPU of a pair reports the link: count it from one side.
          if (l.a == gpu) ++l.count;
          merged = true;
        }
      if (!merged) g.links.push_back(Link{gpu, t, LinkKind::NvLink, 1, 0});
    }
  }
  for (Link& l : g.links) l.gbps = l.count * Graph::nvLinkLaneGBps(g.nodes[l.a].sm);
}

// CUDA's own numbering (it may differ from bus order): from the first
// runtime that numbers any of these GPUs. One that loads but cannot answer
// (no driver, a driver too old for it, no visible device) gives way to the
// next name.
bool numberFromCuda(Graph& g, const std::vector<std::string>& names) {
  using CountFn = int (*)(int*);
  using BusFn = int (*)(char*, int, int);
  for (const std::string& name : names) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) continue;
    auto count = reinterpret_cast<CountFn>(dlsym(lib, "cudaGetDeviceCount"));
    auto bus = reinterpret_cast<BusFn>(dlsym(lib, "cudaDeviceGetPCIBusId"));
    int n = 0;
    bool any = false;
    if (count && bus && count(&n) == 0) {
      for (int d = 0; d < n; ++d) {
        char id[32] = {};
        if (bus(id, sizeof(id), d) != 0) continue;
        const int gpu = g.findBusId(normalBusId(id));
        if (gpu >= 0 && g.nodes[gpu].kind == NodeKind::Gpu) {
          g.nodes[gpu].dev = d;
          any = true;
        }
      }
    }
    dlclose(lib);
    if (any) return true;
  }
  return false;
}

}  // namespace

std::string currentCudaDeviceBusId() {
  using GetFn = int (*)(int*);
  using BusFn = int (*)(char*, int, int);
  for (const std::string& name : DriverLibraries{}.cudart) {
    void* lib = dlopen(name.c_str(), RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL);
    if (!lib) continue;
    auto get = reinterpret_cast<GetFn>(dlsym(lib, "cudaGetDevice"));
    auto bus = reinterpret_cast<BusFn>(dlsym(lib, "cudaDeviceGetPCIBusId"));
    std::string out;
    int dev = -1;
    char id[32] = {};
    if (get && bus && get(&dev) == 0 && bus(id, sizeof(id), dev) == 0) out = normalBusId(id);
    dlclose(lib);  // drops only the reference RTLD_NOLOAD took
    if (!out.empty()) return out;
  }
  return {};
}

void addDriverInformation(Graph& g, const DriverLibraries& libs) {
  std::vector<int> gpus = g.ofKind(NodeKind::Gpu);
  if (gpus.empty()) return;
  for (const std::string& name : libs.nvml) {
    Nvml nvml;
    if (!nvml.open(name)) continue;
    addNvLinks(g, nvml);
    break;
  }
  if (numberFromCuda(g, libs.cudart)) return;
  std::sort(gpus.begin(), gpus.end(),
            [&](int a, int b) { return g.nodes[a].busId < g.nodes[b].busId; });
  for (size_t i = 0; i < gpus.size(); ++i) g.nodes[gpus[i]].dev = static_cast<int>(i);
}

void addNvmlInformation(Graph& g, const std::string& sysRoot) {
  addDriverInformation(g, sysRoot == "/sys" ? DriverLibraries{} : DriverLibraries::none());
}

}  // namespace gyre::topology
