#include <boost/test/unit_test.hpp>

#include <map>
#include <string>

#include "epx/topology/sl_policy.h"
#include "print.h"

using namespace epx::topo;

namespace {
struct Env {
  std::map<std::string, std::string> vars;
  SlInputs inputs(std::optional<int> groupSl = {}, std::optional<int> groupTc = {}) const {
    SlInputs in;
    in.groupSl = groupSl;
    in.groupTc = groupTc;
    in.getenv = [this](const char* n) -> const char* {
      auto it = vars.find(n);
      return it == vars.end() ? nullptr : it->second.c_str();
    };
    return in;
  }
};
}  // namespace

BOOST_AUTO_TEST_SUITE(sl_policy)

BOOST_AUTO_TEST_CASE(builtin_default_is_zero) {
  auto r = resolveSlPolicy(Env{}.inputs());
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  BOOST_TEST(r.value.sl.value == 0);
  BOOST_TEST(r.value.sl.source == SlSource::Builtin);
  BOOST_TEST(r.value.tc.value == 0);
}

BOOST_AUTO_TEST_CASE(precedence_each_level_beats_the_ones_below) {
  Env e;
  e.vars["NCCL_IB_SL"] = "1";
  auto r = resolveSlPolicy(e.inputs());
  BOOST_TEST(r.value.sl.value == 1);
  BOOST_TEST(r.value.sl.origin == "NCCL_IB_SL");
  e.vars["EPX_DEFAULT_SL"] = "2";
  r = resolveSlPolicy(e.inputs());
  BOOST_TEST(r.value.sl.value == 2);
  BOOST_TEST(r.value.sl.origin == "EPX_DEFAULT_SL");
  r = resolveSlPolicy(e.inputs(3));
  BOOST_TEST(r.value.sl.value == 3);
  BOOST_TEST(r.value.sl.source == SlSource::Group);
  e.vars["EPX_OVERRIDE_SL"] = "4";
  r = resolveSlPolicy(e.inputs(3));
  BOOST_TEST(r.value.sl.value == 4);
  BOOST_TEST(r.value.sl.source == SlSource::Override);
}

BOOST_AUTO_TEST_CASE(tc_has_its_own_chain_and_range) {
  Env e;
  e.vars["NCCL_IB_TC"] = "106";
  e.vars["EPX_DEFAULT_SL"] = "3";
  auto r = resolveSlPolicy(e.inputs());
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  BOOST_TEST(r.value.tc.value == 106);
  BOOST_TEST(r.value.tc.origin == "NCCL_IB_TC");
  BOOST_TEST(r.value.sl.value == 3);
  r = resolveSlPolicy(e.inputs({}, 200));
  BOOST_TEST(r.value.tc.value == 200);
  BOOST_TEST(r.value.tc.source == SlSource::Group);
}

BOOST_AUTO_TEST_CASE(out_of_range_and_garbage_are_rejected_with_a_message) {
  for (const char* bad : {"16", "-1", "abc", "3x", "", " 3", "99999999999999999999"}) {
    Env e;
    e.vars["EPX_DEFAULT_SL"] = bad;
    auto r = resolveSlPolicy(e.inputs());
    BOOST_TEST_CONTEXT("EPX_DEFAULT_SL=" << bad) {
      BOOST_TEST(!r.ok());
      BOOST_TEST(r.error.find("EPX_DEFAULT_SL") != std::string::npos);
      BOOST_TEST(r.error.find('\n') == std::string::npos);
    }
  }
  Env e;
  e.vars["EPX_OVERRIDE_TC"] = "256";
  BOOST_TEST(!resolveSlPolicy(e.inputs()).ok());
  BOOST_TEST(!resolveSlPolicy(Env{}.inputs(16)).ok());
  BOOST_TEST(!resolveSlPolicy(Env{}.inputs({}, -1)).ok());
  // A bad value is reported even when a higher level would win.
  Env hidden;
  hidden.vars["EPX_OVERRIDE_SL"] = "2";
  hidden.vars["NCCL_IB_SL"] = "20";
  BOOST_TEST(!resolveSlPolicy(hidden.inputs()).ok());
}

BOOST_AUTO_TEST_CASE(leading_zeros_are_decimal) {
  Env e;
  e.vars["EPX_OVERRIDE_SL"] = "010";
  auto r = resolveSlPolicy(e.inputs());
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  BOOST_TEST(r.value.sl.value == 10);
  e.vars["EPX_OVERRIDE_SL"] = "0x";
  BOOST_TEST(!resolveSlPolicy(e.inputs()).ok());
}

BOOST_AUTO_TEST_CASE(hex_and_bounds_are_accepted) {
  Env e;
  e.vars["EPX_DEFAULT_SL"] = "0xf";
  e.vars["EPX_DEFAULT_TC"] = "255";
  auto r = resolveSlPolicy(e.inputs());
  BOOST_TEST_REQUIRE(r.ok(), r.error);
  BOOST_TEST(r.value.sl.value == 15);
  BOOST_TEST(r.value.tc.value == 255);
}

BOOST_AUTO_TEST_CASE(sl_only_on_infiniband_tc_only_on_roce) {
  Nic ib, roce, efa;
  ib.transport = Transport::InfiniBand;
  roce.transport = Transport::RoCE;
  efa.transport = Transport::EFA;
  BOOST_TEST(std::string(slFieldFor(ib)) == "sl");
  BOOST_TEST(std::string(slFieldFor(roce)) == "tc");
  BOOST_TEST(std::string(slFieldFor(efa)) == "none");
}

BOOST_AUTO_TEST_SUITE_END()
