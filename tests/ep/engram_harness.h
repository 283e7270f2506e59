// Helpers of the Engram GPU suites (engram, random_engram; epx/engram.h): one Engram object per
// rank with every layer's shard filled from a deterministic pattern (byte j of global row g of
// layer l is a function of (seed, l, g, j), so a row fetched from the wrong owner, layer or local
// row never matches), indices built on the host for every rank (each rank fetches its own), the
// output poisoned before each fetch, and the checks of a fetch against the CPU reference
// (host/ref engram_ref.h, given every rank's shards regenerated from the pattern) and of the
// object's async error (bad indices). Every process builds every rank's tables and indices from the
// shared seed and checks its own ranks only (fake nodes).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <vector>

#include "ep_harness.h"
#include "epx/engram.h"

namespace epx::test::engram {

constexpr uint8_t kPoison = 0xa5;
// Poisoned bytes after every output (a fetch must not write past its rows).
constexpr size_t kGuardBytes = 256;

struct Plan {
  int numLayers = 2;
  int64_t rowsPerRank = 64;  // numRows = rowsPerRank * nRanks
  size_t rowBytes = 256;
  int maxTokens = 32;
  int entries = 4;           // entriesPerToken
  int numCtas = 8;           // capped by the SM cap of processes sharing a GPU
  uint64_t chunkBytes = 0;   // 0 = the default (8 MiB)
  int timeoutMs = 0;         // 0 = the default
  int64_t numRows() const;  // at nRanks() ranks
  int64_t numRows(int nRanks) const { return rowsPerRank * nRanks; }
  ncclEpEngramPlan_t api() const;
  ncclEpEngramConfig_t config() const;  // numCtas as it is passed (capped)
  std::string describe() const;
};

enum class TableMemory { Device, MappedHost };

// Byte j of global row g of layer l is patternByte(layerSeed(seed, l), g * rowBytes + j).
uint64_t layerSeed(uint64_t tableSeed, int layer);
// Rank r's shard of layer l: rows [r * rowsPerRank, (r + 1) * rowsPerRank).
std::vector<uint8_t> shardBytes(const Plan& p, uint64_t tableSeed, int rank, int layer);

// One object per rank (collective). With setTables, each local rank's shard of every layer is
// allocated (device memory, or pinned host memory mapped with cudaHostAllocMapped), filled from the
// pattern and passed to ncclEpEngramSetTable. refShards holds every rank's shards on the host
// ([rank][layer]), for the reference.
struct EngramObjects {
  Plan plan;
  uint64_t tableSeed;
  TableMemory memory;
  std::vector<ncclEpEngram_t> engram;          // [rank], local ranks only
  std::vector<std::vector<void*>> shards;      // [rank][layer], local ranks only
  std::vector<std::vector<std::vector<uint8_t>>> refShards;  // [rank][layer], every rank
  // The first bad-index report of each rank's object (it stays until the object is destroyed).
  std::vector<std::string> firstBadIndex;
  EngramObjects(const Plan& p, uint64_t tableSeed, TableMemory m = TableMemory::Device, bool setTables = true);
  ~EngramObjects();
  EngramObjects(const EngramObjects&) = delete;
  EngramObjects& operator=(const EngramObjects&) = delete;
  ncclEpEngram_t operator[](int r) const { return engram[size_t(r)]; }
};

// One rank's part of a fetch: numTokens and its indices [numLayers][tokens][entries].
struct Fetch {
  int tokens = 0;
  std::vector<int32_t> indices;
  // Fills indices from `seed`: each index -1 with probability unusedShare, else a row of an owner
  // drawn from `owners` (empty: every rank), a local row uniform in the owner's shard.
  static Fetch random(const Plan& p, int nRanks, int tokens, uint64_t seed, double unusedShare = 0.1,
                      const std::vector<int>& owners = {});
  // The first layer with an index outside [-1, numRows), or -1.
  int firstBadLayer(const Plan& p, int64_t numRows) const;
  bool hasBad(const Plan& p, int64_t numRows) const { return firstBadLayer(p, numRows) >= 0; }
};

size_t outputBytes(const Plan& p, int tokens);
size_t indexCount(const Plan& p, int tokens);

// One rank's device buffers of a fetch (on the rank's device).
struct RankBuffers {
  DevBuf indices, output;
  // Sizes both for `f` (the output with kGuardBytes more), copies its indices and poisons the whole
  // output buffer (stream-ordered).
  void prepare(const Plan& p, const Fetch& f, cudaStream_t stream);
  // The pointers ncclEpEngramFetch gets: NULL for 0 tokens when nullWhenEmpty.
  const int32_t* indicesArg(const Fetch& f, bool nullWhenEmpty = true) const;
  void* outputArg(const Fetch& f, bool nullWhenEmpty = true) const;
};

std::vector<uint8_t> download(const void* p, size_t bytes);
// The guard bytes after the output of `f` in `all` (the whole output buffer): "" or the first written.
std::string checkGuard(const Plan& p, const Fetch& f, const std::vector<uint8_t>& all);

// Rank r's output `got` ([layers][tokens][entries][rowBytes]) against the reference: "" or the first
// difference (layer, token, entry, index, byte; poison; whose row the bytes are). onlyLayer >= 0:
// `got` holds that layer's rows alone.
std::string checkOutput(const EngramObjects& o, int r, const Fetch& f, const std::vector<uint8_t>& got,
                        int onlyLayer = -1);
// Rank r's async error after a fetch `f`: none while no fetch of this object had a bad index on
// rank r; else ncclInvalidArgument naming rank r and a bad index of the first layer with one (the
// first report stays: later fetches must return it unchanged). "" or why not.
std::string checkAsyncError(EngramObjects& o, int r, const Fetch& f);
std::string asyncErrorOf(ncclEpEngram_t e, ncclResult_t* code = nullptr);

struct FetchOptions {
  bool nullWhenEmpty = true;  // 0 tokens: indices and output NULL
};

// One collective fetch with fetches[r] on every rank r, then its checks: per rank "" or why not.
std::vector<std::string> runFetch(EngramObjects& o, const std::vector<Fetch>& fetches, const FetchOptions& opt = {});

// Boost.Test verdicts of runFetch's result, one per local rank.
void report(const std::vector<std::string>& fails, const std::string& what);

}  // namespace epx::test::engram
