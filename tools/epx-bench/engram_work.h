// The host side of epx-bench --algo engram (engram_bench.h): the indices every rank fetches, the
// tables' byte pattern, the check of fetched rows against it, the floor per layer and the printed
// lines. Host only (no CUDA): the GPU driver (engram_bench.cc) and the GPU-less dry run
// (mock/bench_mock.cc) share it, and it is CPU-tested (test_engram_work.cc).
//
// Tables: layer l's table holds numRows rows of rowBytes bytes; 32-bit word w of global row g is
// engramWord(engramTableKey(seed, l), g * rowBytes / 4 + w) (randgen.h), so each rank fills its own
// shard and any rank can tell what any row must hold.
// Indices: [layers][tokens][entries] int32, uniform in [0, numRows), a stream of its own per rank.
// Floor per layer (what the printed ratio divides by):
//   network peers (ranks on other nodes, node = rank / ranksPerNode) and a NIC rate: the most row
//     bytes any rank receives from, or serves to, ranks on other nodes (max over ranks of max(in,
//     out)) at the rate, plus one round trip (2 x the one-way latency: the request goes out, the
//     rows come back); the request lists (4 bytes per row) are not counted;
//   only NVLink peers (one node): the memory floor (memory_floor.h) of the layer's output rows on
//     each rank, the faster of one copy-engine copy and the plain SM copy with the fetch's CTAs
//     (slowest rank);
//   network peers without a rate: none.
// The fetch's floor is the sum of its layers' (layer l + 1's kernel starts after layer l's on the
// stream, so the layers' transfers do not overlap).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "args.h"
#include "epx/ref/engram_ref.h"
#include "randgen.h"

namespace epxbench {

// Stream keys of the Engram bench's data (randgen.h streamKey tensor ids, beyond kTensorExpertOut).
enum : uint64_t { kTensorEngramTable = 5, kTensorEngramIndices = 6 };

EPXB_HD uint64_t engramTableKey(uint64_t seed, int layer) { return streamKey(seed, kTensorEngramTable, uint64_t(layer)); }
// Word `i` (in 32-bit words from the start of the whole table) of a table with key `key`.
EPXB_HD uint32_t engramWord(uint64_t key, uint64_t i) { return uint32_t(mix64(key + i) >> 16); }

struct EngramBenchShape {
  int nRanks = 1;
  int layers = 1;
  int64_t numRows = 0;  // rows of each layer's table, a multiple of nRanks
  uint64_t rowBytes = 0;
  int tokens = 0;       // per rank and fetch
  int entries = 0;      // rows per token and layer
  int64_t rowsPerRank() const { return numRows / nRanks; }
  int64_t rowsPerLayer() const { return int64_t(tokens) * entries; }  // of one rank's fetch
  // The CPU reference's view of the same shape.
  epx::ref::EngramShape ref() const {
    epx::ref::EngramShape r;
    r.nRanks = nRanks;
    r.layers = layers;
    r.numRows = numRows;
    r.rowBytes = rowBytes;
    r.tokens = tokens;
    r.entries = entries;
    return r;
  }
};

// The shape of this run: the options' sizes at nRanks ranks; --engram-rows 0 takes the default
// (kEngramDefaultRows rounded down to a multiple of the ranks). "" in `why` or the reason the
// options do not fit the rank count.
constexpr int64_t kEngramDefaultRows = int64_t(1) << 20;
EngramBenchShape engramShapeOf(const Options& opt, int nRanks, std::string* why);

// Every rank's shard of every layer filled from the pattern, [rank][layer][rowsPerRank * rowBytes]:
// the tables as the CPU reference (epx::ref::engramFetch) takes them.
std::vector<std::vector<std::vector<uint8_t>>> engramShards(const EngramBenchShape& s, uint64_t seed);

// Rank `rank`'s indices, [layers][tokens][entries] (the same in every process).
std::vector<int32_t> engramIndices(const EngramBenchShape& s, uint64_t seed, int rank);

// "" when `out` ([tokens][entries][rowBytes] of layer `layer`) holds the rows `indices` (the rank's
// whole [layers][tokens][entries] list) name, else the first mismatch and how many rows differ.
std::string engramCheckLayer(const EngramBenchShape& s, uint64_t seed, int layer, const std::vector<int32_t>& indices,
                             const uint8_t* out);

// Row bytes that cross nodes in one layer: for each rank, what it receives from ranks on other
// nodes and what it serves to them, from every rank's indices (allIndices[rank]).
struct EngramLayerTraffic {
  std::vector<double> inBytes, outBytes;  // [rank]
  double maxBytes = 0;                    // max over ranks of max(in, out)
  int maxRank = 0;                        // a rank with that maximum
};
std::vector<EngramLayerTraffic> engramNetTraffic(const EngramBenchShape& s,
                                                 const std::vector<std::vector<int32_t>>& allIndices, int ranksPerNode);

enum class EngramFloorKind { None, Network, Memory };

struct EngramFloor {
  EngramFloorKind kind = EngramFloorKind::None;
  std::vector<double> layerUs;  // [layer]; empty without a floor
  double fetchUs() const;       // the sum over layers
  // Network: the bytes of each layer (EngramLayerTraffic::maxBytes), the rate and latency used.
  std::vector<double> layerBytes;
  double gbps = 0, latencyUs = 0;
  // Memory: each rank's output bytes per layer and the floor's two times (slowest rank).
  double memBytes = 0, memCeUs = 0, memSmUs = 0;
  int memCtas = 0;
};

// The network floor of each layer (kind Network): bytes / rate + 2 x latency.
EngramFloor engramNetFloor(const std::vector<EngramLayerTraffic>& t, double gbps, double latencyUs);
// The memory floor (kind Memory): every layer min(ceUs, smUs) (a time of 0 is "not measured").
EngramFloor engramMemFloor(int layers, double bytes, double ceUs, double smUs, int ctas);

// Times of the timed fetches, slowest rank: doneUs[l] = mean time from the fetch's start to layer
// l's completion (seen by a second stream through ncclEpEngramWaitLayer), layerUs[l] = mean of
// done[l] - done[l - 1] (done[-1] = the start).
struct EngramTimes {
  std::vector<double> doneUs, layerUs;
  double fetchUs() const { return doneUs.empty() ? 0.0 : doneUs.back(); }
};

// The printed lines (rank 0). Header: the run's shape and the floor's definition.
void printEngramHeader(const EngramBenchShape& s, const Options& opt, int ranksPerNode, int ctas,
                       const EngramFloor& f);
// One line per layer and one for the whole fetch: done, layer, floor, ratio; then whether every
// layer completed before the next (pipelining).
void printEngramTimes(const EngramBenchShape& s, const EngramTimes& t, const EngramFloor& f);

}  // namespace epxbench
