// Configuration sampler of the randomized PP send/recv test: see random_pp_config.h.
#include "random_pp_config.h"

#include <algorithm>
#include <sstream>
#include <utility>

#include "random_config.h"

namespace epx::test::rnd::pp {

namespace {

constexpr uint64_t kChannelStream = 0x70706368616eull, kMsgStream = 0x70706d7367ull;
constexpr uint64_t kMinChunk = uint64_t(64) << 10, kMaxChunk = uint64_t(1) << 30;

double windowBytes(const PpSpec& s, int R) {
  const ncclEpPpConfig_t cfg = makePpConfig(s);
  size_t bytes = 0;
  if (ncclEpPpGetBufferSizeHint(&cfg, R, &bytes) != ncclSuccess) return 1e300;
  return double(bytes) * R;
}

// Bytes of one message of a channel whose largest message is M.
uint64_t drawBytes(Rng& rng, uint64_t M) {
  const double u = rng.unit();
  if (u < 0.14) return 0;
  if (u < 0.28) return M;
  if (u < 0.35) return M - 1;
  if (u < 0.42) return 1;
  if (u < 0.55) return 2 * uniform64(rng, 0, (M - 1) / 2) + 1;  // odd, <= M
  if (u < 0.65) {  // a multiple of 16 +- a few
    const int64_t v = int64_t(16 * uniform64(rng, 0, M / 16)) + rng.uniform(-3, 3);
    return uint64_t(std::clamp<int64_t>(v, 0, int64_t(M)));
  }
  return logUniform64(rng, 1, M);
}

}  // namespace

ncclEpPpConfig_t makePpConfig(const PpSpec& s) {
  ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
  cfg.maxMessageBytes = s.maxBytes;
  if (s.slots > 0) cfg.slots = s.slots;
  if (s.numCtas > 0) cfg.numCtas = s.numCtas;
  cfg.chunkBytes = s.chunkBytes;
  return cfg;
}

PpSpec drawChannel(uint64_t baseSeed, int group, int R) {
  Rng rng(streamSeed(baseSeed, kChannelStream, uint64_t(group)));
  PpSpec s;
  double u = rng.unit();
  s.slots = u < 0.2 ? 1 : u < 0.35 ? 64 : u < 0.5 ? 0 : rng.uniform(2, 63);
  u = rng.unit();
  s.numCtas = u < 0.3 ? 0 : u < 0.42 ? 1 : u < 0.54 ? 32 : rng.uniform(2, 31);
  u = rng.unit();
  s.chunkBytes = u < 0.3    ? 0
                 : u < 0.5  ? kMinChunk
                 : u < 0.58 ? kMaxChunk
                 : u < 0.75 ? kMinChunk + 16 * uint64_t(rng.uniform(1, 8191))
                            : 16 * logUniform64(rng, kMinChunk / 16, (uint64_t(16) << 20) / 16);
  // A channel of the default chunk (4 MiB, as epx/pp.h documents) or one whose largest messages
  // span several chunks.
  const uint64_t chunk = s.chunkBytes ? s.chunkBytes : uint64_t(4) << 20;
  u = rng.unit();
  s.maxBytes = u < 0.08   ? 1
               : u < 0.16 ? 16
               : u < 0.3  ? uint64_t(rng.uniform(2, 4096))
               : u < 0.45 ? std::min(kMaxMessageBytes, chunk * uint64_t(rng.uniform(2, 9)) + uint64_t(rng.uniform(0, 15)))
                          : logUniform64(rng, 1, kMaxMessageBytes);
  while (s.maxBytes > 1 && windowBytes(s, R) > kWindowBytesBudget) s.maxBytes /= 2;
  return s;
}

PpCase drawCase(uint64_t baseSeed, int index, const PpSpec& s, int R) {
  Rng rng(streamSeed(baseSeed, kMsgStream, uint64_t(index)));
  PpCase c;
  c.index = index;
  // Ordered pairs: at one rank the rank to itself; else distinct ranks, and now and then a self pair.
  std::vector<std::pair<int, int>> pairs;
  if (R == 1) {
    pairs.push_back({0, 0});
  } else {
    std::vector<std::pair<int, int>> all;
    for (int a = 0; a < R; ++a)
      for (int b = 0; b < R; ++b)
        if (a != b) all.push_back({a, b});
    for (size_t i = all.size(); i > 1; --i) std::swap(all[i - 1], all[size_t(rng.uniform(0, int(i) - 1))]);
    const double u = rng.unit();
    const int n = u < 0.3 ? 1 : u < 0.45 ? int(all.size()) : rng.uniform(2, std::min(int(all.size()), 8));
    pairs.assign(all.begin(), all.begin() + n);
    if (rng.unit() < 0.1) {
      const int r = rng.uniform(0, R - 1);
      pairs.push_back({r, r});
    }
  }
  // Messages per pair: often the slot count or more (the sender then waits for the receiver).
  const int S = s.effectiveSlots();
  std::vector<int> counts;
  int total = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    const double u = rng.unit();
    counts.push_back(u < 0.15 ? 1 : u < 0.3 ? S : u < 0.5 ? S + 1 : rng.uniform(1, 2 * S + 3));
    total += counts.back();
  }
  if (total > kMaxMessages)
    for (int& n : counts) n = std::max(1, int(int64_t(n) * kMaxMessages / total));
  // One global order: a random interleaving of the pairs' sequences.
  std::vector<int> left = counts;
  double bytes = 0;
  for (;;) {
    std::vector<int> open;
    for (size_t p = 0; p < pairs.size(); ++p)
      if (left[p] > 0) open.push_back(int(p));
    if (open.empty()) break;
    const int p = open[size_t(rng.uniform(0, int(open.size()) - 1))];
    --left[size_t(p)];
    PpMsg m;
    m.src = pairs[size_t(p)].first;
    m.dst = pairs[size_t(p)].second;
    m.bytes = drawBytes(rng, s.maxBytes);
    const double u = rng.unit();
    m.capacity = u < 0.5 ? m.bytes : u < 0.75 ? s.maxBytes : m.bytes + uint64_t(rng.uniform(1, 64));
    // Within the budget: the exact capacity, then a small message.
    if (bytes + double(recvRegionBytes(m)) > kMessageBytesBudget) m.capacity = m.bytes;
    if (bytes + double(recvRegionBytes(m)) > kMessageBytesBudget) m.capacity = m.bytes = m.bytes % 4097;
    bytes += double(recvRegionBytes(m));
    m.nullSend = m.bytes == 0 && rng.unit() < 0.5;
    m.nullRecv = m.capacity == 0 && rng.unit() < 0.5;
    m.recvBytes = rng.unit() < 0.8;
    m.seed = rng.next();
    c.msgs.push_back(m);
  }
  c.twoStreams = rng.unit() < 0.8;
  c.lagNs = c.twoStreams && rng.unit() < 0.5 ? uint64_t(rng.uniform(1, int(kMaxLagNs / 1000))) * 1000 : 0;
  return c;
}

std::string describe(const PpSpec& s) {
  std::ostringstream os;
  os << "maxMessageBytes=" << s.maxBytes << " slots=" << (s.slots ? std::to_string(s.slots) : std::string("default"))
     << " numCtas=" << (s.numCtas ? std::to_string(s.numCtas) : std::string("default"))
     << " chunkBytes=" << (s.chunkBytes ? std::to_string(s.chunkBytes) : std::string("default"));
  return os.str();
}

std::string describe(const PpCase& c, const PpSpec& s) {
  constexpr size_t kListed = 40;
  std::ostringstream os;
  os << "case " << c.index << ": channel {" << describe(s) << "} " << c.msgs.size() << " messages"
     << (c.twoStreams ? " (two streams" : " (one stream");
  if (c.lagNs) os << ", receives " << c.lagNs / 1000 << " us late";
  os << "):";
  for (size_t i = 0; i < c.msgs.size() && i < kListed; ++i) {
    const PpMsg& m = c.msgs[i];
    os << " " << m.src << "->" << m.dst << ":" << m.bytes;
    if (m.capacity != m.bytes) os << "/cap" << m.capacity;
    if (m.nullSend || m.nullRecv) os << (m.nullSend ? "/nullsend" : "") << (m.nullRecv ? "/nullrecv" : "");
    if (!m.recvBytes) os << "/nosize";
  }
  if (c.msgs.size() > kListed) os << " ... (" << c.msgs.size() - kListed << " more)";
  return os.str();
}

}  // namespace epx::test::rnd::pp
