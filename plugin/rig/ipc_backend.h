// GIN PROXY backend "ipc": ranks on one host. Window memory is shared through CUDA VMM POSIX file
// descriptors passed over unix sockets (SCM_RIGHTS); puts are copy-engine copies on
// non-blocking streams, one per (context, peer); signals travel as messages to the owning rank,
// which applies them in its ginProgress call. The one-host GIN test rig (fake nodes); its files are
// listed in ipc_context.h.
#pragma once

#include <cstddef>
#include <cstdint>

#include "nccl_net.h"

namespace epx::plugin::gin {

// Returns the GIN instance (NCCL's ctx; per communicator) in *instance. Refuses (ncclInvalidUsage, WARN)
// when EPX_GIN_EMU_GBPS or EPX_GIN_EMU_LATENCY_US is malformed or out of range.
ncclResult_t ipcInit(uint64_t commHash, ncclDebugLogger_t logger, void** instance);
ncclResult_t ipcDevices(int* count);
ncclResult_t ipcGetProperties(int dev, ncclNetProperties_v11_t* props);
ncclResult_t ipcListen(void* instance, int dev, void* handle, void** listenComm);
ncclResult_t ipcConnect(void* handles[], int nRanks, int rank, void* listenComm, void** collComm);
ncclResult_t ipcRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t mrFlags,
                         void** mhandle, void** ginHandle);
ncclResult_t ipcDeregMrSym(void* collComm, void* mhandle);
ncclResult_t ipcCloseColl(void* collComm);
ncclResult_t ipcCloseListen(void* listenComm);
ncclResult_t ipcPut(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                    void* dstMhandle, uint32_t rank, bool withSignal, uint64_t signalOff,
                    void* signalMhandle, uint64_t signalValue, uint32_t signalOp, void** request);
// One-sided get (NCCL 2.30+, the v13 table's iget): `size` bytes of rank `rank`'s window (the
// registration matching this rank's remoteMhandle) into this rank's, in order with the puts to
// that rank. Gets complete like puts (test); a flush has nothing left to wait for.
ncclResult_t ipcGet(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                    void* localMhandle, uint32_t rank, void** request);
ncclResult_t ipcTest(void* collComm, void* request, int* done);

// The ipc handle in a few bytes, for GIN's combined handle (gin/backend.cc), which must also hold
// the verbs backend's: the listener's pid and socket nonce. Its host is compared by ipcHostHash.
struct IpcHandleDigest {
  uint32_t pid;
  uint32_t reserved;
  uint64_t nonce;
};
// false when `handle` is not an ipc handle of the form ipcListen writes.
bool ipcDigestHandle(const void* handle, IpcHandleDigest* out);
// The full handle (NCCL_NET_HANDLE_MAXSIZE bytes) of a listener of this host.
void ipcExpandHandle(const IpcHandleDigest& digest, void* handle);
// A 64-bit hash of this host's boot id: equal on every process of one booted host.
uint64_t ipcHostHash();
ncclResult_t ipcProgress(void* collComm);

}  // namespace epx::plugin::gin
