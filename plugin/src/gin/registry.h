// GIN memory registrations of one context (collComm) and the translation of NCCL's handles.
//
// regMrSym is collective and happens in the same order on every rank, so the k-th registration
// of this rank corresponds to the k-th registration of every peer. NCCL hands the plugin the
// *sender's own* handle for the destination, so a destination is translated to the peer's k-th
// registration, mapped into this process.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace epx::plugin::gin {

enum class Placement { Device, Host };

struct Registration {
  uint32_t index = 0;
  uintptr_t base = 0;  // this rank's address of the region
  size_t size = 0;
  Placement placement = Placement::Device;
  bool ownerApplied = false;  // not mappable by peers (e.g. NCCL's signal buffer): owner applies
  std::vector<uintptr_t> peerBase;  // per rank: the peer's region mapped here, 0 if not mapped
  std::vector<size_t> peerSize;
  // Verbs backend: this rank's local key of the region and every rank's remote key (peerBase is
  // then the peer's own address of its region, written by the NIC, not mapped here).
  uint32_t localKey = 0;
  std::vector<uint32_t> peerKey;
  bool live = true;  // false after deregMrSym (the index stays reserved)
};

class Registry {
 public:
  explicit Registry(int nRanks, int rank) : nRanks_(nRanks), rank_(rank) {}
  Registration* add(uintptr_t base, size_t size, Placement placement);
  // The handle NCCL got from regMrSym, or null when it is not one of ours.
  Registration* find(const void* handle) const;
  Registration* byIndex(uint32_t index) const;
  bool remove(const void* handle);
  int nRanks() const { return nRanks_; }
  int rank() const { return rank_; }
  size_t count() const { return regs_.size(); }

 private:
  int nRanks_;
  int rank_;
  std::vector<std::unique_ptr<Registration>> regs_;
};

// Where a put reads from: this rank's address of [offset, offset+size) of `handle`.
// Returns an error text when the handle is unknown or the range leaves the region.
std::string translateSource(const Registry& reg, const void* handle, uint64_t offset, size_t size,
                            uintptr_t* address);
// Where a put lands: the address, in this process, of [offset, offset+size) of rank `peer`'s
// registration that corresponds to this rank's `handle`.
std::string translateDestination(const Registry& reg, const void* handle, uint64_t offset,
                                 size_t size, int peer, uintptr_t* address);

}  // namespace epx::plugin::gin
