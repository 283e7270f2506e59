// Host-side calls of NCCL's device API (they need nccl_device.h, which needs nvcc).
#include <nccl_device.h>

#include <cstring>

#include "internal.h"

namespace epx {

static_assert(sizeof(ncclDevComm_t) <= epx::dev::kDevCommBytes, "ncclDevComm does not fit Common::devComm");

LsaTeam lsaTeam(ncclComm_t comm) {
  const ncclTeam_t t = ncclTeamLsa(comm);
  return LsaTeam{t.nRanks, t.rank};
}

ncclResult_t devCommCreate(ncclComm_t comm, int ginSignals, int ginCounters, void** out, int* ginContexts) {
  auto* dc = new ncclDevComm_t;
  ncclDevCommRequirements_t reqs;
  std::memset(&reqs, 0, sizeof(reqs));  // 2.28.9 has no initializer macro
  // Signals only when some peer is behind the network: requesting GIN on a single-node
  // communicator would need a GIN backend that such machines may not have. Per-entry signals in
  // resourceRequirementsList are dropped by 2.28.9, so they are requested at the top level.
  reqs.ginSignalCount = ginSignals;
  reqs.ginCounterCount = ginCounters;
  reqs.ginContextCount = 4;  // a hint in 2.28.9 (NCCL_GIN_NCONTEXTS decides, at most 4)
  ncclResult_t r = ncclDevCommCreate(comm, &reqs, dc);
  if (r != ncclSuccess) {
    delete dc;
    return r;
  }
  *ginContexts = ginSignals > 0 ? int(dc->ginContextCount) : 0;
  *out = dc;
  return ncclSuccess;
}

void devCommCopy(const void* devComm, unsigned char* dst) { std::memcpy(dst, devComm, sizeof(ncclDevComm_t)); }

ncclResult_t devCommDestroy(ncclComm_t comm, void* p) {
  auto* dc = static_cast<ncclDevComm_t*>(p);
  ncclResult_t r = ncclDevCommDestroy(comm, dc);
  delete dc;
  return r;
}

}  // namespace epx
