// epx-topo: what the printers show, computed once from the model (the printers only format).
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "epx/topology/estimate.h"
#include "epx/topology/model.h"
#include "epx/topology/nvlink_index.h"
#include "epx/topology/rails.h"
#include "epx/topology/sl_policy.h"

namespace epx::topo::cli {

struct EstimateInputs {
  int numSMs = 132;   ///< H100/H200 SXM
  int experts = 256;
  int topk = 8;
  int nodes = 0;      ///< 0: 2 when an RDMA rail exists, else 1
};

struct Report {
  explicit Report(Topology t) : topo(std::move(t)), nvlinks(topo) {}

  Topology topo;
  NvlinkIndex nvlinks;        ///< every GPU pair's NVLinks, indexed once (after topo)
  RailPlan rails;
  SlPolicy sl;
  EpxEpShape shape;
  int nvlinkLinks = 0;      ///< most NVLinks of any GPU
  double nicGbpsPerGpu = 0; ///< smallest per-GPU share of rail bandwidth, Gb/s
  EpxResourceEstimate estimate;        ///< direct forwarding (libepx's high-throughput kernels)
  EpxResourceEstimate hybridEstimate;  ///< hybrid forwarding; meaningful when hasHybrid()
  bool hasHybrid() const { return estimated && shape.numScaleoutRanks > 1 && estimate.nicGBps > 0; }
  bool estimated = false;   ///< false without a GPU: there is no EP to size (no estimate printed)
};

Report buildReport(Topology topo, const SlPolicy& sl, const EstimateInputs& in);

/// "NV18" / path type / "X" for the GPU×GPU matrix.
std::string gpuGpuCell(const Report& r, int a, int b);

void printTree(const Report& r, std::string& out);
void printMatrix(const Report& r, std::string& out);
void printDetails(const Report& r, std::string& out);  // NICs, rails, SL, estimate, warnings
std::string toJson(const Report& r);

}  // namespace epx::topo::cli
