// ncclTunerPlugin_v5: the rules-file and topology-policy tuner as NCCL 2.28's tuner plugin API.
#include "nccl.h"
#include "nccl_common.h"
#include "nccl_tuner.h"

#include "common/log.h"
#include "tuner/tuner.h"

namespace {

namespace tuner = epx::plugin::tuner;

ncclResult_t init(void** ctx, uint64_t commId, size_t nRanks, size_t nNodes,
                  ncclDebugLogger_t logFunction, ncclNvlDomainInfo_v5_t* nvlDomainInfo,
                  ncclTunerConstants_v5_t* constants) {
  (void)commId;
  (void)constants;  // NCCL's model constants are left as they are
  epx::plugin::setLogger(logFunction);
  tuner::Communicator comm;
  comm.nRanks = nRanks;
  comm.nNodes = nNodes;
  if (nvlDomainInfo != nullptr) {
    comm.nNvlDomains = nvlDomainInfo->nNvlDomains;
    comm.minRanksPerNvlDomain = nvlDomainInfo->minRanksPerNvlDomain;
    comm.maxRanksPerNvlDomain = nvlDomainInfo->maxRanksPerNvlDomain;
  }
  *ctx = tuner::createContext(comm);
  return ncclSuccess;
}

// NCCL aborts the operation on any error from here, so this never returns one. The cost table is
// a contiguous float[numAlgo][numProto] passed as float**.
ncclResult_t getCollInfo(void* ctx, ncclFunc_t collType, size_t nBytes, int numPipeOps,
                         float** collCostTable, int numAlgo, int numProto, int regBuff,
                         int* nChannels) {
  (void)numPipeOps;
  (void)regBuff;
  tuner::decide(static_cast<tuner::Context*>(ctx), static_cast<int>(collType), nBytes,
                reinterpret_cast<float*>(collCostTable), numAlgo, numProto, nChannels);
  return ncclSuccess;
}

ncclResult_t finalize(void* ctx) {
  delete static_cast<tuner::Context*>(ctx);
  return ncclSuccess;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const ncclTuner_v5_t ncclTunerPlugin_v5 = {
    .name = "EPX",
    .init = init,
    .getCollInfo = getCollInfo,
    .finalize = finalize,
};
