// GIN PROXY backend "verbs": ranks on different hosts, over RDMA. NEVER RUN ON A NIC: no machine of
// the project has one; the code runs in the CPU tests against a fake verbs device
// (tests/plugin/fake_verbs.h, test_gin_verbs.cc) and is otherwise compiled and reviewed only.
//
// One RC QP per (GIN context, peer), a loopback QP for the rank itself, one CQ per context, on the
// verbs port of the GPU's rail (verbs_rail.h), with the SL (InfiniBand) or traffic class (RoCE) of
// epx's policy, like the net transport (it reuses net/verbs_*: device list, GID choice, QP
// attributes, out-of-band TCP). Work requests: verbs_plan.h. Registrations are swapped over the
// out-of-band sockets (verbs_gin_wire.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "nccl_net.h"

struct ibv_qp;

namespace epx::plugin::gin {

// Whether the backend can serve this process: the net transport is verbs (so GIN device indices
// are the ncclNet's), else *why says why not.
bool verbsGinAvailable(std::string* why);
ncclResult_t verbsGinDevices(int* count);
ncclResult_t verbsGinGetProperties(int dev, ncclNetProperties_v11_t* props);
// `handle`: NCCL_NET_HANDLE_MAXSIZE bytes; receives a net/verbs_wire.h Handle (the out-of-band
// listen address). `context`: the GIN context index within the communicator (same on all ranks).
ncclResult_t verbsGinListen(int context, int dev, void* handle, void** listenComm);
// Collective over all ranks; blocks at most EPX_GIN_CONNECT_TIMEOUT_MS.
ncclResult_t verbsGinConnect(void* handles[], int nRanks, int rank, void* listenComm, void** collComm);
// Collective; `fd` >= 0 registers through DMA-BUF (offset into it) when the library offers it.
ncclResult_t verbsGinRegMrSym(void* collComm, void* data, size_t size, int type, uint64_t offset, int fd,
                              uint64_t mrFlags, void** mhandle, void** ginHandle);
ncclResult_t verbsGinDeregMrSym(void* collComm, void* mhandle);
ncclResult_t verbsGinCloseColl(void* collComm);
ncclResult_t verbsGinCloseListen(void* listenComm);
ncclResult_t verbsGinPut(void* collComm, uint64_t srcOff, void* srcMhandle, size_t size, uint64_t dstOff,
                         void* dstMhandle, uint32_t rank, bool withSignal, uint64_t signalOff, void* signalMhandle,
                         uint64_t signalValue, uint32_t signalOp, void** request);
// One-sided get (RDMA READ, verbs_plan.h planGinGet) from rank `rank`'s window into this rank's
// (NCCL 2.30+: the v13 table's iget).
ncclResult_t verbsGinGet(void* collComm, uint64_t remoteOff, void* remoteMhandle, size_t size, uint64_t localOff,
                         void* localMhandle, uint32_t rank, void** request);
// An 8-byte RDMA READ of `rank`'s flush word on the QP to that rank (the loopback QP for this
// rank): it completes only after every earlier write and atomic on that QP has been executed at
// the target. Called through the v13 table's iflush (NCCL 2.30+, after gets); NCCL 2.28.9's proxy
// has no flush entry point (its device-side flush waits for test() of each op, the local CQE).
ncclResult_t verbsGinFlush(void* collComm, uint32_t rank, void** request);
ncclResult_t verbsGinTest(void* collComm, void* request, int* done);
ncclResult_t verbsGinProgress(void* collComm);

// Tests: the QP this context uses towards `rank`, and the number of requests it still holds.
ibv_qp* verbsGinQpForTesting(void* collComm, int rank);
size_t verbsGinRequestsForTesting(void* collComm);

}  // namespace epx::plugin::gin
