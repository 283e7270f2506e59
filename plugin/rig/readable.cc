#include "rig/readable.h"

#include <poll.h>

#include <cerrno>
#include <cstddef>

namespace epx::plugin::gin {

bool readableSockets(const std::vector<int>& fds, std::vector<int>* ready) {
  ready->clear();
  thread_local std::vector<pollfd> set;
  thread_local std::vector<int> index;
  set.clear();
  index.clear();
  for (int i = 0; i < static_cast<int>(fds.size()); ++i) {
    if (fds[static_cast<size_t>(i)] < 0) continue;
    set.push_back(pollfd{fds[static_cast<size_t>(i)], POLLIN, 0});
    index.push_back(i);
  }
  if (set.empty()) return true;
  const int n = ::poll(set.data(), set.size(), 0);
  if (n < 0) return errno == EINTR;
  for (size_t k = 0; k < set.size() && static_cast<int>(ready->size()) < n; ++k)
    if (set[k].revents != 0) ready->push_back(index[k]);
  return true;
}

}  // namespace epx::plugin::gin
