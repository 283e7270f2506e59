// Randomized differential test of PP send/recv (suite `random_pp`): channels and message sequences
// drawn from the whole documented range (random_pp_config.h). Every rank issues its sends and
// receives in the case's one global order (so every device wait points to an earlier message and
// the sequence cannot deadlock: pp.h's ordering and flow control); receive buffers and recvBytes
// words are poisoned first; every received byte is compared with the sender's pattern (recomputed on
// the host), the bytes past the message and a 16-byte vector past the capacity must stay poisoned,
// recvBytes must be the message size (and stay untouched when not given). Cases come in groups of
// kCasesPerChannel that share one collectively created channel.
//
// Environment: EPX_TEST_SEED, EPX_RANDOM_CASES (default 300, 100 with EPX_TEST_QUICK),
// EPX_RANDOM_CASE=<index> (replay that case alone with the same seed and rank count),
// EPX_RANDOM_SECONDS (no new channel after this many seconds, default 150, 0 = unlimited). A failing
// case prints its index, the seed, its full configuration and the command line that replays it.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/pp.h"
#include "random_pp_config.h"
#include "random_run.h"

using namespace epx::test;
namespace rp = epx::test::rnd::pp;

namespace {

constexpr uint8_t kPoison = 0xa5;
constexpr uint64_t kSizePoison = ~uint64_t(0);

// The channel config: the draw, with numCtas within the SM cap of processes sharing a GPU (fake
// nodes: the send and the receive kernel of every process spin at once and must all be resident).
ncclEpPpConfig_t channelConfig(const rp::PpSpec& s) {
  ncclEpPpConfig_t cfg = rp::makePpConfig(s);
  if (const int cap = smCap(); cap > 0) cfg.numCtas = std::max(1, std::min(s.numCtas > 0 ? s.numCtas : 4, cap / 2));
  return cfg;
}

struct Channels {
  std::vector<ncclEpPpChannel_t> ch;
  explicit Channels(const rp::PpSpec& s) : ch(size_t(nRanks()), nullptr) {
    const ncclEpPpConfig_t cfg = channelConfig(s);
    gpus().run([&](const RankContext& c) { EPX_CHECK_EP(ncclEpPpChannelCreate(c.comm, &cfg, &ch[size_t(c.rank)])); });
  }
  ~Channels() {
    try {
      gpus().run([&](const RankContext& c) {
        if (ch[size_t(c.rank)]) ncclEpPpChannelDestroy(ch[size_t(c.rank)]);
      });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ncclEpPpChannelDestroy: %s\n", e.what());
    }
  }
  Channels(const Channels&) = delete;
  Channels& operator=(const Channels&) = delete;
};

std::string asyncErrorOf(ncclEpPpChannel_t ch) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  ncclEpPpGetAsyncError(ch, &r, msg, sizeof(msg));
  return r == ncclSuccess ? std::string() : std::string(msg);
}

std::string name(const rp::PpMsg& m, size_t index) {
  return "message " + std::to_string(index) + " (" + std::to_string(m.src) + "->" + std::to_string(m.dst) + ", " +
         std::to_string(m.bytes) + " bytes, capacity " + std::to_string(m.capacity) + ")";
}

// Message m as received into `region` (recvRegionBytes(m) bytes) with size word `size`.
std::string checkMessage(const rp::PpMsg& m, size_t index, const uint8_t* region, uint64_t size) {
  if (m.recvBytes && size != m.bytes) return name(m, index) + ": recvBytes " + std::to_string(size);
  if (!m.recvBytes && size != kSizePoison) return name(m, index) + ": the recvBytes slot not given was written";
  if (m.nullRecv) return {};
  if (const size_t i = firstPatternMismatch(region, 0, m.bytes, m.seed); i < m.bytes)
    return name(m, index) + ": byte " + std::to_string(i) + " is " + std::to_string(region[i]) + ", expected " +
           std::to_string(patternByte(m.seed, i)) + (region[i] == kPoison ? " (poison)" : "");
  for (uint64_t i = m.bytes; i < rp::recvRegionBytes(m); ++i)
    if (region[i] != kPoison) return name(m, index) + ": byte " + std::to_string(i) + " past the message was written";
  return {};
}

// Runs one case on every local rank; "" when every local rank received what was sent.
std::string runPpCase(const rp::PpCase& c, const Channels& ch) {
  const int R = nRanks();
  std::vector<std::string> fails(static_cast<size_t>(R));
  gpus().run([&](const RankContext& ctx) {
    const int r = ctx.rank;
    std::string& fail = fails[size_t(r)];
    // This rank's send and receive regions, in the global order.
    std::vector<uint64_t> sendOff(c.msgs.size(), 0), recvOff(c.msgs.size(), 0);
    std::vector<size_t> received;  // indices of the messages this rank receives
    uint64_t sendBytes = 0, recvBytes = 0;
    for (size_t i = 0; i < c.msgs.size(); ++i) {
      const rp::PpMsg& m = c.msgs[i];
      if (m.src == r) sendOff[i] = sendBytes, sendBytes += rp::sendRegionBytes(m);
      if (m.dst == r) recvOff[i] = recvBytes, recvBytes += rp::recvRegionBytes(m), received.push_back(i);
    }
    DevBuf sendBuf, recvBuf, sizes;
    sendBuf.reserve(sendBytes);
    recvBuf.reserve(recvBytes);
    sizes.reserve(8 * std::max<size_t>(1, received.size()));
    for (size_t i = 0; i < c.msgs.size(); ++i)
      if (c.msgs[i].src == r)
        EPX_CHECK_CUDA(launchFillPattern(sendBuf.as<char>() + sendOff[i], c.msgs[i].bytes, c.msgs[i].seed, ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(recvBuf.ptr(), kPoison, recvBuf.size(), ctx.stream));
    EPX_CHECK_CUDA(cudaMemsetAsync(sizes.ptr(), 0xff, sizes.size(), ctx.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(ctx.stream));
    cudaStream_t sendS = nullptr, recvS = nullptr;
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&sendS, cudaStreamNonBlocking));
    if (c.twoStreams) EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&recvS, cudaStreamNonBlocking));
    else recvS = sendS;
    try {
      if (c.lagNs) EPX_CHECK_CUDA(launchDelay(c.lagNs, recvS));
      size_t k = 0;
      for (size_t i = 0; i < c.msgs.size(); ++i) {
        const rp::PpMsg& m = c.msgs[i];
        if (m.src == r)
          EPX_CHECK_EP(ncclEpPpSend(ch.ch[size_t(r)], m.nullSend ? nullptr : sendBuf.as<char>() + sendOff[i], m.bytes,
                                    m.dst, sendS));
        if (m.dst == r) {
          EPX_CHECK_EP(ncclEpPpRecv(ch.ch[size_t(r)], m.nullRecv ? nullptr : recvBuf.as<char>() + recvOff[i], m.capacity,
                                    m.src, m.recvBytes ? sizes.as<size_t>() + k : nullptr, recvS));
          ++k;
        }
      }
      EPX_CHECK_CUDA(cudaStreamSynchronize(sendS));
      EPX_CHECK_CUDA(cudaStreamSynchronize(recvS));
    } catch (...) {
      cudaStreamSynchronize(sendS);
      cudaStreamSynchronize(recvS);
      cudaStreamDestroy(sendS);
      if (recvS != sendS) cudaStreamDestroy(recvS);
      throw;
    }
    cudaStreamDestroy(sendS);
    if (recvS != sendS) cudaStreamDestroy(recvS);
    std::vector<uint8_t> all(recvBytes);
    std::vector<uint64_t> got(received.size());
    if (recvBytes) EPX_CHECK_CUDA(cudaMemcpy(all.data(), recvBuf.ptr(), recvBytes, cudaMemcpyDeviceToHost));
    if (!got.empty()) EPX_CHECK_CUDA(cudaMemcpy(got.data(), sizes.ptr(), got.size() * 8, cudaMemcpyDeviceToHost));
    for (size_t k = 0; k < received.size() && fail.empty(); ++k) {
      const size_t i = received[k];
      fail = checkMessage(c.msgs[i], i, all.data() + recvOff[i], got[k]);
    }
    if (fail.empty()) fail = asyncErrorOf(ch.ch[size_t(r)]);
    if (!fail.empty()) fail = "rank " + std::to_string(r) + ": " + fail;
  });
  std::string all;
  for (int r : localRanks())
    if (!fails[size_t(r)].empty()) all += (all.empty() ? "" : "; ") + fails[size_t(r)];
  return all;
}

void tally(rnd::RandomRun& run, const rp::PpSpec& s, const rp::PpCase& c) {
  const int S = s.effectiveSlots();
  run.feature("1 slot", S == 1);
  run.feature("64 slots", S == 64);
  run.feature("chunk 64 KiB", s.chunkBytes == (uint64_t(64) << 10));
  run.feature("chunk 1 GiB", s.chunkBytes == (uint64_t(1) << 30));
  run.feature("one stream", !c.twoStreams);
  run.feature("late receiver", c.lagNs > 0);
  std::map<std::pair<int, int>, int> perPair;
  for (const rp::PpMsg& m : c.msgs) {
    ++perPair[{m.src, m.dst}];
    run.feature("messages");
    run.feature("zero-size messages", m.bytes == 0);
    run.feature("max-size messages", m.bytes == s.maxBytes);
    run.feature("odd-size messages", m.bytes % 2 == 1);
    run.feature("messages over 1 MiB", m.bytes > (uint64_t(1) << 20));
    run.feature("exact capacity", m.capacity == m.bytes);
    run.feature("NULL buffers", m.nullSend || m.nullRecv);
  }
  int over = 0, self = 0;
  for (const auto& [pair, n] : perPair) over += n > S, self += pair.first == pair.second;
  run.feature("pairs with more messages than slots", over > 0);
  run.feature("cases with several pairs", perPair.size() > 1);
  run.feature("self pairs", self > 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(random_pp)

BOOST_AUTO_TEST_CASE(differential) {
  rnd::RandomRun run("random_pp", rp::kCasesPerChannel);
  const uint64_t seed = run.seed();
  const int R = run.ranks();
  for (int grp = run.firstGroup(); grp < run.endGroup(); ++grp) {
    if (run.timeUp()) break;
    const rp::PpSpec s = rp::drawChannel(seed, grp, R);
    std::unique_ptr<Channels> ch;
    try {
      ch = std::make_unique<Channels>(s);
    } catch (const std::exception& e) {
      run.reportFailure("to create channel " + std::to_string(grp) + " {" + rp::describe(s) + "}", run.caseBegin(grp),
                        e.what());
      throw;
    }
    for (int i = run.caseBegin(grp); i < run.caseEnd(grp); ++i) {
      const rp::PpCase c = rp::drawCase(seed, i, s, R);
      const std::string name = rp::describe(c, s);
      BOOST_TEST_MESSAGE("random_pp " << name);
      const double start = run.elapsed();
      std::string why;
      try {
        why = runPpCase(c, *ch);
      } catch (const std::exception& e) {
        run.reportFailure(name, i, e.what());
        throw;  // a call failed: the sequence may be out of step; stop here
      }
      if (!why.empty()) run.reportFailure(name, i, why);
      BOOST_TEST(why.empty(), name << ": " << why);
      run.count(why.empty(), run.elapsed() - start, name);
      tally(run, s, c);
      // A device-side error leaves the channel unusable (or out of step): a fresh one.
      bool broken = false;
      for (int r : localRanks()) broken |= !asyncErrorOf(ch->ch[size_t(r)]).empty();
      if (gpus().anyRank(broken) && i + 1 < run.caseEnd(grp)) {
        ch.reset();
        ch = std::make_unique<Channels>(s);
      }
    }
  }
  run.finish();
}

BOOST_AUTO_TEST_SUITE_END()
