// Which GIN backend a context uses, decided at connect from what every rank offered in its
// handle: "ipc" when every rank offers it and all run on one host (same boot id), else "verbs"
// when every rank offers it, else an error naming the rank that lacks both. Every rank sees the
// same handles, so all decide alike. EPX_GIN_BACKEND (auto, ipc, verbs) only limits what a rank
// offers. Pure logic, unit-tested.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace epx::plugin::gin {

enum class GinBackend { Ipc, Verbs };
enum class BackendWish { Auto, Ipc, Verbs };

// Parses EPX_GIN_BACKEND ("" = auto); false for anything else.
bool parseBackendWish(const std::string& text, BackendWish* out);
const char* backendName(GinBackend b);

struct BackendOffer {
  bool ipc = false;
  bool verbs = false;
  uint64_t hostHash = 0;  // ipcHostHash() of the rank's host
};

// "" and *out set, or why no backend serves all ranks.
std::string chooseBackend(const std::vector<BackendOffer>& offers, GinBackend* out);

}  // namespace epx::plugin::gin
