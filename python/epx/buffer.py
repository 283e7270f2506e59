"""epx.Buffer: an EP group over a torch.distributed NCCL process group, with dispatch and combine.

Everything runs on torch.cuda.current_stream() and is asynchronous, except what ep.h documents as
synchronous (exact mode: the layout waits for the receive counts). Outputs are allocated with torch
(PyTorch's caching allocator) on the current stream.
"""

import ctypes as C
import weakref
from dataclasses import dataclass
from typing import Any, List

from . import _abi, _checks, _comm, _lib, _native
from ._errors import EpAsyncError
from .event import EventOverlap, as_cuda_event
from .window import group_buffers, window_tensor
from . import low_latency as _ll

_LAYOUTS = {"expanded": _abi.ncclEpLayoutExpanded, "dedup": _abi.ncclEpLayoutDeduplicated,
            "deduplicated": _abi.ncclEpLayoutDeduplicated}
_MODES = {"exact": _abi.ncclEpModeExact, "capacity": _abi.ncclEpModeCapacity}
_ALGOS = {"auto": _abi.ncclEpAlgoAuto, "high_throughput": _abi.ncclEpAlgoHighThroughput,
          "low_latency": _abi.ncclEpAlgoLowLatency}
_FORWARDING = {"auto": _abi.ncclEpForwardAuto, "direct": _abi.ncclEpForwardDirect,
               "hybrid": _abi.ncclEpForwardHybrid}


def _ptr(t):
    return None if t is None else int(t.data_ptr())


_INT32_MIN, _INT32_MAX = -2 ** 31, 2 ** 31 - 1


def _check_int32(name, v):
    """ctypes stores a Python int into a C int field or argument modulo 2**32, without an error:
    reject values outside int32 here so that they are not silently wrapped."""
    if not _INT32_MIN <= v <= _INT32_MAX:
        raise ValueError("%s=%d does not fit in a C int (%d..%d)" % (name, v, _INT32_MIN, _INT32_MAX))
    return v


def _make_config(max_tokens_per_rank, hidden, num_experts, topk, fp8, sm_budget, timeout_ms, exact_combine,
                 algorithm, forwarding="auto", forward_node_size=0):
    if algorithm not in _ALGOS:
        raise ValueError("algorithm must be one of %s, got %r" % (sorted(_ALGOS), algorithm))
    if forwarding not in _FORWARDING:
        raise ValueError("forwarding must be one of %s, got %r" % (sorted(_FORWARDING), forwarding))
    if isinstance(forward_node_size, bool) or not isinstance(forward_node_size, int):
        raise TypeError("forward_node_size must be an int, got %r" % (forward_node_size,))
    _check_int32("forward_node_size", forward_node_size)
    cfg = _abi.config_initializer()
    for name, v in (("max_tokens_per_rank", max_tokens_per_rank), ("hidden", hidden),
                    ("num_experts", num_experts), ("topk", topk), ("sm_budget", sm_budget),
                    ("timeout_ms", timeout_ms)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise TypeError("%s must be an int, got %r" % (name, v))
        _check_int32(name, v)
    cfg.maxTokensPerRank = max_tokens_per_rank
    cfg.hidden = hidden
    cfg.numExperts = num_experts
    cfg.topk = topk
    cfg.fp8Dispatch = 1 if fp8 else 0
    cfg.algorithm = _ALGOS[algorithm]
    cfg.smBudget = sm_budget  # 0: the analytic estimate
    cfg.timeoutMs = timeout_ms
    cfg.exactCombine = 1 if exact_combine else 0
    cfg.forwarding = _FORWARDING[forwarding]
    cfg.forwardNodeSize = forward_node_size  # 0: the NVLink team; libepx validates it
    return cfg


@dataclass
class DispatchOutput:
    """What Buffer.dispatch returns. R = handle.num_rows, Le = num_experts / num_ranks.

    recv_x: [R, hidden], dtype of x. recv_x_scales: FP8 only, float32 [R, hidden/128], else None.
    recv_topk_idx: dedup layout only, int32 [R, topk] local expert index (0..Le-1) or -1; else None.
    recv_topk_weights: float32, expanded [R] / dedup [R, topk]; None when no topk_weights were given.
    recv_src_info: int32 [R, 2] (source rank, source token) when return_src_info=True, else None.
    expert_counts: int32 [Le] (device) valid rows per local expert.
    expert_offsets: int32 [Le + 1] (device): expanded: aligned segment starts, last = rows incl. gaps;
        dedup: exclusive prefix of expert_counts.
    num_recv_rows: int32 [1] (device) rows written (expanded: incl. gaps).
    handle: the Handle, for combine, cached dispatch and the backward.
    In capacity mode R is the capacity and rows past num_recv_rows are left untouched (garbage).
    """

    recv_x: Any
    recv_x_scales: Any
    recv_topk_idx: Any
    recv_topk_weights: Any
    recv_src_info: Any
    expert_counts: Any
    expert_offsets: Any
    num_recv_rows: Any
    handle: "Handle"
    event: Any = None  # EventOverlap with async_finish=True, else None


class CombineOutput(tuple):
    """What Buffer.combine returns: unpacks as (out, combined_topk_weights); .event is the
    EventOverlap of an async_finish=True call (else None)."""

    def __new__(cls, out, combined_topk_weights, event=None):
        self = super().__new__(cls, (out, combined_topk_weights))
        self.event = event
        return self

    @property
    def out(self):
        return self[0]

    @property
    def combined_topk_weights(self):
        return self[1]


class Handle:
    """A route slot of a Buffer (ncclEpHandle_t): the route of the last dispatch layout.

    Attributes: layout ("expanded"/"dedup"), mode ("exact"/"capacity"), alignment, zero_gaps,
    exact_combine, num_tokens (T of the last layout), num_rows (R: rows of the dispatch output),
    num_recv_tokens and expert_counts (exact mode: host ints/list from the layout; None in capacity mode).
    Create one explicitly with Buffer.create_handle (e.g. before CUDA graph capture), or let dispatch
    create one. Dropping it returns the native handle to the buffer's pool.
    """

    def __init__(self, buffer, layout, mode, alignment, zero_gaps, exact_combine):
        self.buffer = buffer
        self.layout = layout
        self.mode = mode
        self.alignment = alignment
        self.zero_gaps = bool(zero_gaps)
        self.exact_combine = bool(exact_combine)
        self.num_tokens = None
        self.num_rows = None
        self.num_recv_tokens = None
        self.expert_counts = None
        self.dispatched = False
        self._keep = ()
        self._key = (layout, mode, alignment, bool(zero_gaps), bool(exact_combine))
        self._ptr = buffer._take_native(self._key)
        buffer._live.add(self)
        n = C.c_int()
        _lib.check(_lib.lib().ncclEpHandleGetCapacity(self._ptr, C.byref(n)))
        self.capacity = n.value

    @property
    def expanded(self):
        return self.layout == "expanded"

    def _native(self):
        if not self._ptr:
            raise RuntimeError("this epx.Handle was destroyed (or its Buffer was)")
        return self._ptr

    def destroy(self):
        """Give the native handle back to the buffer (it is reused by a later dispatch)."""
        if self._ptr:
            self.buffer._give_native(self._key, self._ptr)
            self._ptr = None
            self._keep = ()

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass


class Buffer(_native.NativeObject):
    """An epx EP group on the ranks of a torch.distributed process group (NCCL backend).

    Args:
        group: torch.distributed ProcessGroup (None: the default group). Its NCCL communicator is
            reused when PyTorch exposes it (ProcessGroupNCCL._comm_ptr(), PyTorch >= 2.8); otherwise
            epx creates its own communicator over the group (unique id broadcast over the group).
            Call torch.cuda.set_device first; the buffer lives on the current device.
        max_tokens_per_rank: largest number of tokens T any rank passes to dispatch (1 .. 65536).
        hidden: channels per token H (8 .. 65536, a multiple of 8; of 128 with fp8=True).
        num_experts: E, a multiple of the group size (at most 1024); expert e lives on rank
            e // (E / group size).
        topk: K, 1 .. 32.
        fp8: also allow FP8 e4m3 dispatch (torch.float8_e4m3fn x + float32 scales per 128 channels).
        sm_budget: CTAs per kernel; 0 = libepx's analytic estimate. Must be equal on every rank.
        timeout_ms: device wait bound before an async error (>= 1). Must be equal on every rank.
        exact_combine: reserve FP32 combine buffers so handles may use exact_combine=True.
        algorithm: "auto" or "high_throughput" (dispatch/combine), or "low_latency" (only
            low_latency_dispatch/low_latency_combine; ep_ll.h).
        forwarding: how high-throughput rows reach other nodes: "direct" (every row to its rank),
            "hybrid" (once per destination node, to the rank on this rank's rail there, which
            forwards it over NVLink; combine sums each node first) or "auto" (= "direct" for now:
            the NVLink forward hop has not run on a GPU yet). ep.h ncclEpForwarding_t.
        forward_node_size: hybrid only: ranks per node; 0 = the NVLink team (another value groups
            fake nodes into virtual nodes, for testing on one GPU).
        use_group_comm: False forces a communicator of epx's own.

    All ranks must create the buffer with the same arguments (libepx compares them and raises
    EpError(ncclInvalidUsage) on every rank when they differ). Collective: every rank must call
    dispatch/combine in the same order.
    """

    def __init__(self, group, max_tokens_per_rank, hidden, num_experts, topk, fp8=False, sm_budget=0,
                 timeout_ms=10000, exact_combine=False, algorithm="auto", use_group_comm=True, forwarding="auto",
                 forward_node_size=0):
        self._group_ptr = None  # first: __del__ (destroy) runs even when __init__ raises
        torch, dist = _native.import_torch("epx.Buffer", ". Install torch; epx.Buffer.get_buffer_size_hint "
                                                         "works without it.")

        self._own_comm = None
        self._pool = {}
        self._live = weakref.WeakSet()  # Handles holding a native handle
        self._reported_async = None
        self._comm_stream = None
        self._side_event = None  # completion of the last call issued on comm_stream
        self._buffers = None
        self._live_ll = weakref.WeakSet()  # LowLatencyHandles
        self._ll_default = None
        self.low_latency_shape = None
        cfg = _make_config(max_tokens_per_rank, hidden, num_experts, topk, fp8, sm_budget, timeout_ms,
                           exact_combine, algorithm, forwarding, forward_node_size)
        _native.bind_group(self, group, torch, dist)
        lib = _lib.lib()  # after torch: libepx then shares torch's libnccl/libcudart
        self._clib = lib  # the library that owns this buffer's native objects (destroy() uses it)
        comm = _comm.borrow_comm(self.group) if use_group_comm else 0
        self.comm_borrowed = bool(comm)
        if not comm:
            self._own_comm = _comm.OwnComm(self.group)
            comm = self._own_comm.ptr
        self._cfg = cfg
        self.max_tokens_per_rank = max_tokens_per_rank
        self.hidden = hidden
        self.num_experts = num_experts
        self.topk = topk
        self.fp8 = bool(fp8)
        self.exact_combine = bool(exact_combine)
        self.algorithm = algorithm
        self.forwarding = forwarding
        self.forward_node_size = forward_node_size
        self.num_local_experts = num_experts // self.num_ranks if self.num_ranks else 0
        g = C.c_void_p()
        try:
            _lib.check(lib.ncclEpGroupCreate(C.c_void_p(comm), C.byref(cfg), C.byref(g)))
        except BaseException:
            if self._own_comm:
                self._own_comm.destroy()
            raise
        self._group_ptr = g.value
        n = C.c_int()
        _lib.check(lib.ncclEpGroupGetSmCount(self._group_ptr, C.byref(n)))
        self.num_sms = n.value
        if algorithm == "low_latency":
            shape = _abi.ncclEpLowLatencyShape_t()
            _lib.check(lib.ncclEpLowLatencyGetShape(self._group_ptr, C.byref(shape)))
            # (local experts Le, rows per expert = num_ranks * max_tokens_per_rank, hidden)
            self.low_latency_shape = (shape.numLocalExperts, shape.rowsPerExpert, shape.hidden)

    # --- sizes ------------------------------------------------------------------------------------
    @staticmethod
    def get_buffer_size_hint(num_ranks, max_tokens_per_rank, hidden, num_experts, topk, fp8=False,
                             sm_budget=0, timeout_ms=10000, exact_combine=False, algorithm="auto", forwarding="auto",
                             forward_node_size=0):
        """Bytes of symmetric (window) memory per rank a Buffer with these arguments allocates
        (ncclEpGetBufferSizeHint; the upper bound, reached with network peers). Needs libepx, not a
        GPU or torch. Raises EpError(ncclInvalidArgument) for an invalid configuration, ValueError for an
        int outside the C int range."""
        cfg = _make_config(max_tokens_per_rank, hidden, num_experts, topk, fp8, sm_budget, timeout_ms,
                           exact_combine, algorithm, forwarding, forward_node_size)
        num_ranks = _check_int32("num_ranks", int(num_ranks))
        out = C.c_size_t()
        _lib.check(_lib.lib().ncclEpGetBufferSizeHint(C.byref(cfg), num_ranks, C.byref(out)))
        return out.value

    # --- lifetime ---------------------------------------------------------------------------------
    def _native(self):
        if not self._group_ptr:
            raise RuntimeError("this epx.Buffer was destroyed")
        return self._group_ptr

    def destroy(self):
        """Destroy every native handle, the group and an own communicator (waits for the device).
        Handles of this buffer become unusable."""
        lib = getattr(self, "_clib", None) if self._group_ptr else None
        for h in list(getattr(self, "_live_ll", ())):
            h.destroy()
        self._ll_default = None
        for h in list(getattr(self, "_live", ())):
            if h._ptr and lib is not None:
                lib.ncclEpHandleDestroy(h._ptr)
            h._ptr = None
            h._keep = ()
        for ptrs in self._pool.values():
            for p in ptrs:
                lib.ncclEpHandleDestroy(p)
        self._pool = {}
        self._buffers = None
        if self._group_ptr:
            g, self._group_ptr = self._group_ptr, None
            _lib.check(lib.ncclEpGroupDestroy(g))
        if self._own_comm:
            self._own_comm.destroy()
            self._own_comm = None

    def _take_native(self, key):
        ptrs = self._pool.get(key)
        if ptrs:
            return ptrs.pop()
        layout, mode, alignment, zero_gaps, exact_combine = key
        hc = _abi.handle_config_initializer()
        hc.layout = _LAYOUTS[layout]
        hc.mode = _MODES[mode]
        hc.expertAlignment = alignment
        hc.zeroGaps = 1 if zero_gaps else 0
        hc.combinePrecision = _abi.ncclEpCombineFp32 if exact_combine else _abi.ncclEpCombineBf16Partials
        h = C.c_void_p()
        _lib.check(_lib.lib().ncclEpHandleCreate(self._native(), C.byref(hc), C.byref(h)))
        return h.value

    def _give_native(self, key, ptr):
        if self._group_ptr:
            self._pool.setdefault(key, []).append(ptr)
        # else: destroyed with the group already

    def create_handle(self, layout="dedup", mode="exact", alignment=1, zero_gaps=False, exact_combine=False):
        """A new route slot (allocates device memory: create handles before CUDA graph capture).

        layout: "dedup" (one row per (token, destination rank), top-k ids and weights per row) or
            "expanded" (one row per (token, local expert), grouped by expert, segments aligned to
            `alignment` rows, gaps zeroed with zero_gaps=True).
        mode: "exact" (layout waits for the counts, outputs sized exactly; not capturable) or
            "capacity" (no host sync, outputs sized at capacity; capturable in a CUDA graph).
        exact_combine: combine partial sums in FP32 (needs Buffer(exact_combine=True)).
        """
        if layout not in _LAYOUTS:
            raise ValueError("layout must be 'dedup' or 'expanded', got %r" % (layout,))
        if mode not in _MODES:
            raise ValueError("mode must be 'exact' or 'capacity', got %r" % (mode,))
        layout = "dedup" if layout == "deduplicated" else layout
        if isinstance(alignment, bool) or not isinstance(alignment, int):
            raise TypeError("alignment must be an int, got %r" % (alignment,))
        self._require_ht("create_handle")
        return Handle(self, layout, mode, alignment, zero_gaps, exact_combine)

    # --- streams ----------------------------------------------------------------------------------
    @property
    def comm_stream(self):
        """The Buffer's own CUDA stream (torch.cuda.Stream), on which calls with async_finish=True or
        previous_event=... run; created at first use."""
        if self._comm_stream is None:
            import torch  # noqa: PLC0415
            self._comm_stream = torch.cuda.Stream(device=self.device)
        return self._comm_stream

    def _begin(self, torch, previous_event, async_finish):
        """(current stream, launch stream, side). Side (async_finish or previous_event): launch on
        comm_stream after previous_event, else after everything issued on the current stream. Not
        side: the current stream, after the last side call (the group's calls stay stream-ordered)."""
        cur = torch.cuda.current_stream(self.device)
        capturing = bool(torch.cuda.is_current_stream_capturing())
        if previous_event is None and not async_finish:
            if self._side_event is not None:
                ev, captured = self._side_event
                if captured == capturing:  # an event of the other capture state cannot be waited for
                    cur.wait_event(ev)
                self._side_event = None
            return cur, cur, False
        ev = as_cuda_event(previous_event) if previous_event is not None else None
        s = self.comm_stream
        if ev is not None:
            s.wait_event(ev)
        else:
            s.wait_stream(cur)
        return cur, s, True

    def _finish(self, torch, cur, s, side, async_finish, tensors):
        """After a call: nothing for the current stream; on comm_stream mark the tensors as used
        there, record the completion, and return it (async_finish) or make the current stream wait."""
        if not side:
            return None
        capturing = bool(torch.cuda.is_current_stream_capturing())
        if not capturing:  # a graph's memory pool keeps its tensors for the graph's lifetime
            for t in tensors:
                if t is not None:
                    t.record_stream(s)
        ev = torch.cuda.Event()
        ev.record(s)
        self._side_event = (ev, capturing)
        if async_finish:
            return EventOverlap(ev, tensors)
        cur.wait_event(ev)
        return None

    # --- errors -----------------------------------------------------------------------------------
    def get_async_error(self):
        """(code, message) of the group's device-side error; code 0 when none. Does not synchronize."""
        return _native.async_error(_lib.lib().ncclEpGroupGetAsyncError, self._native())

    def check_async_error(self):
        """Raise EpAsyncError for a device-side error of the group. A timeout (ncclRemoteError) is
        raised at every call; invalid expert ids (ncclInvalidArgument) once per occurrence."""
        code, msg = self.get_async_error()
        if code == _abi.ncclSuccess:
            return
        if code == _abi.ncclRemoteError or (code, msg) != self._reported_async:
            self._reported_async = (code, msg)
            raise EpAsyncError(code, msg)

    # --- dispatch / combine -----------------------------------------------------------------------
    def dispatch(self, x, topk_idx, topk_weights=None, layout=None, alignment=None, zero_gaps=None,
                 mode=None, x_scales=None, handle=None, return_src_info=False, exact_combine=None,
                 previous_event=None, async_finish=False, zero_copy=False):
        """Send every token to the ranks of its experts (collective, on the current stream).

        Args:
            x: [T, hidden] torch.bfloat16, or torch.float8_e4m3fn with x_scales (or x=(x_fp8, scales)),
                CUDA, contiguous, 16-byte aligned; T <= max_tokens_per_rank.
            topk_idx: [T, topk] torch.int32 or torch.int64 expert ids in [0, num_experts), -1 = unused
                slot. None together with handle=...: cached dispatch on the handle's route.
            topk_weights: optional [T, topk] torch.float32 gate weights (then received per row).
            layout: "dedup" (default) or "expanded". alignment: expanded segment alignment in rows
                (default 1). zero_gaps: zero the alignment gap rows. mode: "exact" (default) or
                "capacity". exact_combine: FP32 combine partials. These pick the handle's config; with
                handle=... they must be left None or equal the handle's.
            x_scales: FP8 only, [T, hidden/128] torch.float32.
            handle: reuse this Handle (its native route slot) instead of a pooled one.
            return_src_info: also return recv_src_info [R, 2] int32.
            previous_event: start after this epx.EventOverlap / torch.cuda.Event (on comm_stream)
                instead of after the current stream's work.
            async_finish: run on comm_stream and return at once with .event (an EventOverlap): call
                d.event.current_stream_wait() before using the outputs on the current stream.
            zero_copy: dedup layout only: receive into the group's window (get_buffers()) instead of
                new tensors; the rows stay valid until the group's next dispatch returns.
        Returns:
            DispatchOutput (see its docstring), with .handle for combine and .event.
        """
        import torch  # noqa: PLC0415

        self._require_ht("dispatch")
        self.check_async_error()
        if handle is None:
            handle = self.create_handle(layout or "dedup", mode or "exact", 1 if alignment is None else alignment,
                                        bool(zero_gaps), bool(exact_combine))
        else:
            if handle.buffer is not self:
                raise ValueError("handle belongs to another epx.Buffer")
            want = {"layout": layout, "mode": mode, "alignment": alignment, "zero_gaps": zero_gaps,
                    "exact_combine": exact_combine}
            for k, v in want.items():
                if v is not None and (("dedup" if v == "deduplicated" else v) != getattr(handle, k)):
                    raise ValueError("%s=%r differs from the handle's %r" % (k, v, getattr(handle, k)))
        cached = topk_idx is None
        if cached and handle.num_tokens is None:
            raise ValueError("topk_idx is required (the handle has no route yet)")
        idx_for_check = topk_idx
        if cached:  # no new route: x must have the route's T
            x0 = x[0] if isinstance(x, (tuple, list)) else x
            if x0 is None or int(x0.shape[0]) != handle.num_tokens:
                raise ValueError("cached dispatch: x has %s tokens but the handle's route has %d"
                                 % (None if x0 is None else int(x0.shape[0]), handle.num_tokens))
            idx_for_check = _FakeIdx(handle.num_tokens, self.topk, x)
        x, x_scales, t, x_type, idx_type = _checks.check_dispatch_args(
            x, x_scales, idx_for_check, topk_weights, hidden=self.hidden, topk=self.topk,
            max_tokens=self.max_tokens_per_rank, fp8_enabled=self.fp8, device=self.device)
        if zero_copy and handle.expanded:
            raise ValueError("zero_copy=True needs the dedup layout (the group's window holds deduplicated rows)")
        lib = _lib.lib()
        hp = handle._native()
        cur, launch, side = self._begin(torch, previous_event, async_finish)
        stream = launch.cuda_stream
        if not cached:
            routing = _abi.ncclEpRouting_t(_ptr(topk_idx), idx_type, t)
            _lib.check(lib.ncclEpDispatchLayout(hp, C.byref(routing), C.c_void_p(stream)))
            handle.num_tokens = t
            handle.dispatched = False
            if handle.mode == "exact":
                counts = _abi.ncclEpCounts_t()
                _lib.check(lib.ncclEpHandleGetCounts(hp, C.byref(counts)))
                handle.num_rows = counts.numRows
                handle.num_recv_tokens = counts.numTokens
                handle.expert_counts = [counts.expertCounts[i] for i in range(counts.numLocalExperts)]
            else:
                handle.num_rows = handle.capacity
        r = handle.num_rows
        ra = max(r, 1)  # libepx needs non-NULL outputs even for 0 rows
        dev = self.device
        le = self.num_local_experts
        is_fp8 = x_type == _abi.ncclFloat8e4m3
        if zero_copy:
            win = self.get_buffers()
            ra = win.rows
            recv_x = win.recv_x_fp8 if is_fp8 else win.recv_x
            recv_scales = win.recv_x_scales if is_fp8 else None
            recv_w = win.recv_topk_weights if topk_weights is not None else None
            recv_idx = win.recv_topk_idx
            src_info = win.recv_src_info if return_src_info else None
        else:
            recv_x = torch.empty((ra, self.hidden), dtype=x.dtype, device=dev)
            recv_scales = torch.empty((ra, self.hidden // 128), dtype=torch.float32, device=dev) if is_fp8 else None
            recv_w = None
            if topk_weights is not None:
                recv_w = torch.empty((ra,) if handle.expanded else (ra, self.topk), dtype=torch.float32, device=dev)
            recv_idx = None if handle.expanded else torch.empty((ra, self.topk), dtype=torch.int32, device=dev)
            src_info = torch.empty((ra, 2), dtype=torch.int32, device=dev) if return_src_info else None
        small = torch.empty((2 * le + 2,), dtype=torch.int32, device=dev)
        counts_t, offsets_t, nrows_t = small[:le], small[le:2 * le + 1], small[2 * le + 1:]
        din = _abi.ncclEpDispatchInputs_t(_ptr(x), x_type, _ptr(x_scales), _ptr(topk_weights), self.hidden)
        dout = _abi.ncclEpDispatchOutputs_t(_ptr(recv_x), _ptr(recv_scales), _ptr(recv_w), _ptr(recv_idx),
                                            _ptr(src_info), _ptr(counts_t), _ptr(offsets_t), _ptr(nrows_t), ra)
        _lib.check(lib.ncclEpDispatch(hp, C.byref(din), C.byref(dout), C.c_void_p(stream)))
        handle.dispatched = True
        if not cached:
            handle._keep = (topk_idx,)  # the capacity-mode layout reads it on the device
        event = self._finish(torch, cur, launch, side, async_finish,
                             (x, x_scales, topk_idx, topk_weights, recv_x, recv_scales, recv_w, recv_idx,
                              src_info, small))

        def cut(t_):
            return None if t_ is None else t_[:r]

        return DispatchOutput(cut(recv_x), cut(recv_scales), cut(recv_idx), cut(recv_w), cut(src_info),
                              counts_t, offsets_t, nrows_t, handle, event)

    def combine(self, handle, x, bias=None, topk_weights=None, out=None, previous_event=None,
                async_finish=False):
        """Return expert outputs to their source tokens and sum them in FP32 (collective, current stream).

        Args:
            handle: the Handle of a dispatch (combine needs a dispatch of the handle's current route).
            x: [R' >= handle.num_rows, hidden] torch.bfloat16 expert outputs in the dispatch output's
                row order (gate weights already applied: combine never multiplies by weights).
            bias: optional [T, hidden] bfloat16 tensor, or a tuple of up to two, added once per token.
            topk_weights: optional float32 (expanded [R], dedup [R, topk]) weights of the rows; then
                combined_topk_weights [T, topk] is returned (the backward of the dispatched weights).
            out: optional preallocated [T, hidden] bfloat16 output.
            previous_event, async_finish: as for dispatch (comm_stream; .event of the result).
            Zero-copy (dedup layout): x = get_buffers().combine_x[:R] with the expert outputs written
            there; every rank must do so for the same call, or none.
        Returns:
            CombineOutput: unpacks as (out [T, hidden] bfloat16, combined_topk_weights [T, topk]
            float32 or None), T = the route's number of tokens; .event with async_finish=True.
        """
        import torch  # noqa: PLC0415

        self._require_ht("combine")
        if not isinstance(handle, Handle) or handle.buffer is not self:
            raise ValueError("handle must be an epx.Handle of this Buffer (from dispatch)")
        if handle.num_tokens is None:
            raise ValueError("the handle has no route: dispatch first")
        self.check_async_error()
        t = handle.num_tokens
        biases = _checks.check_combine_args(x, handle.num_rows, t, bias, topk_weights, hidden=self.hidden,
                                            topk=self.topk, expanded=handle.expanded, device=self.device)
        dev = self.device
        if out is None:
            out_full = torch.empty((max(t, 1), self.hidden), dtype=torch.bfloat16, device=dev)
            out = out_full[:t]
        else:
            _checks.check_tensor("out", out, (t, self.hidden), (_checks.BF16,), 16, dev)
            out_full = out
        if handle.expanded and self._buffers is not None and int(x.data_ptr()) == self._buffers.ptrs.combineX:
            raise ValueError("combine: the expanded layout cannot take get_buffers().combine_x as input "
                             "(libepx stages rows for network peers there); use it with the dedup layout")
        cw = torch.empty((t, self.topk), dtype=torch.float32, device=dev) if topk_weights is not None else None
        xr = int(x.shape[0])
        if xr == 0:  # libepx needs a non-NULL x even for 0 rows
            x = torch.empty((1, self.hidden), dtype=torch.bfloat16, device=dev)
            xr = 1
        cin = _abi.ncclEpCombineInputs_t(_ptr(x), _abi.ncclBfloat16, _ptr(biases[0]), _ptr(biases[1]),
                                         _ptr(topk_weights), xr, self.hidden)
        cout = _abi.ncclEpCombineOutputs_t(_ptr(out_full) if t > 0 else None, _ptr(cw) if t > 0 else None, t)
        cur, launch, side = self._begin(torch, previous_event, async_finish)
        _lib.check(_lib.lib().ncclEpCombine(handle._native(), C.byref(cin), C.byref(cout),
                                            C.c_void_p(launch.cuda_stream)))
        event = self._finish(torch, cur, launch, side, async_finish,
                             (x, biases[0], biases[1], topk_weights, out_full, cw))
        return CombineOutput(out, cw, event)

    def get_buffers(self):
        """The group's receive and combine buffers in its window as torch tensors, without a copy
        (ncclEpGroupGetBuffers; epx.window.GroupBuffers: recv_x, recv_x_fp8, recv_x_scales,
        recv_topk_idx, recv_topk_weights, recv_src_info, combine_x, rows = num_ranks *
        max_tokens_per_rank). Valid while the Buffer lives (destroy() frees the memory)."""
        if self._buffers is None:
            import torch  # noqa: PLC0415
            b = _abi.ncclEpBuffers_t()
            _lib.check(_lib.lib().ncclEpGroupGetBuffers(self._native(), C.byref(b)))
            self._buffers = group_buffers(torch, b, self.hidden, self.topk, self.fp8, self.device, None)
        return self._buffers

    # --- low-latency mode (ep_ll.h) -------------------------------------------------------------------
    def _require_ht(self, what):
        if self.algorithm == "low_latency":
            raise ValueError("%s: this Buffer was created with algorithm='low_latency'; it serves only "
                             "low_latency_dispatch / low_latency_combine" % what)

    def _require_ll(self, what):
        if self.algorithm != "low_latency":
            raise ValueError("%s needs a Buffer created with algorithm='low_latency' (this one: %r)"
                             % (what, self.algorithm))

    def create_low_latency_handle(self):
        """A low-latency route slot: one per micro-batch in flight (two alternate without sharing
        rows). Allocates device memory: create before CUDA graph capture."""
        self._require_ll("create_low_latency_handle")
        return _ll.LowLatencyHandle(self)

    def _default_ll_handle(self):
        if self._ll_default is None:
            self._ll_default = _ll.LowLatencyHandle(self)
        return self._ll_default

    def low_latency_dispatch(self, x, topk_idx, use_fp8=False, round_scale=False, return_src_info=False,
                             handle=None, return_recv_hook=False):
        """Low-latency dispatch (ncclEpLowLatencyDispatch; collective, current stream, capturable).

        Args:
            x: [T, hidden] torch.bfloat16, T <= max_tokens_per_rank (CUDA, contiguous, 16-byte aligned).
            topk_idx: [T, topk] torch.int32/int64 global expert ids, -1 = masked slot.
            use_fp8: cast to FP8 e4m3 in the kernel with one float32 scale per 128 channels (needs
                Buffer(fp8=True); the same on every rank). round_scale: scales rounded up to powers of 2.
            return_src_info: also return recv_src_info [Le, Rpe, 3] int32.
            handle: a LowLatencyHandle (default: the Buffer's own one).
            return_recv_hook: launch only the send half; the result's .hook() launches the receive half.
        Returns:
            LowLatencyDispatchOutput (recv_x, recv_x_scales, recv_count, recv_src_info, handle, hook).
        """
        self._require_ll("low_latency_dispatch")
        return _ll.dispatch(self, x, topk_idx, use_fp8, round_scale, return_src_info, handle, return_recv_hook)

    def low_latency_combine(self, x, topk_weights, handle, out=None, return_recv_hook=False):
        """Low-latency combine of the handle's last dispatch (ncclEpLowLatencyCombine; collective).

        Args:
            x: [Le, Rpe, hidden] torch.bfloat16 unweighted expert outputs in the dispatch layout (rows
                past recv_count are not read), e.g. get_low_latency_combine_buffer() (zero-copy).
            topk_weights: [T, topk] torch.float32 gate weights (T of the handle's dispatch), applied here.
            handle: the LowLatencyHandle of the dispatch. out: optional [T, hidden] bfloat16.
            return_recv_hook: launch only the send half; call the returned hook for the receive half.
        Returns:
            (out [T, hidden] bfloat16 = sum_k topk_weights[t, k] * expert output of slot k, hook or None).
            With a hook, out is written by the receive half.
        """
        self._require_ll("low_latency_combine")
        return _ll.combine(self, x, topk_weights, handle, out, return_recv_hook)

    def get_low_latency_combine_buffer(self):
        """The group's low-latency combine buffer [Le, Rpe, hidden] bfloat16 in its window, as a tensor
        (no copy): write the expert outputs there and pass it to low_latency_combine to save a copy for
        network peers. Must stay unchanged from the combine's send half until the next dispatch's
        receive half returned. Valid while the Buffer lives."""
        self._require_ll("get_low_latency_combine_buffer")
        import torch  # noqa: PLC0415
        p = C.c_void_p()
        _lib.check(_lib.lib().ncclEpLowLatencyGetCombineBuffer(self._native(), C.byref(p)))
        return window_tensor(torch, p.value, self.low_latency_shape, torch.bfloat16, self.device, None)


class _FakeIdx:
    """Stands in for topk_idx in the checks of a cached dispatch (no new route)."""

    def __init__(self, t, k, like):
        self.shape = (t, k)
        self.dtype = "torch.int32"
        self.is_cuda = True
        self.device = like[0].device if isinstance(like, (tuple, list)) else like.device

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return 0


__all__: List[str] = ["Buffer", "Handle", "DispatchOutput", "CombineOutput"]
