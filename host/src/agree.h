// ncclEpGroupCreate's agreement step: all ranks exchange what must match (core/agree.h) and compare.
#pragma once
#include <nccl.h>

#include "internal.h"

namespace epx {

// Collective over g.link.comm: one ncclAllGather of every rank's AgreedConfig (private stream,
// synchronized). Call after g.cfg is normalized and g.nCtas resolved, with g.link.cudaDev current.
// ncclSuccess when every rank created the group with the same config; else ncclInvalidUsage on
// every rank (all see the same records), with the reason in ncclEpGetLastError(); a CUDA or NCCL
// failure of the exchange itself gives ncclUnhandledCudaError or the NCCL call's result.
ncclResult_t agreeOnConfig(const ncclEpGroup& g);

}  // namespace epx
