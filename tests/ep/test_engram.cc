// GPU tests of the Engram fetch (suite "engram", epx/engram.h): every fetch byte-exact against the
// CPU reference (host/ref engram_ref.h), with the output poisoned before it and the tables filled
// from a pattern of (layer, global row, byte), so a missing, misplaced or stale row shows: several
// layers; 0 tokens on some or all ranks (NULL indices and output); every index -1; every index to
// one owner (and one hot row); rows of one 16-byte vector, odd token counts, one entry; 64 layers;
// the largest plan within reason; a bad index (its row zeroed, the rest right, reported by
// ncclEpEngramGetAsyncError naming layer, token, entry and value, and the report kept); host
// refusals with their reasons; ranks that create with different plans; fetches enqueued back to
// back; tables in mapped pinned host memory, changed between fetches and re-pointed; a second
// stream that waits for one layer; a captured CUDA graph replayed with new indices; network chunks
// of several rows (64 KiB chunks) and rows larger than a chunk; 1 and 32 CTAs. Runs at 1 rank and
// across fake nodes; every rank runs every case (the fetch is collective).
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "engram_harness.h"
#include "ep_harness.h"
#include "epx/engram.h"

using namespace epx::test;
using namespace epx::test::engram;

namespace {

// One fetch per rank: rank r fetches tokensOf(r) tokens of random rows (a share of -1), from `seed`.
template <class TokensOf>
std::vector<Fetch> randomFetches(const Plan& p, uint64_t seed, TokensOf tokensOf, double unusedShare = 0.1,
                                 const std::vector<int>& owners = {}) {
  const int R = nRanks();
  std::vector<Fetch> f;
  for (int r = 0; r < R; ++r)
    f.push_back(Fetch::random(p, R, tokensOf(r), mix64(seed ^ (uint64_t(r) << 32)), unusedShare, owners));
  return f;
}

std::vector<Fetch> uniformFetches(const Plan& p, uint64_t seed, double unusedShare = 0.1) {
  return randomFetches(p, seed, [&](int r) { return std::max(1, p.maxTokens - 3 * r % std::max(1, p.maxTokens)); },
                       unusedShare);
}

std::string code(ncclResult_t r) { return std::to_string(int(r)) + ":" + ncclEpGetLastError(); }

// The async-error text of one bad index (async_error.cc).
std::string badIndexMessage(int rank, int layer, int token, int entry, long long value) {
  return "rank " + std::to_string(rank) + ": the Engram index of layer " + std::to_string(layer) + ", token " +
         std::to_string(token) + ", entry " + std::to_string(entry) + " is " + std::to_string(value) +
         ", not -1 or a row in 0 .. numRows - 1; its output row was zeroed";
}

Plan smallPlan() {
  Plan p;
  p.numLayers = 2;
  p.rowsPerRank = 32;
  p.rowBytes = 64;
  p.maxTokens = 32;
  p.entries = 4;
  return p;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(engram)

// Four layers, rows of an odd vector count (17 x 16 B), token counts that differ between ranks, 10%
// of the indices -1; three fetches with new indices on one object.
BOOST_AUTO_TEST_CASE(fetch_several_layers) {
  Plan p;
  p.numLayers = 4;
  p.rowsPerRank = 96;
  p.rowBytes = 272;
  p.maxTokens = 48;
  p.entries = 6;
  EngramObjects o(p, nextSeed());
  for (int k = 0; k < 3; ++k) report(runFetch(o, uniformFetches(p, nextSeed())), "fetch " + std::to_string(k));
}

// 0 tokens with NULL indices and output: on rank 0 only, on every rank but rank 0, on every rank;
// then 0 tokens with valid pointers (also allowed) next to full fetches.
BOOST_AUTO_TEST_CASE(zero_tokens_on_some_or_all_ranks) {
  const Plan p = smallPlan();
  EngramObjects o(p, nextSeed());
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return r == 0 ? 0 : 5 + r; })), "rank 0 without tokens");
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return r == 0 ? p.maxTokens : 0; })),
         "only rank 0 with tokens");
  report(runFetch(o, randomFetches(p, nextSeed(), [](int) { return 0; })), "no tokens anywhere");
  FetchOptions withPointers;
  withPointers.nullWhenEmpty = false;
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return r % 2 ? 0 : p.maxTokens; }), withPointers),
         "0 tokens with pointers");
  // And a full fetch afterwards (the empty ones kept every rank in step).
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int) { return p.maxTokens; })), "full fetch after empty ones");
}

// Every index -1: every output row zeroed (the poison replaced), nothing asked of any owner.
BOOST_AUTO_TEST_CASE(all_indices_unused_zero_the_output) {
  const Plan p = smallPlan();
  EngramObjects o(p, nextSeed());
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int) { return p.maxTokens; }, 1.0)), "every index -1");
  report(runFetch(o, uniformFetches(p, nextSeed())), "valid indices after all -1");
}

// Every rank's every index to one owner (the first, then the last rank): that owner serves every
// requester at once; then one hot row named by every index of every rank.
BOOST_AUTO_TEST_CASE(all_indices_to_one_owner) {
  Plan p = smallPlan();
  p.rowBytes = 528;
  p.maxTokens = 64;
  EngramObjects o(p, nextSeed());
  const int R = nRanks();
  for (int owner : std::vector<int>{0, R - 1}) {
    report(runFetch(o, randomFetches(p, nextSeed(), [&](int) { return p.maxTokens; }, 0.0, {owner})),
           "every index to rank " + std::to_string(owner));
    if (R == 1) break;
  }
  std::vector<Fetch> hot = randomFetches(p, nextSeed(), [&](int r) { return p.maxTokens - r; }, 0.0);
  const int32_t row = int32_t(p.numRows() - 1);
  for (auto& f : hot) std::fill(f.indices.begin(), f.indices.end(), row);
  report(runFetch(o, hot), "one hot row everywhere");
}

// Rows of one 16-byte vector, one entry per token, odd token counts (1, 3, 7, ... per rank), one
// row per rank; then three entries per token of five rows per rank; then 64 layers.
BOOST_AUTO_TEST_CASE(odd_sizes) {
  Plan p;
  p.numLayers = 3;
  p.rowsPerRank = 1;
  p.rowBytes = 16;
  p.maxTokens = 13;
  p.entries = 1;
  {
    EngramObjects o(p, nextSeed());
    report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return std::min(p.maxTokens, 2 * r + 1); }, 0.2)),
           "16 B rows, 1 entry, odd tokens");
    report(runFetch(o, randomFetches(p, nextSeed(), [&](int) { return p.maxTokens; }, 0.0)), "16 B rows, 13 tokens");
  }
  p.rowsPerRank = 5;
  p.entries = 3;
  p.maxTokens = 7;
  {
    EngramObjects o(p, nextSeed());
    report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return 7 - 2 * (r % 4); }, 0.1)), "3 entries, 5 rows per rank");
  }
  p.numLayers = NCCL_EP_ENGRAM_MAX_LAYERS;
  p.rowsPerRank = 4;
  p.rowBytes = 32;
  p.maxTokens = 3;
  p.entries = 2;
  {
    EngramObjects o(p, nextSeed());
    report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return 3 - r % 2; }, 0.1)), "64 layers");
  }
}

// The largest plan within reason: 4096 tokens x 16 entries of 1 KiB rows on 2 layers (128 MiB of
// output per rank; EPX_TEST_QUICK: 1024 tokens), a table of about 16384 rows per layer.
BOOST_AUTO_TEST_CASE(largest_plan) {
  Plan p;
  p.numLayers = 2;
  p.rowsPerRank = std::max<int64_t>(1, 16384 / nRanks());
  p.rowBytes = 1024;
  p.maxTokens = quick() ? 1024 : 4096;
  p.entries = 16;
  EngramObjects o(p, nextSeed());
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int) { return p.maxTokens; }, 0.05)), "largest plan, full");
  report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return p.maxTokens - 1 - 7 * r; }, 0.3)),
         "largest plan, fewer tokens");
}

// A bad index on rank 0 (layer 1, token 3, entry 2 = numRows) and on the last rank (layer 0, token
// 5, entry 1 = -5): the row is zeroed, every other row right, and ncclEpEngramGetAsyncError reports
// ncclInvalidArgument naming rank, layer, token, entry and value on those ranks alone. The object
// stays usable and keeps the first report: a clean fetch afterwards is right and leaves it as it was.
BOOST_AUTO_TEST_CASE(bad_index_row_zeroed_and_reported) {
  const Plan p = smallPlan();
  EngramObjects o(p, nextSeed());
  const int R = nRanks();
  const int64_t numRows = p.numRows();
  std::vector<Fetch> f = randomFetches(p, nextSeed(), [](int) { return 8; }, 0.1);
  auto at = [&](Fetch& x, int layer, int token, int entry) -> int32_t& {
    return x.indices[(size_t(layer) * size_t(x.tokens) + size_t(token)) * size_t(p.entries) + size_t(entry)];
  };
  at(f[0], 1, 3, 2) = int32_t(numRows);
  if (R > 1) at(f[size_t(R - 1)], 0, 5, 1) = -5;
  report(runFetch(o, f), "bad indices");
  std::vector<std::string> msgs(static_cast<size_t>(R));
  std::vector<int> codes(static_cast<size_t>(R), -1);
  gpus().runLocal([&](const RankContext& c) {
    ncclResult_t r = ncclSuccess;
    msgs[size_t(c.rank)] = asyncErrorOf(o[c.rank], &r);
    codes[size_t(c.rank)] = int(r);
  });
  for (int r : localRanks()) {
    std::string want;
    if (r == 0) want = badIndexMessage(0, 1, 3, 2, numRows);
    else if (r == R - 1) want = badIndexMessage(r, 0, 5, 1, -5);
    BOOST_TEST(codes[size_t(r)] == int(want.empty() ? ncclSuccess : ncclInvalidArgument), "rank " << r);
    BOOST_TEST(msgs[size_t(r)] == want, "rank " << r);
  }
  report(runFetch(o, uniformFetches(p, nextSeed())), "clean fetch after bad indices");
  gpus().runLocal([&](const RankContext& c) {
    ncclResult_t r = ncclSuccess;
    BOOST_TEST(asyncErrorOf(o[c.rank], &r) == msgs[size_t(c.rank)]);
  });
}

// Refusals on the host, before anything is launched, with the reason in ncclEpGetLastError; the
// object is unchanged by them (a fetch afterwards is right).
BOOST_AUTO_TEST_CASE(host_refusals) {
  const Plan p = smallPlan();
  EngramObjects o(p, nextSeed());
  const int R = nRanks();
  std::vector<std::vector<std::string>> msgs(static_cast<size_t>(R));
  gpus().runLocal([&](const RankContext& c) {
    auto& m = msgs[size_t(c.rank)];
    ncclEpEngram_t e = o[c.rank];
    DevBuf idx, out;
    idx.reserve(size_t(p.maxTokens + 1) * p.entries * p.numLayers * sizeof(int32_t) + 64);
    out.reserve(outputBytes(p, p.maxTokens + 1) + 64);
    EPX_CHECK_CUDA(cudaMemset(idx.ptr(), 0xff, idx.size()));  // every index -1
    const int32_t* I = idx.as<int32_t>();
    m.push_back(code(ncclEpEngramFetch(e, I, p.maxTokens + 1, out.ptr(), c.stream)));
    m.push_back(code(ncclEpEngramFetch(e, I, -1, out.ptr(), c.stream)));
    m.push_back(code(ncclEpEngramFetch(e, nullptr, 1, out.ptr(), c.stream)));
    m.push_back(code(ncclEpEngramFetch(e, I, 1, nullptr, c.stream)));
    m.push_back(code(ncclEpEngramFetch(e, reinterpret_cast<const int32_t*>(idx.as<char>() + 2), 1, out.ptr(), c.stream)));
    m.push_back(code(ncclEpEngramFetch(e, I, 1, out.as<char>() + 8, c.stream)));
    m.push_back(code(ncclEpEngramFetch(nullptr, I, 1, out.ptr(), c.stream)));
    // Tables.
    void* host = std::aligned_alloc(64, size_t(p.rowsPerRank) * p.rowBytes);
    m.push_back(code(ncclEpEngramSetTable(e, 0, host)));
    std::free(host);
    m.push_back(code(ncclEpEngramSetTable(e, p.numLayers, out.ptr())));
    m.push_back(code(ncclEpEngramSetTable(e, -1, out.ptr())));
    m.push_back(code(ncclEpEngramSetTable(e, 0, nullptr)));
    m.push_back(code(ncclEpEngramSetTable(e, 0, out.as<char>() + 8)));
    m.push_back(code(ncclEpEngramWaitLayer(e, p.numLayers, c.stream)));
    m.push_back(code(ncclEpEngramWaitLayer(nullptr, 0, c.stream)));
    ncclResult_t ae = ncclSuccess;
    m.push_back(code(ncclEpEngramGetAsyncError(e, nullptr, nullptr, 0)));
    m.push_back(std::to_string(int(ncclEpEngramGetAsyncError(e, &ae, nullptr, 0))) + ":" + std::to_string(int(ae)));
    m.push_back(std::to_string(int(ncclEpEngramDestroy(nullptr))));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  });
  for (int r : localRanks()) {
    const auto& m = msgs[size_t(r)];
    BOOST_TEST_REQUIRE(m.size() == 17u);
    BOOST_TEST(m[0] == "4:ncclEpEngramFetch: numTokens 33 is not in 0 .. maxTokens 32");
    BOOST_TEST(m[1] == "4:ncclEpEngramFetch: numTokens -1 is not in 0 .. maxTokens 32");
    BOOST_TEST(m[2] == "4:ncclEpEngramFetch: indices is NULL");
    BOOST_TEST(m[3] == "4:ncclEpEngramFetch: output is NULL");
    BOOST_TEST(m[4] == "4:ncclEpEngramFetch: indices is not 4-byte aligned");
    BOOST_TEST(m[5] == "4:ncclEpEngramFetch: output is not 16-byte aligned");
    BOOST_TEST(m[6] == "4:ncclEpEngramFetch: engram is NULL");
    BOOST_TEST(m[7] == "4:ncclEpEngramSetTable: shard is neither device memory nor mapped pinned host memory "
                       "(cudaHostAlloc with cudaHostAllocMapped, or cudaHostRegister)");
    BOOST_TEST(m[8] == "4:ncclEpEngramSetTable: layer 2 is not in 0 .. 1");
    BOOST_TEST(m[9] == "4:ncclEpEngramSetTable: layer -1 is not in 0 .. 1");
    BOOST_TEST(m[10] == "4:ncclEpEngramSetTable: shard is NULL");
    BOOST_TEST(m[11] == "4:ncclEpEngramSetTable: shard is not 16-byte aligned");
    BOOST_TEST(m[12] == "4:ncclEpEngramWaitLayer: layer 2 is not in 0 .. 1");
    BOOST_TEST(m[13] == "4:ncclEpEngramWaitLayer: engram is NULL");
    BOOST_TEST(m[14] == "4:ncclEpEngramGetAsyncError: NULL argument");
    BOOST_TEST(m[15] == "0:0");
    BOOST_TEST(m[16] == "0");
  }
  report(runFetch(o, uniformFetches(p, nextSeed())), "fetch after the refusals");
}

// A fetch before every layer has a table: ncclInvalidUsage naming the first layer without one (on
// every rank, nothing launched); once all are set, the fetch runs.
BOOST_AUTO_TEST_CASE(fetch_before_set_table_is_refused) {
  const Plan p = smallPlan();
  EngramObjects o(p, nextSeed(), TableMemory::Device, /*setTables=*/false);
  const int R = nRanks();
  std::vector<std::string> before(static_cast<size_t>(R)), partial(static_cast<size_t>(R));
  gpus().runLocal([&](const RankContext& c) {
    before[size_t(c.rank)] = code(ncclEpEngramFetch(o[c.rank], nullptr, 0, nullptr, c.stream));
    const size_t bytes = size_t(p.rowsPerRank) * p.rowBytes;
    for (int l = 0; l < p.numLayers; ++l) {
      void* q = nullptr;
      EPX_CHECK_CUDA(cudaMalloc(&q, bytes));
      o.shards[size_t(c.rank)].push_back(q);
      EPX_CHECK_CUDA(cudaMemcpy(q, o.refShards[size_t(c.rank)][size_t(l)].data(), bytes, cudaMemcpyHostToDevice));
    }
    EPX_CHECK_EP(ncclEpEngramSetTable(o[c.rank], 0, o.shards[size_t(c.rank)][0]));
    partial[size_t(c.rank)] = code(ncclEpEngramFetch(o[c.rank], nullptr, 0, nullptr, c.stream));
    for (int l = 1; l < p.numLayers; ++l) EPX_CHECK_EP(ncclEpEngramSetTable(o[c.rank], l, o.shards[size_t(c.rank)][size_t(l)]));
  });
  for (int r : localRanks()) {
    BOOST_TEST(before[size_t(r)] == "5:ncclEpEngramFetch: layer 0 has no table on this rank (ncclEpEngramSetTable)");
    BOOST_TEST(partial[size_t(r)] == "5:ncclEpEngramFetch: layer 1 has no table on this rank (ncclEpEngramSetTable)");
  }
  report(runFetch(o, uniformFetches(p, nextSeed())), "fetch once every table is set");
}

// Plans and configs refused by ncclEpEngramCreate and ncclEpEngramGetBufferSizeHint before any
// communication (every rank alike), with the reason; nothing is created.
BOOST_AUTO_TEST_CASE(bad_plans_and_configs_are_refused) {
  const int R = nRanks();
  std::vector<std::vector<std::string>> msgs(static_cast<size_t>(R));
  std::vector<size_t> hints(static_cast<size_t>(R), 0);
  std::vector<int> created(static_cast<size_t>(R), 0);
  gpus().runLocal([&](const RankContext& c) {
    auto& m = msgs[size_t(c.rank)];
    const ncclEpEngramPlan_t good = smallPlan().api();
    auto tryPlan = [&](ncclEpEngramPlan_t pl) {
      ncclEpEngram_t out = nullptr;
      m.push_back(code(ncclEpEngramCreate(c.comm, &pl, nullptr, &out)));
      if (out) ++created[size_t(c.rank)];
    };
    auto tryConfig = [&](ncclEpEngramConfig_t cfg) {
      ncclEpEngram_t out = nullptr;
      m.push_back(code(ncclEpEngramCreate(c.comm, &good, &cfg, &out)));
      if (out) ++created[size_t(c.rank)];
    };
    ncclEpEngramPlan_t q = good;
    q.numLayers = 0;
    tryPlan(q);
    q.numLayers = NCCL_EP_ENGRAM_MAX_LAYERS + 1;
    tryPlan(q);
    q = good;
    q.numRows = 0;
    tryPlan(q);
    q.numRows = int64_t(R) * ((int64_t(1) << 31) / R + 1);  // a multiple of R above 2^31 - 1
    tryPlan(q);
    q = good;
    q.rowBytes = 24;
    tryPlan(q);
    q.rowBytes = 0;
    tryPlan(q);
    q = good;
    q.maxTokens = 0;
    tryPlan(q);
    q = good;
    q.entriesPerToken = 0;
    tryPlan(q);
    q = good;
    q.maxTokens = 1 << 20;
    q.entriesPerToken = 17;
    tryPlan(q);
    ncclEpEngram_t out = nullptr;
    m.push_back(code(ncclEpEngramCreate(c.comm, nullptr, nullptr, &out)));
    m.push_back(code(ncclEpEngramCreate(c.comm, &good, nullptr, nullptr)));
    ncclEpEngramConfig_t cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.magic = 0;
    tryConfig(cfg);
    cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.size = sizeof(cfg) - 8;
    tryConfig(cfg);
    cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.numCtas = 33;
    tryConfig(cfg);
    cfg.numCtas = 0;
    tryConfig(cfg);
    cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.timeoutMs = 0;
    tryConfig(cfg);
    cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.chunkBytes = 1000;
    tryConfig(cfg);
    cfg.chunkBytes = (size_t(64) << 10) - 16;
    tryConfig(cfg);
    cfg.chunkBytes = (size_t(64) << 10) + 8;
    tryConfig(cfg);
    // The size hint: the same checks; a valid plan needs at least the receive rows of one layer.
    q = good;
    q.numLayers = 0;
    size_t bytes = 0;
    m.push_back(code(ncclEpEngramGetBufferSizeHint(c.comm, &q, nullptr, &bytes)));
    m.push_back(code(ncclEpEngramGetBufferSizeHint(c.comm, &good, nullptr, nullptr)));
    EPX_CHECK_EP(ncclEpEngramGetBufferSizeHint(c.comm, &good, nullptr, &hints[size_t(c.rank)]));
  });
  const Plan sp = smallPlan();
  for (int r : localRanks()) {
    const auto& m = msgs[size_t(r)];
    BOOST_TEST_REQUIRE(m.size() == 21u);
    BOOST_TEST(m[0] == "4:ncclEpEngramCreate: numLayers 0 is not in 1 .. 64");
    BOOST_TEST(m[1] == "4:ncclEpEngramCreate: numLayers 65 is not in 1 .. 64");
    BOOST_TEST(m[2] == "4:ncclEpEngramCreate: numRows 0 is not a positive multiple of the " + std::to_string(R) +
                           " ranks (every rank holds an equal shard of each table)");
    const int64_t big = int64_t(R) * ((int64_t(1) << 31) / R + 1);
    BOOST_TEST(m[3] == "4:ncclEpEngramCreate: numRows " + std::to_string(big) + " is more than 2147483647 (indices are int32)");
    BOOST_TEST(m[4] == "4:ncclEpEngramCreate: rowBytes 24 is not a positive multiple of 16 up to 1073741824");
    BOOST_TEST(m[5] == "4:ncclEpEngramCreate: rowBytes 0 is not a positive multiple of 16 up to 1073741824");
    BOOST_TEST(m[6] == "4:ncclEpEngramCreate: maxTokens 0 must be at least 1");
    BOOST_TEST(m[7] == "4:ncclEpEngramCreate: entriesPerToken 0 must be at least 1");
    BOOST_TEST(m[8] == "4:ncclEpEngramCreate: maxTokens x entriesPerToken is 17825792, more than 16777216 rows per layer");
    BOOST_TEST(m[9] == "4:ncclEpEngramCreate: plan is NULL");
    BOOST_TEST(m[10] == "4:ncclEpEngramCreate: engram is NULL");
    BOOST_TEST(m[11] == "4:ncclEpEngramCreate: config was not initialized with its _INITIALIZER macro (bad magic)");
    BOOST_TEST(m[12] == "4:ncclEpEngramCreate: config has size " + std::to_string(sizeof(ncclEpEngramConfig_t) - 8) +
                            ", this library expects " + std::to_string(sizeof(ncclEpEngramConfig_t)));
    BOOST_TEST(m[13] == "4:ncclEpEngramCreate: numCtas 33 is not in 1 .. 32");
    BOOST_TEST(m[14] == "4:ncclEpEngramCreate: numCtas 0 is not in 1 .. 32");
    BOOST_TEST(m[15] == "4:ncclEpEngramCreate: timeoutMs 0 must be >= 1");
    const std::string chunk = " is not a multiple of 16 in 65536 .. 1073741824 (0 = default 8388608)";
    BOOST_TEST(m[16] == "4:ncclEpEngramCreate: chunkBytes 1000" + chunk);
    BOOST_TEST(m[17] == "4:ncclEpEngramCreate: chunkBytes 65520" + chunk);
    BOOST_TEST(m[18] == "4:ncclEpEngramCreate: chunkBytes 65544" + chunk);
    BOOST_TEST(m[19] == "4:ncclEpEngramGetBufferSizeHint: numLayers 0 is not in 1 .. 64");
    BOOST_TEST(m[20] == "4:ncclEpEngramGetBufferSizeHint: bytes is NULL");
    BOOST_TEST(created[size_t(r)] == 0);
    BOOST_TEST(hints[size_t(r)] >= size_t(sp.maxTokens) * size_t(sp.entries) * sp.rowBytes);
  }
}

// Ranks that create with different plans or configs all get ncclInvalidUsage naming the field and
// the rank (the first difference from rank 0); nothing is created.
BOOST_AUTO_TEST_CASE(plans_that_differ_between_ranks_are_refused, *boost::unit_test::precondition(needsPeers)) {
  const int R = nRanks();
  std::vector<std::vector<std::string>> msgs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    const bool last = c.rank == R - 1;
    ncclEpEngramPlan_t pl = smallPlan().api();
    if (last) pl.maxTokens = 64;
    ncclEpEngram_t out = nullptr;
    msgs[size_t(c.rank)].push_back(code(ncclEpEngramCreate(c.comm, &pl, nullptr, &out)));
    if (out) ncclEpEngramDestroy(out);
    pl = smallPlan().api();
    ncclEpEngramConfig_t cfg = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
    cfg.chunkBytes = last ? size_t(64) << 10 : 0;
    out = nullptr;
    msgs[size_t(c.rank)].push_back(code(ncclEpEngramCreate(c.comm, &pl, &cfg, &out)));
    if (out) ncclEpEngramDestroy(out);
  });
  const std::string who = "5:ncclEpEngramCreate: rank " + std::to_string(R - 1);
  const std::string tail = "; every rank must create the Engram object with the same plan and config";
  for (int r : localRanks()) {
    BOOST_TEST_REQUIRE(msgs[size_t(r)].size() == 2u);
    BOOST_TEST(msgs[size_t(r)][0] == who + " has maxTokens 64 but rank 0 has 32" + tail);
    BOOST_TEST(msgs[size_t(r)][1] == who + " has chunkBytes 65536 but rank 0 has 8388608" + tail);
  }
}

// Fetches enqueued back to back on one stream without a host sync, each with its own indices, token
// counts (0 on some ranks in one of them) and output: every one right (each a new op of the
// object's session; twice round, so the sequence numbers keep advancing).
BOOST_AUTO_TEST_CASE(back_to_back_fetches) {
  Plan p = smallPlan();
  p.numLayers = 3;
  p.rowBytes = 144;
  EngramObjects o(p, nextSeed());
  const int R = nRanks();
  constexpr int kFetches = 4;
  for (int round = 0; round < 2; ++round) {
    std::vector<std::vector<Fetch>> f;
    for (int k = 0; k < kFetches; ++k)
      f.push_back(randomFetches(p, nextSeed(), [&](int r) { return k == 2 && r % 2 == 1 ? 0 : p.maxTokens - k * 5 - r % 3; },
                                0.05 * k));
    std::vector<std::vector<RankBuffers>> bufs(kFetches);
    for (auto& b : bufs) b = std::vector<RankBuffers>(static_cast<size_t>(R));
    gpus().run([&](const RankContext& c) {
      for (int k = 0; k < kFetches; ++k) {
        RankBuffers& b = bufs[size_t(k)][size_t(c.rank)];
        const Fetch& x = f[size_t(k)][size_t(c.rank)];
        b.prepare(p, x, c.stream);
        EPX_CHECK_EP(ncclEpEngramFetch(o[c.rank], b.indicesArg(x), x.tokens, b.outputArg(x), c.stream));
      }
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    });
    std::vector<std::string> fails(static_cast<size_t>(R));
    gpus().runLocal([&](const RankContext& c) {
      std::string& why = fails[size_t(c.rank)];
      for (int k = 0; k < kFetches && why.empty(); ++k) {
        const Fetch& x = f[size_t(k)][size_t(c.rank)];
        const DevBuf& out = bufs[size_t(k)][size_t(c.rank)].output;
        const std::vector<uint8_t> got = download(out.ptr(), out.size());
        why = checkAsyncError(o, c.rank, x);
        if (why.empty()) why = checkOutput(o, c.rank, x, got);
        if (why.empty()) why = checkGuard(p, x, got);
        if (!why.empty()) why = "fetch " + std::to_string(k) + ": " + why;
      }
    });
    report(fails, "round " + std::to_string(round));
  }
}

// Tables in pinned host memory mapped into the device (cudaHostAllocMapped): fetched like device
// tables; contents changed on the host between fetches are what the next fetch returns.
BOOST_AUTO_TEST_CASE(pinned_host_tables) {
  Plan p = smallPlan();
  p.numLayers = 3;
  p.rowsPerRank = 200;
  p.rowBytes = 400;
  EngramObjects o(p, nextSeed(), TableMemory::MappedHost);
  report(runFetch(o, uniformFetches(p, nextSeed())), "pinned host tables");
  // New contents of layer 2 (written on the host while no fetch runs).
  const uint64_t seed2 = nextSeed();
  for (int r = 0; r < nRanks(); ++r) o.refShards[size_t(r)][2] = shardBytes(p, seed2, r, 2);
  gpus().runLocal([&](const RankContext& c) {
    std::memcpy(o.shards[size_t(c.rank)][2], o.refShards[size_t(c.rank)][2].data(), o.refShards[size_t(c.rank)][2].size());
  });
  report(runFetch(o, uniformFetches(p, nextSeed())), "pinned host tables, layer 2 rewritten");
}

// Device tables changed between fetches: layer 1's contents rewritten on the stream before the next
// fetch, and layer 0 pointed at another shard with ncclEpEngramSetTable.
BOOST_AUTO_TEST_CASE(tables_change_between_fetches) {
  Plan p = smallPlan();
  p.rowsPerRank = 48;
  p.rowBytes = 96;
  EngramObjects o(p, nextSeed());
  report(runFetch(o, uniformFetches(p, nextSeed())), "first tables");
  const uint64_t s0 = nextSeed(), s1 = nextSeed();
  for (int r = 0; r < nRanks(); ++r) {
    o.refShards[size_t(r)][0] = shardBytes(p, s0, r, 0);
    o.refShards[size_t(r)][1] = shardBytes(p, s1, r, 1);
  }
  const size_t bytes = size_t(p.rowsPerRank) * p.rowBytes;
  gpus().run([&](const RankContext& c) {
    void* q = nullptr;
    EPX_CHECK_CUDA(cudaMalloc(&q, bytes));
    o.shards[size_t(c.rank)].push_back(q);  // freed with the object
    EPX_CHECK_CUDA(cudaMemcpy(q, o.refShards[size_t(c.rank)][0].data(), bytes, cudaMemcpyHostToDevice));
    EPX_CHECK_EP(ncclEpEngramSetTable(o[c.rank], 0, q));
    EPX_CHECK_CUDA(cudaMemcpyAsync(o.shards[size_t(c.rank)][1], o.refShards[size_t(c.rank)][1].data(), bytes,
                                   cudaMemcpyHostToDevice, c.stream));
  });
  report(runFetch(o, uniformFetches(p, nextSeed())), "layer 0 re-pointed, layer 1 rewritten");
}

// ncclEpEngramWaitLayer: a second stream that waits for layer 0 (then the last layer) of a fetch
// reads that layer's rows right on that stream, before the fetch's own stream is synchronized. A
// stream that waits on a layer of an object that never fetched does not wait.
BOOST_AUTO_TEST_CASE(wait_layer_on_a_second_stream) {
  Plan p;
  p.numLayers = 4;
  p.rowsPerRank = 256;
  p.rowBytes = 2048;
  p.maxTokens = 256;
  p.entries = 8;
  EngramObjects o(p, nextSeed());
  const int R = nRanks();
  const std::vector<Fetch> f = uniformFetches(p, nextSeed());
  std::vector<RankBuffers> bufs(static_cast<size_t>(R));
  std::vector<std::vector<uint8_t>> first(static_cast<size_t>(R)), last(static_cast<size_t>(R));
  std::vector<std::string> fails(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    const Fetch& x = f[size_t(c.rank)];
    RankBuffers& b = bufs[size_t(c.rank)];
    const size_t layerBytes = size_t(x.tokens) * p.entries * p.rowBytes;
    cudaStream_t s2 = nullptr;
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    uint8_t* host = nullptr;
    EPX_CHECK_CUDA(cudaMallocHost(&host, 2 * layerBytes));
    try {
      b.prepare(p, x, c.stream);
      EPX_CHECK_EP(ncclEpEngramFetch(o[c.rank], b.indicesArg(x), x.tokens, b.outputArg(x), c.stream));
      EPX_CHECK_EP(ncclEpEngramWaitLayer(o[c.rank], 0, s2));
      EPX_CHECK_CUDA(cudaMemcpyAsync(host, b.output.ptr(), layerBytes, cudaMemcpyDeviceToHost, s2));
      EPX_CHECK_CUDA(cudaStreamSynchronize(s2));
      first[size_t(c.rank)].assign(host, host + layerBytes);
      EPX_CHECK_EP(ncclEpEngramWaitLayer(o[c.rank], p.numLayers - 1, s2));
      EPX_CHECK_CUDA(cudaMemcpyAsync(host + layerBytes, b.output.as<char>() + (p.numLayers - 1) * layerBytes, layerBytes,
                                     cudaMemcpyDeviceToHost, s2));
      EPX_CHECK_CUDA(cudaStreamSynchronize(s2));
      last[size_t(c.rank)].assign(host + layerBytes, host + 2 * layerBytes);
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    } catch (...) {
      cudaStreamSynchronize(c.stream);
      cudaStreamDestroy(s2);
      cudaFreeHost(host);
      throw;
    }
    cudaStreamDestroy(s2);
    cudaFreeHost(host);
  });
  gpus().runLocal([&](const RankContext& c) {
    const Fetch& x = f[size_t(c.rank)];
    std::string& why = fails[size_t(c.rank)];
    why = checkAsyncError(o, c.rank, x);
    if (why.empty()) why = checkOutput(o, c.rank, x, first[size_t(c.rank)], 0);
    if (why.empty()) why = checkOutput(o, c.rank, x, last[size_t(c.rank)], p.numLayers - 1);
    const DevBuf& out = bufs[size_t(c.rank)].output;
    const std::vector<uint8_t> got = download(out.ptr(), out.size());
    if (why.empty()) why = checkOutput(o, c.rank, x, got);
    if (why.empty()) why = checkGuard(p, x, got);
  });
  report(fails, "layers read on a second stream");
  // An object that never fetched: the wait is no wait.
  const EngramObjects fresh(smallPlan(), nextSeed());
  gpus().runLocal([&](const RankContext& c) {
    cudaStream_t s2 = nullptr;
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&s2, cudaStreamNonBlocking));
    EPX_CHECK_EP(ncclEpEngramWaitLayer(fresh[c.rank], 1, s2));
    EPX_CHECK_CUDA(cudaStreamSynchronize(s2));
    cudaStreamDestroy(s2);
  });
}

// A fetch captured in a CUDA graph together with a second stream that waits for layer 0 and copies
// it aside (the wait joins that stream into the capture), replayed with new index contents (copied
// on the stream before each replay): each replay's output and copy match its indices.
BOOST_AUTO_TEST_CASE(graph_replay_reads_the_current_indices) {
  Plan p = smallPlan();
  p.numLayers = 3;
  p.rowBytes = 320;
  EngramObjects o(p, nextSeed());
  const int R = nRanks();
  const int replays = quick() ? 2 : 4;
  auto tokensOf = [&](int r) { return p.maxTokens - 1 - r % 4; };
  std::vector<RankBuffers> bufs(static_cast<size_t>(R));
  std::vector<DevBuf> copies(static_cast<size_t>(R));
  std::vector<cudaStream_t> side(static_cast<size_t>(R), nullptr);
  std::vector<cudaEvent_t> joined(static_cast<size_t>(R), nullptr);
  std::vector<cudaGraphExec_t> execs(static_cast<size_t>(R), nullptr);
  std::vector<Fetch> f = randomFetches(p, nextSeed(), tokensOf);
  gpus().run([&](const RankContext& c) {
    const Fetch& x = f[size_t(c.rank)];
    RankBuffers& b = bufs[size_t(c.rank)];
    const size_t layerBytes = size_t(x.tokens) * p.entries * p.rowBytes;
    b.prepare(p, x, c.stream);
    copies[size_t(c.rank)].reserve(layerBytes);
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&side[size_t(c.rank)], cudaStreamNonBlocking));
    EPX_CHECK_CUDA(cudaEventCreateWithFlags(&joined[size_t(c.rank)], cudaEventDisableTiming));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    cudaGraph_t g = nullptr;
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    try {
      EPX_CHECK_EP(ncclEpEngramFetch(o[c.rank], b.indicesArg(x), x.tokens, b.outputArg(x), c.stream));
      EPX_CHECK_EP(ncclEpEngramWaitLayer(o[c.rank], 0, side[size_t(c.rank)]));
      EPX_CHECK_CUDA(cudaMemcpyAsync(copies[size_t(c.rank)].ptr(), b.output.ptr(), layerBytes, cudaMemcpyDeviceToDevice,
                                     side[size_t(c.rank)]));
      EPX_CHECK_CUDA(cudaEventRecord(joined[size_t(c.rank)], side[size_t(c.rank)]));
      EPX_CHECK_CUDA(cudaStreamWaitEvent(c.stream, joined[size_t(c.rank)], 0));
    } catch (...) {
      cudaGraph_t broken = nullptr;
      cudaStreamEndCapture(c.stream, &broken);
      if (broken) cudaGraphDestroy(broken);
      throw;
    }
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &g));
    const cudaError_t ie = cudaGraphInstantiate(&execs[size_t(c.rank)], g, 0);
    cudaGraphDestroy(g);
    EPX_CHECK_CUDA(ie);
  });
  for (int k = 0; k < replays; ++k) {
    f = randomFetches(p, nextSeed(), tokensOf, 0.05 * k);
    gpus().run([&](const RankContext& c) {
      const Fetch& x = f[size_t(c.rank)];
      RankBuffers& b = bufs[size_t(c.rank)];
      b.prepare(p, x, c.stream);  // same sizes: the same buffers, new indices, poisoned output
      EPX_CHECK_CUDA(cudaMemsetAsync(copies[size_t(c.rank)].ptr(), kPoison, copies[size_t(c.rank)].size(), c.stream));
      EPX_CHECK_CUDA(cudaGraphLaunch(execs[size_t(c.rank)], c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    });
    std::vector<std::string> fails(static_cast<size_t>(R));
    gpus().runLocal([&](const RankContext& c) {
      const Fetch& x = f[size_t(c.rank)];
      std::string& why = fails[size_t(c.rank)];
      const DevBuf& out = bufs[size_t(c.rank)].output;
      const std::vector<uint8_t> got = download(out.ptr(), out.size());
      why = checkAsyncError(o, c.rank, x);
      if (why.empty()) why = checkOutput(o, c.rank, x, got);
      if (why.empty()) why = checkGuard(p, x, got);
      if (why.empty())
        why = "layer 0 copy: " + checkOutput(o, c.rank, x,
                                             download(copies[size_t(c.rank)].ptr(), size_t(x.tokens) * p.entries * p.rowBytes), 0);
      if (why == "layer 0 copy: ") why.clear();
    });
    report(fails, "replay " + std::to_string(k));
  }
  gpus().runLocal([&](const RankContext& c) {
    cudaGraphExecDestroy(execs[size_t(c.rank)]);
    cudaEventDestroy(joined[size_t(c.rank)]);
    cudaStreamDestroy(side[size_t(c.rank)]);
  });
}

// Network owners send their rows in chunks of chunkBytes: 64 KiB chunks of 21 rows of 3088 B (plus
// a tail chunk) over 3 CTAs, each owner serving many chunks per layer; 64 KiB chunks of exactly 4
// rows; rows larger than a chunk (one row per chunk). At 1 rank (NVLink / local only) the same
// fetches must be right too.
BOOST_AUTO_TEST_CASE(network_chunks_of_several_rows) {
  struct Shape {
    size_t rowBytes;
    int maxTokens, entries;
    int64_t rowsPerRank;
  };
  for (const Shape& s : {Shape{3088, 256, 8, 512}, Shape{16384, 64, 4, 64}, Shape{(size_t(64) << 10) + 16, 16, 2, 8}}) {
    Plan p;
    p.numLayers = 2;
    p.rowBytes = s.rowBytes;
    p.maxTokens = s.maxTokens;
    p.entries = s.entries;
    p.rowsPerRank = s.rowsPerRank;
    p.chunkBytes = uint64_t(64) << 10;
    p.numCtas = 3;
    EngramObjects o(p, nextSeed());
    for (int k = 0; k < 2; ++k)
      report(runFetch(o, randomFetches(p, nextSeed(), [&](int r) { return p.maxTokens - r % 3; }, 0.05)),
             p.describe() + ", fetch " + std::to_string(k));
  }
}

// One CTA and 32 CTAs (the documented range; capped where processes share a GPU).
BOOST_AUTO_TEST_CASE(one_and_thirty_two_ctas) {
  for (int ctas : {1, 32}) {
    Plan p = smallPlan();
    p.numLayers = 3;
    p.maxTokens = 100;
    p.entries = 5;
    p.rowBytes = 208;
    p.numCtas = ctas;
    p.chunkBytes = uint64_t(64) << 10;
    EngramObjects o(p, nextSeed());
    report(runFetch(o, uniformFetches(p, nextSeed())), p.describe());
  }
}

BOOST_AUTO_TEST_SUITE_END()
