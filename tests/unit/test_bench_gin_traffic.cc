// epx-bench's reading of the GIN plugin counters (tools/epx-bench/gin_traffic.h): which plugin
// file NCCL_NET_PLUGIN names, how entries are summed (puts to self excluded), and the reader's
// behaviour when NCCL has not loaded the plugin.
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <vector>

#include "gin_traffic.h"

using epxbench::GinStatsReader;
using epxbench::GinTraffic;
using epxbench::netPluginLibrary;
using epxbench::sumGinTraffic;

BOOST_AUTO_TEST_SUITE(bench_gin_traffic)

BOOST_AUTO_TEST_CASE(plugin_library_name) {
  BOOST_TEST(netPluginLibrary(nullptr).empty());
  BOOST_TEST(netPluginLibrary("").empty());
  BOOST_TEST(netPluginLibrary("none").empty());
  BOOST_TEST(netPluginLibrary("epx") == "libnccl-net-epx.so");
  BOOST_TEST(netPluginLibrary("/opt/epx/lib/libnccl-net-epx.so") == "/opt/epx/lib/libnccl-net-epx.so");
  BOOST_TEST(netPluginLibrary("libnccl-net-epx.so") == "libnccl-net-epx.so");
  BOOST_TEST(netPluginLibrary("libnccl-net-epx.so.1") == "libnccl-net-epx.so.1");
  BOOST_TEST(netPluginLibrary("./x.so") == "./x.so");
}

epxGinIpcStats entry(int rank, int peer, uint64_t puts, uint64_t putSignals, uint64_t signalOnly, uint64_t bytes) {
  epxGinIpcStats e{};
  e.rank = rank;
  e.nRanks = 4;
  e.peer = peer;
  e.puts = puts;
  e.putSignals = putSignals;
  e.signalOnly = signalOnly;
  e.ops = puts + putSignals + signalOnly;
  e.signals = putSignals + signalOnly;
  e.bytes = bytes;
  e.wireBytes = bytes + 64 * signalOnly;
  return e;
}

BOOST_AUTO_TEST_CASE(sum_excludes_self) {
  const epxGinIpcStats v[] = {entry(1, 0, 10, 2, 3, 1000), entry(1, 1, 99, 99, 99, 99999),  // self: excluded
                              entry(1, 2, 5, 0, 1, 500), entry(1, 3, 0, 0, 7, 0)};
  const GinTraffic t = sumGinTraffic(v, 4);
  BOOST_TEST(t.puts == 15.0);
  BOOST_TEST(t.putSignals == 2.0);
  BOOST_TEST(t.signalOnly == 11.0);
  BOOST_TEST(t.ops == 28.0);
  BOOST_TEST(t.bytes == 1500.0);
  BOOST_TEST(t.wireBytes == 1500.0 + 64.0 * 11);
  const GinTraffic z = sumGinTraffic(v, 0);
  BOOST_TEST(z.ops == 0.0);
  BOOST_TEST(z.wireBytes == 0.0);
}

BOOST_AUTO_TEST_CASE(latency_means) {
  // Rank 1 of 3, two contexts: entries (context, peer); self entries carry the progress counters.
  std::vector<epxGinIpcStats> v;
  for (int ctx = 0; ctx < 2; ++ctx)
    for (int peer = 0; peer < 3; ++peer) {
      epxGinIpcStats e{};
      e.rank = 1;
      e.nRanks = 3;
      e.context = ctx;
      e.peer = peer;
      e.progressGapMaxNs = ctx == 0 ? 300000 : 2500000;
      e.progressGaps1ms = ctx == 0 ? 0 : 2;
      e.applyBatches = 4;
      e.applyNs = 40000;
      e.progressCalls = ctx == 0 ? 100 : 300;  // the same in each entry of a context
      if (peer != 1) {
        e.completed = 2;
        e.copied = 1;
        e.copyNs = 10000;
        e.doneNs = 30000;
        e.ops = 4;
        e.issueNs = 6000;
        e.signalsIn = 1;
        e.signalInNs = 5000;
      } else {  // self: ops here never reach a NIC and are left out
        e.completed = 100;
        e.doneNs = 1;
      }
      v.push_back(e);
    }
  const epxbench::GinLatency l = epxbench::ginLatency(v.data(), int(v.size()));
  BOOST_TEST(l.completed == 8.0);
  BOOST_TEST(l.copyUs == 10.0);
  BOOST_TEST(l.issueUs == 1.5);  // 4 entries x 6 us over 4 x 4 ops
  BOOST_TEST(l.doneUs == 15.0);
  BOOST_TEST(l.signalsIn == 4.0);
  BOOST_TEST(l.signalInUs == 5.0);
  BOOST_TEST(l.applyBatches == 8.0);  // once per context
  BOOST_TEST(l.applyUs == 10.0);
  BOOST_TEST(l.gapMaxUs == 2500.0);
  BOOST_TEST(l.gaps1ms == 2.0);
  BOOST_TEST(l.progressCalls == 200.0);     // mean over the 2 contexts, from their self entries
  epxbench::GinLatency w = l;
  w.setWindow(1000.0);
  BOOST_TEST(w.gapMeanUs == 5.0);  // 1 ms window / 200 calls
  epxbench::GinLatency z = epxbench::ginLatency(v.data(), 0);
  BOOST_TEST(z.doneUs == 0.0);
  z.setWindow(1000.0);
  BOOST_TEST(z.gapMeanUs == 0.0);
}

BOOST_AUTO_TEST_CASE(reader_without_loaded_plugin) {
  ::setenv("NCCL_NET_PLUGIN", "epx-test-not-loaded", 1);
  {
    GinStatsReader r;
    BOOST_TEST(!r.available());
    BOOST_TEST(r.why().find("libnccl-net-epx-test-not-loaded.so") != std::string::npos);
    r.reset();  // harmless
    BOOST_TEST(r.total().ops == 0.0);
  }
  ::unsetenv("NCCL_NET_PLUGIN");
  GinStatsReader unset;
  BOOST_TEST(!unset.available());
  BOOST_TEST(unset.why().find("NCCL_NET_PLUGIN") != std::string::npos);
}

BOOST_AUTO_TEST_SUITE_END()
