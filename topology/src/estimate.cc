// Analytic SM/QP sizing after DeepEP V2 (ElasticBuffer.get_theoretical_num_sms/_qps), constants as
// in docs/topology.md, "SM and QP estimate". Units: GB/s per direction; traffic in "token copies".
#include "epx/topology/estimate.h"

#include <algorithm>
#include <cmath>

namespace epx::topo {

namespace {

int alignUp(int v, int a) { return (v + a - 1) / a * a; }

}  // namespace

double epxExpectedGroupsTouched(int experts, int topk, int groups) {
  if (groups <= 1) return 1.0;
  if (experts <= 0 || topk <= 0) return 1.0;
  const double perGroup = static_cast<double>(experts) / groups;
  double missAll = 1.0;  // C(E − E/g, k) / C(E, k) as a product, no overflow
  for (int i = 0; i < topk; ++i) {
    double num = experts - perGroup - i, den = experts - i;
    if (num <= 0 || den <= 0) { missAll = 0; break; }
    missAll *= num / den;
  }
  return groups * (1.0 - missAll);
}

double epxExpectedNetworkRows(int experts, int topk, int ranks, int nodes, EpxForwarding forwarding) {
  if (nodes <= 1) return 0.0;
  const int groups = forwarding == EpxForwarding::kHybrid ? nodes : ranks;
  return epxExpectedGroupsTouched(experts, topk, groups) * (1.0 - 1.0 / nodes);
}

double epxNvlinkGBps(int links) { return links > 0 ? links * kNvlinkLinkGBps * kNvlinkEfficiency : 0.0; }

double epxNicGBps(double rateGbps) { return rateGbps > 0 ? rateGbps / 8.0 : 0.0; }

EpxResourceEstimate epxEstimateEpResources(double nvlinkGBps, double nicGBps, int numSMs, const EpxEpShape& shape) {
  EpxResourceEstimate r;
  r.nvlinkGBps = std::max(0.0, nvlinkGBps);
  r.nicGBps = std::max(0.0, nicGBps);
  const int U = std::max(1, shape.numScaleupRanks);
  const int S = r.nicGBps > 0 ? std::max(1, shape.numScaleoutRanks) : 1;
  const int R = U * S;
  const double topkAll = epxExpectedGroupsTouched(shape.numExperts, shape.numTopk, R);

  // Per token copy sent: SM reads and writes (HBM) and link traffic, relative units.
  const bool hybrid = S > 1 && shape.forwarding == EpxForwarding::kHybrid;
  double smRead = 1.0 / topkAll, smWrite = 0, rdma = 0, nvlink = 0;
  if (hybrid) {  // NVLink inside a node, RDMA to rail peers, forwarding in between
    const double topkNodes = epxExpectedGroupsTouched(shape.numExperts, shape.numTopk, S);
    smWrite += 1.0 / topkAll;                             // into the send buffer
    smWrite += (1.0 / topkAll) * (topkNodes / S);         // local-node bypass
    rdma += (1.0 / topkAll) * topkNodes * (1.0 - 1.0 / S);
    smRead += topkNodes / topkAll;                        // forwarders read RDMA arrivals
    smWrite += 1.0;                                       // and write them over NVLink
    nvlink += 1.0 - 1.0 / U;
  } else {       // direct: each copy written once (an NVLink store or a network staging row)
    smWrite += 1.0;
    nvlink += (1.0 / S) * (1.0 - 1.0 / U);  // to the other ranks of the own node
    rdma += 1.0 - 1.0 / S;                  // to every rank of another node
  }

  // Bottleneck link: the larger traffic/bandwidth ratio.
  double traffic = 0, gbps = 0;
  bool rdmaBound = S > 1 && (r.nvlinkGBps <= 0 || rdma / r.nicGBps > nvlink / r.nvlinkGBps);
  if (rdmaBound) { traffic = rdma; gbps = r.nicGBps; }
  else { traffic = nvlink; gbps = r.nvlinkGBps; }

  double sms = 0;
  if (traffic > 0 && gbps > 0)
    sms = std::max(gbps / traffic * smRead / kSmHbmReadGBps, gbps / traffic * smWrite / kSmHbmWriteGBps);
  int n = alignUp(std::max(kMinSms, static_cast<int>(std::ceil(sms * kSmMargin))), kSmAlign);
  if (!shape.preferOverlapWithCompute) n = std::max(n, 64);
  if (numSMs > 0) n = std::min(n, numSMs);
  r.sms = n;

  if (r.nicGBps <= 0) r.qps = 0;                                  // NVLink-only EP: no RDMA
  else if (hybrid) r.qps = std::min(n * 16 + 1, kMaxHybridQps);  // one per SM × channel, + notify
  else r.qps = std::min(n, kMaxDirectQps);                        // few QPs, less doorbell ringing
  r.networkRowsPerToken = epxExpectedNetworkRows(shape.numExperts, shape.numTopk, R, S, shape.forwarding);
  return r;
}

EpxResourceEstimate epxEstimateEpResources(double nvlinkGBps, double nicGBps, int numSMs) {
  EpxEpShape shape;
  shape.numScaleupRanks = 2;
  shape.numScaleoutRanks = nicGBps > 0 ? 2 : 1;
  return epxEstimateEpResources(nvlinkGBps, nicGBps, numSMs, shape);
}

}  // namespace epx::topo
