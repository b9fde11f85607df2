#include "transport/net/net_plugin.h"

#include <dlfcn.h>

#include <climits>
#include <cstdarg>
#include <cstdio>
#include <vector>

#include "base/log.h"

namespace gyre::transport {

namespace {

// The plugin's log lines go to gyre's log, at the matching level.
void pluginLogger(int level, unsigned long, const char* file, int line, const char* fmt, ...) {
  const log::Level l = level == netabi::kLogWarn || level == netabi::kLogAbort ? log::Level::Warn
                       : level == netabi::kLogInfo || level == netabi::kLogVersion ? log::Level::Info
                                                                                    : log::Level::Trace;
  if (!log::enabled(l)) return;
  char text[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(text, sizeof(text), fmt, args);
  va_end(args);
  log::write(l, "net plugin: %s (%s:%d)", text, file ? file : "?", line);
}

// Plugins may not profile through gyre: a callback that records nothing.
netabi::Result noProfiler(void** eventHandle, int, void*, int64_t, void*) {
  if (eventHandle) *eventHandle = nullptr;
  return netabi::kSuccess;
}

bool looksLikePath(const std::string& s) {
  return s.find('/') != std::string::npos || (s.size() > 3 && s.compare(s.size() - 3, 3, ".so") == 0) ||
         s.find(".so.") != std::string::npos;
}

// Calls f with whichever table the plugin has (for the calls whose
// signature every version shares).
template <typename F>
auto onTable(const netabi::NetV8* a, const netabi::NetV9* b, const netabi::NetV10* c, const netabi::NetV11* d,
             const netabi::NetV12* e, F f) {
  if (e) return f(*e);
  if (d) return f(*d);
  if (c) return f(*c);
  if (b) return f(*b);
  return f(*a);
}

template <typename Props>
NetDeviceProperties commonProperties(const Props& p) {
  NetDeviceProperties d;
  d.name = p.name ? p.name : "";
  d.ptrSupport = p.ptrSupport;
  d.speedMbps = p.speed;
  d.maxComms = p.maxComms;
  d.maxRecvs = p.maxRecvs;
  return d;
}

}  // namespace

const char* netResultName(netabi::Result r) {
  switch (r) {
    case netabi::kSuccess: return "success";
    case netabi::kUnhandledCudaError: return "unhandled CUDA error";
    case netabi::kSystemError: return "system error";
    case netabi::kInternalError: return "internal error";
    case netabi::kInvalidArgument: return "invalid argument";
    case netabi::kInvalidUsage: return "invalid usage";
    case netabi::kRemoteError: return "remote error";
    default: return "unknown result";
  }
}

std::unique_ptr<NetPlugin> NetPlugin::load(const std::string& spec) {
  if (spec.empty()) throwError(gyreInvalidArgument, "GYRE_NET_PLUGIN is empty");
  std::vector<std::string> candidates;
  if (looksLikePath(spec)) {
    candidates.push_back(spec);
  } else {
    candidates.push_back("libgyre-net-" + spec + ".so");
    candidates.push_back("libnccl-net-" + spec + ".so");
  }
  std::unique_ptr<NetPlugin> p(new NetPlugin());
  std::string errors;
  for (const std::string& c : candidates) {
    // RTLD_LOCAL: a plugin's symbols must not resolve another's.
    p->library_ = ::dlopen(c.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (p->library_) {
      p->path_ = c;
      break;
    }
    const char* e = ::dlerror();
    errors += (errors.empty() ? "" : "; ") + std::string(e ? e : c.c_str());
  }
  if (!p->library_)
    throwError(gyreInvalidArgument, "GYRE_NET_PLUGIN=" + spec + ": cannot load the plugin (" + errors + ")");

  auto sym = [&](const char* s) { return ::dlsym(p->library_, s); };
  if ((p->v12_ = static_cast<const netabi::NetV12*>(sym(netabi::kSymbolV12)))) p->version_ = 12;
  else if ((p->v11_ = static_cast<const netabi::NetV11*>(sym(netabi::kSymbolV11)))) p->version_ = 11;
  else if ((p->v10_ = static_cast<const netabi::NetV10*>(sym(netabi::kSymbolV10)))) p->version_ = 10;
  else if ((p->v9_ = static_cast<const netabi::NetV9*>(sym(netabi::kSymbolV9)))) p->version_ = 9;
  else if ((p->v8_ = static_cast<const netabi::NetV8*>(sym(netabi::kSymbolV8)))) p->version_ = 8;
  if (p->version_ == 0) {
    std::string older;
    for (int v = 7; v >= 2 && older.empty(); --v)
      if (sym(("ncclNetPlugin_v" + std::to_string(v)).c_str())) older = "v" + std::to_string(v);
    throwError(gyreInvalidArgument,
               "GYRE_NET_PLUGIN=" + spec + " (" + p->path_ + ") has no NCCL net plugin table gyre knows (" +
                   (older.empty() ? std::string("no ncclNetPlugin_vN symbol") : "it has " + older + " only") +
                   "; gyre loads ncclNetPlugin_v8 to _v12)");
  }
  const char* tableName = onTable(p->v8_, p->v9_, p->v10_, p->v11_, p->v12_, [](const auto& t) { return t.name; });
  p->name_ = tableName ? tableName : "?";

  netabi::Result r;
  const char* init = "init";
  if (p->v12_) {
    netabi::CommConfig cfg{-1};
    r = p->v12_->init(&p->context_, 0, &cfg, pluginLogger, noProfiler);
  } else if (p->v11_) {
    netabi::CommConfig cfg{-1};
    r = p->v11_->init(&p->context_, 0, &cfg, pluginLogger, noProfiler);
  } else if (p->v10_) {
    r = p->v10_->init(pluginLogger, noProfiler);
  } else if (p->v9_) {
    r = p->v9_->init(pluginLogger);
  } else {
    r = p->v8_->init(pluginLogger);
  }
  if (r != netabi::kSuccess) {
    p->version_ = -p->version_;  // not initialised: nothing to finalize
    p->fail(init, r);
  }
  GYRE_INFO("net: %s loaded", p->describe().c_str());
  return p;
}

NetPlugin::~NetPlugin() {
  if (version_ >= 11) {
    auto finalize = v12_ ? v12_->finalize : v11_->finalize;
    if (finalize) finalize(context_);
  }
  // The library stays loaded: a plugin may have started threads that
  // outlive its comms, and NCCL's plugins expect to live as long as the
  // process (loading it again finds it mapped).
}

std::string NetPlugin::describe() const {
  return "plugin " + name_ + " (v" + std::to_string(version_ < 0 ? -version_ : version_) + ", " + path_ + ")";
}

void NetPlugin::fail(const char* call, netabi::Result r) const {
  const gyreResult_t code = r == netabi::kRemoteError ? gyreRemoteError
                            : r == netabi::kSystemError ? gyreSystemError
                                                        : gyreInternalError;
  throwError(code, "net " + describe() + ": " + call + " failed (" + netResultName(r) + ")");
}

int NetPlugin::devices() {
  int n = 0;
  check("devices", onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.devices(&n); }));
  return n;
}

NetDeviceProperties NetPlugin::properties(int dev) {
  NetDeviceProperties d;
  if (v12_ || v11_) {
    netabi::PropertiesV12 p12{};
    netabi::PropertiesV11 p11{};
    check("getProperties", v12_ ? v12_->getProperties(dev, &p12) : v11_->getProperties(dev, &p11));
    d = v12_ ? commonProperties(p12) : commonProperties(p11);
    d.maxTransferBytes = v12_ ? p12.maxP2pBytes : p11.maxP2pBytes;
  } else if (v10_ || v9_) {
    netabi::PropertiesV9 p{};
    check("getProperties", v10_ ? v10_->getProperties(dev, &p) : v9_->getProperties(dev, &p));
    d = commonProperties(p);
    d.maxTransferBytes = p.maxP2pBytes;
  } else {
    netabi::PropertiesV8 p{};
    check("getProperties", v8_->getProperties(dev, &p));
    d = commonProperties(p);
    d.maxTransferBytes = INT_MAX;  // v8 sizes are int
  }
  return d;
}

void* NetPlugin::listen(int dev, void* handle) {
  void* comm = nullptr;
  netabi::Result r;
  if (v12_) r = v12_->listen(context_, dev, handle, &comm);
  else if (v11_) r = v11_->listen(context_, dev, handle, &comm);
  else if (v10_) r = v10_->listen(dev, handle, &comm);
  else if (v9_) r = v9_->listen(dev, handle, &comm);
  else r = v8_->listen(dev, handle, &comm);
  check("listen", r);
  return comm;
}

void* NetPlugin::connect(int dev, void* handle) {
  void* comm = nullptr;
  netabi::DeviceHandle* device = nullptr;  // no device offload
  netabi::Result r;
  if (v12_) {
    r = v12_->connect(context_, dev, handle, &comm, &device);
  } else if (v11_) {
    r = v11_->connect(context_, dev, handle, &comm, &device);
  } else if (v10_) {
    netabi::CommConfig cfg{-1};
    r = v10_->connect(dev, &cfg, handle, &comm, &device);
  } else if (v9_) {
    r = v9_->connect(dev, handle, &comm, &device);
  } else {
    r = v8_->connect(dev, handle, &comm, &device);
  }
  check("connect", r);
  return comm;
}

void* NetPlugin::accept(void* listenComm) {
  void* comm = nullptr;
  netabi::DeviceHandle* device = nullptr;
  check("accept", onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.accept(listenComm, &comm, &device); }));
  return comm;
}

void* NetPlugin::registerMemory(void* comm, void* data, size_t bytes) {
  void* mh = nullptr;
  check("regMr", onTable(v8_, v9_, v10_, v11_, v12_,
                         [&](const auto& t) { return t.regMr(comm, data, bytes, netabi::kPtrHost, &mh); }));
  return mh;
}

void NetPlugin::deregisterMemory(void* comm, void* mhandle) noexcept {
  onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.deregMr(comm, mhandle); });
}

void* NetPlugin::isend(void* sendComm, void* data, size_t bytes, int tag, void* mhandle) {
  void* request = nullptr;
  netabi::Result r;
  if (v8_) r = v8_->isend(sendComm, data, static_cast<int>(bytes), tag, mhandle, &request);
  else if (v9_) r = v9_->isend(sendComm, data, bytes, tag, mhandle, &request);
  else if (v10_) r = v10_->isend(sendComm, data, bytes, tag, mhandle, nullptr, &request);
  else if (v11_) r = v11_->isend(sendComm, data, bytes, tag, mhandle, nullptr, &request);
  else r = v12_->isend(sendComm, data, bytes, tag, mhandle, nullptr, &request);
  check("isend", r);
  return request;
}

void* NetPlugin::irecv(void* recvComm, void* data, size_t bytes, int tag, void* mhandle) {
  void* request = nullptr;
  netabi::Result r;
  if (v8_) {
    int size = static_cast<int>(bytes);
    r = v8_->irecv(recvComm, 1, &data, &size, &tag, &mhandle, &request);
  } else if (v9_) {
    r = v9_->irecv(recvComm, 1, &data, &bytes, &tag, &mhandle, &request);
  } else {
    void* profiler = nullptr;
    if (v10_) r = v10_->irecv(recvComm, 1, &data, &bytes, &tag, &mhandle, &profiler, &request);
    else if (v11_) r = v11_->irecv(recvComm, 1, &data, &bytes, &tag, &mhandle, &profiler, &request);
    else r = v12_->irecv(recvComm, 1, &data, &bytes, &tag, &mhandle, &profiler, &request);
  }
  check("irecv", r);
  return request;
}

bool NetPlugin::test(void* request, size_t* bytes) {
  int done = 0, size = 0;
  check("test", onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.test(request, &done, &size); }));
  // The ABI's size is an int: a negative one would pass as a huge size_t.
  if (done && size < 0)
    throwError(gyreSystemError, "net " + describe() + ": test reported " + std::to_string(size) + " bytes received");
  if (done && bytes) *bytes = static_cast<size_t>(size);
  return done != 0;
}

void NetPlugin::closeSend(void* comm) noexcept {
  if (comm) onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.closeSend(comm); });
}

void NetPlugin::closeRecv(void* comm) noexcept {
  if (comm) onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.closeRecv(comm); });
}

void NetPlugin::closeListen(void* comm) noexcept {
  if (comm) onTable(v8_, v9_, v10_, v11_, v12_, [&](const auto& t) { return t.closeListen(comm); });
}

}  // namespace gyre::transport
