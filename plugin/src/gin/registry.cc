#include "gin/registry.h"

namespace epx::plugin::gin {

Registration* Registry::add(uintptr_t base, size_t size, Placement placement) {
  auto r = std::make_unique<Registration>();
  r->index = static_cast<uint32_t>(regs_.size());
  r->base = base;
  r->size = size;
  r->placement = placement;
  r->peerBase.assign(static_cast<size_t>(nRanks_), 0);
  r->peerSize.assign(static_cast<size_t>(nRanks_), 0);
  r->peerKey.assign(static_cast<size_t>(nRanks_), 0);
  r->peerBase[static_cast<size_t>(rank_)] = base;
  r->peerSize[static_cast<size_t>(rank_)] = size;
  regs_.push_back(std::move(r));
  return regs_.back().get();
}

Registration* Registry::find(const void* handle) const {
  for (const auto& r : regs_)
    if (r.get() == handle && r->live) return r.get();
  return nullptr;
}

Registration* Registry::byIndex(uint32_t index) const {
  if (index >= regs_.size() || !regs_[index]->live) return nullptr;
  return regs_[index].get();
}

bool Registry::remove(const void* handle) {
  Registration* r = find(handle);
  if (r == nullptr) return false;
  r->live = false;
  return true;
}

namespace {
bool rangeInside(uint64_t offset, size_t size, size_t regionSize) {
  return offset <= regionSize && size <= regionSize - offset;
}
}  // namespace

std::string translateSource(const Registry& reg, const void* handle, uint64_t offset, size_t size,
                            uintptr_t* address) {
  const Registration* r = reg.find(handle);
  if (r == nullptr) return "source is not a registered GIN region";
  if (!rangeInside(offset, size, r->size))
    return "source range [" + std::to_string(offset) + ", +" + std::to_string(size) +
           ") leaves registration " + std::to_string(r->index) + " of " + std::to_string(r->size) + " bytes";
  *address = r->base + offset;
  return {};
}

std::string translateDestination(const Registry& reg, const void* handle, uint64_t offset,
                                 size_t size, int peer, uintptr_t* address) {
  const Registration* r = reg.find(handle);
  if (r == nullptr) return "destination is not a registered GIN region";
  if (peer < 0 || peer >= reg.nRanks()) return "destination rank " + std::to_string(peer) + " out of range";
  size_t p = static_cast<size_t>(peer);
  if (r->peerBase[p] == 0)
    return "registration " + std::to_string(r->index) + " of rank " + std::to_string(peer) +
           " is not mapped here (" + (r->ownerApplied ? "owner-applied region" : "host memory") + ")";
  if (!rangeInside(offset, size, r->peerSize[p]))
    return "destination range [" + std::to_string(offset) + ", +" + std::to_string(size) +
           ") leaves rank " + std::to_string(peer) + "'s registration " + std::to_string(r->index) +
           " of " + std::to_string(r->peerSize[p]) + " bytes";
  *address = r->peerBase[p] + offset;
  return {};
}

}  // namespace epx::plugin::gin
