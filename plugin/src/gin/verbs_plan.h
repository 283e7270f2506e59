// GIN verbs backend: the work requests of one GIN operation, without verbs calls. Pure logic,
// unit-tested (tests/plugin/test_gin_verbs.cc); verbs_backend.cc turns them into ibv_send_wr.
//
// Every op goes to one RC QP, the one connected to the target rank (a loopback QP for this rank),
// so the NIC executes its requests in posting order:
//   put             RDMA WRITE(s) of the payload; a put of 0 bytes is one empty RDMA WRITE;
//   put with signal the WRITE(s), then an ATOMIC FETCH_AND_ADD of the signal's delta into the
//                   peer's 64-bit signal word: the responder executes it after the writes before it
//                   on the QP, so the signal never becomes visible before the data;
//   signal          the FETCH_AND_ADD alone (NCCL sends it as a put of 0 bytes with a signal);
//   get             RDMA READ(s) from the peer's region into this rank's (NCCL 2.30+, planGinGet).
// Only the last request of an op is signalled: its completion (the local CQE) completes the op,
// which is when NCCL bumps the op's counter and advances the peer's flush index.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "gin/registry.h"

namespace epx::plugin::gin {

// Largest payload of one RDMA WRITE: a larger put is cut into writes of this size (ibv_sge's
// length is 32-bit; NICs cap a message at 2 GiB).
constexpr size_t kVerbsMaxWriteBytes = size_t(1) << 30;

struct VerbsWr {
  enum Kind { Write, FetchAdd, Read } kind = Write;
  uint64_t localAddr = 0;  // source (Write) or where the old value / read data lands
  uint32_t length = 0;
  uint32_t lkey = 0;
  uint64_t remoteAddr = 0;
  uint32_t rkey = 0;
  uint64_t add = 0;  // FetchAdd: the signal's delta
  bool signaled = false;
};

struct GinOp {
  uint64_t srcOff = 0;
  const void* src = nullptr;  // NCCL's handles (ginHandle == mhandle)
  size_t size = 0;
  uint64_t dstOff = 0;
  const void* dst = nullptr;
  int peer = 0;
  bool withSignal = false;
  uint64_t signalOff = 0;
  const void* signal = nullptr;
  uint64_t signalValue = 0;
  uint32_t signalOp = 0;
};

// Where an atomic's old value goes: an 8-byte registered word of this rank (never read).
struct AtomicSink {
  uint64_t addr = 0;
  uint32_t lkey = 0;
};

// A one-sided get: `size` bytes of rank `peer`'s registration that corresponds to this rank's
// `remote` handle, at remoteOff, into this rank's `local` registration at localOff — RDMA READ(s)
// of at most kVerbsMaxWriteBytes each, the last one signalled (its CQE: every byte has landed).
struct GinGet {
  uint64_t remoteOff = 0;
  const void* remote = nullptr;
  size_t size = 0;
  uint64_t localOff = 0;
  const void* local = nullptr;
  int peer = 0;
};
std::string planGinGet(const Registry& reg, const GinGet& get, std::vector<VerbsWr>* wrs);

// The work requests of `op`, in posting order, the last one signalled. "" on success, else why
// the op cannot be done (unknown handle, range outside a registration, bad signal).
std::string planGinOp(const Registry& reg, const GinOp& op, const AtomicSink& sink, std::vector<VerbsWr>* wrs);

}  // namespace epx::plugin::gin
