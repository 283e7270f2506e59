// What the completion session of an op (session.cuh, OpSession) needs besides the transport:
// its device state and the GIN rows expected so far. Used by the EP dispatch / combine (and the
// layout's sequence number) and by the bucket collectives. Plain struct (host C++ includes it).
#pragma once
#include <cstdint>

#include "epx/device/protocol.h"

namespace epx::dev {

enum OpKind : int { kOpDispatch = 0, kOpCombine = 1, kNumOpKinds = 2 };
// Running totals of SessionArgs::arrived: one per op kind, then hybrid forwarding's two (records
// a forwarder received from each rail peer, partials it received from each rank of its node).
enum ArrivedKind : int { kArrivedFwdDispatch = kNumOpKinds, kArrivedFwdCombine = kNumOpKinds + 1, kNumArrivedKinds = kNumOpKinds + 2 };
// Grid-wide steps of hybrid forwarding that the last CTA completes (GroupState::fwdCtas).
enum FwdStep : int { kFwdRecordsStaged = 0, kFwdRowsWritten = 1, kFwdPartialsSent = 2, kNumFwdSteps = 3 };

// CTAs whose staging progress a kernel can follow chunk by chunk (GroupState::stageProgress).
constexpr int kStageProgressCtas = 32;

// The session's device state (device memory; an EP group's, or a bucket's). Sequence numbers:
// every op reads seq+1 and its last CTA stores it, so CUDA graph replays keep counting without
// host involvement.
struct GroupState {
  uint32_t layoutSeq;
  uint32_t opSeq[kNumOpKinds];
  uint32_t doneCtas[kNumOpKinds];
  uint32_t stagedCtas[kNumOpKinds][kMaxPutRounds];  // CTAs done staging a put round (OpSession::lastToStage)
  uint32_t fwdCtas[kNumFwdSteps];                   // CTAs done with a hybrid forwarding step (FwdStep)
  uint32_t fwdSumCtas[kMaxPutRounds];               // CTAs done summing a round of node sums (combine)
  // CTA b's staged chunks of the running op, tagged with its sequence number: (seq << 32) | chunks
  // (the bucket reduce-scatter's BF16 conversion; monotonic, so never reset).
  uint64_t stageProgress[kStageProgressCtas];
};

struct SessionArgs {
  GroupState* state;
  uint32_t* arrived;  // [kNumArrivedKinds][nRanks] rows (records) expected so far from each source (cumulative)
  int nCtas;          // CTAs of the session's kernels, equal on every rank
};

}  // namespace epx::dev
