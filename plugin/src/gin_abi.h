// The GIN plugin API versions the adapters export (gin_v11.cc, gin_v13.cc, gin_v14.cc): NCCL's
// plugin headers vendored under include/nccl (net v11 and GIN v11 of 2.28.9; net v12 and GIN
// v13/v14 of 2.30.7), and the conversions every adapter shares. The backend (gin/backend.h)
// speaks v11's properties; the adapters translate.
#pragma once

#include <cstring>

#include "nccl_net.h"  // net v6..v11 and ncclGin_v11_t (2.28.9)

// Headers of 2.28.9 name the device handle up to v11; 2.30+ also as v12 (the same struct).
#if NCCL_VERSION_CODE < NCCL_VERSION(2, 30, 0)
typedef ncclNetDeviceHandle_v11_t ncclNetDeviceHandle_v12_t;
#endif
// net_v12.h defines this macro again with other spacing; epx uses neither.
#undef NCCL_NET_ATTR_INIT
#include "net/net_v12.h"
#include "gin/gin_v13.h"
#include "gin/gin_v14.h"

#include "gin/backend.h"

namespace epx::plugin::gin {

// v12 properties (GIN v13/v14) from the backend's v11 ones: the same fields, up to 8 virtual
// device members instead of 4, and a rail and plane id (unknown here).
inline ncclResult_t ginGetPropertiesV12(int dev, ncclNetProperties_v12_t* out) {
  ncclNetProperties_v11_t p;
  std::memset(&p, 0, sizeof(p));
  if (ncclResult_t r = ginGetProperties(dev, &p); r != ncclSuccess) return r;
  std::memset(out, 0, sizeof(*out));
  out->name = p.name;
  out->pciPath = p.pciPath;
  out->guid = p.guid;
  out->ptrSupport = p.ptrSupport;
  out->regIsGlobal = p.regIsGlobal;
  out->forceFlush = p.forceFlush;
  out->speed = p.speed;
  out->port = p.port;
  out->latency = p.latency;
  out->maxComms = p.maxComms;
  out->maxRecvs = p.maxRecvs;
  out->netDeviceType = p.netDeviceType;
  out->netDeviceVersion = p.netDeviceVersion;
  out->vProps.ndevs = p.vProps.ndevs;
  for (int i = 0; i < p.vProps.ndevs && i < NCCL_NET_MAX_DEVS_PER_NIC; ++i) out->vProps.devs[i] = p.vProps.devs[i];
  out->maxP2pBytes = p.maxP2pBytes;
  out->maxCollBytes = p.maxCollBytes;
  out->maxMultiRequestSize = p.maxMultiRequestSize;
  out->railId = NCCL_NET_ID_UNDEF;
  out->planeId = NCCL_NET_ID_UNDEF;
  return ncclSuccess;
}

// v13/v14 createContext: the backend has one context per connection (the collComm), which serves
// every GIN context index; the device handle says "proxy" (the backend needs ginProgress).
inline ncclResult_t ginCreateContextOnCollComm(void* collComm, void** ginCtx, ncclNetDeviceHandle_v11_t** devHandle) {
  static ncclNetDeviceHandle_v11_t proxyHandle = {NCCL_NET_DEVICE_GIN_PROXY, 0, nullptr, 0, 1};
  if (collComm == nullptr || ginCtx == nullptr) return ncclInvalidArgument;
  *ginCtx = collComm;
  if (devHandle) *devHandle = &proxyHandle;
  return ncclSuccess;
}

}  // namespace epx::plugin::gin
