// ncclEpGetNcclVersions: which NCCL this libepx was built against, which one the process loaded,
// and whether the loaded one can run it (the rule is core/nccl_version.h's, the same check group,
// bucket and PP creation make).
#include <nccl.h>

#include "core/errors.h"
#include "core/nccl_version.h"
#include "epx/ep.h"

extern "C" ncclResult_t ncclEpGetNcclVersions(int* runtimeVersion, int* buildVersion) {
  if (!runtimeVersion || !buildVersion)
    return epx::fail(ncclInvalidArgument, "ncclEpGetNcclVersions: runtimeVersion and buildVersion must not be NULL");
  *buildVersion = NCCL_VERSION_CODE;
  *runtimeVersion = 0;
  if (ncclGetVersion(runtimeVersion) != ncclSuccess)
    return epx::fail(ncclSystemError, "ncclEpGetNcclVersions: ncclGetVersion of the loaded libnccl failed");
  if (std::string v = epx::checkNcclVersion(*runtimeVersion, NCCL_VERSION_CODE); !v.empty())
    return epx::fail(ncclInvalidUsage, "ncclEpGetNcclVersions: " + v);
  return ncclSuccess;
}
