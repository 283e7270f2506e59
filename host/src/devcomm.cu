// Host-side calls of NCCL's device API (they need nccl_device.h, which needs nvcc).
#include <nccl_device.h>

#include <cstring>

#include "core/nccl_version.h"
#include "devcomm.h"
#include "epx/device/link_args.h"

namespace epx {

// LinkArgs::devComm is sized by CMake from these headers (EPX_NCCL_DEVCOMM_BYTES): it must hold
// ncclDevComm with less than 16 bytes to spare, else the build mixes two NCCLs' headers.
static_assert(sizeof(ncclDevComm_t) <= size_t(dev::kDevCommBytes), "ncclDevComm does not fit LinkArgs::devComm");
static_assert(size_t(dev::kDevCommBytes) - sizeof(ncclDevComm_t) < 16,
              "EPX_NCCL_DEVCOMM_BYTES was measured on other NCCL headers; reconfigure");
static_assert(alignof(ncclDevComm_t) <= 16, "LinkArgs::devComm is 16-byte aligned");

LsaTeam lsaTeam(ncclComm_t comm) {
  const ncclTeam_t t = ncclTeamLsa(comm);
  return LsaTeam{t.nRanks, t.rank};
}

ncclResult_t devCommCreate(ncclComm_t comm, int ginSignals, int ginCounters, void** out, int* ginContexts) {
  auto* dc = new ncclDevComm_t;
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
  // 2.30+: the initializer sets size, NCCL_API_MAGIC and the headers' version, which the runtime
  // checks (and uses to fill this version's ncclDevComm layout).
  ncclDevCommRequirements_t reqs = NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER;
  // GIN is enabled by a connection type from 2.30 on (signals alone are refused): every rank may put
  // to every network peer. epx's signals order the puts before them (a peer that sees the signal
  // reads the rows): NCCL's legacy signal operators (ncclGin_SignalAdd) are strong only with
  // ginStrongSignalsRequired.
  reqs.ginConnectionType = ginSignals > 0 ? NCCL_GIN_CONNECTION_FULL : NCCL_GIN_CONNECTION_NONE;
  reqs.ginStrongSignalsRequired = true;
#else
  ncclDevCommRequirements_t reqs;
  std::memset(&reqs, 0, sizeof(reqs));  // 2.28.9 has no initializer macro
#endif
  // Signals only when some peer is behind the network: requesting GIN on a single-node
  // communicator would need a GIN backend that such machines may not have. Per-entry signals in
  // resourceRequirementsList are dropped by 2.28.9, so they are requested at the top level.
  reqs.ginSignalCount = ginSignals;
  reqs.ginCounterCount = ginCounters;
  reqs.ginContextCount = 4;  // a hint (2.28.9: NCCL_GIN_NCONTEXTS decides, at most 4)
  ncclResult_t r = ncclDevCommCreate(comm, &reqs, dc);
  if (r != ncclSuccess) {
    delete dc;
    return r;
  }
  *ginContexts = ginSignals > 0 ? int(dc->ginContextCount) : 0;
  *out = dc;
  return ncclSuccess;
}

std::string devCommAbiCheck(const void* devComm) {
#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 30, 0)
  auto* dc = static_cast<const ncclDevComm_t*>(devComm);
  return checkDevCommAbi(dc->magic, dc->version, NCCL_API_MAGIC, NCCL_VERSION_CODE);
#else
  (void)devComm;  // 2.28.9's ncclDevComm has no magic or version: the runtime's version was checked
  return {};
#endif
}

void devCommCopy(const void* devComm, unsigned char* dst) {
  std::memset(dst, 0, dev::kDevCommBytes);
  std::memcpy(dst, devComm, sizeof(ncclDevComm_t));
}

ncclResult_t devCommDestroy(ncclComm_t comm, void* p) {
  auto* dc = static_cast<ncclDevComm_t*>(p);
  ncclResult_t r = ncclDevCommDestroy(comm, dc);
  delete dc;
  return r;
}

}  // namespace epx
