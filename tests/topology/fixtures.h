// Shared helpers for the topology suites: fixture paths and loaders that fail the test loudly.
#pragma once
#include <boost/test/unit_test.hpp>

#include <string>

#include "epx/topology/load.h"
#include "epx/topology/paths.h"
#include "epx/topology/rails.h"
#include "print.h"

namespace epx::topo::test {

inline std::string fixture(const std::string& name) { return std::string(EPX_TOPO_FIXTURE_DIR) + "/" + name; }

inline Topology loadNccl(const std::string& name) {
  auto r = loadNcclXml(fixture(name));
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  return r.value;
}

inline Topology loadHwloc(const std::string& name) {
  auto r = loadHwlocXml(fixture(name));
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  return r.value;
}

inline Topology loadNcclText(const std::string& xml) {
  auto r = loadNcclXmlBuffer(xml, "inline");
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  return r.value;
}

inline int nicByName(const Topology& t, const std::string& name, int port = -1) {
  for (const Nic& n : t.nics)
    if (n.name == name && (port < 0 || n.port == port)) return n.index;
  BOOST_FAIL("no NIC named " + name);
  return -1;
}

inline int gpuByBus(const Topology& t, const std::string& bus) {
  for (const Gpu& g : t.gpus)
    if (formatBusId(g.address) == bus) return g.index;
  BOOST_FAIL("no GPU at " + bus);
  return -1;
}

/// Names of the NICs a GPU's rails use, sorted.
inline std::vector<std::string> railNicNames(const Topology& t, const RailPlan& p, int gpu) {
  std::vector<std::string> v;
  for (int n : p.gpus.at(gpu).nics) v.push_back(t.nics[n].name + ":" + std::to_string(t.nics[n].port));
  std::sort(v.begin(), v.end());
  return v;
}

/// Invariants every plan must satisfy: per-card GPU load differs by at most one, every GPU has a
/// rail when any rail exists, a card's ports stay together, and no card serves a GPU twice.
inline void checkBalanced(const Topology& t, const RailPlan& p) {
  if (p.rails.empty()) return;
  size_t lo = SIZE_MAX, hi = 0;
  for (const Rail& r : p.rails) {
    lo = std::min(lo, r.gpus.size());
    hi = std::max(hi, r.gpus.size());
    for (int n : r.nics) BOOST_TEST(t.nics[n].card == r.card);
  }
  BOOST_TEST(hi - lo <= 1u);
  size_t railsLo = SIZE_MAX, railsHi = 0;
  for (const GpuRail& g : p.gpus) {
    BOOST_TEST(g.rail >= 0);
    railsLo = std::min(railsLo, g.rails.size());
    railsHi = std::max(railsHi, g.rails.size());
  }
  BOOST_TEST(railsHi - railsLo <= 1u);
}

}  // namespace epx::topo::test
