#include "rules.h"

#include <cctype>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "nccl.h"
#include "nccl_common.h"
#include "nccl_tuner.h"
#include "tuner/cost_table.h"

namespace epx::plugin::tuner {

namespace {

const char* const kCollectives[] = {"broadcast", "reduce", "allgather", "reducescatter", "allreduce"};
const char* const kAlgorithms[] = {"tree", "ring", "collnet_direct", "collnet_chain",
                                   "nvls", "nvls_tree", "pat"};
const char* const kProtocols[] = {"ll", "ll128", "simple"};

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

template <size_t N>
int lookup(const char* const (&names)[N], const std::string& word) {
  for (size_t i = 0; i < N; ++i)
    if (word == names[i]) return static_cast<int>(i);
  return -1;
}

bool parseNumber(std::string_view s, bool allowSuffix, uint64_t* out) {
  if (s.empty()) return false;
  uint64_t value = 0;
  size_t i = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i) {
    if (value > (UINT64_MAX - 9) / 10) return false;
    value = value * 10 + static_cast<uint64_t>(s[i] - '0');
  }
  if (i == 0) return false;
  if (i < s.size()) {
    if (!allowSuffix || i + 1 != s.size()) return false;
    int shift = 0;
    switch (std::toupper(static_cast<unsigned char>(s[i]))) {
      case 'K': shift = 10; break;
      case 'M': shift = 20; break;
      case 'G': shift = 30; break;
      default: return false;
    }
    if (value > (UINT64_MAX >> shift)) return false;
    value <<= shift;
  }
  *out = value;
  return true;
}

bool parseRange(std::string_view s, bool allowSuffix, Range* out) {
  Range r;
  if (s == "*") {
    *out = r;
    return true;
  }
  size_t dash = s.find('-');
  if (dash == std::string_view::npos) {
    if (!parseNumber(s, allowSuffix, &r.lo)) return false;
    r.hi = r.lo;
  } else {
    std::string_view lo = s.substr(0, dash), hi = s.substr(dash + 1);
    if (lo.empty() && hi.empty()) return false;
    if (!lo.empty() && !parseNumber(lo, allowSuffix, &r.lo)) return false;
    if (!hi.empty() && !parseNumber(hi, allowSuffix, &r.hi)) return false;
    if (r.lo > r.hi) return false;
  }
  *out = r;
  return true;
}

}  // namespace

const char* algorithmName(int a) { return a >= 0 && a < 7 ? kAlgorithms[a] : "?"; }
const char* protocolName(int p) { return p >= 0 && p < 3 ? kProtocols[p] : "?"; }
const char* collectiveName(int c) { return c >= 0 && c < 5 ? kCollectives[c] : (c == -1 ? "*" : "?"); }

ParseResult parseRules(std::string_view text) {
  ParseResult result;
  std::istringstream in{std::string(text)};
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    std::string body = line.substr(0, line.find('#'));
    std::istringstream fields(body);
    std::vector<std::string> f;
    for (std::string w; fields >> w;) f.push_back(w);
    if (f.empty()) continue;
    auto error = [&](const std::string& what) {
      result.errors.push_back("line " + std::to_string(number) + ": " + what + " in \"" + line + "\"");
    };
    if (f.size() < 6 || f.size() > 7) {
      error("expected 6 or 7 fields (collective bytes ranks nodes algorithm protocol [channels]), got " +
            std::to_string(f.size()));
      continue;
    }
    Rule rule;
    rule.line = number;
    rule.text = line;
    std::string coll = lower(f[0]);
    rule.collective = coll == "*" ? -1 : lookup(kCollectives, coll);
    if (coll != "*" && rule.collective < 0) {
      error("unknown collective '" + f[0] + "'");
      continue;
    }
    if (!parseRange(f[1], true, &rule.bytes)) {
      error("bad byte range '" + f[1] + "'");
      continue;
    }
    if (!parseRange(f[2], false, &rule.ranks)) {
      error("bad rank count '" + f[2] + "'");
      continue;
    }
    if (!parseRange(f[3], false, &rule.nodes)) {
      error("bad node count '" + f[3] + "'");
      continue;
    }
    rule.algorithm = lookup(kAlgorithms, lower(f[4]));
    if (rule.algorithm < 0) {
      error("unknown algorithm '" + f[4] + "'");
      continue;
    }
    rule.protocol = lookup(kProtocols, lower(f[5]));
    if (rule.protocol < 0) {
      error("unknown protocol '" + f[5] + "'");
      continue;
    }
    if (f.size() == 7) {
      uint64_t ch = 0;
      if (!parseNumber(f[6], false, &ch) || ch > 1024) {
        error("bad channel count '" + f[6] + "'");
        continue;
      }
      rule.channels = static_cast<int>(ch);
    }
    result.rules.push_back(rule);
  }
  return result;
}

ParseResult loadRulesFile(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    ParseResult r;
    r.errors.push_back("rules file " + path + " is a directory");
    return r;
  }
  std::ifstream in(path);
  if (!in) {
    ParseResult r;
    r.errors.push_back("cannot open rules file " + path);
    return r;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  return parseRules(buffer.str());
}

std::vector<size_t> matchingRules(const std::vector<Rule>& rules, int collective, size_t bytes,
                                  size_t nRanks, size_t nNodes) {
  std::vector<size_t> out;
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule& r = rules[i];
    if (r.collective != -1 && r.collective != collective) continue;
    if (!r.bytes.contains(bytes) || !r.ranks.contains(nRanks) || !r.nodes.contains(nNodes)) continue;
    out.push_back(i);
  }
  return out;
}

int applyRules(const std::vector<Rule>& rules, int collective, size_t bytes, size_t nRanks,
               size_t nNodes, float* table, int numAlgo, int numProto, int* nChannels) {
  for (size_t i : matchingRules(rules, collective, bytes, nRanks, nNodes)) {
    const Rule& r = rules[i];
    if (!makeCheapest(table, numAlgo, numProto, r.algorithm, r.protocol)) continue;  // not allowed here
    if (r.channels > 0 && nChannels != nullptr) *nChannels = r.channels;
    return static_cast<int>(i);
  }
  return -1;
}

}  // namespace epx::plugin::tuner
