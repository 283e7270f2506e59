// Plain structs of the low-latency (LL) kernels: group-owned device state, a handle's route and the
// kernel arguments. No CUDA types beyond pointers (host C++ includes it).
#pragma once
#include <cstdint>

#include "epx/device/ep_args.h"
#include "epx/device/ll_layout.h"

namespace epx::dev {

// Which halves of an LL call a launch runs (the public NCCL_EP_LL_SEND / NCCL_EP_LL_RECV bits).
enum LlHalf : int { kLlHalfSend = 1, kLlHalfRecv = 2 };

// Group-owned LL state (device memory, zeroed at creation). Sequence numbers count the send halves
// of each op kind from 1; the bank of op #seq is seq & 1. Every CTA of a send half reads seq + 1,
// the last CTA to finish stores it, so CUDA-graph replays keep alternating banks with no host.
struct LlState {
  uint32_t seq[kLlNumOps];       // last op sent
  uint32_t sentCtas[kLlNumOps];  // CTAs done with the current send half (the last one signals)
  uint32_t recvCtas[kLlNumOps];  // CTAs done with the current receive half (the last one frees the bank)
};

struct LlGroupDev {
  LlLayout l;
  LlState* state;
  uint32_t* countSeen;  // [kLlBanks][Le][nRanks] running totals of the dispatch count words
};

// A handle's LL route (device memory owned by the handle, sized by the group's maxima).
struct LlRoute {
  int32_t* tokExpert;    // [maxTokens, K] validated global expert of slot k, or -1 (masked, invalid, repeated)
  int32_t* tokSlot;      // [maxTokens, K] row of (token, k) among this rank's tokens of that expert
  int32_t* rowSrc;       // [Le, rowsPerExpert, 2] (source rank, source slot) of each dispatch output row
  int32_t* srcStart;     // [Le, nRanks + 1] exclusive prefix of the rows received from each source
  int32_t* expertCount;  // [Le] rows received per local expert
  int32_t* stageStart;   // [numExperts + 1] first dispatch staging row of each global expert (GIN
                         // landing order: combine finds a GIN expert's rows by it)
  uint32_t* seq;         // [kLlNumOps] sequence number of this handle's last send half
};

struct LlDispatchArgs {
  LinkArgs link;
  EpShape shape;
  LlGroupDev g;
  LlRoute r;
  int halves;            // LlHalf bits
  const uint16_t* x;     // [T, hidden] BF16
  const void* topkIdx;   // [T, K] int32 or int64
  int idxIs64;
  int numTokens;
  int fp8;               // cast to FP8 e4m3 with one FP32 scale per 128 channels
  int roundScale;        // FP8: scales rounded up to powers of two (UE8M0)
  char* recvX;           // [Le, rowsPerExpert, hidden] BF16 or FP8
  float* recvScales;     // FP8: [Le, rowsPerExpert, hidden / 128]
  int32_t* recvCount;    // [Le]
  int32_t* recvSrcInfo;  // optional [Le, rowsPerExpert, 3]: source rank, source token, top-k slot
};

struct LlCombineArgs {
  LinkArgs link;
  EpShape shape;
  LlGroupDev g;
  LlRoute r;
  int halves;
  int zeroCopy;              // x is the window's combineSend region (no staging copy)
  const uint16_t* x;         // [Le, rowsPerExpert, hidden] BF16 expert outputs
  const float* topkWeights;  // [T, K] gate weights applied at the source
  int numTokens;             // T of the dispatch this combine returns
  uint16_t* out;             // [T, hidden] BF16
};

}  // namespace epx::dev
