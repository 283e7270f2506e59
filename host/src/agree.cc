// The exchange behind epx::agreeOnConfig: one ncclAllGather of a 64-byte record per rank.
#include "agree.h"

#include <cuda_runtime.h>

#include <string>
#include <vector>

#include "core/agree.h"
#include "core/errors.h"

namespace epx {

namespace {

ncclResult_t cudaFailed(const char* what, cudaError_t e) {
  return fail(ncclUnhandledCudaError,
              std::string("ncclEpGroupCreate: exchanging the config between ranks: ") + what + ": " + cudaGetErrorString(e));
}

// Nonblocking communicators may answer ncclInProgress: wait until the call is enqueued.
ncclResult_t settle(ncclComm_t comm, ncclResult_t r) {
  while (r == ncclInProgress) {
    ncclResult_t state = ncclSuccess;
    if (ncclResult_t q = ncclCommGetAsyncError(comm, &state); q != ncclSuccess) return q;
    r = state;
  }
  return r;
}

// Gathers every rank's record into all (all.size() == nRanks).
ncclResult_t gather(const ncclEpGroup& g, const AgreedConfig& mine, std::vector<AgreedConfig>& all) {
  constexpr size_t kBytes = sizeof(AgreedConfig);
  cudaStream_t stream = nullptr;
  char* dev = nullptr;
  cudaError_t ce = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
  if (ce != cudaSuccess) return cudaFailed("cudaStreamCreateWithFlags", ce);
  ncclResult_t result = ncclSuccess;
  const char* what = nullptr;
  if ((ce = cudaMalloc(&dev, kBytes * g.nRanks)) != cudaSuccess) {
    what = "cudaMalloc";
  } else if ((ce = cudaMemcpyAsync(dev + kBytes * g.rank, &mine, kBytes, cudaMemcpyHostToDevice, stream)) !=
             cudaSuccess) {
    what = "cudaMemcpyAsync";
  } else if ((result = settle(g.comm, ncclAllGather(dev + kBytes * g.rank, dev, kBytes, ncclUint8, g.comm, stream))) !=
             ncclSuccess) {
    fail(result, std::string("ncclEpGroupCreate: ncclAllGather of the group config failed: ") +
                     ncclGetErrorString(result));
  } else if ((ce = cudaMemcpyAsync(all.data(), dev, kBytes * g.nRanks, cudaMemcpyDeviceToHost, stream)) !=
                 cudaSuccess ||
             (ce = cudaStreamSynchronize(stream)) != cudaSuccess) {
    what = "copying the records back";
  }
  if (what) result = cudaFailed(what, ce);
  if (dev) cudaFree(dev);
  cudaStreamDestroy(stream);
  return result;
}

}  // namespace

ncclResult_t agreeOnConfig(const ncclEpGroup& g) {
  const AgreedConfig mine = makeAgreedConfig(g.cfg, g.nCtas);
  std::vector<AgreedConfig> all(size_t(g.nRanks), mine);
  if (g.nRanks > 1)
    if (ncclResult_t r = gather(g, mine, all); r != ncclSuccess) return r;
  const std::string err = checkAgreement(all);
  if (!err.empty()) return fail(ncclInvalidUsage, "ncclEpGroupCreate: " + err);
  return ncclSuccess;
}

}  // namespace epx
