// The NVML and CUDA-runtime paths of the topology detector, on machines
// without a GPU: fake driver libraries built with the tests (fake_nvml.c,
// fake_cudart.c) describe the GPUs of fixtures/dgx_h100.xml, and a graph
// holding only what PCI says about them (the fixture without its NVLinks,
// compute capabilities and device numbers) must come out as the fixture:
// NVLinks to four NVSwitches, compute capability 9.0, and the CUDA runtime's
// numbering (reversed, in the fake) rather than bus order.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <thread>

#include "tests/support/subprocess.h"
#include "topology/detect_gpu.h"
#include "topology/graph.h"
#include "topology/topology_io.h"

namespace gyre::topology {
namespace {

const std::string kFixtures = GYRE_TOPO_FIXTURES;
const std::string kFakeNvml = GYRE_FAKE_NVML;      // .../fake_driver/libnvidia-ml.so.1
const std::string kFakeCudart = GYRE_FAKE_CUDART;  // .../fake_driver/libcudart.so.12
const std::string kProbe = GYRE_DRIVER_PROBE;

// fake_dgx.h, as the graph writes it: GPUs in bus order, and the NVSwitches
// with the lanes each GPU has to them.
const std::vector<std::string> kGpuBus = {"0000:18:00.0", "0000:19:00.0", "0000:38:00.0",
                                          "0000:39:00.0", "0000:98:00.0", "0000:99:00.0",
                                          "0000:b8:00.0", "0000:b9:00.0"};
const std::map<std::string, int> kSwitchLanes = {
    {"0000:05:00.0", 5}, {"0000:06:00.0", 4}, {"0000:07:00.0", 4}, {"0000:08:00.0", 5}};

std::string readFile(const std::string& path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The DGX fixture as detection knows it before asking the driver: PCI only.
std::string pciOnlyXml() {
  // Plain string edits (GCC 12's <regex> trips -Wmaybe-uninitialized under
  // the sanitizer build's -Werror): drop every <nvlink .../> line, and the
  // dev and sm attributes right after "<gpu".
  std::istringstream in(readFile(kFixtures + "/dgx_h100.xml"));
  std::string xml, line;
  while (std::getline(in, line)) {
    if (line.find("<nvlink ") != std::string::npos) continue;
    const size_t gpu = line.find("<gpu dev=\"");
    if (gpu != std::string::npos) {
      const size_t sm = line.find(" sm=\"", gpu);
      const size_t end = sm == std::string::npos ? sm : line.find('"', sm + 5);
      if (end != std::string::npos) line.erase(gpu + 4, end + 1 - (gpu + 4));
    }
    xml += line + "\n";
  }
  return xml;
}

Graph pciOnly() {
  Graph g = parseTopology(pciOnlyXml(), "pci-only");
  EXPECT_TRUE(g.links.empty());
  EXPECT_TRUE(g.ofKind(NodeKind::NvSwitch).empty());
  for (int i : g.ofKind(NodeKind::Gpu)) EXPECT_EQ(g.nodes[i].dev, -1);
  for (int i : g.ofKind(NodeKind::Gpu)) EXPECT_EQ(g.nodes[i].sm, 0);
  return g;
}

DriverLibraries fakes(bool nvml, bool cudart) {
  DriverLibraries libs = DriverLibraries::none();
  if (nvml) libs.nvml = {kFakeNvml};
  if (cudart) libs.cudart = {kFakeCudart};
  return libs;
}

Graph withDriver(const DriverLibraries& libs) {
  Graph g = pciOnly();
  addDriverInformation(g, libs);
  return g;
}

int devOf(const Graph& g, const std::string& bus) {
  const int i = g.findBusId(bus);
  return i >= 0 ? g.nodes[i].dev : -100;
}

// Keeps a fake library loaded for the length of a test, so that its state
// (counters, the current device) outlives the detector's dlclose.
class Loaded {
 public:
  explicit Loaded(const std::string& path) : h_(dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL)) {
    EXPECT_NE(h_, nullptr) << dlerror();
  }
  ~Loaded() {
    if (h_) dlclose(h_);
  }
  Loaded(const Loaded&) = delete;
  Loaded& operator=(const Loaded&) = delete;
  template <typename F>
  F* fn(const char* name) const {
    auto* f = reinterpret_cast<F*>(h_ ? dlsym(h_, name) : nullptr);
    EXPECT_NE(f, nullptr) << name;
    return f;
  }

 private:
  void* h_;
};

class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = getenv(name)) old_ = old;
    setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      setenv(name_, old_->c_str(), 1);
    else
      unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

void expectDgxNvLinks(const Graph& g) {
  const std::vector<int> switches = g.ofKind(NodeKind::NvSwitch);
  ASSERT_EQ(switches.size(), 4u) << toXml(g);
  for (int s : switches) {
    EXPECT_EQ(kSwitchLanes.count(g.nodes[s].busId), 1u) << g.nodes[s].busId;
    EXPECT_EQ(g.nodes[s].pciClass, "0x068000");
    EXPECT_EQ(g.nodes[s].parent, -1);
  }
  EXPECT_EQ(g.links.size(), 8u * 4u);
  for (const Link& l : g.links) {
    ASSERT_EQ(g.nodes[l.a].kind, NodeKind::Gpu);
    ASSERT_EQ(g.nodes[l.b].kind, NodeKind::NvSwitch);
    EXPECT_EQ(l.kind, LinkKind::NvLink);
    EXPECT_EQ(l.count, kSwitchLanes.at(g.nodes[l.b].busId))
        << g.nodes[l.a].busId << " to " << g.nodes[l.b].busId;
    EXPECT_DOUBLE_EQ(l.gbps, l.count * 25.0);  // NVLink 4: 25 GB/s a lane, one direction
  }
  for (const std::string& a : kGpuBus) {
    const int ga = g.findBusId(a);
    EXPECT_EQ(g.nodes[ga].sm, 90) << a;
    EXPECT_DOUBLE_EQ(g.nvSwitchGBps(ga), 18 * 25.0) << a;
    for (const std::string& b : kGpuBus) {
      if (a == b) continue;
      const Path p = g.path(ga, g.findBusId(b));
      EXPECT_EQ(p.cls, PathClass::NVL) << a << " - " << b;
      EXPECT_DOUBLE_EQ(p.gbps, 450.0) << a << " - " << b;
    }
  }
}

TEST(TopologyDriver, NvmlGivesNvSwitchLinksAndComputeCapability) {
  Loaded nvml(kFakeNvml);
  const Graph g = withDriver(fakes(true, false));
  expectDgxNvLinks(g);
  // No CUDA runtime: bus order, which the fixture also has. Everything else
  // the fixture says, NVML said.
  EXPECT_EQ(toXml(g), toXml(parseTopology(readFile(kFixtures + "/dgx_h100.xml"), "fixture")));
  // One session, closed; nothing asked outside it, nothing NVML would refuse.
  EXPECT_EQ(nvml.fn<int()>("gyreFakeNvmlInits")(), 1);
  EXPECT_EQ(nvml.fn<int()>("gyreFakeNvmlShutdowns")(), 1);
  EXPECT_EQ(nvml.fn<int()>("gyreFakeNvmlMisuse")(), 0);
}

TEST(TopologyDriver, CudaNumberingComesFromTheRuntime) {
  const Graph g = withDriver(fakes(true, true));
  expectDgxNvLinks(g);
  // The fake numbers GPUs from the end of the bus.
  for (size_t i = 0; i < kGpuBus.size(); ++i)
    EXPECT_EQ(devOf(g, kGpuBus[i]), static_cast<int>(kGpuBus.size() - 1 - i)) << kGpuBus[i];
  EXPECT_EQ(shortName(g, g.findBusId("0000:b9:00.0")), "GPU0");
}

TEST(TopologyDriver, CudaNumberingWithoutNvml) {
  const Graph g = withDriver(fakes(false, true));
  EXPECT_TRUE(g.links.empty());
  EXPECT_TRUE(g.ofKind(NodeKind::NvSwitch).empty());
  for (size_t i = 0; i < kGpuBus.size(); ++i) {
    EXPECT_EQ(devOf(g, kGpuBus[i]), static_cast<int>(kGpuBus.size() - 1 - i));
    EXPECT_EQ(g.nodes[g.findBusId(kGpuBus[i])].sm, 0);
  }
}

// What a graph looks like when no driver library answers: PCI as it was,
// GPUs numbered in bus order.
std::string busOrderXml() {
  Graph g = pciOnly();
  for (size_t i = 0; i < kGpuBus.size(); ++i)
    g.nodes[g.findBusId(kGpuBus[i])].dev = static_cast<int>(i);
  return toXml(g);
}

TEST(TopologyDriver, WithoutDriverLibrariesGpusKeepPciAndBusOrder) {
  EXPECT_EQ(toXml(withDriver(DriverLibraries::none())), busOrderXml());
  DriverLibraries missing;
  missing.nvml = {"libgyre-test-no-such-nvml.so.1", "/nonexistent/libnvidia-ml.so.1"};
  missing.cudart = {"libgyre-test-no-such-cudart.so.12", "/nonexistent/libcudart.so.12"};
  EXPECT_EQ(toXml(withDriver(missing)), busOrderXml());
  // Detection under a test root never asks the driver, whatever is installed.
  Graph g = pciOnly();
  addNvmlInformation(g, kFixtures);
  EXPECT_EQ(toXml(g), busOrderXml());
}

TEST(TopologyDriver, FailingNvmlInitLeavesPciUntouched) {
  ScopedEnv fail("GYRE_FAKE_NVML_INIT_ERROR", "9");  // NVML_ERROR_DRIVER_NOT_LOADED
  Loaded nvml(kFakeNvml);
  EXPECT_EQ(toXml(withDriver(fakes(true, false))), busOrderXml());
  // Nothing asked after the failed init, and no shutdown for it.
  EXPECT_EQ(nvml.fn<int()>("gyreFakeNvmlInits")(), 0);
  EXPECT_EQ(nvml.fn<int()>("gyreFakeNvmlShutdowns")(), 0);
  EXPECT_EQ(nvml.fn<int()>("gyreFakeNvmlMisuse")(), 0);
  // The CUDA runtime still numbers the GPUs.
  const Graph g = withDriver(fakes(true, true));
  EXPECT_TRUE(g.links.empty());
  EXPECT_EQ(devOf(g, kGpuBus.front()), 7);
}

TEST(TopologyDriver, RuntimeWithoutUsableDriverGivesWayToBusOrder) {
  {
    ScopedEnv fail("GYRE_FAKE_CUDA_ERROR", "35");  // cudaErrorInsufficientDriver
    const Graph g = withDriver(fakes(true, true));
    expectDgxNvLinks(g);
    for (size_t i = 0; i < kGpuBus.size(); ++i)
      EXPECT_EQ(devOf(g, kGpuBus[i]), static_cast<int>(i));
  }
  // A name that does not load gives way to the next one.
  DriverLibraries libs = fakes(false, true);
  libs.cudart.insert(libs.cudart.begin(), "libgyre-test-no-such-cudart.so.12");
  EXPECT_EQ(devOf(withDriver(libs), kGpuBus.front()), 7);
}

TEST(TopologyDriver, DirectNvLinksBetweenGpuPairsAreCountedOnce) {
  // Both GPUs of a pair report the same 12 lanes.
  ScopedEnv shape("GYRE_FAKE_NVML_SHAPE", "pairs");
  const Graph g = withDriver(fakes(true, false));
  EXPECT_TRUE(g.ofKind(NodeKind::NvSwitch).empty());
  ASSERT_EQ(g.links.size(), 4u) << toXml(g);
  for (const Link& l : g.links) {
    EXPECT_EQ(l.count, 12);
    EXPECT_DOUBLE_EQ(l.gbps, 12 * 25.0);
  }
  for (size_t i = 0; i < kGpuBus.size(); ++i) {
    const int a = g.findBusId(kGpuBus[i]);
    EXPECT_EQ(g.nodes[a].sm, 80);
    const Path partner = g.path(a, g.findBusId(kGpuBus[i ^ 1]));
    EXPECT_EQ(partner.cls, PathClass::NVL);
    EXPECT_DOUBLE_EQ(partner.gbps, 300.0);
  }
  // Between pairs: PCIe, as the fixture's tree has it.
  EXPECT_EQ(g.path(g.findBusId(kGpuBus[0]), g.findBusId(kGpuBus[2])).cls, PathClass::PHB);
  EXPECT_EQ(g.path(g.findBusId(kGpuBus[1]), g.findBusId(kGpuBus[4])).cls, PathClass::SYS);
  // The dump lists each pair's link once per GPU, as NCCL does, and loads
  // back into the same links.
  const Graph back = parseTopology(toXml(g), "dump");
  ASSERT_EQ(back.links.size(), 4u);
  for (const Link& l : back.links) EXPECT_EQ(l.count, 12);
}

TEST(TopologyDriver, CurrentDeviceIsTheLoadedRuntimes) {
  // The runtime is never loaded to answer: a CPU program stays one.
  ASSERT_EQ(currentCudaDeviceBusId(), "") << "a CUDA runtime is already loaded in this process";
  {
    Loaded cudart(kFakeCudart);  // as a CUDA program has it, by its soname libcudart.so.12
    auto setDevice = cudart.fn<int(int)>("cudaSetDevice");
    auto getDevice = cudart.fn<int(int*)>("cudaGetDevice");
    ASSERT_TRUE(setDevice && getDevice);
    EXPECT_EQ(currentCudaDeviceBusId(), "0000:b9:00.0");  // device 0 until set
    ASSERT_EQ(setDevice(5), 0);
    EXPECT_EQ(currentCudaDeviceBusId(), "0000:38:00.0");
    // Per thread, as the runtime's current device is.
    std::string other;
    std::thread([&] { other = currentCudaDeviceBusId(); }).join();
    EXPECT_EQ(other, "0000:b9:00.0");
    // Numbering the graph leaves the current device alone.
    const Graph g = withDriver(fakes(false, true));
    EXPECT_EQ(devOf(g, "0000:38:00.0"), 5);
    int dev = -1;
    EXPECT_EQ(getDevice(&dev), 0);
    EXPECT_EQ(dev, 5);
    EXPECT_EQ(g.findBusId(currentCudaDeviceBusId()), g.findBusId("0000:38:00.0"));
  }
  // Unloaded again: the detector's own references are all given back.
  EXPECT_EQ(currentCudaDeviceBusId(), "");
}

// The names the library looks up in production find the driver where the
// dynamic loader does (here: the fakes, first on LD_LIBRARY_PATH).
TEST(TopologyDriver, DefaultNamesFindTheDriverOnTheLoaderPath) {
  const std::string topo =
      testing::TempDir() + "/gyre-pci-only-" + std::to_string(getpid()) + ".xml";
  std::ofstream(topo) << pciOnlyXml();
  const std::string fakeDir = kFakeNvml.substr(0, kFakeNvml.rfind('/'));
  std::string path = fakeDir;
  if (const char* old = getenv("LD_LIBRARY_PATH"); old && *old) path += std::string(":") + old;
  test::Proc probe;
  probe.argv = {kProbe, topo};
  // A real runtime found before the fake one (libcudart.so from a toolkit)
  // must give way to it: with no visible device it numbers nothing.
  probe.env = {{"LD_LIBRARY_PATH", path}, {"CUDA_VISIBLE_DEVICES", ""}};
  const test::Outcome out = test::run(probe, 60);
  std::remove(topo.c_str());
  ASSERT_EQ(out.exitCode, 0) << out.describe();
  const Graph g = parseTopology(out.out, "probe");
  expectDgxNvLinks(g);
  for (size_t i = 0; i < kGpuBus.size(); ++i)
    EXPECT_EQ(devOf(g, kGpuBus[i]), static_cast<int>(kGpuBus.size() - 1 - i));
}

// And without the fakes: where this machine has no NVIDIA driver, as the
// machines the tests normally run on, the graph keeps PCI and bus order.
TEST(TopologyDriver, DefaultNamesWithoutADriverKeepBusOrder) {
  if (void* real = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL)) {
    dlclose(real);
    GTEST_SKIP() << "this machine has an NVIDIA driver: it, not the fixture, answers";
  }
  const std::string topo =
      testing::TempDir() + "/gyre-pci-only-nodrv-" + std::to_string(getpid()) + ".xml";
  std::ofstream(topo) << pciOnlyXml();
  test::Proc probe;
  probe.argv = {kProbe, topo};
  const test::Outcome out = test::run(probe, 60);
  std::remove(topo.c_str());
  ASSERT_EQ(out.exitCode, 0) << out.describe();
  EXPECT_EQ(toXml(parseTopology(out.out, "probe")), busOrderXml());
}

}  // namespace
}  // namespace gyre::topology
