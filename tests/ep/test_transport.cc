// GPU tests of the device transport's one-sided read (suite "transport"): every rank reads a range
// of every rank's window (itself included) with Transport::get, at odd offsets and sizes from 1 B
// to 9 MiB + 1, into a poisoned destination with guard bytes, and checks every byte and guard on
// the host against the source rank's pattern. NVLink (LSA) peers are read with loads; network
// peers with NCCL's GIN get, which needs NCCL 2.30.3+ headers: a build against older headers reads
// the LSA peers only and checks the refusal text a get across nodes gets
// (core/nccl_version.h ginGetUnsupported). Runs at 1 rank (reads itself) and across fake nodes.
// The window comes from epx's shared link (host/src/link.h), as every epx object's does.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "coll_kernels.h"
#include "core/nccl_version.h"
#include "ep_harness.h"
#include "epx/device/protocol.h"
#include "link.h"
#include "transport_kernels.h"

using namespace epx::test;

namespace {

constexpr uint8_t kPoison = 0xa5;
constexpr uint64_t kFlagsBytes = 4096;                  // the link's synchronization words (unused here)
constexpr uint64_t kSrcOff = kFlagsBytes + 3;           // read from here in every source window
constexpr uint64_t kMaxBytes = (uint64_t(9) << 20) + 1;  // largest read
constexpr uint64_t kGuard = 64;                         // poisoned bytes checked on each side
constexpr uint64_t kDstStride = kMaxBytes + 2 * kGuard + 5;
constexpr uint64_t kDstBase = kSrcOff + kMaxBytes + kGuard + 1;  // odd: destinations misaligned

uint64_t seedOf(uint64_t base, int rank) { return base * 1000003u + uint64_t(rank); }

}  // namespace

BOOST_AUTO_TEST_SUITE(transport)

BOOST_AUTO_TEST_CASE(get_reads_every_ranks_window_exactly) {
  const int R = nRanks();
  const uint64_t base = nextSeed();
  const std::vector<uint64_t> sizes = {1, 3, 4096 + 5, (uint64_t(1) << 20) + 7, kMaxBytes};
  const uint64_t windowBytes = kDstBase + uint64_t(R) * kDstStride + kGuard;
  std::vector<std::string> failures(static_cast<size_t>(R));
  std::vector<std::string> notes(static_cast<size_t>(R));
  gpus().run([&](const RankContext& c) {
    std::string& fail = failures[size_t(c.rank)];
    epx::WindowLink l;
    if (std::string why = epx::linkQuery(c.comm, &l); !why.empty()) {
      fail = "linkQuery: " + why;
      return;
    }
    epx::LinkRequest req;
    req.bytes = windowBytes;
    req.zeroedPrefix = kFlagsBytes;
    req.ginSignals = 1;
    req.ginCounters = R;  // one per CTA (one CTA per source)
    req.who = "transport test";
    EPX_CHECK_EP(epx::linkOpen(req, &l));
    const epx::dev::LinkArgs args = epx::linkArgs(l, 0);
    // Which ranks this build can read: all of them, or the LSA peers only.
    std::vector<int> sources;
    for (int p = 0; p < R; ++p)
      if (transportHasGinGet() || epx::dev::isLsaPeer(l.rank, l.lsaRank, l.lsaSize, p)) sources.push_back(p);
    if (!transportHasGinGet() && l.network()) {
      const std::string why = epx::ginGetUnsupported(NCCL_VERSION_CODE, "a read across nodes");
      if (why.find("2.30.3") == std::string::npos || why.find("a read across nodes") != 0)
        fail = "the refusal of a get across nodes does not say what is needed: " + why;
      notes[size_t(c.rank)] = "network peers not read (NCCL headers older than 2.30.3)";
    }
    int* sourcesDev = nullptr;
    EPX_CHECK_CUDA(cudaMalloc(&sourcesDev, sizeof(int) * (sources.empty() ? 1 : sources.size())));
    EPX_CHECK_CUDA(cudaMemcpy(sourcesDev, sources.data(), sizeof(int) * sources.size(), cudaMemcpyHostToDevice));
    char* win = static_cast<char*>(l.buffer);
    EPX_CHECK_CUDA(launchFillPatternRange(win, kSrcOff, kSrcOff + kMaxBytes, seedOf(base, c.rank), c.stream));
    std::vector<uint8_t> got(kDstStride);
    for (uint64_t bytes : sizes) {
      EPX_CHECK_CUDA(cudaMemsetAsync(win + kDstBase, kPoison, uint64_t(R) * kDstStride, c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      EPX_CHECK_EP(epx::linkBarrier(c.comm));  // every source is filled, every destination poisoned
      const auto t0 = std::chrono::steady_clock::now();
      EPX_CHECK_CUDA(launchGets(args, sourcesDev, int(sources.size()), kSrcOff, kDstBase + kGuard, kDstStride, bytes,
                                c.stream));
      EPX_CHECK_CUDA(cudaStreamSynchronize(c.stream));
      const double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count();
      for (size_t s = 0; s < sources.size() && fail.empty(); ++s) {
        const int src = sources[s];
        EPX_CHECK_CUDA(cudaMemcpy(got.data(), win + kDstBase + s * kDstStride, kDstStride, cudaMemcpyDeviceToHost));
        const uint64_t seed = seedOf(base, src);
        for (uint64_t i = 0; i < kGuard && fail.empty(); ++i)
          if (got[i] != kPoison) fail = "byte " + std::to_string(i) + " before the destination was written";
        for (uint64_t j = 0; j < bytes && fail.empty(); ++j)
          if (got[kGuard + j] != patternByte(seed, kSrcOff + j))
            fail = "byte " + std::to_string(j) + " of " + std::to_string(bytes) + " read from rank " +
                   std::to_string(src) + " is " + std::to_string(got[kGuard + j]) + ", expected " +
                   std::to_string(patternByte(seed, kSrcOff + j));
        for (uint64_t i = kGuard + bytes; i < kDstStride && fail.empty(); ++i)
          if (got[i] != kPoison) fail = "byte " + std::to_string(i - kGuard) + " past a read of " +
                                        std::to_string(bytes) + " bytes from rank " + std::to_string(src) + " was written";
      }
      if (!fail.empty()) fail = "rank " + std::to_string(c.rank) + ": " + fail;
      if (bytes == kMaxBytes && fail.empty())
        notes[size_t(c.rank)] += (notes[size_t(c.rank)].empty() ? "" : "; ") + std::to_string(sources.size()) +
                                 " reads of " + std::to_string(bytes) + " B in " + std::to_string(int(us)) + " us";
      if (!fail.empty()) break;
    }
    EPX_CHECK_CUDA(cudaFree(sourcesDev));
    EPX_CHECK_EP(epx::linkBarrier(c.comm));  // no peer reads this window any more
    EPX_CHECK_EP(epx::linkQuiesce(&l, "transport test"));
    epx::linkClose(&l);
  });
  for (int r = 0; r < R; ++r) {
    if (isLocal(r) && !notes[size_t(r)].empty()) BOOST_TEST_MESSAGE("rank " << r << ": " << notes[size_t(r)]);
    BOOST_TEST(failures[size_t(r)].empty(), failures[size_t(r)] << " (seed " << base << ")");
  }
}

BOOST_AUTO_TEST_SUITE_END()
