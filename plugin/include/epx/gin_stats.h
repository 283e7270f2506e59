/* Counters of the GIN "ipc" backend of libnccl-net-epx.so, for tools such as epx-bench.
 *
 * The plugin counts, per (GIN context, peer), the GIN operations NCCL's proxy issued (iput,
 * iputSignal with a payload, signal-only iputSignal) and their payload bytes, and reports the NIC
 * emulation settings (EPX_GIN_EMU_GBPS, EPX_GIN_EMU_LATENCY_US; docs/plugins.md) and the
 * emulated NIC's busy time. The counters are always on; the NIC fields are 0 when emulation is off.
 *
 * How to read them from a tool in the same process as NCCL
 * ---------------------------------------------------------
 * NCCL loads the plugin with dlopen(..., RTLD_NOW | RTLD_LOCAL): its symbols are not global, so
 * dlsym(RTLD_DEFAULT, ...) does not find them, and linking against the plugin would not share
 * NCCL's copy. Open the copy NCCL loaded with RTLD_NOLOAD, after NCCL has loaded the plugin (after
 * the first communicator's init):
 *
 *   // path: NCCL_NET_PLUGIN's value when it is a path (any path to the same file works: glibc
 *   // matches a loaded library by file), else "libnccl-net-<value>.so" as NCCL itself resolves it.
 *   void* h = dlopen(path, RTLD_NOW | RTLD_NOLOAD);   // NULL: NCCL has not loaded this plugin
 *   epxGinIpcStatsVersionFn version = (epxGinIpcStatsVersionFn)dlsym(h, "epxGinIpcStatsVersion");
 *   epxGinIpcStatsSnapshotFn snapshot = (epxGinIpcStatsSnapshotFn)dlsym(h, "epxGinIpcStatsSnapshot");
 *   epxGinIpcStatsResetFn reset = (epxGinIpcStatsResetFn)dlsym(h, "epxGinIpcStatsReset");
 *   if (version == NULL || version() != EPX_GIN_IPC_STATS_VERSION) ...  // older/newer plugin
 *   int n = snapshot(NULL, 0);                   // number of entries
 *   epxGinIpcStats* s = malloc(n * sizeof *s);
 *   n = snapshot(s, n);                          // may have grown meanwhile: use min(result, n)
 *   ...
 *   dlclose(h);                                  // drops only the reference RTLD_NOLOAD added
 *
 * Without RTLD_NOLOAD, dlopen would load the plugin if NCCL had not (yet), and that copy's
 * counters stay empty if NCCL later loads another file.
 *
 * Thread safety: NCCL's GIN progress thread updates the counters (lock-free); any thread may call
 * these functions at any time. Each counter is exact, but the counters of one entry are read one
 * after another, so a snapshot taken while operations run may show an operation in `ops` whose
 * bytes are not yet in `bytes` (or the reverse). Snapshot at a quiet point for exact totals.
 */
#ifndef EPX_GIN_STATS_H
#define EPX_GIN_STATS_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EPX_GIN_IPC_STATS_VERSION 3

/* One (GIN context, peer) of this process. Entries exist for every context connected since the
 * plugin was loaded or last reset, closed ones included (closed = 1) until the next reset. They
 * are listed in connection order, peers in rank order, one per rank of the context (self too). */
typedef struct epxGinIpcStats {
  uint64_t commHash;     /* NCCL's commHash handed to GIN init for this context's communicator (0: unknown) */
  int32_t rank;          /* this process's rank in the GIN connection */
  int32_t nRanks;
  int32_t context;       /* GIN context index within the communicator: 0 .. NCCL_GIN_NCONTEXTS-1 */
  int32_t peer;          /* target rank; may equal rank (puts to self) */
  int32_t cudaDev;       /* CUDA device ordinal of the context; one emulated NIC per device and process */
  int32_t closed;        /* 1 once NCCL closed the connection */
  uint64_t ops;          /* puts + putSignals + signalOnly */
  uint64_t puts;         /* iput (no signal), of any size */
  uint64_t putSignals;   /* iputSignal with a payload */
  uint64_t signalOnly;   /* iputSignal with size 0 (signal(), barriers) */
  uint64_t signals;      /* putSignals + signalOnly */
  uint64_t bytes;        /* payload bytes */
  uint64_t wireBytes;    /* bytes charged to the emulated NIC: the payload, or 64 for an op without one */
  double emuGBps;        /* emulated line rate (EPX_GIN_EMU_GBPS, 1e9 bytes/s); 0: emulation off */
  double emuLatencyUs;   /* emulated one-way latency (EPX_GIN_EMU_LATENCY_US); 0 when off */
  uint64_t busyNs;       /* this entry's serialization time on the emulated NIC: wireBytes / rate */
  uint64_t nicBusyNs;    /* busy time of the whole emulated NIC (all contexts and peers of the device) */
  /* Latency accounting (version 2). Times are host steady-clock nanoseconds, summed over the ops
   * since the last reset; divide by the matching count. "Issued" is when NCCL's GIN proxy thread
   * handed the op to the plugin (the GPU posted it earlier: that delay is not visible here). */
  uint64_t completed;    /* ops to this peer reported done (iput: copy done and departed; iputSignal: signal sent) */
  uint64_t copied;       /* of those, ops with a payload */
  uint64_t copyNs;       /* sum over `copied`: copy seen complete - issued */
  uint64_t doneNs;       /* sum over `completed`: reported done - issued (includes the emulated NIC's gate) */
  uint64_t signalsIn;    /* signals from this peer applied to this rank's memory */
  uint64_t signalInNs;   /* sum over `signalsIn`: write to the GPU queued - message received from the peer */
  /* The context's progress (the same values in each entry of a context): */
  uint64_t progressCalls;     /* ginProgress calls by NCCL's GIN progress thread */
  uint64_t progressGapMaxNs;  /* longest time between two of them (the thread was not running, or busy) */
  uint64_t progressGaps1ms;   /* gaps longer than 1 ms */
  uint64_t applyBatches;      /* signal apply batches (a signal kernel launch each; a read-back without it) */
  uint64_t applyNs;           /* their total time */
  /* Version 3. */
  uint64_t issueNs;      /* sum over this peer's ops: time inside the put call (queuing the copy and the
                            completion write on the stream) - issued; the rest of copyNs is the stream */
} epxGinIpcStats;

/* EPX_GIN_IPC_STATS_VERSION of the plugin. */
int epxGinIpcStatsVersion(void);
/* Copies up to maxEntries entries into out (out may be NULL when maxEntries is 0) and returns the
 * number of entries that exist (which may exceed maxEntries). */
int epxGinIpcStatsSnapshot(epxGinIpcStats* out, int maxEntries);
/* Zeroes every counter and the NIC busy times, and forgets closed contexts. Open contexts keep
 * their entries. The emulated NIC's schedule (when it is next free) is not touched. */
void epxGinIpcStatsReset(void);

typedef int (*epxGinIpcStatsVersionFn)(void);
typedef int (*epxGinIpcStatsSnapshotFn)(epxGinIpcStats* out, int maxEntries);
typedef void (*epxGinIpcStatsResetFn)(void);

#ifdef __cplusplus
}
#endif

#endif /* EPX_GIN_STATS_H */
