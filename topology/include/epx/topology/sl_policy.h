// epx topology: InfiniBand service level (SL) and RoCE traffic class (TC) policy.
//
// Precedence, highest first (one rule for both values):
//   SL: EPX_OVERRIDE_SL > group SL > EPX_DEFAULT_SL > NCCL_IB_SL > 0
//   TC: EPX_OVERRIDE_TC > group TC > EPX_DEFAULT_TC > NCCL_IB_TC > 0
// SL (0..15) is used on InfiniBand ports (ibv_ah_attr.sl); TC (0..255, the IP ToS byte, DSCP =
// TC>>2) on RoCE ports (ibv_ah_attr.grh.traffic_class). EFA ports use neither.
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "epx/topology/model.h"
#include "epx/topology/result.h"

namespace epx::topo {

enum class SlSource { Override, Group, Default, Nccl, Builtin };
const char* toString(SlSource s);

/// One resolved value and where it came from.
struct SlValue {
  int value = 0;
  SlSource source = SlSource::Builtin;
  std::string origin;  ///< "EPX_OVERRIDE_SL", "group", "EPX_DEFAULT_SL", "NCCL_IB_SL", "built-in default"
};

struct SlPolicy {
  SlValue sl;  ///< InfiniBand service level, 0..15
  SlValue tc;  ///< RoCE traffic class, 0..255
};

/// Inputs: the group's own values (from the caller's API) and an environment lookup.
struct SlInputs {
  std::optional<int> groupSl;
  std::optional<int> groupTc;
  /// Returns the variable's value or nullptr; defaults to ::getenv.
  std::function<const char*(const char*)> getenv;
};

inline constexpr int kMaxIbSl = 15;
inline constexpr int kMaxTrafficClass = 255;

/// Resolves both values. A non-integer or out-of-range value at any level is an error naming the
/// variable and the range, even if a higher level would win (a typo must not hide).
Result<SlPolicy> resolveSlPolicy(const SlInputs& in);

/// What applies to one NIC port: "sl" (InfiniBand), "tc" (RoCE) or "none" (EFA/unknown).
const char* slFieldFor(const Nic& nic);

}  // namespace epx::topo
