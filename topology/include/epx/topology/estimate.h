// epx topology: analytic SM and QP estimate for the EP (dispatch/combine) kernels.
//
// Model: DeepEP V2 `ElasticBuffer.get_theoretical_num_sms` / `get_theoretical_num_qps`
// (deepseek-ai/DeepEP), with the constants of the version epx follows: an SM reads HBM at
// 180 GB/s and writes at 45 GB/s; NVLink bandwidth = links × 26.562 GB/s × 0.9; RDMA bandwidth =
// port rate (Gb/s) / 8. The SM count feeds the bottleneck link (NVLink or RDMA) for a uniform
// gate, ×1.3 margin, aligned up to 4, at least 4, at most the GPU's SMs. Full derivation:
// docs/topology.md, "SM and QP estimate".
// Pure functions: usable without any topology loaded.
#pragma once

namespace epx::topo {

inline constexpr double kNvlinkLinkGBps = 26.562;   ///< per NVLink4 link, per direction (nvidia-smi nvlink -s)
inline constexpr int kNvlinkSxmLinks = 18;          ///< NVLink4 links of an H100/H200 SXM GPU
inline constexpr double kNvlinkEfficiency = 0.9;
inline constexpr double kSmHbmReadGBps = 180.0;     ///< per SM
inline constexpr double kSmHbmWriteGBps = 45.0;     ///< per SM
inline constexpr double kSmMargin = 1.3;
inline constexpr int kSmAlign = 4;
inline constexpr int kMinSms = 4;
inline constexpr int kMaxDirectQps = 9;             ///< 8 data + 1 notify (direct mode)
inline constexpr int kMaxHybridQps = 129;           ///< largest allocation DeepEP V2 makes

// Group shapes libepx accepts (host/include/epx/ep.h; the values are kMaxTopk, kMaxExperts and
// kMaxRanks of device/include/epx/device/ep_args.h, which this CUDA-free library cannot include;
// tests/core/test_sm_agreement.cc checks that they agree). epx-topo estimates only such shapes.
inline constexpr int kEpMaxTopk = 32;      ///< ncclEpConfig_t::topk: 1 .. 32
inline constexpr int kEpMaxExperts = 1024; ///< ncclEpConfig_t::numExperts: at most 1024
inline constexpr int kEpMaxRanks = 1024;   ///< EP size (NVLink ranks × nodes): at most 1024

struct EpxResourceEstimate {
  int sms = 0;            ///< SMs for one EP kernel (dispatch or combine)
  int qps = 0;            ///< RDMA QPs per peer connection; 0 without RDMA
  double nvlinkGBps = 0;  ///< NVLink bandwidth used, GB/s per direction
  double nicGBps = 0;     ///< RDMA bandwidth used, GB/s per direction
  double networkRowsPerToken = 0;  ///< token rows a rank puts on the network per token (uniform routing); 0 on one node
};

/// How a token reaches the GPUs of another node.
enum class EpxForwarding {
  kDirect,  ///< one network copy per destination rank on another node (libepx's high-throughput kernels)
  kHybrid,  ///< one network copy per destination node, to the rail peer, which forwards it over NVLink (DeepEP V2's multi-node model)
};

/// EP group geometry the estimate assumes.
struct EpxEpShape {
  int numScaleupRanks = 2;   ///< ranks per NVLink domain (GPUs a rank reaches over NVLink, itself included)
  int numScaleoutRanks = 1;  ///< NVLink domains (nodes) joined by RDMA
  int numExperts = 256;
  int numTopk = 8;
  bool preferOverlapWithCompute = true;  ///< false raises the count to 64 (DeepEP's rule)
  EpxForwarding forwarding = EpxForwarding::kDirect;  ///< alike on one node
};

/// Expected number of groups a token's top-k experts touch under uniform routing, `numExperts`
/// split evenly over `groups`: groups × (1 − C(E − E/groups, k) / C(E, k)). With groups = ranks it
/// is the distinct destination ranks per token (direct mode's copies), with groups = nodes the
/// distinct destination nodes (hybrid mode's network copies, the own node included).
double epxExpectedGroupsTouched(int numExperts, int topk, int groups);

/// Token rows a rank puts on the network per token under uniform routing, `ranks` split into
/// `nodes` equal nodes: direct T(ranks)·(1 − 1/nodes) (every destination rank on another node),
/// hybrid T(nodes)·(1 − 1/nodes) (every other destination node once). 0 with one node.
double epxExpectedNetworkRows(int numExperts, int topk, int ranks, int nodes, EpxForwarding forwarding);

/// NVLink GB/s per direction from a link count: links × 26.562 × 0.9.
double epxNvlinkGBps(int links);
/// RDMA GB/s per direction from a port rate in Gb/s: rate / 8.
double epxNicGBps(double rateGbps);

/// Estimate with an explicit group shape. Bandwidths in GB/s per direction; a bandwidth ≤ 0 means
/// that link is absent. `numSMs` is the GPU's SM count (132 on H100/H200 SXM), ≤ 0 = no cap.
EpxResourceEstimate epxEstimateEpResources(double nvlinkGBps, double nicGBps, int numSMs,
                                           const EpxEpShape& shape);

/// Estimate for the smallest group on this hardware, which needs the most SMs per byte of link
/// bandwidth: 2 NVLink ranks, and 2 nodes when `nicGBps` > 0; 256 experts, top-8.
/// For 2×H200 (18 links, no NIC): 28 SMs, 0 QPs.
EpxResourceEstimate epxEstimateEpResources(double nvlinkGBps, double nicGBps, int numSMs);

}  // namespace epx::topo
