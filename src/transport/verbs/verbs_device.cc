#include "transport/verbs/verbs_device.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace gyre::transport {

namespace {

bool isZero(const ibv_gid& g) {
  for (uint8_t b : g.raw)
    if (b) return false;
  return true;
}

bool isIpv4Mapped(const ibv_gid& g) {
  for (int i = 0; i < 10; ++i)
    if (g.raw[i]) return false;
  return g.raw[10] == 0xff && g.raw[11] == 0xff;
}

const char* portStateName(ibv_port_state s) {
  return s == IBV_PORT_ACTIVE ? "active"
         : s == IBV_PORT_DOWN ? "down"
         : s == IBV_PORT_INIT ? "init"
                              : "not active";
}

// The GID a RoCE port is reached by without GYRE_IB_GID_INDEX: a RoCE v2
// GID of an IPv4 address, else any RoCE v2 GID, else any non-zero one.
int autoGidIndex(ibv_context* ctx, int port, int tableLength) {
  int best = -1, bestRank = 0;
  for (int i = 0; i < tableLength; ++i) {
    ibv_gid_entry e{};
    if (ibv_query_gid_ex(ctx, static_cast<uint32_t>(port), static_cast<uint32_t>(i), &e, 0) != 0)
      continue;
    if (isZero(e.gid)) continue;
    const bool v2 = e.gid_type == IBV_GID_TYPE_ROCE_V2;
    const int rank = v2 && isIpv4Mapped(e.gid) ? 3 : v2 ? 2 : 1;
    if (rank > bestRank) {
      best = i;
      bestRank = rank;
    }
  }
  return best;
}

}  // namespace

std::string gidText(const ibv_gid& g) {
  char s[64];
  if (isIpv4Mapped(g)) {
    std::snprintf(s, sizeof s, "::ffff:%u.%u.%u.%u", g.raw[12], g.raw[13], g.raw[14], g.raw[15]);
  } else {
    int n = 0;
    for (int i = 0; i < 16; i += 2)
      n += std::snprintf(s + n, sizeof s - static_cast<size_t>(n), "%s%02x%02x", i ? ":" : "",
                         g.raw[i], g.raw[i + 1]);
  }
  return s;
}

std::unique_ptr<VerbsDevice> VerbsDevice::open(const HcaFilter& filter, int gidIndex,
                                               std::string* why) {
  int count = 0;
  ibv_device** list = ibv_get_device_list(&count);
  if (!list || count == 0) {
    if (list) ibv_free_device_list(list);
    *why =
        "no RDMA device on this host (ibv_get_device_list found none: no RDMA NIC, or its driver "
        "or rdma_rxe is not loaded)";
    return nullptr;
  }
  std::string found;  // every device:port and its state, for the message
  std::unique_ptr<VerbsDevice> d;
  for (int i = 0; i < count && !d; ++i) {
    const std::string name = ibv_get_device_name(list[i]);
    ibv_context* ctx = ibv_open_device(list[i]);
    if (!ctx) {
      found +=
          (found.empty() ? "" : ", ") + name + " (cannot be opened: " + std::strerror(errno) + ")";
      continue;
    }
    ibv_device_attr da{};
    const bool attrs = ibv_query_device(ctx, &da) == 0;
    for (int p = 1; attrs && p <= da.phys_port_cnt && !d; ++p) {
      ibv_port_attr pa{};
      if (ibv_query_port(ctx, static_cast<uint8_t>(p), &pa) != 0) continue;
      found += (found.empty() ? "" : ", ") + name + ":" + std::to_string(p) + " (" +
               portStateName(pa.state) + ")";
      if (pa.state != IBV_PORT_ACTIVE || !hcaAllows(filter, name, p)) continue;
      const bool eth = pa.link_layer == IBV_LINK_LAYER_ETHERNET;
      int g = gidIndex;
      if (g < 0) g = eth ? autoGidIndex(ctx, p, pa.gid_tbl_len) : 0;
      ibv_gid gid{};
      if (g < 0 || g >= pa.gid_tbl_len ||
          ibv_query_gid(ctx, static_cast<uint8_t>(p), g, &gid) != 0 || (eth && isZero(gid))) {
        *why = gidIndex >= 0
                   ? "GYRE_IB_GID_INDEX=" + std::to_string(gidIndex) + ": " + name + ":" +
                         std::to_string(p) + " has no GID there (its table holds " +
                         std::to_string(pa.gid_tbl_len) + " entries; `ibv_devinfo -v` lists them)"
                   : name + ":" + std::to_string(p) +
                         " is RoCE but has no usable GID (no IP address on its netdev?)";
        ibv_close_device(ctx);
        ibv_free_device_list(list);
        return nullptr;
      }
      d.reset(new VerbsDevice());
      d->context_ = ctx;
      d->name_ = name;
      d->port_ = p;
      d->gidIndex_ = g;
      d->gid_ = gid;
      d->lid_ = pa.lid;
      d->ethernet_ = eth;
      d->mtu_ = pa.active_mtu;
      d->maxRdAtomic_ = std::clamp(std::min(da.max_qp_rd_atom, da.max_qp_init_rd_atom), 1, 16);
      d->maxCqe_ = da.max_cqe;
    }
    if (!d) ibv_close_device(ctx);
  }
  ibv_free_device_list(list);
  if (!d) {
    *why = (filter.spec.empty() ? std::string("no active port")
                                : "GYRE_IB_HCA=" + filter.spec + " matches no active port") +
           " among this host's RDMA devices (found " + found + ")";
    return nullptr;
  }
  d->pd_ = ibv_alloc_pd(d->context_);
  if (!d->pd_) {
    *why = d->name_ + ": ibv_alloc_pd failed: " + std::strerror(errno);
    return nullptr;
  }
  return d;
}

VerbsDevice::~VerbsDevice() {
  if (pd_) ibv_dealloc_pd(pd_);
  if (context_) ibv_close_device(context_);
}

std::string VerbsDevice::describe() const {
  return name_ + ":" + std::to_string(port_) +
         (ethernet_ ? " GID " + std::to_string(gidIndex_) + " (" + gidText(gid_) + ")"
                    : " LID " + std::to_string(lid_));
}

}  // namespace gyre::transport
