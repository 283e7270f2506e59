// Printing of epx-bench results: nccl-tests style, fixed columns with units in the header, one
// line per configuration; optional CSV file with one row per measured operation.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "memory_floor_work.h"
#include "routing.h"

namespace epxbench {

// Bytes one operation moves, averaged over ranks (see the header text printed by printConditions).
struct OpBytes {
  double logical = 0;  // received rows incl. own tokens x bytes per row
  double nvlink = 0;   // rows from/to other ranks only
};

// Network floor: the bytes that must cross the network (rows between ranks on different nodes),
// max over ranks of max(bytes out, bytes in), at the NIC line rate, plus one one-way latency.
struct NetFloor {
  bool on = false;
  double bytes16 = 0, bytes8 = 0, bytesComb = 0;  // payload bytes (rows x row bytes)
  double us16 = 0, us8 = 0, usComb = 0;           // 0: no network bytes
};

// Network copies per routed token, mean over all ranks' tokens: one per distinct destination rank
// on another node (direct mode, what epx's high-throughput kernels put), or one per distinct
// destination node other than the source's (hybrid mode: once per node, then NVLink; not built
// yet), from the routing (epx::ref::hybridPlan) and for uniform routing analytically.
struct NetCopies {
  double direct = 0, hybrid = 0;
  double uniformDirect = 0, uniformHybrid = 0;
};

struct RoutingInfo {
  RoutingKind kind;
  std::string description;
  Traffic traffic;
  Traffic wire;  // rows the mode run moves between ranks: traffic, or with --hybrid both hops' rows
  OpBytes bf16, fp8, combine;  // per rank, mean over ranks
  double maxRemoteBytes16 = 0;  // max over ranks of max(remote bytes in, out) for BF16 dispatch
  double lowerBoundUs = 0;      // maxRemoteBytes16 at the best measured peer-copy rate (0: unknown)
  NetFloor net;
  NetCopies copies;
};

// Where the ranks run (printed by printSystem).
struct Placement {
  int nRanks = 0;
  bool multiProcess = false;
  int ranksPerNode = 0;  // ranks per (fake) NCCL node; nRanks in single-process mode
  int nDev = 0;          // GPUs visible to a process
};

struct CeilingSummary {
  bool measured = false;
  bool p2p = true;
  double bytesPerRank = 0;
  double ceUs = 0, smFewUs = 0, smAllUs = 0;  // max over ranks, per round
  int smFew = 0, smAll = 0;
  double ceGBps() const;
  double smFewGBps() const;
  double smAllGBps() const;
  double bestGBps() const;
};

struct BaselineSummary {
  bool measured = false;
  double dispUs = 0, fp8Us = 0, combUs = 0;  // max over ranks of per-rank medians
  bool checked = false, ok = true;
  std::string msg;
};

struct EpxRow {
  RoutingKind kind;
  int layout = 1, mode = 1, align = 1, smsReq = 0, smsUsed = 0;
  bool window = true;
  bool fp8 = true;
  double layoutUs = 0, bf16Us = 0, fp8Us = 0, combUs = 0;  // max over ranks of per-rank medians
  bool checked = false, ok = true;
  std::string msg;
};

// Memory floor of one configuration (memory_floor.h) over the ranks.
struct MemFloorSummary {
  bool measured = false;
  MemFloorTimes t;
};

// GIN traffic of one operation's call, over the ranks (epx_runner.h EpxGinCalls).
struct GinOpSummary {
  const char* op = "";
  double opsMean = 0, putsMean = 0, putSignalsMean = 0, signalOnlyMean = 0;
  double wireMeanBytes = 0;      // bytes charged to the NIC per rank, mean
  double rowMeanBytes = 0;       // token-row payload that must cross nodes per rank, mean
  double overheadMaxPct = 0;     // max over ranks of (wire - rows) / wire
  double netGBpsMean = 0;        // wire bytes / the rank's median time of this op, mean over ranks
};

// Prints only when `printer` (rank 0 in multi-process mode); the other ranks stay quiet.
class Report {
 public:
  Report(const Options& opt, bool printer);
  ~Report();
  void printSystem(const Placement& p);
  void printNetFloor(const std::vector<RoutingInfo>& routings, int ranksPerNode);
  void printConditions(const BenchShape& s, const std::vector<RoutingInfo>& routings);
  void printCeiling(const CeilingSummary& c, const std::vector<RoutingInfo>& routings);
  void printBaselineHeader();
  void printBaseline(const RoutingInfo& r, const BaselineSummary& b);
  void printEpxHeader();
  void printEpx(const EpxRow& row, const RoutingInfo& r, const BaselineSummary* b);
  void note(const std::string& line);
  // GIN operations and bytes per call below the row of printEpx.
  void printGin(const std::vector<GinOpSummary>& ops);
  // The memory floor of the row's configuration below it, with epx's time over it.
  void printMemFloor(const EpxRow& row, const MemFloorSummary& f);

 private:
  void csvRow(const std::string& section, const char* routing, const EpxRow* row, const char* op,
              double us, const OpBytes& bytes, double baselineUs, const char* check, double floorUs = 0);
  const Options& opt_;
  bool printer_;
  bool floorCols_ = false;  // epx rows carry time / network floor columns
  FILE* csv_ = nullptr;
};

}  // namespace epxbench
