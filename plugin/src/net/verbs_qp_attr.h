// ibv_qp_attr contents for the RC state machine RESET -> INIT -> RTR -> RTS, from a QpPath.
// Pure (fills structs, calls nothing), unit-tested; ibv_modify_qp is called in verbs_transport.cc.
#pragma once

#include <infiniband/verbs.h>

#include "net/verbs_params.h"

namespace epx::plugin::verbs {

constexpr int kQpAccess = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;

// Responder rights of a QP of the GIN verbs backend: its peers write and fetch-add into it, and it
// is read back by flush.
constexpr int kGinQpAccess = kQpAccess | IBV_ACCESS_REMOTE_ATOMIC;

void initAttr(int port, ibv_qp_attr* attr, int* mask, int access = kQpAccess);
void rtrAttr(const QpPath& path, int port, uint32_t destQpn, ibv_qp_attr* attr, int* mask);
void rtsAttr(const QpPath& path, uint32_t sqPsn, ibv_qp_attr* attr, int* mask);
// Creation caps of every QP of a connection: depth messages, each at most one chunk per QP plus
// the size word and the FIFO write.
void qpInitAttr(ibv_cq* cq, int fifoDepth, ibv_qp_init_attr* attr);
// An RC QP on `cq` with room for `maxSendWr` send and `maxRecvWr` receive work requests of one SGE.
void rcQpInitAttr(ibv_cq* cq, int maxSendWr, int maxRecvWr, int maxInline, ibv_qp_init_attr* attr);

}  // namespace epx::plugin::verbs
