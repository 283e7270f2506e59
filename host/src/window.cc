#include "window.h"

#include <cuda_runtime.h>

#include <algorithm>
#include <map>
#include <memory>
#include <mutex>

#include "core/errors.h"
#include "devcomm.h"
#include "link.h"

namespace epx {

namespace {

std::mutex g_mutex;
std::map<ncclComm_t, std::vector<std::unique_ptr<CommWindow>>> g_windows;

std::string cudaText(cudaError_t e) { return cudaGetErrorString(e); }

}  // namespace

bool CommWindow::fits(const WindowNeed& n) const {
  return regions.largestFree(kRegionAlign) >= n.bytes && signals.largestFree() >= uint64_t(n.ginSignals) &&
         counters.largestFree() >= uint64_t(n.ginCounters);
}

std::string CommWindow::freeText() const {
  WindowNeed f;
  f.bytes = regions.largestFree(kRegionAlign);
  f.ginSignals = int(signals.largestFree());
  f.ginCounters = int(counters.largestFree());
  return describeNeed(f) + " free in one piece, of " +
         describeNeed({bytes, int(signals.size()), int(counters.size())});
}

std::vector<CommWindow*> windowsOf(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(g_mutex);
  std::vector<CommWindow*> out;
  if (auto it = g_windows.find(comm); it != g_windows.end())
    for (auto& w : it->second) out.push_back(w.get());
  return out;
}

ncclResult_t windowOpen(ncclComm_t comm, bool network, int nRanks, int lsaSize, const WindowNeed& size, bool planned,
                        const char* who, CommWindow** out) {
  *out = nullptr;
  auto w = std::make_unique<CommWindow>();
  w->comm = comm;
  w->planned = planned;
  w->bytes = (size.bytes + kRegionAlign - 1) / kRegionAlign * kRegionAlign;
  const int signals = network ? size.ginSignals : 0, counters = network ? size.ginCounters : 0;
  auto cleanup = [&](ncclResult_t r, const std::string& msg) {
    if (w->devComm) devCommDestroy(comm, w->devComm);
    if (w->window) ncclCommWindowDeregister(comm, w->window);
    if (w->buffer) ncclMemFree(w->buffer);
    return fail(r, std::string(who) + ": " + msg);
  };
  ncclResult_t r = ncclMemAlloc(&w->buffer, w->bytes);
  if (r != ncclSuccess) {
    w->buffer = nullptr;
    return cleanup(r, "ncclMemAlloc of the epx window (" + std::to_string(w->bytes) + " bytes) failed");
  }
  // Zero before registration: the flags of every region must be zero before any peer can write.
  cudaError_t ce;
  if ((ce = cudaMemset(w->buffer, 0, w->bytes)) != cudaSuccess || (ce = cudaDeviceSynchronize()) != cudaSuccess)
    return cleanup(ncclUnhandledCudaError, "clearing the epx window: " + cudaText(ce));
  if ((r = ncclCommWindowRegister(comm, w->buffer, w->bytes, &w->window, NCCL_WIN_DEFAULT)) != ncclSuccess ||
      w->window == nullptr) {
    w->window = nullptr;
    return cleanup(r != ncclSuccess ? r : ncclInvalidUsage,
                   "ncclCommWindowRegister failed or gave no window: the communicator has no symmetric-memory support "
                   "(needs CUDA P2P between all ranks, cuMem, NCCL_WIN_ENABLE=1)");
  }
  if ((r = devCommCreate(comm, signals, counters, &w->devComm, &w->ginContexts)) != ncclSuccess) {
    w->devComm = nullptr;
    return cleanup(r, network ? "ncclDevCommCreate with GIN failed: the ranks span " + std::to_string(nRanks / lsaSize) +
                                    " NVLink domains and peers outside this rank's domain need GIN (NCCL's InfiniBand "
                                    "GIN, or NCCL_NET_PLUGIN=epx on one host); see NCCL_DEBUG=INFO"
                              : "ncclDevCommCreate failed");
  }
  if (std::string e = devCommAbiCheck(w->devComm); !e.empty()) return cleanup(ncclInvalidUsage, e);
  if (network && w->ginContexts < 1) return cleanup(ncclInvalidUsage, "the device communicator has no GIN context");
  w->regions = RangeAllocator(w->bytes);
  w->signals = RangeAllocator(uint64_t(signals));
  w->counters = RangeAllocator(uint64_t(counters));
  *out = w.get();
  std::lock_guard<std::mutex> lock(g_mutex);
  g_windows[comm].push_back(std::move(w));
  return ncclSuccess;
}

void windowClose(CommWindow* w) {
  if (!w) return;
  if (w->devComm) devCommDestroy(w->comm, w->devComm);
  if (w->window) ncclCommWindowDeregister(w->comm, w->window);
  if (w->buffer) ncclMemFree(w->buffer);
  std::lock_guard<std::mutex> lock(g_mutex);
  auto it = g_windows.find(w->comm);
  if (it == g_windows.end()) return;
  auto& v = it->second;
  v.erase(std::remove_if(v.begin(), v.end(), [&](const std::unique_ptr<CommWindow>& p) { return p.get() == w; }),
          v.end());
  if (v.empty()) g_windows.erase(it);
}

ncclResult_t planQuery(ncclComm_t comm, const ncclEpWindowPlan_t* plan, const char* who, WindowLink* l) {
  if (!comm) return fail(ncclInvalidArgument, std::string(who) + ": comm is NULL");
  if (!plan) return fail(ncclInvalidArgument, std::string(who) + ": plan is NULL");
  if (std::string e = linkQuery(comm, l); !e.empty()) return fail(ncclInvalidArgument, std::string(who) + ": " + e);
  return ncclSuccess;
}

void addToPlan(const WindowNeed& n, ncclEpWindowPlan_t* plan) {
  plan->bytes += size_t(n.bytes);
  plan->ginSignals += n.ginSignals;
  plan->ginCounters += n.ginCounters;
}

}  // namespace epx

using epx::fail;

extern "C" ncclResult_t ncclEpWindowCreate(ncclComm_t comm, const ncclEpWindowPlan_t* plan) {
  constexpr const char* kWho = "ncclEpWindowCreate";
  if (!comm) return fail(ncclInvalidArgument, std::string(kWho) + ": comm is NULL");
  if (!plan) return fail(ncclInvalidArgument, std::string(kWho) + ": plan is NULL");
  if (plan->bytes == 0 || plan->ginSignals < 0 || plan->ginCounters < 0)
    return fail(ncclInvalidArgument, std::string(kWho) + ": the plan has 0 bytes or a negative count (start from "
                                                         "NCCL_EP_WINDOW_PLAN_INITIALIZER and add the objects)");
  epx::WindowLink l;
  if (std::string e = epx::linkQuery(comm, &l); !e.empty()) return fail(ncclInternalError, std::string(kWho) + ": " + e);
  if (!epx::windowsOf(comm).empty())
    return fail(ncclInvalidUsage, std::string(kWho) + ": the communicator already has an epx window (an epx object "
                                                      "was created on it first, or a plan was): plan before the "
                                                      "communicator's first epx object");
  // Every rank planned the same window (a rank that planned less would refuse objects the others take).
  const ncclEpWindowPlan_t mine = *plan;
  std::vector<ncclEpWindowPlan_t> all(size_t(l.nRanks), mine);
  if (ncclResult_t r = epx::linkGather(comm, l.rank, l.nRanks, &mine, sizeof(mine), all.data(), kWho); r != ncclSuccess)
    return r;
  for (int q = 0; q < l.nRanks; ++q) {
    const ncclEpWindowPlan_t& o = all[size_t(q)];
    if (o.bytes != mine.bytes || o.ginSignals != mine.ginSignals || o.ginCounters != mine.ginCounters)
      return fail(ncclInvalidUsage, std::string(kWho) + ": rank " + std::to_string(q) + " planned " +
                                        epx::describeNeed({o.bytes, o.ginSignals, o.ginCounters}) + ", rank " +
                                        std::to_string(l.rank) + " planned " +
                                        epx::describeNeed({mine.bytes, mine.ginSignals, mine.ginCounters}) +
                                        ": every rank must plan the same objects");
  }
  epx::CommWindow* w = nullptr;
  const epx::WindowNeed size{plan->bytes, plan->ginSignals, plan->ginCounters};
  if (ncclResult_t r = epx::windowOpen(comm, l.network(), l.nRanks, l.lsaSize, size, true, kWho, &w); r != ncclSuccess)
    return r;
  if (ncclResult_t r = epx::linkBarrier(comm); r != ncclSuccess) {
    epx::windowClose(w);
    return fail(r, std::string(kWho) + ": closing barrier (ncclAllReduce) failed");
  }
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpWindowDestroy(ncclComm_t comm) {
  constexpr const char* kWho = "ncclEpWindowDestroy";
  if (!comm) return fail(ncclInvalidArgument, std::string(kWho) + ": comm is NULL");
  const std::vector<epx::CommWindow*> ws = epx::windowsOf(comm);
  if (ws.empty() || !ws.front()->planned)
    return fail(ncclInvalidUsage, std::string(kWho) + ": the communicator has no planned epx window (ncclEpWindowCreate)");
  epx::CommWindow* w = ws.front();
  if (w->objects > 0)
    return fail(ncclInvalidUsage, std::string(kWho) + ": " + std::to_string(w->objects) +
                                      " epx object(s) still hold a region of the window: destroy them first");
  int dev = -1;
  if (ncclCommCuDevice(comm, &dev) == ncclSuccess) cudaSetDevice(dev);
  epx::windowClose(w);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpWindowGetInfo(ncclComm_t comm, ncclEpWindowInfo_t* info) {
  if (!comm) return fail(ncclInvalidArgument, "ncclEpWindowGetInfo: comm is NULL");
  if (!info) return fail(ncclInvalidArgument, "ncclEpWindowGetInfo: info is NULL");
  *info = ncclEpWindowInfo_t{};
  const std::vector<epx::CommWindow*> ws = epx::windowsOf(comm);
  info->windows = int(ws.size());
  info->planned = !ws.empty() && ws.front()->planned;
  for (const epx::CommWindow* w : ws) {
    info->objects += w->objects;
    info->bytes += size_t(w->bytes);
    info->bytesUsed += size_t(w->regions.used());
    info->ginSignals += int(w->signals.size());
    info->ginSignalsUsed += int(w->signals.used());
    info->ginCounters += int(w->counters.size());
    info->ginCountersUsed += int(w->counters.used());
  }
  return ncclSuccess;
}
