#include "file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

#include "epx/topology/load.h"

namespace epx::topo::detail {

std::string readSmallFile(const std::string& path, std::string* out) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return path + ": " + std::strerror(errno);
  if (S_ISDIR(st.st_mode)) return path + ": is a directory";
  // Only regular files: a FIFO or device could block forever.
  if (!S_ISREG(st.st_mode)) return path + ": not a regular file";
  if (static_cast<size_t>(st.st_size) > kMaxTopologyFileBytes)
    return path + ": file too large (" + std::to_string(st.st_size) + " bytes, limit " +
           std::to_string(kMaxTopologyFileBytes) + ")";
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return path + ": " + std::strerror(errno);
  out->clear();
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) {
    out->append(buf, n);
    if (out->size() > kMaxTopologyFileBytes) { std::fclose(f); return path + ": file too large"; }
  }
  bool err = std::ferror(f);
  std::fclose(f);
  if (err) return path + ": read error";
  if (out->empty()) return path + ": file is empty";
  return "";
}

std::string readSysfsLine(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "r");
  if (!f) return "";
  char buf[256] = {0};
  if (!std::fgets(buf, sizeof buf, f)) buf[0] = 0;
  std::fclose(f);
  std::string s(buf);
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ' || s.back() == '\r')) s.pop_back();
  return s;
}

}  // namespace epx::topo::detail
