// Verbs transport settings (environment) and the QP attributes derived from them, the two ports
// and epx's SL/TC policy. Pure logic, unit-tested; the verbs calls that apply them are in
// verbs_qp.cc.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>

#include "epx/topology/sl_policy.h"
#include "net/verbs_gid.h"
#include "net/verbs_wire.h"

namespace epx::plugin::verbs {

using Getenv = std::function<const char*(const char*)>;

struct Settings {
  int qpsPerConnection = 2;  // EPX_IB_QPS_PER_CONNECTION, 1..16
  int timeout = 20;          // EPX_IB_TIMEOUT / NCCL_IB_TIMEOUT, 1..31 (4.096 us × 2^timeout)
  int retryCount = 7;        // EPX_IB_RETRY_CNT / NCCL_IB_RETRY_CNT, 0..7
  int rnrRetry = 7;          // 7 = retry forever on receiver-not-ready
  int minRnrTimer = 12;      // IBV encoded, 0.64 ms
  int mtuBytes = 0;          // EPX_IB_MTU (256..4096, power of 2), 0 = the ports' active MTU
  size_t minChunk = 128 << 10;  // EPX_IB_MIN_CHUNK: smallest chunk a message is split into
  int fifoDepth = 64;        // EPX_IB_FIFO_DEPTH, power of 2, 1..256
  int gidIndex = -1;         // EPX_IB_GID_INDEX / NCCL_IB_GID_INDEX, -1 = policy (verbs_gid.h)
  AddressFamily family = AddressFamily::Ipv4;  // EPX_IB_ADDR_FAMILY / NCCL_IB_ADDR_FAMILY
  int useDmabuf = 1;         // EPX_IB_DMABUF: 0 never, 1 when the kernel and driver offer it
  bool gdrFlush = true;      // EPX_IB_GDR_FLUSH: iflush reads back through a loopback QP
  std::string hcaFilter;     // EPX_IB_HCA / NCCL_IB_HCA
};

// Reads every setting; "" when all are valid, else the first bad variable and its range (the
// transport then refuses to start rather than guess).
std::string readSettings(const Getenv& getenv, Settings* out);

// IBV_MTU_* code (1 = 256 .. 5 = 4096) for a byte count; 0 when not a valid MTU.
int mtuCodeFromBytes(int bytes);
// The MTU both ends use: the smaller active MTU, lowered to the requested one when set.
int chooseMtu(int localCode, int remoteCode, int requestedBytes);

// What the SL/TC policy sets on one connection. InfiniBand: the SL in the address vector, no GRH.
// RoCE: GRH with the traffic class (DSCP = tc >> 2); the SL stays 0.
struct ServiceLevel {
  int sl = 0;
  int trafficClass = 0;
  bool grh = false;
  std::string why;  // e.g. "tc 106 from EPX_OVERRIDE_TC"
};
ServiceLevel chooseServiceLevel(bool ethernet, const topo::SlPolicy& policy);

// The policy for one connection: NCCL's per-communicator traffic class (ncclNet v11 config, v10
// connect config; NCCL_NET_TRAFFIC_CLASS_UNDEF = -1 when unset) takes the policy's "group" level.
std::string resolveConnectionPolicy(int ncclTrafficClass, const Getenv& getenv, topo::SlPolicy* out);

// Everything ibv_modify_qp needs for RTR and RTS, from the local port and the peer's info.
struct QpPath {
  bool ethernet = false;
  int mtu = 0;
  uint16_t dlid = 0;
  uint8_t dgid[16] = {};
  int sgidIndex = 0;
  int hopLimit = 0;  // 255 on RoCE
  ServiceLevel service;
  int timeout = 0, retryCount = 0, rnrRetry = 0, minRnrTimer = 0;
  int maxRdAtomic = 1;
  uint32_t remotePsn = 0;
};
QpPath makeQpPath(const Settings& s, const ConnInfo& local, const ConnInfo& remote, const ServiceLevel& service);

}  // namespace epx::plugin::verbs
