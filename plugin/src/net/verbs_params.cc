#include "net/verbs_params.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace epx::plugin::verbs {

namespace {

// First set variable of `names`; nullptr when none.
const char* first(const Getenv& getenv, std::initializer_list<const char*> names, const char** which) {
  for (const char* n : names)
    if (const char* v = getenv(n); v && *v) {
      *which = n;
      return v;
    }
  return nullptr;
}

std::string readInt(const Getenv& getenv, std::initializer_list<const char*> names, long lo, long hi, int* out) {
  const char* which = nullptr;
  const char* v = first(getenv, names, &which);
  if (!v) return {};
  char* end = nullptr;
  errno = 0;
  const long x = std::strtol(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi)
    return std::string(which) + "=\"" + v + "\" is not an integer in " + std::to_string(lo) + ".." + std::to_string(hi);
  *out = static_cast<int>(x);
  return {};
}

bool powerOf2(long x) { return x > 0 && (x & (x - 1)) == 0; }

}  // namespace

std::string readSettings(const Getenv& getenv, Settings* out) {
  Settings s;
  std::string e;
  if (!(e = readInt(getenv, {"EPX_IB_QPS_PER_CONNECTION"}, 1, kMaxQps, &s.qpsPerConnection)).empty()) return e;
  if (!(e = readInt(getenv, {"EPX_IB_TIMEOUT", "NCCL_IB_TIMEOUT"}, 1, 31, &s.timeout)).empty()) return e;
  if (!(e = readInt(getenv, {"EPX_IB_RETRY_CNT", "NCCL_IB_RETRY_CNT"}, 0, 7, &s.retryCount)).empty()) return e;
  if (!(e = readInt(getenv, {"EPX_IB_MTU"}, 0, 4096, &s.mtuBytes)).empty()) return e;
  if (s.mtuBytes != 0 && mtuCodeFromBytes(s.mtuBytes) == 0)
    return "EPX_IB_MTU=" + std::to_string(s.mtuBytes) + " is not 256, 512, 1024, 2048 or 4096";
  int chunk = static_cast<int>(s.minChunk);
  if (!(e = readInt(getenv, {"EPX_IB_MIN_CHUNK"}, 4096, 1 << 30, &chunk)).empty()) return e;
  s.minChunk = static_cast<size_t>(chunk);
  if (!(e = readInt(getenv, {"EPX_IB_FIFO_DEPTH"}, 1, kMaxFifoDepth, &s.fifoDepth)).empty()) return e;
  if (!powerOf2(s.fifoDepth)) return "EPX_IB_FIFO_DEPTH=" + std::to_string(s.fifoDepth) + " is not a power of 2";
  if (!(e = readInt(getenv, {"EPX_IB_GID_INDEX", "NCCL_IB_GID_INDEX"}, -1, 255, &s.gidIndex)).empty()) return e;
  if (!(e = readInt(getenv, {"EPX_IB_DMABUF"}, 0, 1, &s.useDmabuf)).empty()) return e;
  int flush = 1;
  if (!(e = readInt(getenv, {"EPX_IB_GDR_FLUSH"}, 0, 1, &flush)).empty()) return e;
  s.gdrFlush = flush != 0;
  const char* which = nullptr;
  if (const char* v = first(getenv, {"EPX_IB_ADDR_FAMILY", "NCCL_IB_ADDR_FAMILY"}, &which); v && !parseAddressFamily(v, &s.family))
    return std::string(which) + "=\"" + v + "\" is not AF_INET or AF_INET6";
  if (const char* v = first(getenv, {"EPX_IB_HCA", "NCCL_IB_HCA"}, &which)) s.hcaFilter = v;
  *out = std::move(s);
  return {};
}

int mtuCodeFromBytes(int bytes) {
  switch (bytes) {
    case 256: return 1;
    case 512: return 2;
    case 1024: return 3;
    case 2048: return 4;
    case 4096: return 5;
    default: return 0;
  }
}

int chooseMtu(int localCode, int remoteCode, int requestedBytes) {
  int m = std::min(localCode, remoteCode);
  if (const int r = mtuCodeFromBytes(requestedBytes); r > 0) m = std::min(m, r);
  return std::max(m, 1);
}

ServiceLevel chooseServiceLevel(bool ethernet, const topo::SlPolicy& policy) {
  ServiceLevel s;
  if (ethernet) {
    s.grh = true;
    s.trafficClass = policy.tc.value;
    s.why = "tc " + std::to_string(s.trafficClass) + " from " + policy.tc.origin;
  } else {
    s.sl = policy.sl.value;
    s.why = "sl " + std::to_string(s.sl) + " from " + policy.sl.origin;
  }
  return s;
}

std::string resolveConnectionPolicy(int ncclTrafficClass, const Getenv& getenv, topo::SlPolicy* out) {
  topo::SlInputs in;
  if (ncclTrafficClass >= 0) in.groupTc = ncclTrafficClass;
  in.getenv = getenv;
  auto r = topo::resolveSlPolicy(in);
  if (!r.ok()) return r.error;
  *out = r.value;
  return {};
}

QpPath makeQpPath(const Settings& s, const ConnInfo& local, const ConnInfo& remote, const ServiceLevel& service) {
  QpPath p;
  p.ethernet = local.ethernet != 0;
  p.mtu = chooseMtu(local.mtu, remote.mtu, s.mtuBytes);
  p.dlid = p.ethernet ? 0 : remote.lid;
  std::memcpy(p.dgid, remote.gid, sizeof p.dgid);
  p.sgidIndex = local.gidIndex;
  p.hopLimit = p.ethernet ? 255 : 0;
  p.service = service;
  p.timeout = s.timeout;
  p.retryCount = s.retryCount;
  p.rnrRetry = s.rnrRetry;
  p.minRnrTimer = s.minRnrTimer;
  p.remotePsn = remote.psn;
  return p;
}

}  // namespace epx::plugin::verbs
