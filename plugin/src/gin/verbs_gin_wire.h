// GIN verbs backend: what ranks swap over the out-of-band TCP sockets (net/verbs_oob.h). Pure
// logic, unit-tested.
//
// connect (collective, full mesh, self included): rank i opens a socket to every rank j > i (its
// listen address is in NCCL's handle, a net/verbs_wire.h Handle) and accepts one from every j < i.
// On each socket the connecting rank sends a GinHello, the accepting rank answers with its own;
// each carries the sender's ConnInfo (one QP: the one it created for this peer, and its flush
// word as the control region). Both bring their QP up (RTR, RTS) and swap one ready byte. The
// sockets stay open: regMrSym (collective, same order on every rank) sends a GinRegInfo to every
// peer and receives one from each.
#pragma once

#include <cstdint>
#include <string>

#include "net/verbs_wire.h"

namespace epx::plugin::gin {

constexpr uint32_t kGinHelloMagic = 0x45504748;  // "EPGH"
constexpr uint32_t kGinRegMagic = 0x45504752;    // "EPGR"
// ConnInfo.fifoDepth of a GIN connection (the field must match on both ends; GIN has no FIFO).
constexpr uint32_t kGinConnInfoDepth = 1;

struct GinHello {
  uint32_t magic;
  uint32_t rank;
  uint32_t nRanks;
  uint32_t context;  // GIN context index (diagnostics: both ends must agree)
  verbs::ConnInfo info;
};

struct GinRegInfo {
  uint32_t magic;
  uint32_t index;  // registration number: the same on every rank (regMrSym order)
  uint64_t addr;   // the region's address in the sender (what its NIC accepts under rkey)
  uint64_t size;
  uint32_t rkey;
  uint32_t checksum;  // over every field above
};

void sealRegInfo(GinRegInfo& info);
// "" when `got` is a well-formed registration `index` from a peer, else why not.
std::string validateRegInfo(const GinRegInfo& got, uint32_t index);
// "" when `got` is the hello of rank `expectedRank` (< 0: any rank other than `myRank`) of a
// communicator of `nRanks` ranks, GIN context `context`; else why not.
std::string validateHello(const GinHello& got, int expectedRank, int myRank, int nRanks, int context);

}  // namespace epx::plugin::gin
