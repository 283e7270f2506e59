// Fields of ncclNetProperties_v11_t that every transport of this plugin fills alike: a host-side
// (not device-offloaded) network device of its own, one request per receive, NCCL's size limits.
#pragma once
#include "nccl_net.h"

namespace epx::plugin {

inline void fillHostNetDefaults(ncclNetProperties_v11_t* props, int dev, int maxRecvs) {
  props->latency = 0;
  props->maxComms = 65536;
  props->maxRecvs = maxRecvs;
  props->netDeviceType = NCCL_NET_DEVICE_HOST;
  props->netDeviceVersion = NCCL_NET_DEVICE_INVALID_VERSION;
  props->vProps.ndevs = 1;
  props->vProps.devs[0] = dev;
  props->maxP2pBytes = NCCL_MAX_NET_SIZE_BYTES;
  props->maxCollBytes = NCCL_MAX_NET_SIZE_BYTES;
  props->maxMultiRequestSize = 1;
}

}  // namespace epx::plugin
