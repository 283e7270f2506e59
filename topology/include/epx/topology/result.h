// epx topology: a value-or-error return type (C++20 has no std::expected).
#pragma once
#include <string>
#include <utility>

namespace epx::topo {

/// A value, or a one-line error message when `error` is non-empty.
template <class T>
struct Result {
  T value{};
  std::string error;
  /// The input is well-formed but beyond a documented size limit (e.g. kMaxTopologyDevices).
  bool overLimit = false;

  bool ok() const { return error.empty(); }
  static Result fail(std::string msg) { Result r; r.error = std::move(msg); return r; }
  static Result failOverLimit(std::string msg) { Result r = fail(std::move(msg)); r.overLimit = true; return r; }
  static Result of(T v) { Result r; r.value = std::move(v); return r; }
};

}  // namespace epx::topo
