#include "net/verbs_qp_attr.h"

#include <cstring>

namespace epx::plugin::verbs {

void initAttr(int port, ibv_qp_attr* a, int* mask, int access) {
  std::memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_INIT;
  a->pkey_index = 0;
  a->port_num = static_cast<uint8_t>(port);
  a->qp_access_flags = static_cast<unsigned>(access);
  *mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
}

void rtrAttr(const QpPath& p, int port, uint32_t destQpn, ibv_qp_attr* a, int* mask) {
  std::memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_RTR;
  a->path_mtu = static_cast<ibv_mtu>(p.mtu);
  a->dest_qp_num = destQpn;
  a->rq_psn = p.remotePsn;
  a->max_dest_rd_atomic = static_cast<uint8_t>(p.maxRdAtomic);
  a->min_rnr_timer = static_cast<uint8_t>(p.minRnrTimer);
  a->ah_attr.port_num = static_cast<uint8_t>(port);
  a->ah_attr.sl = static_cast<uint8_t>(p.service.sl);
  a->ah_attr.src_path_bits = 0;
  if (p.ethernet || p.service.grh) {
    a->ah_attr.is_global = 1;
    std::memcpy(a->ah_attr.grh.dgid.raw, p.dgid, 16);
    a->ah_attr.grh.sgid_index = static_cast<uint8_t>(p.sgidIndex);
    a->ah_attr.grh.hop_limit = static_cast<uint8_t>(p.hopLimit);
    a->ah_attr.grh.traffic_class = static_cast<uint8_t>(p.service.trafficClass);
    a->ah_attr.grh.flow_label = 0;
  }
  a->ah_attr.dlid = p.ethernet ? 0 : p.dlid;
  *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
          IBV_QP_MIN_RNR_TIMER;
}

void rtsAttr(const QpPath& p, uint32_t sqPsn, ibv_qp_attr* a, int* mask) {
  std::memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_RTS;
  a->timeout = static_cast<uint8_t>(p.timeout);
  a->retry_cnt = static_cast<uint8_t>(p.retryCount);
  a->rnr_retry = static_cast<uint8_t>(p.rnrRetry);
  a->sq_psn = sqPsn;
  a->max_rd_atomic = static_cast<uint8_t>(p.maxRdAtomic);
  *mask = IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
}

void qpInitAttr(ibv_cq* cq, int fifoDepth, ibv_qp_init_attr* a) {
  rcQpInitAttr(cq, 3 * fifoDepth, fifoDepth, sizeof(FifoEntry), a);
}

void rcQpInitAttr(ibv_cq* cq, int maxSendWr, int maxRecvWr, int maxInline, ibv_qp_init_attr* a) {
  std::memset(a, 0, sizeof *a);
  a->send_cq = cq;
  a->recv_cq = cq;
  a->qp_type = IBV_QPT_RC;
  a->sq_sig_all = 0;
  a->cap.max_send_wr = static_cast<uint32_t>(maxSendWr);
  a->cap.max_recv_wr = static_cast<uint32_t>(maxRecvWr);
  a->cap.max_send_sge = 1;
  a->cap.max_recv_sge = 1;
  a->cap.max_inline_data = static_cast<uint32_t>(maxInline);
}

}  // namespace epx::plugin::verbs
