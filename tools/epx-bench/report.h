// Printing of epx-bench results: nccl-tests style, fixed columns with units in the header, one
// line per configuration; optional CSV file with one row per measured operation.
#pragma once
#include <cstdio>
#include <string>
#include <vector>

#include "args.h"
#include "routing.h"

namespace epxbench {

// Bytes one operation moves, averaged over ranks (see the header text printed by printConditions).
struct OpBytes {
  double logical = 0;  // received rows incl. own tokens x bytes per row
  double nvlink = 0;   // rows from/to other ranks only
};

struct RoutingInfo {
  RoutingKind kind;
  std::string description;
  Traffic traffic;
  OpBytes bf16, fp8, combine;  // per rank, mean over ranks
  double maxRemoteBytes16 = 0;  // max over ranks of max(remote bytes in, out) for BF16 dispatch
  double lowerBoundUs = 0;      // maxRemoteBytes16 at the best measured peer-copy rate (0: unknown)
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

class Report {
 public:
  explicit Report(const Options& opt);
  ~Report();
  void printSystem(int nGpus);
  void printConditions(const BenchShape& s, const std::vector<RoutingInfo>& routings);
  void printCeiling(const CeilingSummary& c, const std::vector<RoutingInfo>& routings);
  void printBaselineHeader();
  void printBaseline(const RoutingInfo& r, const BaselineSummary& b);
  void printEpxHeader();
  void printEpx(const EpxRow& row, const RoutingInfo& r, const BaselineSummary* b);
  void note(const std::string& line);

 private:
  void csvRow(const std::string& section, const char* routing, const EpxRow* row, const char* op,
              double us, const OpBytes& bytes, double baselineUs, const char* check);
  const Options& opt_;
  FILE* csv_ = nullptr;
};

}  // namespace epxbench
