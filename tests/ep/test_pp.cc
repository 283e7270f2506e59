// GPU tests of PP send/recv (suite "pp"): ring and random pairs with more messages than slots, a
// receiver that lags behind (the sender waits on the device and never overwrites), sizes from 0 B
// to 16 MiB (not multiples of 16), graph capture and replay, many iterations, a receive buffer too
// small (reported, nothing written), timeouts naming the peer, argument errors, and NCCL's
// ncclSend/ncclRecv on the same data.
// Runs at 1 rank (messages to itself) and across fake nodes (GIN). Every received byte is checked
// against the sender's pattern (recomputed on the host). EPX_TEST_QUICK=1: messages up to 4 MiB + 48 B,
// 100 iterations instead of 1000, 10 graph replays instead of 50.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "ep_harness.h"
#include "epx/pp.h"

using namespace epx::test;

namespace {

constexpr uint8_t kPoison = 0xa5;
constexpr uint64_t kLagNs = 2000000;  // the receiver starts 2 ms after the sender

struct Msg {
  int src, dst;
  size_t bytes;
  uint64_t seed;
};

// One channel per local rank, destroyed at the end of the test.
struct Channels {
  std::vector<ncclEpPpChannel_t> ch;
  // chunkBytes 0: the library's default GIN chunk.
  Channels(size_t maxBytes, int slots, size_t chunkBytes = 0) : ch(size_t(nRanks()), nullptr) {
    gpus().run([&](const RankContext& c) {
      ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
      cfg.maxMessageBytes = maxBytes;
      cfg.slots = slots;
      cfg.chunkBytes = chunkBytes;
      EPX_CHECK_EP(ncclEpPpChannelCreate(c.comm, &cfg, &ch[size_t(c.rank)]));
    });
  }
  // Collective (run() starts with a barrier): no rank unmaps its window while a peer's kernel may
  // still store into it.
  ~Channels() {
    try {
      gpus().run([&](const RankContext& c) { ncclEpPpChannelDestroy(ch[size_t(c.rank)]); });
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ncclEpPpChannelDestroy: %s\n", e.what());
    }
  }
  ncclEpPpChannel_t operator[](int r) const { return ch[size_t(r)]; }
};

std::vector<size_t> messageSizes() {
  // 4 MiB + 48: just over the default chunk (two GIN put rounds) in the quick list too.
  std::vector<size_t> s = {0, 4, 16, 1000, 4100, 65536 + 4, (size_t(1) << 20) + 12, (size_t(4) << 20) + 48};
  if (!quick()) s.push_back(size_t(16) << 20);
  return s;
}

// Bytes `got` of message m against its pattern; "" or the first mismatch.
std::string checkMessage(const Msg& m, const std::vector<uint8_t>& got, uint64_t gotBytes) {
  if (gotBytes != m.bytes)
    return "message " + std::to_string(m.src) + "->" + std::to_string(m.dst) + ": size " + std::to_string(gotBytes) +
           ", sent " + std::to_string(m.bytes);
  for (size_t i = 0; i < m.bytes; ++i)
    if (got[i] != patternByte(m.seed, i))
      return "message " + std::to_string(m.src) + "->" + std::to_string(m.dst) + " of " + std::to_string(m.bytes) +
             " bytes: byte " + std::to_string(i) + " is " + std::to_string(got[i]) + ", expected " +
             std::to_string(patternByte(m.seed, i));
  for (size_t i = m.bytes; i < got.size(); ++i)
    if (got[i] != kPoison) return "byte " + std::to_string(i) + " past the message was written";
  return {};
}

std::string asyncErrorOf(ncclEpPpChannel_t ch) {
  ncclResult_t r = ncclSuccess;
  char msg[512] = {0};
  ncclEpPpGetAsyncError(ch, &r, msg, sizeof(msg));
  return r == ncclSuccess ? std::string() : std::string(msg);
}

// Runs `msgs` (a global order, the same in every process): each rank sends its messages in order on
// one stream and receives its messages in order on another (after a delay, so the senders run
// ahead into the slot limit), then checks what it received. The dependency of every wait points to
// an earlier message, so the order cannot deadlock.
void runMessages(const Channels& ch, const std::vector<Msg>& msgs, size_t maxBytes, bool lag) {
  const int R = nRanks();
  std::vector<std::string> failures(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    cudaStream_t sendS = nullptr, recvS = nullptr;
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&sendS, cudaStreamNonBlocking));
    EPX_CHECK_CUDA(cudaStreamCreateWithFlags(&recvS, cudaStreamNonBlocking));
    std::vector<const Msg*> mine;
    for (const Msg& m : msgs)
      if (m.dst == c.rank) mine.push_back(&m);
    DevBuf sendBuf, recvBuf, sizes;
    sendBuf.reserve(maxBytes);
    const size_t stride = (maxBytes + 15) / 16 * 16 + 16;  // one more vector: writes past a message show
    recvBuf.reserve(stride * std::max<size_t>(1, mine.size()));
    sizes.reserve(sizeof(uint64_t) * std::max<size_t>(1, mine.size()));
    EPX_CHECK_CUDA(cudaMemset(recvBuf.ptr(), kPoison, stride * std::max<size_t>(1, mine.size())));
    EPX_CHECK_CUDA(cudaMemset(sizes.ptr(), 0xff, sizeof(uint64_t) * std::max<size_t>(1, mine.size())));
    EPX_CHECK_CUDA(cudaDeviceSynchronize());
    if (lag) EPX_CHECK_CUDA(launchDelay(kLagNs, recvS));
    size_t k = 0;
    for (const Msg& m : msgs) {
      if (m.src == c.rank) {
        EPX_CHECK_CUDA(launchFillPattern(sendBuf.ptr(), m.bytes, m.seed, sendS));
        EPX_CHECK_EP(ncclEpPpSend(ch[c.rank], sendBuf.ptr(), m.bytes, m.dst, sendS));
      }
      if (m.dst == c.rank) {
        EPX_CHECK_EP(ncclEpPpRecv(ch[c.rank], recvBuf.as<char>() + k * stride, stride - 16, m.src,
                                  sizes.as<size_t>() + k, recvS));
        ++k;
      }
    }
    EPX_CHECK_CUDA(cudaStreamSynchronize(sendS));
    EPX_CHECK_CUDA(cudaStreamSynchronize(recvS));
    std::vector<uint8_t> all(stride * mine.size());
    std::vector<uint64_t> got(mine.size());
    if (!mine.empty()) {
      EPX_CHECK_CUDA(cudaMemcpy(all.data(), recvBuf.ptr(), all.size(), cudaMemcpyDeviceToHost));
      EPX_CHECK_CUDA(cudaMemcpy(got.data(), sizes.ptr(), got.size() * 8, cudaMemcpyDeviceToHost));
    }
    std::string& f = failures[size_t(c.rank)];
    for (size_t i = 0; i < mine.size() && f.empty(); ++i) {
      std::vector<uint8_t> one(all.begin() + long(i * stride), all.begin() + long((i + 1) * stride));
      f = checkMessage(*mine[i], one, got[i]);
    }
    if (f.empty()) f = asyncErrorOf(ch[c.rank]);
    cudaStreamDestroy(sendS);
    cudaStreamDestroy(recvS);
  });
  for (int r : localRanks()) BOOST_TEST(failures[size_t(r)] == "", "rank " << r << ": " << failures[size_t(r)]);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pp)

// Every rank sends to the next and receives from the previous, every size, twice as many messages
// per size as slots, the receiver 2 ms late.
BOOST_AUTO_TEST_CASE(ring_more_messages_than_slots) {
  const int R = nRanks();
  const auto sizes = messageSizes();
  const size_t maxBytes = sizes.back();
  constexpr int kSlots = 2;
  Channels ch(maxBytes, kSlots);
  Rng rng(nextSeed());
  std::vector<Msg> msgs;
  for (size_t s : sizes)
    for (int rep = 0; rep < 2 * kSlots; ++rep)
      for (int r = 0; r < R; ++r) msgs.push_back(Msg{r, (r + 1) % R, s, rng.next()});
  BOOST_TEST_MESSAGE("pp ring: " << msgs.size() << " messages, up to " << maxBytes << " bytes, " << kSlots << " slots");
  runMessages(ch, msgs, maxBytes, true);
}

// Random (source, destination) pairs, self included, random sizes; per pair more messages than slots.
// The smallest GIN chunk (64 KiB): messages to network peers go in 1 to 8 rounds (65540 bytes: 2,
// 1 MiB: 8 of 128 KiB).
BOOST_AUTO_TEST_CASE(random_pairs) {
  const int R = nRanks();
  const auto sizes = messageSizes();
  constexpr int kSlots = 3;
  const size_t maxBytes = std::min<size_t>(sizes.back(), size_t(1) << 20);
  Channels ch(maxBytes, kSlots, size_t(64) << 10);
  Rng rng(nextSeed());
  std::vector<Msg> msgs;
  const int count = quick() ? 48 : 160;
  for (int i = 0; i < count; ++i) {
    const int src = rng.uniform(0, R - 1), dst = rng.uniform(0, R - 1);
    size_t bytes = sizes[size_t(rng.uniform(0, int(sizes.size()) - 1))];
    msgs.push_back(Msg{src, dst, std::min(bytes, maxBytes), rng.next()});
  }
  runMessages(ch, msgs, maxBytes, true);
}

// 1000 small messages around the ring on one stream (send then receive), all checked.
BOOST_AUTO_TEST_CASE(many_iterations) {
  const int R = nRanks();
  const int iters = quick() ? 100 : 1000;
  constexpr size_t kBytes = 272;  // 17 vectors
  Channels ch(kBytes, 4);
  const uint64_t base = nextSeed();
  auto seedOf = [&](int src, int it) { return mix64(base + uint64_t(src) * 1000003u + uint64_t(it)); };
  std::vector<std::string> failures(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    const int next = (c.rank + 1) % R, prev = (c.rank + R - 1) % R;
    DevBuf send, recv;
    send.reserve(kBytes);
    recv.reserve(kBytes * size_t(iters));
    EPX_CHECK_CUDA(cudaMemsetAsync(recv.ptr(), kPoison, kBytes * size_t(iters), c.stream));  // stream order: c.stream is non-blocking
    for (int it = 0; it < iters; ++it) {
      EPX_CHECK_CUDA(launchFillPattern(send.ptr(), kBytes, seedOf(c.rank, it), c.stream));
      EPX_CHECK_EP(ncclEpPpSend(ch[c.rank], send.ptr(), kBytes, next, c.stream));
      EPX_CHECK_EP(ncclEpPpRecv(ch[c.rank], recv.as<char>() + size_t(it) * kBytes, kBytes, prev, nullptr, c.stream));
    }
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    std::vector<uint8_t> got(kBytes * size_t(iters));
    EPX_CHECK_CUDA(cudaMemcpy(got.data(), recv.ptr(), got.size(), cudaMemcpyDeviceToHost));
    for (int it = 0; it < iters && failures[size_t(c.rank)].empty(); ++it)
      for (size_t i = 0; i < kBytes; ++i)
        if (got[size_t(it) * kBytes + i] != patternByte(seedOf(prev, it), i)) {
          failures[size_t(c.rank)] = "iteration " + std::to_string(it) + " byte " + std::to_string(i) + " differs";
          break;
        }
  });
  for (int r : localRanks()) BOOST_TEST(failures[size_t(r)] == "", "rank " << r << ": " << failures[size_t(r)]);
}

// A ring of 4 messages per replay captured once, replayed with new data each time.
BOOST_AUTO_TEST_CASE(graph_capture_replay) {
  const int R = nRanks();
  const int replays = quick() ? 10 : 50;
  constexpr int kMsgs = 4;
  constexpr size_t kBytes = (size_t(64) << 10) + 48;
  Channels ch(kBytes, 2);
  const uint64_t base = nextSeed();
  auto seedOf = [&](int src, int rep, int m) { return mix64(base ^ (uint64_t(src) << 40) ^ (uint64_t(rep) << 8) ^ uint64_t(m)); };
  std::vector<std::string> failures(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    const int next = (c.rank + 1) % R, prev = (c.rank + R - 1) % R;
    DevBuf send, recv;
    send.reserve(kBytes * kMsgs);
    recv.reserve(kBytes * kMsgs);
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    EPX_CHECK_CUDA(cudaStreamBeginCapture(c.stream, cudaStreamCaptureModeThreadLocal));
    for (int m = 0; m < kMsgs; ++m) {
      ncclResult_t r1 = ncclEpPpSend(ch[c.rank], send.as<char>() + m * kBytes, kBytes, next, c.stream);
      ncclResult_t r2 = ncclEpPpRecv(ch[c.rank], recv.as<char>() + m * kBytes, kBytes, prev, nullptr, c.stream);
      if (r1 != ncclSuccess || r2 != ncclSuccess) {
        cudaStreamEndCapture(c.stream, &graph);
        throw std::runtime_error(std::string("capture: ") + ncclEpGetLastError());
      }
    }
    EPX_CHECK_CUDA(cudaStreamEndCapture(c.stream, &graph));
    EPX_CHECK_CUDA(cudaGraphInstantiate(&exec, graph, 0));
    std::vector<uint8_t> got(kBytes * kMsgs);
    for (int rep = 0; rep < replays; ++rep) {  // every replay on every rank (collective), first failure kept
      for (int m = 0; m < kMsgs; ++m)
        EPX_CHECK_CUDA(launchFillPattern(send.as<char>() + m * kBytes, kBytes, seedOf(c.rank, rep, m), c.stream));
      EPX_CHECK_CUDA(cudaMemsetAsync(recv.ptr(), kPoison, kBytes * kMsgs, c.stream));
      EPX_CHECK_CUDA(cudaGraphLaunch(exec, c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      EPX_CHECK_CUDA(cudaMemcpy(got.data(), recv.ptr(), got.size(), cudaMemcpyDeviceToHost));
      if (!failures[size_t(c.rank)].empty()) continue;
      for (int m = 0; m < kMsgs && failures[size_t(c.rank)].empty(); ++m)
        for (size_t i = 0; i < kBytes; ++i)
          if (got[m * kBytes + i] != patternByte(seedOf(prev, rep, m), i)) {
            failures[size_t(c.rank)] = "replay " + std::to_string(rep) + " message " + std::to_string(m) + " byte " +
                                       std::to_string(i) + " differs";
            break;
          }
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
  });
  for (int r : localRanks()) BOOST_TEST(failures[size_t(r)] == "", "rank " << r << ": " << failures[size_t(r)]);
}

// epx and NCCL's ncclSend/ncclRecv move the same bytes (ring, largest size).
BOOST_AUTO_TEST_CASE(same_bytes_as_nccl_send_recv) {
  const int R = nRanks();
  const size_t bytes = messageSizes().back() - 4;
  Channels ch(bytes, 1);
  const uint64_t seed = nextSeed();
  std::vector<std::string> failures(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    const int next = (c.rank + 1) % R, prev = (c.rank + R - 1) % R;
    DevBuf send, viaEpx, viaNccl;
    send.reserve(bytes);
    viaEpx.reserve(bytes);
    viaNccl.reserve(bytes);
    EPX_CHECK_CUDA(launchFillPattern(send.ptr(), bytes, seed + uint64_t(c.rank), c.stream));
    EPX_CHECK_EP(ncclEpPpSend(ch[c.rank], send.ptr(), bytes, next, c.stream));
    EPX_CHECK_EP(ncclEpPpRecv(ch[c.rank], viaEpx.ptr(), bytes, prev, nullptr, c.stream));
    EPX_CHECK_NCCL(ncclGroupStart());
    EPX_CHECK_NCCL(ncclSend(send.ptr(), bytes, ncclUint8, next, c.comm, c.stream));
    EPX_CHECK_NCCL(ncclRecv(viaNccl.ptr(), bytes, ncclUint8, prev, c.comm, c.stream));
    EPX_CHECK_NCCL(ncclGroupEnd());
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    std::vector<uint8_t> a(bytes), b(bytes);
    EPX_CHECK_CUDA(cudaMemcpy(a.data(), viaEpx.ptr(), bytes, cudaMemcpyDeviceToHost));
    EPX_CHECK_CUDA(cudaMemcpy(b.data(), viaNccl.ptr(), bytes, cudaMemcpyDeviceToHost));
    if (a != b) failures[size_t(c.rank)] = "epx and NCCL received different bytes";
    else if (a[bytes - 1] != patternByte(seed + uint64_t(prev), bytes - 1)) failures[size_t(c.rank)] = "wrong data";
  });
  for (int r : localRanks()) BOOST_TEST(failures[size_t(r)] == "", "rank " << r << ": " << failures[size_t(r)]);
}

// A message larger than the receive buffer: reported, nothing written, the channel goes on.
BOOST_AUTO_TEST_CASE(receive_buffer_too_small) {
  const int R = nRanks();
  constexpr size_t kMsg = 256, kCap = 128;
  Channels ch(4096, 2);
  const uint64_t seed = nextSeed();
  std::vector<std::string> errors(static_cast<size_t>(R)), failures(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    const int next = (c.rank + 1) % R, prev = (c.rank + R - 1) % R;
    DevBuf send, recv, size;
    send.reserve(kMsg);
    recv.reserve(kMsg);
    size.reserve(8);
    EPX_CHECK_CUDA(cudaMemsetAsync(recv.ptr(), kPoison, kMsg, c.stream));
    EPX_CHECK_CUDA(launchFillPattern(send.ptr(), kMsg, seed, c.stream));
    EPX_CHECK_EP(ncclEpPpSend(ch[c.rank], send.ptr(), kMsg, next, c.stream));
    EPX_CHECK_EP(ncclEpPpRecv(ch[c.rank], recv.ptr(), kCap, prev, size.as<size_t>(), c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    std::vector<uint8_t> got(kMsg);
    uint64_t n = 0;
    EPX_CHECK_CUDA(cudaMemcpy(got.data(), recv.ptr(), kMsg, cudaMemcpyDeviceToHost));
    EPX_CHECK_CUDA(cudaMemcpy(&n, size.ptr(), 8, cudaMemcpyDeviceToHost));
    if (std::count(got.begin(), got.end(), kPoison) != long(kMsg)) failures[size_t(c.rank)] = "the buffer was written";
    if (n != kMsg) failures[size_t(c.rank)] += " recvBytes " + std::to_string(n);
    ncclResult_t ar = ncclSuccess;
    char msg[512] = {0};
    EPX_CHECK_EP(ncclEpPpGetAsyncError(ch[c.rank], &ar, msg, sizeof(msg)));
    errors[size_t(c.rank)] = std::to_string(int(ar)) + ":" + msg;
    // The slot was freed: the next message (that fits) arrives.
    EPX_CHECK_EP(ncclEpPpSend(ch[c.rank], send.ptr(), kCap, next, c.stream));
    EPX_CHECK_EP(ncclEpPpRecv(ch[c.rank], recv.ptr(), kCap, prev, nullptr, c.stream));
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    EPX_CHECK_CUDA(cudaMemcpy(got.data(), recv.ptr(), kMsg, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < kCap; ++i)
      if (got[i] != patternByte(seed, i)) {
        failures[size_t(c.rank)] += " second message differs";
        break;
      }
  });
  for (int r : localRanks()) {
    const int prev = (r + R - 1) % R;
    BOOST_TEST(failures[size_t(r)] == "", "rank " << r << ": " << failures[size_t(r)]);
    BOOST_TEST(errors[size_t(r)] == "4:rank " + std::to_string(r) + ": a PP message of 256 bytes from peer rank " +
                                        std::to_string(prev) +
                                        " is larger than the receive buffer (128 bytes); it was dropped, nothing was written");
  }
}

// A message that never comes and a receiver that never frees its slot become timeouts naming the
// peer (here each rank itself, so that no other rank is left waiting); the channel then refuses work.
BOOST_AUTO_TEST_CASE(timeouts_name_the_peer) {
  const int R = nRanks();
  constexpr int kTimeoutMs = 300;
  std::vector<std::string> recvErr(static_cast<size_t>(R)), sendErr(static_cast<size_t>(R)), refused(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
    cfg.maxMessageBytes = 64;
    cfg.slots = 1;
    cfg.timeoutMs = kTimeoutMs;
    ncclEpPpChannel_t a = nullptr, b = nullptr;
    EPX_CHECK_EP(ncclEpPpChannelCreate(c.comm, &cfg, &a));
    EPX_CHECK_EP(ncclEpPpChannelCreate(c.comm, &cfg, &b));
    DevBuf buf;
    buf.reserve(64);
    EPX_CHECK_EP(ncclEpPpRecv(a, buf.ptr(), 64, c.rank, nullptr, c.stream));  // nothing was sent
    EPX_CHECK_EP(ncclEpPpSend(b, buf.ptr(), 64, c.rank, c.stream));
    EPX_CHECK_EP(ncclEpPpSend(b, buf.ptr(), 64, c.rank, c.stream));  // slot 0 never freed
    EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
    recvErr[size_t(c.rank)] = asyncErrorOf(a);
    sendErr[size_t(c.rank)] = asyncErrorOf(b);
    const ncclResult_t r = ncclEpPpSend(a, buf.ptr(), 64, c.rank, c.stream);
    refused[size_t(c.rank)] = std::to_string(int(r)) + ":" + ncclEpGetLastError();
    EPX_CHECK_EP(ncclEpPpChannelDestroy(a));
    EPX_CHECK_EP(ncclEpPpChannelDestroy(b));
  });
  for (int r : localRanks()) {
    const std::string me = std::to_string(r);
    BOOST_TEST(recvErr[size_t(r)].find("rank " + me + ": timed out after 300 ms in PP recv (waiting for the message) "
                                       "waiting for peer rank " + me + " over NVLink (expected 1, saw 0") == 0u,
               recvErr[size_t(r)]);
    BOOST_TEST(sendErr[size_t(r)].find("rank " + me + ": timed out after 300 ms in PP send (waiting for the receiver to "
                                       "free a slot) waiting for peer rank " + me + " over NVLink (expected 1, saw 0") == 0u,
               sendErr[size_t(r)]);
    BOOST_TEST(refused[size_t(r)] ==
               "6:ncclEpPpSend: the channel had a device-side timeout (ncclEpPpGetAsyncError); destroy it");
  }
}

// Bad arguments fail before anything is launched, with the reason.
// Ranks that create a channel with different configs all get ncclInvalidUsage naming the field.
BOOST_AUTO_TEST_CASE(configs_differ_between_ranks) {
  const int R = nRanks();
  if (R < 2) return;  // nothing to differ from
  std::vector<std::string> msgs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    ncclEpPpConfig_t cfg = NCCL_EP_PP_CONFIG_INITIALIZER;
    cfg.maxMessageBytes = 4096;
    cfg.chunkBytes = c.rank == R - 1 ? size_t(128) << 10 : 0;  // 0: the default, 4 MiB (epx/pp.h)
    ncclEpPpChannel_t none = nullptr;
    const ncclResult_t r = ncclEpPpChannelCreate(c.comm, &cfg, &none);
    msgs[size_t(c.rank)] = std::to_string(int(r)) + ":" + ncclEpGetLastError();
    if (none) ncclEpPpChannelDestroy(none);
  });
  for (int r : localRanks())
    BOOST_TEST(msgs[size_t(r)] == "5:ncclEpPpChannelCreate: rank " + std::to_string(R - 1) +
                                      " has chunkBytes 131072 but rank 0 has 4194304; every rank must create the "
                                      "channel with the same config");
}

BOOST_AUTO_TEST_CASE(argument_errors) {
  const int R = nRanks();
  Channels ch(1024, 2);
  std::vector<std::vector<std::string>> msgs(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    DevBuf buf;
    buf.reserve(2048);
    auto err = [&](ncclResult_t r) { msgs[size_t(c.rank)].push_back(std::to_string(int(r)) + ":" + ncclEpGetLastError()); };
    err(ncclEpPpSend(ch[c.rank], buf.ptr(), 64, R, c.stream));
    err(ncclEpPpSend(ch[c.rank], buf.ptr(), 1025, 0, c.stream));
    err(ncclEpPpSend(ch[c.rank], buf.as<char>() + 8, 64, 0, c.stream));
    err(ncclEpPpRecv(ch[c.rank], nullptr, 64, 0, nullptr, c.stream));
    err(ncclEpPpSend(nullptr, buf.ptr(), 64, 0, c.stream));
    ncclEpPpConfig_t bad = NCCL_EP_PP_CONFIG_INITIALIZER;  // maxMessageBytes left 0 (not collective: fails first)
    ncclEpPpChannel_t none = nullptr;
    err(ncclEpPpChannelCreate(c.comm, &bad, &none));
  });
  for (int r : localRanks()) {
    const auto& m = msgs[size_t(r)];
    BOOST_TEST_REQUIRE(m.size() == 6u);
    BOOST_TEST(m[0] == "4:ncclEpPpSend: peer " + std::to_string(R) + " is not a rank of the communicator (0 .. " +
                           std::to_string(R - 1) + ")");
    BOOST_TEST(m[1] == "4:ncclEpPpSend: message of 1025 bytes is larger than the channel's maxMessageBytes 1024");
    BOOST_TEST(m[2] == "4:ncclEpPpSend: buf is not 16-byte aligned");
    BOOST_TEST(m[3] == "4:ncclEpPpRecv: buf is NULL");
    BOOST_TEST(m[4] == "4:ncclEpPpSend: channel is NULL");
    BOOST_TEST(m[5] == "4:ncclEpPpChannelCreate: maxMessageBytes 0 is not in 1 .. 4294967296");
  }
}

BOOST_AUTO_TEST_SUITE_END()
