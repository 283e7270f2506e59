// NCCL_IB_HCA-style device filter for the verbs transport (EPX_IB_HCA, else NCCL_IB_HCA).
// Pure logic, unit-tested (tests/plugin/test_verbs_logic.cc).
//
// Syntax: a comma-separated list of `name[:port]`. A leading '^' turns the list into an exclude
// list; a leading '=' (after '^' when both) requires exact names instead of name prefixes. An
// entry without a port matches every port of the device. An empty filter accepts everything.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace epx::plugin::verbs {

struct HcaFilterEntry {
  std::string name;
  int port = -1;  // -1: any port
};

struct HcaFilter {
  bool exclude = false;
  bool exact = false;
  std::vector<HcaFilterEntry> entries;
};

// Parses a filter. Returns "" when valid, else why not (a port that is not a number in 1..255,
// an empty name before ':').
std::string parseHcaFilter(std::string_view text, HcaFilter* out);

// Whether port `port` of device `name` passes the filter.
bool hcaFilterAccepts(const HcaFilter& filter, std::string_view name, int port);

}  // namespace epx::plugin::verbs
