// Boost.Test needs operator<< to print enums in failure messages.
#pragma once
#include <ostream>

#include "epx/topology/model.h"
#include "epx/topology/sl_policy.h"

namespace epx::topo {
inline std::ostream& operator<<(std::ostream& o, PathType v) { return o << toString(v); }
inline std::ostream& operator<<(std::ostream& o, Transport v) { return o << toString(v); }
inline std::ostream& operator<<(std::ostream& o, LinkLayer v) { return o << toString(v); }
inline std::ostream& operator<<(std::ostream& o, NodeKind v) { return o << toString(v); }
inline std::ostream& operator<<(std::ostream& o, SlSource v) { return o << toString(v); }
inline std::ostream& operator<<(std::ostream& o, SourceKind v) { return o << static_cast<int>(v); }
}  // namespace epx::topo
