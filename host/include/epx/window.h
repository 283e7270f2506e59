/*
 * epx's window of a communicator: one registered symmetric allocation (ncclMemAlloc +
 * ncclCommWindowRegister) and one NCCL device communicator (its GIN contexts, signals and
 * counters), shared by every epx object of that communicator — EP groups (high-throughput and
 * low-latency), buckets, PP channels, load-balancing and Engram objects — each in a region of its own:
 * bytes of the window (2 MiB
 * aligned), a range of GIN signals and a range of GIN counters.
 *
 * Planned (one window, one device communicator, for every object of the communicator):
 *
 *   ncclEpWindowPlan_t plan = NCCL_EP_WINDOW_PLAN_INITIALIZER;
 *   ncclEpWindowPlanAddGroup(comm, &epConfig, &plan);              local: no communication
 *   ncclEpWindowPlanAddBucket(comm, tensors, n, &bucketConfig, &plan);
 *   ncclEpWindowPlanAddPpChannel(comm, &ppConfig, &plan);
 *   ncclEpWindowPlanAddLb / ncclEpWindowPlanAddEngram (lb.h, engram.h objects)
 *   ncclEpWindowCreate(comm, &plan);                               collective; before the objects
 *   ... ncclEpGroupCreate / ncclEpBucketCreate / ncclEpPpChannelCreate on comm ...
 *   ... their destroys ...
 *   ncclEpWindowDestroy(comm);                                     collective; after them
 *
 * An object takes the lowest free region that fits and gives it back at its destroy, so objects
 * created and destroyed in turn reuse the same bytes. With a planned window, an object that does
 * not fit is refused (ncclInvalidUsage naming what is free and what it needs): nothing else is
 * registered. Without a plan, each object registers a window (and a device communicator) sized for
 * itself, released with it. A communicator with several epx objects should plan: one registration
 * instead of one per object, and one device communicator, so one set of GIN contexts (QPs) and one
 * signal range instead of a set per object. Every rank must create and destroy the objects of a
 * communicator in the same order (they are collective): the regions are then the same on every
 * rank, which creation checks (ncclInvalidUsage when two ranks took different regions).
 * The plan is the sum of its objects' regions: every planned object fits, in any order of creation
 * (regions are whole 2 MiB units); objects beyond the plan are refused.
 * Lifetime: epx keeps the window by communicator pointer; call ncclEpWindowDestroy (after the
 * objects) before ncclCommDestroy / ncclCommAbort of that communicator, or the registration leaks
 * and a new communicator at the same address is told it already has an epx window. After
 * ncclEpWindowDestroy the communicator may be planned again.
 * Errors are ncclResult_t values; the reason of the last one is in ncclEpGetLastError() (ep.h), and
 * EPX_DEBUG=1 prints each as it happens.
 */
#ifndef EPX_WINDOW_H_
#define EPX_WINDOW_H_

#include <nccl.h>
#include <stddef.h>

#include "epx/bucket.h"
#include "epx/engram.h"
#include "epx/ep.h"
#include "epx/lb.h"
#include "epx/pp.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a window holds: the sum of the regions of the objects it is planned for. Start from
 * NCCL_EP_WINDOW_PLAN_INITIALIZER; the ncclEpWindowPlanAdd* calls add one object each. */
typedef struct {
  size_t bytes;    /* window bytes per rank */
  int ginSignals;  /* GIN signals (used only when some peer is outside this rank's NVLink domain) */
  int ginCounters; /* GIN counters per GIN context (likewise) */
} ncclEpWindowPlan_t;

#define NCCL_EP_WINDOW_PLAN_INITIALIZER {0, 0, 0}

/* Adds the region of an object with this config on comm to *plan: the sizes ncclEpGroupCreate,
 * ncclEpBucketCreate and ncclEpPpChannelCreate take on this rank (the GIN ranges only when comm has
 * peers outside this rank's NVLink domain). Local (no communication). Errors: ncclInvalidArgument
 * (NULL plan or comm, a communicator NCCL cannot describe, the config or bucket plan as the create
 * call checks them), ncclUnhandledCudaError (a CUDA query about the current device failed). */
ncclResult_t ncclEpWindowPlanAddGroup(ncclComm_t comm, const ncclEpConfig_t* config, ncclEpWindowPlan_t* plan);
ncclResult_t ncclEpWindowPlanAddBucket(ncclComm_t comm, const ncclEpBucketTensor_t* tensors, int numTensors,
                                       const ncclEpBucketConfig_t* config, ncclEpWindowPlan_t* plan);
ncclResult_t ncclEpWindowPlanAddPpChannel(ncclComm_t comm, const ncclEpPpConfig_t* config, ncclEpWindowPlan_t* plan);
/* The region of an expert load-balancing object (lb.h); ncclInvalidUsage where ncclEpLbCreate would
 * refuse this NCCL (gradient tensors with network peers on NCCL older than 2.30.3). */
ncclResult_t ncclEpWindowPlanAddLb(ncclComm_t comm, const ncclEpLbPlan_t* lbPlan, const ncclEpLbConfig_t* config,
                                   ncclEpWindowPlan_t* plan);
/* The region of an Engram object (engram.h). */
ncclResult_t ncclEpWindowPlanAddEngram(ncclComm_t comm, const ncclEpEngramPlan_t* engramPlan,
                                       const ncclEpEngramConfig_t* config, ncclEpWindowPlan_t* plan);

/* Collective over comm: registers comm's one epx window with the planned bytes, GIN signals and
 * counters. The checks before the ranks exchange their plans (NULL, bytes 0, a window already
 * there) are local: they must fail on every rank alike, or the other ranks wait in the exchange.
 * Errors: ncclInvalidArgument (NULL, bytes 0), ncclInvalidUsage (comm already has an epx window —
 * planned, or one an unplanned object still holds: plan before the first object; ranks planned
 * differently; no symmetric memory or GIN), ncclInternalError (NCCL cannot describe comm),
 * CUDA/NCCL failures (ncclUnhandledCudaError, the NCCL call's own result). */
ncclResult_t ncclEpWindowCreate(ncclComm_t comm, const ncclEpWindowPlan_t* plan);

/* Collective over comm: releases the planned window. ncclInvalidUsage while an object still holds
 * a region of it (destroy the objects first) or when comm has no planned window. */
ncclResult_t ncclEpWindowDestroy(ncclComm_t comm);

/* comm's epx windows as seen by this rank (all zero when it has none). */
typedef struct {
  int windows;         /* registered epx windows of comm (1 with a plan) */
  int planned;         /* 1: the first is the planned window of ncclEpWindowCreate */
  int objects;         /* objects holding a region, over all windows */
  size_t bytes;        /* registered bytes, over all windows */
  size_t bytesUsed;    /* bytes in regions */
  int ginSignals, ginSignalsUsed;
  int ginCounters, ginCountersUsed;
} ncclEpWindowInfo_t;
ncclResult_t ncclEpWindowGetInfo(ncclComm_t comm, ncclEpWindowInfo_t* info);

#ifdef __cplusplus
}
#endif

#endif /* EPX_WINDOW_H_ */
