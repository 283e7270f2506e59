#include "engram_harness.h"

#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "coll_kernels.h"
#include "epx/ref/engram_ref.h"

namespace epx::test::engram {

namespace {

// Bytes [begin, begin + n) of the pattern `seed` into dst (one mix64 per 8 bytes).
void fillPattern(uint8_t* dst, uint64_t begin, size_t n, uint64_t seed) {
  size_t k = 0;
  while (k < n) {
    const uint64_t i = begin + k;
    const uint64_t w = mix64(seed * 0x100000001b3ull + (i >> 3));
    for (uint64_t b = i & 7; b < 8 && k < n; ++b, ++k) dst[k] = uint8_t(w >> (b * 8));
  }
}

int cappedCtas(int numCtas) { return smCap() > 0 ? std::max(1, std::min(numCtas, smCap())) : numCtas; }

bool isBad(int32_t v, int64_t numRows) { return v < -1 || int64_t(v) >= numRows; }

std::string byteText(uint8_t b) { return std::to_string(int(b)); }

}  // namespace

int64_t Plan::numRows() const { return rowsPerRank * nRanks(); }

ncclEpEngramPlan_t Plan::api() const {
  ncclEpEngramPlan_t p{};
  p.numLayers = numLayers;
  p.numRows = numRows();
  p.rowBytes = rowBytes;
  p.maxTokens = maxTokens;
  p.entriesPerToken = entries;
  return p;
}

ncclEpEngramConfig_t Plan::config() const {
  ncclEpEngramConfig_t c = NCCL_EP_ENGRAM_CONFIG_INITIALIZER;
  c.numCtas = cappedCtas(numCtas);
  c.chunkBytes = chunkBytes;
  if (timeoutMs > 0) c.timeoutMs = timeoutMs;
  return c;
}

std::string Plan::describe() const {
  return std::to_string(numLayers) + " layers x " + std::to_string(rowsPerRank) + " rows/rank x " +
         std::to_string(rowBytes) + " B, maxTokens " + std::to_string(maxTokens) + " x " + std::to_string(entries) +
         " entries, " + std::to_string(cappedCtas(numCtas)) + " CTAs, chunk " +
         (chunkBytes ? std::to_string(chunkBytes) + " B" : std::string("default"));
}

uint64_t layerSeed(uint64_t tableSeed, int layer) { return mix64(tableSeed ^ (uint64_t(layer + 1) << 48) ^ 0x454e4752ull); }

std::vector<uint8_t> shardBytes(const Plan& p, uint64_t tableSeed, int rank, int layer) {
  const size_t bytes = size_t(p.rowsPerRank) * p.rowBytes;
  std::vector<uint8_t> v(bytes);
  fillPattern(v.data(), uint64_t(rank) * bytes, bytes, layerSeed(tableSeed, layer));
  return v;
}

// ---- objects -----------------------------------------------------------------------------------

EngramObjects::EngramObjects(const Plan& p, uint64_t seed, TableMemory m, bool setTables)
    : plan(p),
      tableSeed(seed),
      memory(m),
      engram(size_t(nRanks()), nullptr),
      shards(size_t(nRanks())),
      refShards(size_t(nRanks())),
      firstBadIndex(size_t(nRanks())) {
  const int R = nRanks();
  for (int r = 0; r < R; ++r)
    for (int l = 0; l < plan.numLayers; ++l) refShards[size_t(r)].push_back(shardBytes(plan, tableSeed, r, l));
  const ncclEpEngramPlan_t pl = plan.api();
  const ncclEpEngramConfig_t cfg = plan.config();
  const size_t bytes = size_t(plan.rowsPerRank) * plan.rowBytes;
  gpus().run([&](const RankContext& c) {
    EPX_CHECK_EP(ncclEpEngramCreate(c.comm, &pl, &cfg, &engram[size_t(c.rank)]));
    if (!setTables) return;
    auto& mine = shards[size_t(c.rank)];
    for (int l = 0; l < plan.numLayers; ++l) {
      void* q = nullptr;
      const auto& src = refShards[size_t(c.rank)][size_t(l)];
      if (memory == TableMemory::Device) {
        EPX_CHECK_CUDA(cudaMalloc(&q, bytes));
        mine.push_back(q);
        EPX_CHECK_CUDA(cudaMemcpy(q, src.data(), bytes, cudaMemcpyHostToDevice));
      } else {
        EPX_CHECK_CUDA(cudaHostAlloc(&q, bytes, cudaHostAllocMapped));
        mine.push_back(q);
        std::memcpy(q, src.data(), bytes);
      }
      EPX_CHECK_EP(ncclEpEngramSetTable(engram[size_t(c.rank)], l, q));
    }
  });
}

EngramObjects::~EngramObjects() {
  try {
    gpus().run([&](const RankContext& c) {
      if (engram[size_t(c.rank)]) ncclEpEngramDestroy(engram[size_t(c.rank)]);
      for (void* q : shards[size_t(c.rank)]) {
        if (memory == TableMemory::Device) cudaFree(q);
        else cudaFreeHost(q);
      }
    });
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ncclEpEngramDestroy: %s\n", e.what());
  }
}

// ---- fetches -----------------------------------------------------------------------------------

Fetch Fetch::random(const Plan& p, int nRanks, int tokens, uint64_t seed, double unusedShare,
                    const std::vector<int>& owners) {
  Fetch f;
  f.tokens = tokens;
  f.indices.resize(indexCount(p, tokens));
  Rng rng(seed);
  for (auto& v : f.indices) {
    if (rng.unit() < unusedShare) {
      v = -1;
      continue;
    }
    const int owner = owners.empty() ? rng.uniform(0, nRanks - 1) : owners[size_t(rng.uniform(0, int(owners.size()) - 1))];
    v = int32_t(int64_t(owner) * p.rowsPerRank + int64_t(rng.next() % uint64_t(p.rowsPerRank)));
  }
  return f;
}

int Fetch::firstBadLayer(const Plan& p, int64_t numRows) const {
  const size_t perLayer = size_t(tokens) * size_t(p.entries);
  for (size_t i = 0; i < indices.size(); ++i)
    if (isBad(indices[i], numRows)) return int(i / perLayer);
  return -1;
}

size_t indexCount(const Plan& p, int tokens) { return size_t(p.numLayers) * size_t(tokens) * size_t(p.entries); }
size_t outputBytes(const Plan& p, int tokens) { return indexCount(p, tokens) * p.rowBytes; }

void RankBuffers::prepare(const Plan& p, const Fetch& f, cudaStream_t stream) {
  const size_t n = indexCount(p, f.tokens), out = outputBytes(p, f.tokens);
  indices.reserve(n * sizeof(int32_t));
  output.reserve(out + kGuardBytes);
  if (n) EPX_CHECK_CUDA(cudaMemcpyAsync(indices.ptr(), f.indices.data(), n * sizeof(int32_t), cudaMemcpyHostToDevice, stream));
  EPX_CHECK_CUDA(cudaMemsetAsync(output.ptr(), kPoison, output.size(), stream));
}

const int32_t* RankBuffers::indicesArg(const Fetch& f, bool nullWhenEmpty) const {
  return f.tokens == 0 && nullWhenEmpty ? nullptr : indices.as<int32_t>();
}

void* RankBuffers::outputArg(const Fetch& f, bool nullWhenEmpty) const {
  return f.tokens == 0 && nullWhenEmpty ? nullptr : output.ptr();
}

std::vector<uint8_t> download(const void* p, size_t bytes) {
  std::vector<uint8_t> v(bytes);
  if (bytes) EPX_CHECK_CUDA(cudaMemcpy(v.data(), p, bytes, cudaMemcpyDeviceToHost));
  return v;
}

// ---- checks ------------------------------------------------------------------------------------

std::string checkGuard(const Plan& p, const Fetch& f, const std::vector<uint8_t>& all) {
  for (size_t i = outputBytes(p, f.tokens); i < all.size(); ++i)
    if (all[i] != kPoison)
      return "byte " + std::to_string(i - outputBytes(p, f.tokens)) + " after the output was written (" +
             byteText(all[i]) + ")";
  return {};
}

std::string checkOutput(const EngramObjects& o, int r, const Fetch& f, const std::vector<uint8_t>& got, int onlyLayer) {
  const Plan& p = o.plan;
  epx::ref::EngramShape s;
  s.nRanks = nRanks();
  s.layers = p.numLayers;
  s.numRows = p.numRows();
  s.rowBytes = p.rowBytes;
  s.tokens = f.tokens;
  s.entries = p.entries;
  if (std::string e = epx::ref::engramCheckShape(s); !e.empty()) return "reference shape: " + e;
  if (f.indices.size() != indexCount(p, f.tokens)) return "the case has " + std::to_string(f.indices.size()) + " indices";
  const epx::ref::EngramResult want = epx::ref::engramFetch(s, o.refShards, f.indices);
  const size_t W = p.rowBytes, perLayer = size_t(f.tokens) * size_t(p.entries);
  const size_t begin = onlyLayer >= 0 ? size_t(onlyLayer) * perLayer * W : 0;
  const size_t bytes = onlyLayer >= 0 ? perLayer * W : want.out.size();
  if (got.size() < bytes) return "output of " + std::to_string(got.size()) + " bytes, reference " + std::to_string(bytes);
  for (size_t k = 0; k < bytes; ++k) {
    const size_t i = begin + k;
    if (got[k] == want.out[i]) continue;
    const size_t row = i / W;
    const size_t layer = row / perLayer, token = (row % perLayer) / size_t(p.entries), entry = row % size_t(p.entries);
    std::string why = "rank " + std::to_string(r) + ", layer " + std::to_string(layer) + ", token " + std::to_string(token) +
                      ", entry " + std::to_string(entry) + " (index " + std::to_string(f.indices[row]) + "), byte " +
                      std::to_string(i % W) + ": " + byteText(got[k]) + ", reference " + byteText(want.out[i]);
    const uint8_t* g = got.data() + (k - i % W);
    if (std::all_of(g, g + W, [](uint8_t b) { return b == kPoison; })) return why + " (the row is poison: not written)";
    if (std::all_of(g, g + W, [](uint8_t b) { return b == 0; })) return why + " (the row is zero)";
    // Whose row the bytes are (a misplaced row).
    for (int q = 0; q < s.nRanks; ++q)
      for (int l = 0; l < p.numLayers; ++l) {
        const auto& sh = o.refShards[size_t(q)][size_t(l)];
        for (int64_t j = 0; j < p.rowsPerRank; ++j)
          if (std::memcmp(sh.data() + size_t(j) * W, g, W) == 0)
            return why + " (the row holds row " + std::to_string(int64_t(q) * p.rowsPerRank + j) + " of layer " +
                   std::to_string(l) + ")";
      }
    return why;
  }
  return {};
}

std::string asyncErrorOf(ncclEpEngram_t e, ncclResult_t* code) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  if (ncclEpEngramGetAsyncError(e, &r, msg, sizeof(msg)) != ncclSuccess) {
    if (code) *code = ncclInternalError;
    return std::string("ncclEpEngramGetAsyncError failed: ") + ncclEpGetLastError();
  }
  if (code) *code = r;
  return r == ncclSuccess ? std::string() : std::string(msg);
}

std::string checkAsyncError(EngramObjects& o, int r, const Fetch& f) {
  ncclResult_t code = ncclSuccess;
  const std::string msg = asyncErrorOf(o[r], &code);
  const std::string got = "async error " + std::to_string(int(code)) + " '" + msg + "'";
  std::string& first = o.firstBadIndex[size_t(r)];
  if (!first.empty()) {
    if (code != ncclInvalidArgument || msg != first) return got + ", want the earlier report unchanged: '" + first + "'";
    return {};
  }
  const Plan& p = o.plan;
  const int badLayer = f.firstBadLayer(p, p.numRows());
  if (badLayer < 0) return code == ncclSuccess ? std::string() : got + ", want none";
  if (code != ncclInvalidArgument) return got + ", want ncclInvalidArgument (a bad index in layer " + std::to_string(badLayer) + ")";
  int rank = -1, layer = -1, entry = -1;
  long long token = -1, value = 0;
  if (std::sscanf(msg.c_str(), "rank %d: the Engram index of layer %d, token %lld, entry %d is %lld", &rank, &layer,
                  &token, &entry, &value) != 5)
    return got + ": not a bad-index report";
  if (msg.find("not -1 or a row in 0 .. numRows - 1; its output row was zeroed") == std::string::npos)
    return got + ": the reason is missing";
  if (rank != r || layer != badLayer || token < 0 || token >= f.tokens || entry < 0 || entry >= p.entries)
    return got + ", want rank " + std::to_string(r) + ", layer " + std::to_string(badLayer) + ", a token < " +
           std::to_string(f.tokens) + " and an entry < " + std::to_string(p.entries);
  const size_t flat = (size_t(layer) * size_t(f.tokens) + size_t(token)) * size_t(p.entries) + size_t(entry);
  if (f.indices[flat] != value || !isBad(int32_t(value), p.numRows()))
    return got + ": that index is " + std::to_string(f.indices[flat]) + " (numRows " + std::to_string(p.numRows()) + ")";
  first = msg;
  return {};
}

std::vector<std::string> runFetch(EngramObjects& o, const std::vector<Fetch>& fetches, const FetchOptions& opt) {
  const int R = nRanks();
  if (int(fetches.size()) != R) throw std::logic_error("runFetch: need one fetch per rank");
  std::vector<std::string> fails(static_cast<size_t>(R));
  std::vector<RankBuffers> bufs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    RankBuffers& b = bufs[size_t(c.rank)];
    const Fetch& f = fetches[size_t(c.rank)];
    b.prepare(o.plan, f, c.stream);
    EPX_CHECK_EP(ncclEpEngramFetch(o[c.rank], b.indicesArg(f, opt.nullWhenEmpty), f.tokens,
                                   b.outputArg(f, opt.nullWhenEmpty), c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
  });
  gpus().runLocal([&](const RankContext& c) {
    const Fetch& f = fetches[size_t(c.rank)];
    std::string& why = fails[size_t(c.rank)];
    const DevBuf& out = bufs[size_t(c.rank)].output;
    const std::vector<uint8_t> got = download(out.ptr(), out.size());
    why = checkAsyncError(o, c.rank, f);
    if (why.empty()) why = checkOutput(o, c.rank, f, got);
    if (why.empty()) why = checkGuard(o.plan, f, got);
  });
  return fails;
}

void report(const std::vector<std::string>& fails, const std::string& what) {
  for (int r : localRanks()) BOOST_TEST(fails[size_t(r)] == "", what << ", rank " << r << ": " << fails[size_t(r)]);
}

}  // namespace epx::test::engram
