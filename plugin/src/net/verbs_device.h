// Verbs device enumeration for the net transport: active InfiniBand/RoCE ports that pass the HCA
// filter, one ncclNet device per port, with properties from topology/ and the chosen GID.
// NEVER RUN ON A NIC: this VM has no RDMA device; on it, enumeration finds none and the plugin
// keeps the socket transport.
#pragma once

#include <infiniband/verbs.h>

#include <string>
#include <vector>

#include "net/verbs_params.h"
#include "net/verbs_props.h"

namespace epx::plugin::verbs {

struct Port {
  ibv_context* context = nullptr;  // shared by the ports of one device (opened once)
  ibv_pd* pd = nullptr;            // one protection domain per device
  PortFacts facts;
  DeviceProps props;
  int gidIndex = 0;
  uint8_t gid[16] = {};
  uint16_t lid = 0;
  int activeMtu = 0;  // IBV_MTU_* code
};

// Enumerates once; later calls return the same list. *why says why it is empty.
const std::vector<Port>& verbsPorts(const Settings& s, std::string* why);

}  // namespace epx::plugin::verbs
