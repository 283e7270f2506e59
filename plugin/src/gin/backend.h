// The GIN plugin's backends behind one set of calls (gin_v11.cc): "ipc" (ranks on one host,
// ipc_backend.h) and "verbs" (RDMA, verbs_backend.h). listen offers every backend this process can
// run in one combined handle; connect picks one for the context from all ranks' handles
// (backend_choice.h) and closes the other's listener at closeListen.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_net.h"

namespace epx::plugin::gin {

// Reads EPX_GIN_BACKEND (auto, ipc, verbs) and starts the backends it allows. Fails when none can
// run, or (ncclInvalidUsage) when a setting is malformed.
ncclResult_t ginInit(uint64_t commHash, ncclDebugLogger_t logger, void** instance);
ncclResult_t ginDevices(int* count);
ncclResult_t ginGetProperties(int dev, ncclNetProperties_v11_t* props);
ncclResult_t ginListen(void* instance, int dev, void* handle, void** listenComm);
ncclResult_t ginConnect(void* handles[], int nRanks, int rank, void* listenComm, void** collComm);
ncclResult_t ginRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                         uint64_t mrFlags, void** mhandle, void** ginHandle);
ncclResult_t ginDeregMrSym(void* collComm, void* mhandle);
ncclResult_t ginCloseColl(void* collComm);
ncclResult_t ginCloseListen(void* listenComm);
ncclResult_t ginPut(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                    void* dstMhandle, uint32_t rank, bool withSignal, uint64_t signalOff, void* signalMhandle,
                    uint64_t signalValue, uint32_t signalOp, void** request);
// NCCL 2.30+ (the v13 table): a one-sided get from rank `rank`'s window into this rank's, and a
// flush after gets (ipc: nothing to wait for, *request = null; verbs: an RDMA READ on the QP).
ncclResult_t ginGet(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                    void* localMhandle, uint32_t rank, void** request);
ncclResult_t ginFlush(void* collComm, uint32_t rank, void** request);
ncclResult_t ginTest(void* collComm, void* request, int* done);
ncclResult_t ginProgress(void* collComm);

// Tests: the backend a connected context uses, and its backend's own collComm.
bool ginUsesVerbsForTesting(void* collComm);
void* ginInnerForTesting(void* collComm);

}  // namespace epx::plugin::gin
