// The registered window of an expert load-balancing object (ncclEpLb, epx/lb.h) and its kernels'
// arguments. Laid out by device/ for the kernels and the host (sizing, CPU tests); identical on
// every rank (the plan is agreed at creation).
//   flags      u32 [kNumFlagKinds][nRanks] (the protocol session's words, window_layout.h)
//   slots      per weight tensor: [numSlots][rowBytes], this rank's redundant experts' weights
//   slotGrads  per gradient tensor: [numSlots][rowElems] FP32, the replicas' gradients
//   stage      network peers and weight tensors: [CTA][kLbStageBuffers][chunkBytes], where the
//              prefetch copies a chunk of an original row before putting it to a network holder
//   scratch    network peers and gradient tensors: [CTA][kLbLaneSets][kLbSetLanes][laneBytes]
//              (two sets of chunkBytes), where the gradient reduction gets pieces of network
//              replicas' rows into one set while it adds the other's
// Both calls run through the protocol session's slot kLbSessionKind: a call is op #seq on every
// rank, ready = "this rank entered op #seq" (its slots may be written, its slot gradients are
// final), arrival = "a source finished writing into / reading from this rank".
#pragma once
#include <cstdint>

#include "epx/device/chunking.h"
#include "epx/device/link_args.h"
#include "epx/device/session_args.h"
#include "epx/device/window_layout.h"

namespace epx::dev {

constexpr int kLbMaxTensors = 8;
constexpr int kLbMaxSlots = 256;
constexpr int kLbMaxCtas = 32;
constexpr uint64_t kLbRowAlign = 256;
// A CTA alternates between two stage buffers: it copies a chunk into one while the other's put is
// on the wire (the buffer's GIN counter says when its put left).
constexpr int kLbStageBuffers = 2;
// The gradient reduction's lanes: a CTA gets pieces of network replicas into one set of
// kLbSetLanes lanes while it adds the pieces the other set got (one flush per step). A batch of
// replicas fills a set: kLbSetLanes / replicas pieces of each, so a set always holds up to one
// chunk. The mapping is walked in batches of at most kLbSetLanes replicas.
constexpr int kLbLaneSets = 2;
constexpr int kLbSetLanes = 4;
constexpr int kLbGetLanes = kLbLaneSets * kLbSetLanes;

struct LbLayout {
  uint64_t flags;
  uint64_t totalBytes;
  int numSlots;
  int numWeightTensors, numGradTensors;
  uint64_t weightRowBytes[kLbMaxTensors], slots[kLbMaxTensors];
  uint64_t gradRowElems[kLbMaxTensors], slotGrads[kLbMaxTensors];
  uint64_t stage;      // 0 without network peers or weight tensors
  uint64_t scratch;    // 0 without network peers or gradient tensors
  uint64_t chunkBytes;  // stage buffer bytes
  uint64_t laneBytes;   // scratch lane bytes (a multiple of 16): a set of lanes is about one chunk
};

EPX_HD uint64_t lbLaneBytes(uint64_t chunkBytes) {
  const uint64_t b = chunkBytes / uint64_t(kLbSetLanes) / kVecBytes * kVecBytes;
  return b > 0 ? b : kVecBytes;
}

// Row sizes as planned (weight rows a multiple of 16 bytes, gradient rows of 4 elements; checked
// by the host first).
inline LbLayout layoutLb(const uint64_t* weightRowBytes, int numWeightTensors, const uint64_t* gradRowElems,
                         int numGradTensors, int numSlots, int nRanks, int numCtas, uint64_t chunkBytes,
                         bool ginPeers) {
  LbLayout l{};
  l.numSlots = numSlots;
  l.numWeightTensors = numWeightTensors;
  l.numGradTensors = numGradTensors;
  l.chunkBytes = chunkBytes;
  l.laneBytes = lbLaneBytes(chunkBytes);
  RegionCursor cur;
  l.flags = cur.take(uint64_t(kNumFlagKinds) * uint64_t(nRanks) * 4, kWindowRegionAlign);
  for (int t = 0; t < numWeightTensors; ++t) {
    l.weightRowBytes[t] = weightRowBytes[t];
    l.slots[t] = cur.take(uint64_t(numSlots) * weightRowBytes[t], kLbRowAlign);
  }
  for (int t = 0; t < numGradTensors; ++t) {
    l.gradRowElems[t] = gradRowElems[t];
    l.slotGrads[t] = cur.take(uint64_t(numSlots) * gradRowElems[t] * 4, kLbRowAlign);
  }
  if (ginPeers && numWeightTensors > 0)
    l.stage = cur.take(uint64_t(numCtas) * kLbStageBuffers * chunkBytes, kLbRowAlign);
  if (ginPeers && numGradTensors > 0)
    l.scratch = cur.take(uint64_t(numCtas) * kLbGetLanes * l.laneBytes, kLbRowAlign);
  l.totalBytes = cur.total();
  return l;
}

// Where slot s of weight tensor t / gradient tensor t lives (window offset).
EPX_HD uint64_t lbSlotOffset(const LbLayout& l, int t, int s) { return l.slots[t] + uint64_t(s) * l.weightRowBytes[t]; }
EPX_HD uint64_t lbSlotGradOffset(const LbLayout& l, int t, int s) {
  return l.slotGrads[t] + uint64_t(s) * l.gradRowElems[t] * 4;
}
EPX_HD uint64_t lbStageOffset(const LbLayout& l, int cta, int buffer) {
  return l.stage + (uint64_t(cta) * kLbStageBuffers + uint64_t(buffer)) * l.chunkBytes;
}
EPX_HD uint64_t lbLaneOffset(const LbLayout& l, int cta, int lane) {
  return l.scratch + (uint64_t(cta) * kLbGetLanes + uint64_t(lane)) * l.laneBytes;
}
// GIN counters: CTA b's puts from stage buffer k count on counter k * nCtas + b (PP's scheme).
EPX_HD int lbGinCounterBase(int buffer, int nCtas) { return buffer * nCtas; }
EPX_HD int lbGinCounters(int nCtas) { return kLbStageBuffers * nCtas; }

// The one session slot of both calls (ready: kFlagReadyDispatch; arrivals: kFlagArriveDispatch).
constexpr int kLbSessionKind = kOpDispatch;

enum LbOp : int { kLbPrefetch = 0, kLbReduceGrads = 1 };

struct LbArgs {
  LinkArgs link;        // flags = LbLayout::flags
  SessionArgs session;
  LbLayout l;
  int op;               // LbOp
  const int32_t* mapping;  // [nRanks * numSlots], device
  int numExperts, localExperts;
  const char* weights[kLbMaxTensors];  // prefetch: this rank's originals [localExperts][rowBytes]
  float* grads[kLbMaxTensors];         // reduction: this rank's originals' gradients, in place
};

}  // namespace epx::dev
