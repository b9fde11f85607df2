#include "topology/detect_gpu.h"

#include <dlfcn.h>

#include <algorithm>
#include <cctype>
#include <cstring>

namespace gyre::topology {

namespace {

// The parts of nvml.h used here, declared locally so that building never
// needs the driver's headers. Layouts follow NVML's stable ABI (the _v2/_v3
// entry points).
using nvmlReturn_t = int;
using nvmlDevice_t = void*;
struct NvmlPciInfo {
  char busIdLegacy[16];
  unsigned domain, bus, device, pciDeviceId, pciSubSystemId;
  char busId[32];
};
constexpr unsigned kNvmlMaxLinks = 18;
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
  bool open() {
    lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
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
  ~Nvml() {
    if (!lib) return;
    if (shutdown) shutdown();
    dlclose(lib);
  }
};

// NVML and CUDA write "00000000:17:00.0"; sysfs "0000:17:00.0".
std::string normalBusId(const char* s) {
  std::string b(s);
  for (char& c : b) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (b.size() > 12) b = b.substr(b.size() - 12);
  return b;
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
      if (t < 0 && type == kNvmlLinkToSwitch) {
        Node s;
        s.kind = NodeKind::NvSwitch;
        s.busId = target;
        s.pciClass = "0x068000";
        t = g.add(s);
      }
      if (t < 0 || t == gpu) continue;
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

// CUDA's own numbering (it may differ from bus order).
bool numberFromCuda(Graph& g) {
  void* lib = dlopen("libcudart.so", RTLD_NOW | RTLD_LOCAL);
  if (!lib) lib = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
  if (!lib) return false;
  using CountFn = int (*)(int*);
  using BusFn = int (*)(char*, int, int);
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
  return any;
}

}  // namespace

std::string currentCudaDeviceBusId() {
  void* lib = nullptr;
  for (const char* name :
       {"libcudart.so", "libcudart.so.12", "libcudart.so.13", "libcudart.so.11.0"})
    if ((lib = dlopen(name, RTLD_NOW | RTLD_NOLOAD | RTLD_LOCAL))) break;
  if (!lib) return {};
  using GetFn = int (*)(int*);
  using BusFn = int (*)(char*, int, int);
  auto get = reinterpret_cast<GetFn>(dlsym(lib, "cudaGetDevice"));
  auto bus = reinterpret_cast<BusFn>(dlsym(lib, "cudaDeviceGetPCIBusId"));
  std::string out;
  int dev = -1;
  char id[32] = {};
  if (get && bus && get(&dev) == 0 && bus(id, sizeof(id), dev) == 0) out = normalBusId(id);
  dlclose(lib);  // drops only the reference RTLD_NOLOAD took
  return out;
}

void addNvmlInformation(Graph& g, const std::string& sysRoot) {
  std::vector<int> gpus = g.ofKind(NodeKind::Gpu);
  if (gpus.empty()) return;
  // NVML describes the real machine: not a sysfs copy under a test root.
  if (sysRoot == "/sys") {
    Nvml nvml;
    if (nvml.open()) addNvLinks(g, nvml);
    if (numberFromCuda(g)) return;
  }
  std::sort(gpus.begin(), gpus.end(),
            [&](int a, int b) { return g.nodes[a].busId < g.nodes[b].busId; });
  for (size_t i = 0; i < gpus.size(); ++i) g.nodes[gpus[i]].dev = static_cast<int>(i);
}

}  // namespace gyre::topology
