#include "epx/topology/sl_policy.h"

#include <cerrno>
#include <cstdlib>

namespace epx::topo {

const char* toString(SlSource s) {
  switch (s) {
    case SlSource::Override: return "override";
    case SlSource::Group: return "group";
    case SlSource::Default: return "default";
    case SlSource::Nccl: return "nccl";
    case SlSource::Builtin: return "builtin";
  }
  return "?";
}

namespace {

/// Parses a decimal or 0x-hex integer; rejects signs, spaces and trailing text.
bool parseInt(const char* s, long* out) {
  if (!s || !*s || *s == '-' || *s == '+' || *s == ' ') return false;
  errno = 0;
  char* end = nullptr;
  const bool hex = s[0] == '0' && (s[1] == 'x' || s[1] == 'X');
  long v = std::strtol(hex ? s + 2 : s, &end, hex ? 16 : 10);  // "010" is ten, not octal eight
  if (errno || end == s || end == s + 2 * hex || *end) return false;
  *out = v;
  return true;
}

struct Level {
  const char* origin;
  SlSource source;
  bool isEnv;
  std::optional<int> group;
};

/// Walks the levels highest first; validates every level that is set.
Result<SlValue> resolve(const SlInputs& in, const Level (&levels)[4], int max, const char* what) {
  auto getenv = in.getenv ? in.getenv : [](const char* n) -> const char* { return std::getenv(n); };
  std::optional<SlValue> chosen;
  for (const Level& l : levels) {
    long v = 0;
    if (l.isEnv) {
      const char* s = getenv(l.origin);
      if (!s) continue;
      if (!parseInt(s, &v))
        return Result<SlValue>::fail(std::string(l.origin) + "=\"" + s + "\" is not a non-negative integer (" + what + " is 0.." +
                                     std::to_string(max) + ")");
      if (v < 0 || v > max)
        return Result<SlValue>::fail(std::string(l.origin) + "=" + s + " is out of range (" + what + " is 0.." +
                                     std::to_string(max) + ")");
    } else {
      if (!l.group) continue;
      v = *l.group;
      if (v < 0 || v > max)
        return Result<SlValue>::fail(std::string("the group's value ") + std::to_string(v) + " is out of range (" + what + " is 0.." +
                                     std::to_string(max) + ")");
    }
    if (!chosen) chosen = SlValue{static_cast<int>(v), l.source, l.origin};
  }
  if (!chosen) chosen = SlValue{0, SlSource::Builtin, "built-in default"};
  return Result<SlValue>::of(*chosen);
}

}  // namespace

Result<SlPolicy> resolveSlPolicy(const SlInputs& in) {
  const Level sl[4] = {{"EPX_OVERRIDE_SL", SlSource::Override, true, {}},
                       {"group", SlSource::Group, false, in.groupSl},
                       {"EPX_DEFAULT_SL", SlSource::Default, true, {}},
                       {"NCCL_IB_SL", SlSource::Nccl, true, {}}};
  const Level tc[4] = {{"EPX_OVERRIDE_TC", SlSource::Override, true, {}},
                       {"group", SlSource::Group, false, in.groupTc},
                       {"EPX_DEFAULT_TC", SlSource::Default, true, {}},
                       {"NCCL_IB_TC", SlSource::Nccl, true, {}}};
  auto s = resolve(in, sl, kMaxIbSl, "an InfiniBand SL");
  if (!s.ok()) return Result<SlPolicy>::fail(s.error);
  auto c = resolve(in, tc, kMaxTrafficClass, "a RoCE traffic class");
  if (!c.ok()) return Result<SlPolicy>::fail(c.error);
  return Result<SlPolicy>::of(SlPolicy{s.value, c.value});
}

const char* slFieldFor(const Nic& nic) {
  switch (nic.transport) {
    case Transport::InfiniBand: return "sl";
    case Transport::RoCE: return "tc";
    default: return "none";
  }
}

}  // namespace epx::topo
