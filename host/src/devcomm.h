// NCCL device-API pieces (host side), implemented in devcomm.cu: compiled by nvcc because
// nccl_device.h needs it.
#pragma once
#include <nccl.h>

#include <string>

namespace epx {

struct LsaTeam {
  int size, rank;
};
LsaTeam lsaTeam(ncclComm_t comm);
// ginSignals > 0 requests that many GIN signals (and so GIN); *ginContexts = contexts obtained.
ncclResult_t devCommCreate(ncclComm_t comm, int ginSignals, int ginCounters, void** devComm, int* ginContexts);
// "" when devComm (from devCommCreate) has the ABI the kernels were compiled for (NCCL 2.30+ headers:
// NCCL_API_MAGIC and the headers' version; core/nccl_version.h); else why not.
std::string devCommAbiCheck(const void* devComm);
// Copies the ncclDevComm into LinkArgs::devComm.
void devCommCopy(const void* devComm, unsigned char* dst);
ncclResult_t devCommDestroy(ncclComm_t comm, void* devComm);

}  // namespace epx
