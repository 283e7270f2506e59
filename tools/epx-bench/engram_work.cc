// Host side of epx-bench --algo engram (engram_work.h).
#include "engram_work.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "epx/ref/engram_ref.h"

namespace epxbench {

EngramBenchShape engramShapeOf(const Options& opt, int nRanks, std::string* why) {
  EngramBenchShape s;
  s.nRanks = nRanks;
  s.layers = opt.engramLayers;
  s.rowBytes = opt.engramRowBytes;
  s.tokens = opt.engramTokens;
  s.entries = opt.engramEntries;
  s.numRows = opt.engramRows ? opt.engramRows : kEngramDefaultRows / nRanks * nRanks;
  why->clear();
  if (s.numRows < nRanks || s.numRows % nRanks)
    *why = "--engram-rows " + std::to_string(s.numRows) + " is not a positive multiple of the " + std::to_string(nRanks) +
           " ranks (every rank holds the same number of rows)";
  return s;
}

std::vector<int32_t> engramIndices(const EngramBenchShape& s, uint64_t seed, int rank) {
  const size_t n = size_t(s.layers) * size_t(s.rowsPerLayer());
  std::vector<int32_t> idx(n);
  const uint64_t key = streamKey(seed, kTensorEngramIndices, uint64_t(rank));
  for (size_t i = 0; i < n; ++i) idx[i] = int32_t(mix64(key + i) % uint64_t(s.numRows));
  return idx;
}

std::string engramCheckLayer(const EngramBenchShape& s, uint64_t seed, int layer, const std::vector<int32_t>& indices,
                             const uint8_t* out) {
  const uint64_t key = engramTableKey(seed, layer);
  const uint64_t words = s.rowBytes / 4;
  const int64_t perLayer = s.rowsPerLayer();
  int64_t bad = 0;
  std::string first;
  std::vector<uint32_t> want(words);
  for (int64_t k = 0; k < perLayer; ++k) {
    const int32_t g = indices[size_t(layer) * size_t(perLayer) + size_t(k)];
    for (uint64_t w = 0; w < words; ++w) want[w] = engramWord(key, uint64_t(g) * words + w);
    const uint8_t* got = out + uint64_t(k) * s.rowBytes;
    if (std::memcmp(got, want.data(), s.rowBytes) == 0) continue;
    if (bad++ == 0) {
      uint64_t w = 0;
      uint32_t v = 0;
      for (; w < words; ++w) {
        std::memcpy(&v, got + w * 4, 4);
        if (v != want[w]) break;
      }
      char buf[256];
      std::snprintf(buf, sizeof(buf), "layer %d token %lld entry %lld (row %d): word %llu is 0x%08x, want 0x%08x", layer,
                    (long long)(k / s.entries), (long long)(k % s.entries), int(g), (unsigned long long)w, v, want[w]);
      first = buf;
    }
  }
  if (!bad) return "";
  return first + " (" + std::to_string(bad) + " of " + std::to_string(perLayer) + " rows differ)";
}

std::vector<std::vector<std::vector<uint8_t>>> engramShards(const EngramBenchShape& s, uint64_t seed) {
  const uint64_t words = s.rowBytes / 4, shardWords = uint64_t(s.rowsPerRank()) * words;
  std::vector<std::vector<std::vector<uint8_t>>> shards(size_t(s.nRanks), std::vector<std::vector<uint8_t>>(size_t(s.layers)));
  for (int r = 0; r < s.nRanks; ++r)
    for (int l = 0; l < s.layers; ++l) {
      auto& b = shards[size_t(r)][size_t(l)];
      b.resize(size_t(shardWords) * 4);
      for (uint64_t w = 0; w < shardWords; ++w) {
        const uint32_t v = engramWord(engramTableKey(seed, l), uint64_t(r) * shardWords + w);
        std::memcpy(b.data() + w * 4, &v, 4);
      }
    }
  return shards;
}

std::vector<EngramLayerTraffic> engramNetTraffic(const EngramBenchShape& s,
                                                 const std::vector<std::vector<int32_t>>& allIndices, int ranksPerNode) {
  const int n = s.nRanks;
  std::vector<EngramLayerTraffic> t(size_t(s.layers));
  for (auto& x : t) x.inBytes.assign(size_t(n), 0.0), x.outBytes.assign(size_t(n), 0.0);
  const epx::ref::EngramShape rs = s.ref();
  for (int a = 0; a < n; ++a) {  // a: the requester; rows[l][b]: rows it reads from owner b
    const auto rows = epx::ref::engramRowsPerOwner(rs, allIndices[size_t(a)]);
    for (int l = 0; l < s.layers; ++l)
      for (int b = 0; b < n; ++b)
        if (a / ranksPerNode != b / ranksPerNode) {
          const double bytes = double(rows[size_t(l)][size_t(b)]) * double(s.rowBytes);
          t[size_t(l)].inBytes[size_t(a)] += bytes;
          t[size_t(l)].outBytes[size_t(b)] += bytes;
        }
  }
  for (auto& x : t)
    for (int r = 0; r < n; ++r) {
      const double m = std::max(x.inBytes[size_t(r)], x.outBytes[size_t(r)]);
      if (m > x.maxBytes) x.maxBytes = m, x.maxRank = r;
    }
  return t;
}

double EngramFloor::fetchUs() const {
  double sum = 0;
  for (double us : layerUs) sum += us;
  return sum;
}

EngramFloor engramNetFloor(const std::vector<EngramLayerTraffic>& t, double gbps, double latencyUs) {
  EngramFloor f;
  if (gbps <= 0) return f;
  f.kind = EngramFloorKind::Network;
  f.gbps = gbps;
  f.latencyUs = latencyUs;
  for (const auto& x : t) {
    f.layerBytes.push_back(x.maxBytes);
    f.layerUs.push_back(x.maxBytes / (gbps * 1e3) + 2 * latencyUs);
  }
  return f;
}

EngramFloor engramMemFloor(int layers, double bytes, double ceUs, double smUs, int ctas) {
  EngramFloor f;
  const double best = ceUs > 0 && smUs > 0 ? std::min(ceUs, smUs) : std::max(ceUs, smUs);
  if (best <= 0) return f;
  f.kind = EngramFloorKind::Memory;
  f.memBytes = bytes;
  f.memCeUs = ceUs;
  f.memSmUs = smUs;
  f.memCtas = ctas;
  f.layerUs.assign(size_t(layers), best);
  return f;
}

namespace {

std::string sizeText(uint64_t bytes) {
  if (bytes >= (uint64_t(1) << 20) && bytes % (uint64_t(1) << 20) == 0) return std::to_string(bytes >> 20) + " MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + " KiB";
  return std::to_string(bytes) + " B";
}

}  // namespace

void printEngramHeader(const EngramBenchShape& s, const Options& opt, int ranksPerNode, int ctas,
                       const EngramFloor& f) {
  const int nodes = s.nRanks / ranksPerNode;
  std::printf("# engram: %d ranks (%d node%s x %d), %d layers x %lld rows x %llu B (%lld rows per rank); per rank and layer\n"
              "#   %d tokens x %d entries, uniform random rows (seed %llu, a stream per rank); %d CTAs%s, chunks %s; %d timed\n"
              "#   fetches after %d\n",
              s.nRanks, nodes, nodes == 1 ? "" : "s", ranksPerNode, s.layers, (long long)s.numRows,
              (unsigned long long)s.rowBytes, (long long)s.rowsPerRank(), s.tokens, s.entries, opt.seed, ctas,
              opt.collCtas > 0 ? "" : " (the library's default)",
              opt.chunkBytes ? ("of " + sizeText(opt.chunkBytes)).c_str() : "of the library's default size", opt.iters,
              opt.warmup);
  switch (f.kind) {
    case EngramFloorKind::Network:
      std::printf("# floor per layer: network, %.1f GB/s + one round trip 2 x %.1f us; bytes = max over ranks of\n"
                  "#   max(row bytes received from, row bytes served to ranks on other nodes) (request lists not counted)\n",
                  f.gbps, f.latencyUs);
      break;
    case EngramFloorKind::Memory:
      std::printf("# floor per layer: memory (one node, NVLink peers only), the layer's %.2f MB of output rows on each rank:\n"
                  "#   copy engine %.1f us, SM copy (%d CTAs) %.1f us; floor = the faster (slowest rank)\n",
                  f.memBytes / 1e6, f.memCeUs, f.memCtas, f.memSmUs);
      break;
    case EngramFloorKind::None:
      std::printf("# floor: none (ranks on other nodes and no network rate: --net-gbps or EPX_GIN_EMU_GBPS)\n");
      break;
  }
  std::fflush(stdout);
}

void printEngramTimes(const EngramBenchShape& s, const EngramTimes& t, const EngramFloor& f) {
  const bool floorOn = f.kind != EngramFloorKind::None && f.layerUs.size() == size_t(s.layers);
  const bool net = f.kind == EngramFloorKind::Network;
  std::printf("# per layer (slowest rank, mean of the timed fetches): done = from the fetch's start to the layer's rows in\n"
              "# the output (an event after ncclEpEngramWaitLayer on a second stream); layer = done - the previous layer's done\n");
  std::printf("%-7s %-6s %11s %11s %11s %9s%s\n", "#", "layer", "done(us)", "layer(us)", "floor(us)", "x floor",
              net ? "  net(MB)" : "");
  auto ratio = [](double us, double floorUs) { return us > 0 && floorUs > 0 ? us / floorUs : 0.0; };
  for (int l = 0; l < s.layers; ++l) {
    const double fl = floorOn ? f.layerUs[size_t(l)] : 0.0;
    char netCol[32] = "";
    if (net) std::snprintf(netCol, sizeof(netCol), " %8.2f", f.layerBytes[size_t(l)] / 1e6);
    std::printf("%-7s %-6d %11.1f %11.1f %11.1f %9.2f%s\n", "engram", l, t.doneUs[size_t(l)], t.layerUs[size_t(l)], fl,
                ratio(t.layerUs[size_t(l)], fl), netCol);
  }
  double netSum = 0;
  for (double b : f.layerBytes) netSum += b;
  char netCol[32] = "";
  if (net) std::snprintf(netCol, sizeof(netCol), " %8.2f", netSum / 1e6);
  const double ff = floorOn ? f.fetchUs() : 0.0;
  std::printf("%-7s %-6s %11.1f %11s %11.1f %9.2f%s\n", "engram", "fetch", t.fetchUs(), "-", ff, ratio(t.fetchUs(), ff),
              netCol);
  int inOrder = 0;
  for (int l = 1; l < s.layers; ++l) inOrder += t.doneUs[size_t(l)] > t.doneUs[size_t(l) - 1] ? 1 : 0;
  double worst = 0;
  for (int l = 0; l < s.layers && floorOn; ++l) worst = std::max(worst, ratio(t.layerUs[size_t(l)], f.layerUs[size_t(l)]));
  char worstText[64] = "";
  if (floorOn) std::snprintf(worstText, sizeof(worstText), "; worst layer %.2f x floor", worst);
  const double first = t.doneUs.empty() ? 0.0 : t.doneUs[0];
  std::printf("# engram pipelining: layer 0 ready at %.1f us of %.1f us (%.0f %% of the fetch); %d of %d later layers done "
              "after the one before%s\n",
              first, t.fetchUs(), t.fetchUs() > 0 ? 100.0 * first / t.fetchUs() : 0.0, inOrder, s.layers - 1, worstText);
  std::fflush(stdout);
}

}  // namespace epxbench
