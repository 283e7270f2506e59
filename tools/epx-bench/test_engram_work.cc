// CPU tests of epx-bench --algo engram's host side (engram_work.h): the indices, the tables'
// pattern and the check of fetched rows, the bytes that cross nodes and the floor per layer; and
// its command-line options (args.cc; parseArgs exits on an error, so those cases run in a child).
#define BOOST_TEST_MODULE epx_bench_engram
#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "args_in_child.h"
#include "engram_work.h"
#include "epx/ref/engram_ref.h"

namespace {

using namespace epxbench;

EngramBenchShape shape(int nRanks, int layers, int64_t rows, uint64_t rowBytes, int tokens, int entries) {
  EngramBenchShape s;
  s.nRanks = nRanks;
  s.layers = layers;
  s.numRows = rows;
  s.rowBytes = rowBytes;
  s.tokens = tokens;
  s.entries = entries;
  return s;
}

// What a correct fetch returns on rank `rank`: the CPU reference over tables of the pattern.
std::vector<uint8_t> referenceFetch(const EngramBenchShape& s, uint64_t seed, const std::vector<int32_t>& idx) {
  return epx::ref::engramFetch(s.ref(), engramShards(s, seed), idx).out;
}

using testing::has;

// parseArgs(args) in a child (args_in_child.h) that prints the engram options it parsed.
testing::ParseOutcome parse(std::vector<std::string> args) {
  return testing::parseInChild(std::move(args), {}, [](const Options& o) {
    std::printf("layers=%d rows=%lld rowBytes=%zu tokens=%d entries=%d ctas=%d chunk=%zu lat=%g\n", o.engramLayers,
                o.engramRows, o.engramRowBytes, o.engramTokens, o.engramEntries, o.collCtas, o.chunkBytes,
                o.netLatencyUs);
  });
}

}  // namespace

BOOST_AUTO_TEST_CASE(engram_options) {
  testing::ParseOutcome p = parse({"--algo", "engram"});
  BOOST_TEST(p.status == 0, p.output);
  BOOST_TEST(has(p, "layers=4 rows=0 rowBytes=1024 tokens=4096 entries=16 ctas=0 chunk=0 lat=0"), p.output);
  p = parse({"--algo", "engram", "--engram-layers", "2", "--engram-rows", "1024", "--engram-row-bytes", "512",
             "--engram-tokens", "128", "--engram-entries", "8", "--coll-ctas", "16", "--chunk-kib", "4096",
             "--net-gbps", "50", "--net-latency-us", "3", "--ranks-per-node", "1", "--seed", "5", "--no-check",
             "--iters", "5", "--warmup", "1"});
  BOOST_TEST(p.status == 0, p.output);
  BOOST_TEST(has(p, "layers=2 rows=1024 rowBytes=512 tokens=128 entries=8 ctas=16 chunk=4194304 lat=3"), p.output);
  // Refused: options of other modes, values out of range, another mode's use of the engram options.
  BOOST_TEST(has(parse({"--engram-layers", "2"}), "--engram-layers applies to --algo engram only"));
  BOOST_TEST(has(parse({"--algo", "lb", "--engram-rows", "64"}), "--engram-rows applies to --algo engram only"));
  BOOST_TEST(has(parse({"--algo", "engram", "--tokens", "64"}), "--tokens has no effect with --algo engram"));
  BOOST_TEST(has(parse({"--algo", "engram", "--sms", "8"}), "--sms has no effect with --algo engram"));
  BOOST_TEST(has(parse({"--algo", "engram", "--csv", "/tmp/x.csv"}), "--csv has no effect with --algo engram"));
  BOOST_TEST(has(parse({"--algo", "engram", "--engram-layers", "65"}), "--engram-layers: '65' is not an integer in [1, 64]"));
  BOOST_TEST(has(parse({"--algo", "engram", "--engram-row-bytes", "100"}), "--engram-row-bytes: '100' is not a multiple of 16"));
  BOOST_TEST(has(parse({"--algo", "engram", "--engram-rows", "2147483648"}), "--engram-rows: '2147483648' is not an integer"));
  BOOST_TEST(has(parse({"--algo", "engram", "--engram-tokens", "65536", "--engram-entries", "512"}),
                 "is more than 2^24 rows per layer"));
  BOOST_TEST(parse({"--algo", "engram", "--engram-tokens", "65536", "--engram-entries", "256"}).status == 0);  // 2^24
  BOOST_TEST(has(parse({"--algo", "bucket", "--net-latency-us", "3"}), "--net-latency-us has no effect with --algo bucket"));
  BOOST_TEST(has(parse({"--coll-ctas", "4"}), "bucket, pp, lb and engram only"));
  BOOST_TEST(has(parse({"--algo", "x"}), "lb or engram, got 'x'"));
}

BOOST_AUTO_TEST_CASE(indices_are_seeded_uniform_and_differ_by_rank) {
  const EngramBenchShape s = shape(4, 3, 1000, 64, 50, 7);
  const auto a = engramIndices(s, 1, 0), b = engramIndices(s, 1, 1), a2 = engramIndices(s, 1, 0), c = engramIndices(s, 2, 0);
  BOOST_TEST(a.size() == size_t(3 * 50 * 7));
  BOOST_TEST(a == a2);
  BOOST_TEST(a != b);
  BOOST_TEST(a != c);
  std::set<int32_t> seen;
  for (int32_t x : a) {
    BOOST_TEST((x >= 0 && x < 1000));
    seen.insert(x);
  }
  BOOST_TEST(seen.size() > 500u);  // 1050 draws of 1000 values: about 650 distinct
}

BOOST_AUTO_TEST_CASE(check_accepts_the_reference_and_names_a_wrong_row) {
  const EngramBenchShape s = shape(2, 2, 64, 32, 5, 3);
  const auto idx = engramIndices(s, 7, 1);
  auto out = referenceFetch(s, 7, idx);
  const size_t layerBytes = size_t(s.rowsPerLayer()) * s.rowBytes;
  for (int l = 0; l < s.layers; ++l) BOOST_TEST(engramCheckLayer(s, 7, l, idx, out.data() + l * layerBytes) == "");
  // Another seed's tables are another pattern.
  BOOST_TEST(engramCheckLayer(s, 8, 0, idx, out.data()) != "");
  // Layer 1, token 2, entry 1 (row 7 of the layer), word 3 flipped.
  out[layerBytes + 7 * s.rowBytes + 3 * 4] ^= 1;
  const std::string m = engramCheckLayer(s, 7, 1, idx, out.data() + layerBytes);
  BOOST_TEST(m.find("layer 1 token 2 entry 1 (row " + std::to_string(idx[size_t(s.rowsPerLayer()) + 7]) + "): word 3") == 0, m);
  BOOST_TEST(m.find("(1 of 15 rows differ)") != std::string::npos, m);
  BOOST_TEST(engramCheckLayer(s, 7, 0, idx, out.data()) == "");
}

BOOST_AUTO_TEST_CASE(net_traffic_counts_rows_between_nodes) {
  // 4 ranks, 2 per node, 8 rows (2 per rank), 1 layer, 1 token x 4 entries, 16-byte rows.
  EngramBenchShape s = shape(4, 1, 8, 16, 1, 4);
  std::vector<std::vector<int32_t>> all = {
      {0, 2, 4, 6},  // rank 0 reads from ranks 0, 1 (its node) and 2, 3
      {4, 4, 5, 1},  // rank 1: 3 rows from rank 2
      {0, 0, 0, 7},  // rank 2: 3 rows from rank 0, one from rank 3 (its node)
      {6, 6, 6, 6},  // rank 3: its own rows only
  };
  const auto t = engramNetTraffic(s, all, 2);
  BOOST_REQUIRE(t.size() == 1u);
  const std::vector<double> in = {2 * 16, 3 * 16, 3 * 16, 0}, out = {3 * 16, 0, 4 * 16, 1 * 16};
  BOOST_TEST(t[0].inBytes == in, boost::test_tools::per_element());
  BOOST_TEST(t[0].outBytes == out, boost::test_tools::per_element());
  BOOST_TEST(t[0].maxBytes == 64.0);
  BOOST_TEST(t[0].maxRank == 2);
  // One node: nothing crosses.
  BOOST_TEST(engramNetTraffic(s, all, 4)[0].maxBytes == 0.0);
}

BOOST_AUTO_TEST_CASE(floors) {
  std::vector<EngramLayerTraffic> t(2);
  t[0].maxBytes = 50e6;   // 50 MB at 50 GB/s: 1000 us
  t[1].maxBytes = 25e6;
  const EngramFloor f = engramNetFloor(t, 50, 3);
  BOOST_TEST(int(f.kind) == int(EngramFloorKind::Network));
  BOOST_TEST(f.layerUs[0] == 1006.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(f.layerUs[1] == 506.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(f.fetchUs() == 1512.0, boost::test_tools::tolerance(1e-9));
  BOOST_TEST(int(engramNetFloor(t, 0, 3).kind) == int(EngramFloorKind::None));
  const EngramFloor m = engramMemFloor(3, 64e6, 40, 55, 8);
  BOOST_TEST(int(m.kind) == int(EngramFloorKind::Memory));
  BOOST_TEST(m.layerUs.size() == 3u);
  BOOST_TEST(m.layerUs[2] == 40.0);
  BOOST_TEST(m.fetchUs() == 120.0);
  BOOST_TEST(engramMemFloor(3, 64e6, 0, 55, 8).layerUs[0] == 55.0);
  BOOST_TEST(int(engramMemFloor(3, 64e6, 0, 0, 8).kind) == int(EngramFloorKind::None));
}

BOOST_AUTO_TEST_CASE(shape_of_the_options) {
  Options o;
  o.algo = Algo::Engram;
  std::string why;
  EngramBenchShape s = engramShapeOf(o, 3, &why);
  BOOST_TEST(why == "");
  BOOST_TEST(s.numRows == (int64_t(1) << 20) / 3 * 3);
  BOOST_TEST((s.layers == 4 && s.tokens == 4096 && s.entries == 16 && s.rowBytes == 1024u));
  o.engramRows = 1000;
  s = engramShapeOf(o, 8, &why);
  BOOST_TEST(s.numRows == 1000);
  BOOST_TEST(why == "");
  engramShapeOf(o, 3, &why);
  BOOST_TEST(why.find("--engram-rows 1000 is not a positive multiple of the 3 ranks") == 0, why);
  o.engramRows = 4;
  engramShapeOf(o, 8, &why);
  BOOST_TEST(why != "");
}
