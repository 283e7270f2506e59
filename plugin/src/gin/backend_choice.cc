#include "gin/backend_choice.h"

namespace epx::plugin::gin {

bool parseBackendWish(const std::string& text, BackendWish* out) {
  if (text.empty() || text == "auto") *out = BackendWish::Auto;
  else if (text == "ipc") *out = BackendWish::Ipc;
  else if (text == "verbs") *out = BackendWish::Verbs;
  else return false;
  return true;
}

const char* backendName(GinBackend b) { return b == GinBackend::Ipc ? "ipc" : "verbs"; }

std::string chooseBackend(const std::vector<BackendOffer>& offers, GinBackend* out) {
  if (offers.empty()) return "no ranks";
  int noIpc = -1, noVerbs = -1, otherHost = -1;
  for (size_t j = 0; j < offers.size(); ++j) {
    const int r = static_cast<int>(j);
    if (!offers[j].ipc && noIpc < 0) noIpc = r;
    if (!offers[j].verbs && noVerbs < 0) noVerbs = r;
    if (offers[j].hostHash != offers[0].hostHash && otherHost < 0) otherHost = r;
  }
  if (noIpc < 0 && otherHost < 0) {
    *out = GinBackend::Ipc;
    return {};
  }
  if (noVerbs < 0) {
    *out = GinBackend::Verbs;
    return {};
  }
  std::string ipcWhy = noIpc >= 0 ? "rank " + std::to_string(noIpc) + " offers no ipc backend"
                                  : "rank " + std::to_string(otherHost) + " runs on another host than rank 0";
  return "no GIN backend serves every rank: ipc: " + ipcWhy + "; verbs: rank " + std::to_string(noVerbs) +
         " offers no verbs backend (no usable RDMA port, or EPX_GIN_BACKEND)";
}

}  // namespace epx::plugin::gin
