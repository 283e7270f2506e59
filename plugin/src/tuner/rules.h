// Tuner rules: the EPX_TUNER_RULES file format, its parser and the first-match lookup.
//
// One rule per line, '#' starts a comment, fields separated by blanks:
//   collective  bytes  ranks  nodes  algorithm  protocol  [channels]
// collective: broadcast | reduce | allgather | reducescatter | allreduce | *
// bytes, ranks, nodes: N (exactly N), LO-HI (LO <= x <= HI), LO- (x >= LO), -HI (x <= HI) or *;
//   byte counts take the suffixes K, M, G (powers of 1024)
// algorithm: tree | ring | collnet_direct | collnet_chain | nvls | nvls_tree | pat
// protocol: ll | ll128 | simple
// channels: a positive channel cap for the operation; absent or 0 keeps NCCL's choice
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace epx::plugin::tuner {

struct Range {
  uint64_t lo = 0;
  uint64_t hi = UINT64_MAX;
  bool contains(uint64_t v) const { return lo <= v && v <= hi; }
};

struct Rule {
  int collective = -1;  // ncclFunc_t value, -1 = any
  Range bytes, ranks, nodes;
  int algorithm = 0;  // NCCL_ALGO_*
  int protocol = 0;   // NCCL_PROTO_*
  int channels = 0;   // 0 = keep NCCL's
  int line = 0;       // 1-based line in the file
  std::string text;   // the line as written, for logs
};

struct ParseResult {
  std::vector<Rule> rules;
  std::vector<std::string> errors;  // "line N: what"
};

ParseResult parseRules(std::string_view text);
ParseResult loadRulesFile(const std::string& path);

// Indices of rules matching (collective, bytes, ranks, nodes), in file order.
std::vector<size_t> matchingRules(const std::vector<Rule>& rules, int collective, size_t bytes,
                                  size_t nRanks, size_t nNodes);

const char* algorithmName(int algorithm);
const char* protocolName(int protocol);
const char* collectiveName(int collective);

// Applies the first matching rule whose (algorithm, protocol) NCCL allows for this call (its cost
// is not NCCL_ALGO_PROTO_IGNORE) by making it the cheapest entry; returns that rule's index, or -1
// when no rule applies and NCCL's choice stands. `table` is NCCL's contiguous float[numAlgo][numProto].
int applyRules(const std::vector<Rule>& rules, int collective, size_t bytes, size_t nRanks,
               size_t nNodes, float* table, int numAlgo, int numProto, int* nChannels);

}  // namespace epx::plugin::tuner
