#include "gin/verbs_plan.h"

#include <algorithm>

#include "gin/signals.h"

namespace epx::plugin::gin {

std::string planGinOp(const Registry& reg, const GinOp& op, const AtomicSink& sink, std::vector<VerbsWr>* wrs) {
  wrs->clear();
  if (op.peer < 0 || op.peer >= reg.nRanks())
    return "target rank " + std::to_string(op.peer) + " out of range (" + std::to_string(reg.nRanks()) + " ranks)";
  const size_t peer = static_cast<size_t>(op.peer);
  if (op.size > 0) {
    uintptr_t src = 0, dst = 0;
    if (std::string bad = translateSource(reg, op.src, op.srcOff, op.size, &src); !bad.empty()) return bad;
    if (std::string bad = translateDestination(reg, op.dst, op.dstOff, op.size, op.peer, &dst); !bad.empty())
      return bad;
    const Registration* s = reg.find(op.src);
    const Registration* d = reg.find(op.dst);
    for (size_t done = 0; done < op.size;) {
      const size_t n = std::min(kVerbsMaxWriteBytes, op.size - done);
      VerbsWr w;
      w.kind = VerbsWr::Write;
      w.localAddr = src + done;
      w.length = static_cast<uint32_t>(n);
      w.lkey = s->localKey;
      w.remoteAddr = dst + done;
      w.rkey = d->peerKey[peer];
      wrs->push_back(w);
      done += n;
    }
  } else if (!op.withSignal) {
    wrs->push_back(VerbsWr{});  // an empty RDMA WRITE: completes in order like any put
  }
  if (op.withSignal) {
    const Registration* s = reg.find(op.signal);
    if (s == nullptr) return "signal is not a registered GIN region";
    SignalUpdate u{s->index, op.signalOff, op.signalValue, op.signalOp};
    if (std::string bad = validateSignal(u, s->size); !bad.empty()) return bad;
    if (s->peerBase[peer] == 0 || s->peerSize[peer] < s->size)
      return "rank " + std::to_string(op.peer) + "'s signal region " + std::to_string(s->index) + " is not known here";
    VerbsWr a;
    a.kind = VerbsWr::FetchAdd;
    a.localAddr = sink.addr;
    a.length = sizeof(uint64_t);
    a.lkey = sink.lkey;
    a.remoteAddr = s->peerBase[peer] + op.signalOff;
    a.rkey = s->peerKey[peer];
    a.add = signalDelta(u);
    wrs->push_back(a);
  }
  wrs->back().signaled = true;
  return {};
}

std::string planGinGet(const Registry& reg, const GinGet& get, std::vector<VerbsWr>* wrs) {
  wrs->clear();
  if (get.peer < 0 || get.peer >= reg.nRanks())
    return "source rank " + std::to_string(get.peer) + " out of range (" + std::to_string(reg.nRanks()) + " ranks)";
  uintptr_t local = 0, remote = 0;
  if (std::string bad = translateSource(reg, get.local, get.localOff, get.size, &local); !bad.empty())
    return "destination: " + bad;
  if (std::string bad = translateDestination(reg, get.remote, get.remoteOff, get.size, get.peer, &remote); !bad.empty())
    return "source: " + bad;
  const Registration* l = reg.find(get.local);
  const Registration* r = reg.find(get.remote);
  size_t done = 0;
  do {  // a get of 0 bytes is one empty READ: it completes in order like any get
    const size_t n = std::min(kVerbsMaxWriteBytes, get.size - done);
    VerbsWr w;
    w.kind = VerbsWr::Read;
    w.localAddr = local + done;
    w.length = static_cast<uint32_t>(n);
    w.lkey = l->localKey;
    w.remoteAddr = remote + done;
    w.rkey = r->peerKey[static_cast<size_t>(get.peer)];
    wrs->push_back(w);
    done += n;
  } while (done < get.size);
  wrs->back().signaled = true;
  return {};
}

}  // namespace epx::plugin::gin
