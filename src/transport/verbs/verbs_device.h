// The RDMA device, port and GID a rank's verbs transport uses: the first
// active port that GYRE_IB_HCA allows, and on RoCE the GID that
// GYRE_IB_GID_INDEX names or, without it, the port's RoCE v2 GID of an
// IPv4 address (routable, and what rxe and most RoCE fabrics carry). When
// nothing fits, why: the devices and ports found, so the user can fix it.
#pragma once

#include <infiniband/verbs.h>

#include <memory>
#include <string>

#include "transport/verbs/ib_device_select.h"

namespace gyre::transport {

class VerbsDevice {
 public:
  // Null with *why set when no device, port or GID fits. gidIndex < 0: automatic.
  static std::unique_ptr<VerbsDevice> open(const HcaFilter& filter, int gidIndex, std::string* why);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  ibv_context* context() const { return context_; }
  ibv_pd* pd() const { return pd_; }
  const std::string& name() const { return name_; }
  int port() const { return port_; }
  int gidIndex() const { return gidIndex_; }
  const ibv_gid& gid() const { return gid_; }
  uint16_t lid() const { return lid_; }
  bool ethernet() const { return ethernet_; }  // RoCE: addressed by GID, not LID
  ibv_mtu mtu() const { return mtu_; }
  int maxReadsInFlight() const { return maxRdAtomic_; }  // RDMA reads a QP may have outstanding
  int maxCqEntries() const { return maxCqe_; }
  // "rxe0:1 GID 1 (::ffff:10.0.0.1)", for logs and messages.
  std::string describe() const;

 private:
  VerbsDevice() = default;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  std::string name_;
  int port_ = 0;
  int gidIndex_ = 0;
  ibv_gid gid_{};
  uint16_t lid_ = 0;
  bool ethernet_ = false;
  ibv_mtu mtu_ = IBV_MTU_1024;
  int maxRdAtomic_ = 1;
  int maxCqe_ = 0;
};

// A GID as text: IPv4-mapped ones as ::ffff:a.b.c.d, others as 8 hex groups.
std::string gidText(const ibv_gid& gid);

}  // namespace gyre::transport
