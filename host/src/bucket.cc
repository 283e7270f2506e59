// ncclEpBucket: a window link (link.h) holding the planned tensors and the reductions' receive
// areas (bucket_layout.h), the protocol session's state, and the collective launches
// (device/src/bucket.cu). All-reduce = reduce-scatter + all-gather (two kernels, stream-ordered).
#include "epx/bucket.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "core/async_error.h"
#include "core/coll_config.h"
#include "core/config.h"
#include "core/errors.h"
#include "epx/device/coll_launch.h"
#include "epx/window.h"
#include "link.h"
#include "window.h"

using epx::fail;

struct ncclEpBucket {
  epx::WindowLink link;
  epx::BucketConfig cfg;
  std::vector<epx::BucketTensorSpec> plan;
  epx::dev::BucketLayout bl{};
  std::vector<char*> tensorPtrs;
  epx::SessionState ses;  // the protocol session's device state
  epx::dev::SessionArgs session() const { return ses.args(cfg.numCtas); }
};

struct ncclEpBucketSession {
  ncclEpBucket_t bucket = nullptr;
  uint64_t stagedBytes = 0;
};

namespace {

void release(ncclEpBucket* b) {
  epx::linkClose(&b->link);
  b->ses.release();
  delete b;
}

static_assert(epx::kUnsetInt == NCCL_EP_UNDEF_INT, "core/coll_config.h: kUnsetInt is the public NCCL_EP_UNDEF_INT");

// The public structs in core's terms (core/coll_config.h). The plan: empty when there is none to
// read (NULL, or a count the plan check refuses first).
std::vector<epx::BucketTensorSpec> specsOf(const ncclEpBucketTensor_t* tensors, int n) {
  std::vector<epx::BucketTensorSpec> out;
  if (tensors && n > 0 && n <= epx::dev::kMaxBucketTensors)
    for (int i = 0; i < n; ++i) out.push_back({tensors[i].count, tensors[i].dtype});
  return out;
}

std::string checkPlan(const ncclEpBucketTensor_t* tensors, int n, int nRanks, std::vector<epx::BucketTensorSpec>* specs,
                      std::vector<epx::dev::BucketTensorPlan>* plan) {
  *specs = specsOf(tensors, n);
  return epx::checkBucketPlan(tensors ? specs->data() : nullptr, n, nRanks, plan);
}

std::string normalizeConfig(const ncclEpBucketConfig_t* in, epx::BucketConfig* out) {
  epx::BucketConfigRequest req;  // no config: the defaults
  if (in) {
    if (std::string e = epx::checkConfigHeader("config", true, in->size, sizeof(ncclEpBucketConfig_t), in->magic,
                                               NCCL_EP_BUCKET_CONFIG_MAGIC);
        !e.empty())
      return e;
    req.numCtas = in->numCtas;
    req.timeoutMs = in->timeoutMs;
    req.chunkBytes = in->chunkBytes;
  }
  return epx::normalizeBucketConfig(req, out);
}

// A call's items against the plan (n items; at most kMaxBucketTensors are read, more fail the
// count check first).
std::string checkItems(const ncclEpBucket* b, epx::BucketCall call, const ncclEpBucketItem_t* items, int n,
                       bool haveSession, const ncclEpBucketReduceOpts_t* opts) {
  epx::BucketItemSpec specs[epx::dev::kMaxBucketTensors];
  for (int i = 0; items && i < n && i < epx::dev::kMaxBucketTensors; ++i)
    specs[i] = {items[i].tensor, items[i].count, items[i].dtype, items[i].external};
  const std::vector<const char*> ptrs(b->tensorPtrs.begin(), b->tensorPtrs.end());
  const epx::BucketView view{b->plan.data(), int(b->plan.size()), ptrs.data()};
  return epx::checkBucketItems(view, call, items ? specs : nullptr, n, haveSession,
                               opts ? std::optional<ncclDataType_t>(opts->wireType) : std::nullopt);
}

ncclResult_t checkUsable(const ncclEpBucket* b, const char* who) {
  return epx::linkCheckUsable(b->link, who, "bucket", "ncclEpBucketGetAsyncError");
}

size_t tensorBytes(const epx::BucketTensorSpec& t) { return t.count * size_t(epx::dtypeBytes(t.dtype)); }

// Copies external tensors in (toBucket) or back out, on the stream.
ncclResult_t stage(ncclEpBucket* b, ncclEpBucketSession* s, const ncclEpBucketItem_t* items, int n, bool toBucket,
                   cudaStream_t stream, const char* who) {
  for (int i = 0; i < n; ++i) {
    const ncclEpBucketItem_t& it = items[i];
    char* mine = b->tensorPtrs[size_t(it.tensor)];
    if (it.external == nullptr || it.external == mine) continue;
    const size_t bytes = tensorBytes(b->plan[size_t(it.tensor)]);
    const cudaError_t ce = toBucket ? cudaMemcpyAsync(mine, it.external, bytes, cudaMemcpyDeviceToDevice, stream)
                                    : cudaMemcpyAsync(it.external, mine, bytes, cudaMemcpyDeviceToDevice, stream);
    if (ce != cudaSuccess)
      return fail(ncclUnhandledCudaError, std::string(who) + ": staging an external tensor: " + cudaGetErrorString(ce));
    s->stagedBytes += bytes;
  }
  return ncclSuccess;
}

// gatherOfAllReduce: the all-gather half of an all-reduce (its peers handed their tensors over in
// the reduce-scatter half, bucket_layout.h).
ncclResult_t launchOp(ncclEpBucket* b, const ncclEpBucketItem_t* items, int n, int op, bool bf16Wire,
                      const ncclEpBucketReduceOpts_t* opts, cudaStream_t stream, const char* who,
                      bool gatherOfAllReduce = false) {
  epx::dev::BucketArgs a{};
  a.link = epx::linkArgs(b->link, b->bl.flags);
  a.session = b->session();
  a.op = op;
  a.bf16Wire = bf16Wire ? 1 : 0;
  a.hasScale = opts && opts->hasScale ? 1 : 0;
  a.scale = a.hasScale ? opts->scale : 1.0f;
  a.chunkBytes = b->cfg.chunkBytes;
  a.gatherOfAllReduce = gatherOfAllReduce ? 1 : 0;
  a.numTensors = n;
  for (int i = 0; i < n; ++i) a.t[i] = b->bl.t[items[i].tensor];
  if (cudaError_t ce = epx::dev::launchBucket(a, b->cfg.numCtas, stream); ce != cudaSuccess)
    return fail(ncclUnhandledCudaError, std::string(who) + ": launch: " + cudaGetErrorString(ce));
  return ncclSuccess;
}

ncclResult_t collective(ncclEpBucket_t b, epx::BucketCall call, const ncclEpBucketItem_t* items, int n,
                        const ncclEpBucketReduceOpts_t* opts, ncclEpBucketSession_t s, cudaStream_t stream) {
  const char* who = epx::bucketCallName(call);
  if (!b) return fail(ncclInvalidArgument, std::string(who) + ": bucket is NULL");
  if (s && s->bucket != b) return fail(ncclInvalidArgument, std::string(who) + ": the session belongs to another bucket");
  if (std::string e = checkItems(b, call, items, n, s != nullptr, opts); !e.empty())
    return fail(ncclInvalidArgument, std::string(who) + ": " + e);
  if (ncclResult_t r = checkUsable(b, who); r != ncclSuccess) return r;
  if (s)
    if (ncclResult_t r = stage(b, s, items, n, true, stream, who); r != ncclSuccess) return r;
  ncclResult_t r = ncclSuccess;
  switch (call) {
    case epx::BucketCall::AllGather: r = launchOp(b, items, n, epx::dev::kBucketAllGather, false, opts, stream, who); break;
    case epx::BucketCall::ReduceScatter:
      r = launchOp(b, items, n, epx::dev::kBucketReduceScatter, opts && opts->wireType == ncclBfloat16, opts, stream, who);
      break;
    case epx::BucketCall::AllReduce:
      // The wire type applies to the reduce-scatter half; the gather half moves the sums as they are.
      r = launchOp(b, items, n, epx::dev::kBucketReduceScatter, opts && opts->wireType == ncclBfloat16, opts, stream, who);
      if (r == ncclSuccess) r = launchOp(b, items, n, epx::dev::kBucketAllGather, false, nullptr, stream, who, true);
      break;
  }
  if (r == ncclSuccess && s) r = stage(b, s, items, n, false, stream, who);
  return r;
}

// What a bucket takes of its communicator's window (linkOpen).
epx::LinkRequest bucketRequest(const epx::dev::BucketLayout& bl, const epx::BucketConfig& cfg, int nRanks) {
  epx::LinkRequest req;
  req.bytes = bl.totalBytes;
  req.zeroedPrefix = bl.totalBytes;  // flags, and the tensors start zeroed
  req.ginSignals = epx::dev::ginSignalCount(nRanks);
  req.ginCounters = cfg.numCtas;
  req.timeoutMs = cfg.timeoutMs;
  req.who = "ncclEpBucketCreate";
  return req;
}

}  // namespace

extern "C" ncclResult_t ncclEpWindowPlanAddBucket(ncclComm_t comm, const ncclEpBucketTensor_t* tensors, int numTensors,
                                                  const ncclEpBucketConfig_t* config, ncclEpWindowPlan_t* plan) {
  constexpr const char* kWho = "ncclEpWindowPlanAddBucket";
  epx::WindowLink l;
  if (ncclResult_t r = epx::planQuery(comm, plan, kWho, &l); r != ncclSuccess) return r;
  epx::BucketConfig cfg;
  std::vector<epx::BucketTensorSpec> specs;
  std::vector<epx::dev::BucketTensorPlan> tplan;
  std::string e = normalizeConfig(config, &cfg);
  if (e.empty()) e = checkPlan(tensors, numTensors, l.nRanks, &specs, &tplan);
  if (!e.empty()) return fail(ncclInvalidArgument, std::string(kWho) + ": " + e);
  const epx::dev::BucketLayout bl = epx::dev::layoutBucket(tplan.data(), numTensors, l.nRanks, l.network());
  epx::addToPlan(epx::linkNeed(bucketRequest(bl, cfg, l.nRanks), l), plan);
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketGetBufferSizeHint(const ncclEpBucketTensor_t* tensors, int numTensors, int nRanks,
                                                      size_t* bytes) {
  if (!bytes) return fail(ncclInvalidArgument, "ncclEpBucketGetBufferSizeHint: bytes is NULL");
  if (nRanks < 1) return fail(ncclInvalidArgument, "ncclEpBucketGetBufferSizeHint: nRanks must be >= 1");
  std::vector<epx::BucketTensorSpec> specs;
  std::vector<epx::dev::BucketTensorPlan> plan;
  if (std::string e = checkPlan(tensors, numTensors, nRanks, &specs, &plan); !e.empty())
    return fail(ncclInvalidArgument, "ncclEpBucketGetBufferSizeHint: " + e);
  *bytes = epx::dev::layoutBucket(plan.data(), numTensors, nRanks, nRanks > 1).totalBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketCreate(ncclComm_t comm, const ncclEpBucketTensor_t* tensors, int numTensors,
                                           const ncclEpBucketConfig_t* config, ncclEpBucket_t* out) {
  constexpr const char* kWho = "ncclEpBucketCreate";
  auto who = [](const std::string& e) { return std::string(kWho) + ": " + e; };
  if (!out) return fail(ncclInvalidArgument, who("bucket is NULL"));
  *out = nullptr;
  if (!comm) return fail(ncclInvalidArgument, who("comm is NULL"));
  auto* b = new ncclEpBucket;
  if (ncclResult_t r = epx::linkStart(comm, kWho, &b->link); r != ncclSuccess) {
    delete b;
    return r;
  }
  std::vector<epx::dev::BucketTensorPlan> plan;
  std::string e = normalizeConfig(config, &b->cfg);
  if (e.empty()) e = checkPlan(tensors, numTensors, b->link.nRanks, &b->plan, &plan);
  if (!e.empty()) {
    delete b;
    return fail(ncclInvalidArgument, who(e));
  }
  if (ncclResult_t r = epx::linkAgree(b->link, epx::makeBucketAgreed(b->plan.data(), numTensors, b->cfg, EPX_VERSION_CODE),
                                      epx::checkBucketAgreement, kWho);
      r != ncclSuccess) {
    delete b;
    return r;
  }
  b->bl = epx::dev::layoutBucket(plan.data(), numTensors, b->link.nRanks, b->link.network());
  cudaError_t ce;
  if ((ce = epx::dev::preloadBucketKernels()) != cudaSuccess || (ce = b->ses.alloc(b->link.nRanks)) != cudaSuccess) {
    release(b);
    return fail(ncclUnhandledCudaError, who(std::string("device state: ") + cudaGetErrorString(ce)));
  }
  const epx::LinkRequest req = bucketRequest(b->bl, b->cfg, b->link.nRanks);
  if (ncclResult_t r = epx::linkOpen(req, &b->link); r != ncclSuccess) {
    release(b);
    return r;
  }
  for (int i = 0; i < numTensors; ++i) b->tensorPtrs.push_back(static_cast<char*>(b->link.buffer) + b->bl.t[i].offset);
  if (const char* v = std::getenv("EPX_DEBUG"); v && *v && *v != '0')
    std::fprintf(stderr, "epx: rank %d/%d bucket: %d tensors, %d CTAs, window %zu B, GIN contexts %d\n", b->link.rank,
                 b->link.nRanks, numTensors, b->cfg.numCtas, size_t(b->bl.totalBytes), b->link.ginContexts);
  *out = b;
  epx::clearLastError();
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketDestroy(ncclEpBucket_t b) {
  if (!b) return ncclSuccess;
  cudaSetDevice(b->link.cudaDev);
  const ncclResult_t r = epx::linkQuiesce(&b->link, "ncclEpBucketDestroy");
  release(b);
  return r;
}

extern "C" ncclResult_t ncclEpBucketGetTensor(ncclEpBucket_t b, int index, void** ptr) {
  if (!b || !ptr) return fail(ncclInvalidArgument, "ncclEpBucketGetTensor: NULL argument");
  if (index < 0 || index >= int(b->plan.size()))
    return fail(ncclInvalidArgument, "ncclEpBucketGetTensor: tensor " + std::to_string(index) + " is not in the plan (0 .. " +
                                         std::to_string(b->plan.size() - 1) + ")");
  *ptr = b->tensorPtrs[size_t(index)];
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketSessionCreate(ncclEpBucket_t b, ncclEpBucketSession_t* s) {
  if (!b || !s) return fail(ncclInvalidArgument, "ncclEpBucketSessionCreate: NULL argument");
  *s = new ncclEpBucketSession{b, 0};
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketSessionDestroy(ncclEpBucketSession_t s) {
  delete s;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketSessionGetStagedBytes(ncclEpBucketSession_t s, size_t* bytes) {
  if (!s || !bytes) return fail(ncclInvalidArgument, "ncclEpBucketSessionGetStagedBytes: NULL argument");
  *bytes = s->stagedBytes;
  return ncclSuccess;
}

extern "C" ncclResult_t ncclEpBucketAllGather(ncclEpBucket_t b, const ncclEpBucketItem_t* items, int n,
                                              ncclEpBucketSession_t s, cudaStream_t stream) {
  return collective(b, epx::BucketCall::AllGather, items, n, nullptr, s, stream);
}

extern "C" ncclResult_t ncclEpBucketReduceScatter(ncclEpBucket_t b, const ncclEpBucketItem_t* items, int n,
                                                  const ncclEpBucketReduceOpts_t* opts, ncclEpBucketSession_t s,
                                                  cudaStream_t stream) {
  return collective(b, epx::BucketCall::ReduceScatter, items, n, opts, s, stream);
}

extern "C" ncclResult_t ncclEpBucketAllReduce(ncclEpBucket_t b, const ncclEpBucketItem_t* items, int n,
                                              const ncclEpBucketReduceOpts_t* opts, ncclEpBucketSession_t s,
                                              cudaStream_t stream) {
  return collective(b, epx::BucketCall::AllReduce, items, n, opts, s, stream);
}

extern "C" ncclResult_t ncclEpBucketGetAsyncError(ncclEpBucket_t b, ncclResult_t* asyncError, char* msg, size_t msgLen) {
  return epx::linkGetAsyncError(b ? &b->link : nullptr, asyncError, msg, msgLen, "ncclEpBucketGetAsyncError");
}
