// Internal: bounded whole-file reads with one-line errors.
#pragma once
#include <string>

namespace epx::topo::detail {

/// Reads `path` into `out`. Returns "" or a one-line error ("cannot open …", "… is empty", "too large").
std::string readSmallFile(const std::string& path, std::string* out);

/// Reads a short sysfs attribute (first line, trimmed); "" if absent.
std::string readSysfsLine(const std::string& path);

}  // namespace epx::topo::detail
