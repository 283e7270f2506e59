#include "net/verbs_hca_filter.h"

#include <cctype>

namespace epx::plugin::verbs {

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

bool nameMatches(const HcaFilter& f, const HcaFilterEntry& e, std::string_view name) {
  if (f.exact) return name == e.name;
  return name.substr(0, e.name.size()) == e.name;
}

}  // namespace

std::string parseHcaFilter(std::string_view text, HcaFilter* out) {
  HcaFilter f;
  text = trim(text);
  if (!text.empty() && text.front() == '^') f.exclude = true, text.remove_prefix(1);
  if (!text.empty() && text.front() == '=') f.exact = true, text.remove_prefix(1);
  while (!text.empty()) {
    const size_t comma = text.find(',');
    std::string_view item = trim(text.substr(0, comma));
    text = comma == std::string_view::npos ? std::string_view{} : text.substr(comma + 1);
    if (item.empty()) continue;
    HcaFilterEntry e;
    const size_t colon = item.find(':');
    if (colon != std::string_view::npos) {
      std::string_view port = trim(item.substr(colon + 1));
      item = trim(item.substr(0, colon));
      if (item.empty()) return "empty device name before ':" + std::string(port) + "'";
      int p = 0;
      if (port.empty() || port.size() > 3) return "port '" + std::string(port) + "' of " + std::string(item) + " is not a number in 1..255";
      for (char c : port) {
        if (!std::isdigit(static_cast<unsigned char>(c)))
          return "port '" + std::string(port) + "' of " + std::string(item) + " is not a number in 1..255";
        p = p * 10 + (c - '0');
      }
      if (p < 1 || p > 255) return "port '" + std::string(port) + "' of " + std::string(item) + " is not a number in 1..255";
      e.port = p;
    }
    e.name = std::string(item);
    f.entries.push_back(std::move(e));
  }
  *out = std::move(f);
  return {};
}

bool hcaFilterAccepts(const HcaFilter& filter, std::string_view name, int port) {
  if (filter.entries.empty()) return true;
  bool listed = false;
  for (const HcaFilterEntry& e : filter.entries)
    if (nameMatches(filter, e, name) && (e.port < 0 || e.port == port)) listed = true;
  return filter.exclude ? !listed : listed;
}

}  // namespace epx::plugin::verbs
