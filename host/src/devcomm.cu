// Host-side calls of NCCL's device API (they need nccl_device.h, which needs nvcc).
#include <nccl_device.h>

#include <cstring>

#include "internal.h"

namespace epx {

int lsaTeamSize(ncclComm_t comm) { return ncclTeamLsa(comm).nRanks; }

ncclResult_t devCommCreate(ncclComm_t comm, void** out) {
  auto* dc = new ncclDevComm_t;
  ncclDevCommRequirements_t reqs;
  std::memset(&reqs, 0, sizeof(reqs));  // 2.28.9 has no initializer macro
  reqs.lsaBarrierCount = 1;             // kept for future LSA barriers; waits use epx's own flags
  ncclResult_t r = ncclDevCommCreate(comm, &reqs, dc);
  if (r != ncclSuccess) {
    delete dc;
    return r;
  }
  *out = dc;
  return ncclSuccess;
}

ncclResult_t devCommDestroy(ncclComm_t comm, void* p) {
  auto* dc = static_cast<ncclDevComm_t*>(p);
  ncclResult_t r = ncclDevCommDestroy(comm, dc);
  delete dc;
  return r;
}

}  // namespace epx
