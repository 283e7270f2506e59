"""Low-latency (decode) dispatch and combine: the ctypes side of host/include/epx/ep_ll.h.

A Buffer created with algorithm="low_latency" serves only these calls (docs/low-latency.md): one
kernel per call, no layout, no host synchronization, capturable in a CUDA graph. Each (token, top-k
slot) becomes its own row at its expert's rank, expert-major: recv_x [Le, rows_per_expert, hidden]
with rows_per_expert = num_ranks * max_tokens_per_rank and recv_count [Le] valid rows per expert.
Combine is weighted at the source: out[t] = sum_k topk_weights[t, k] * expert output of slot k.

Send/receive split: return_recv_hook=True launches only the send half (NCCL_EP_LL_SEND) and returns
a LowLatencyRecvHook; calling it launches the receive half (NCCL_EP_LL_RECV) on the stream current
at that moment, with the same inputs and outputs (the hook keeps them referenced). Call-order rules
(ep_ll.h) are checked by libepx and raise EpError(ncclInvalidUsage).
"""

import ctypes as C
from dataclasses import dataclass
from typing import Any

from . import _abi, _checks, _lib


class LowLatencyHandle:
    """A low-latency route slot (ncclEpHandle_t of a low-latency group): one per micro-batch in
    flight. Create before CUDA graph capture (Buffer.create_low_latency_handle). num_tokens: T of its
    last dispatch (the rows of its combine's output)."""

    def __init__(self, buffer):
        hc = _abi.handle_config_initializer()  # the config is not used by low-latency calls
        h = C.c_void_p()
        self._clib = _lib.lib()  # the library that owns the native handle (destroy() uses it)
        _lib.check(self._clib.ncclEpHandleCreate(buffer._native(), C.byref(hc), C.byref(h)))
        self.buffer = buffer
        self._ptr = h.value
        self.num_tokens = None
        buffer._live_ll.add(self)

    def _native(self):
        if not self._ptr:
            raise RuntimeError("this epx.LowLatencyHandle was destroyed (or its Buffer was)")
        return self._ptr

    def destroy(self):
        if self._ptr and self.buffer._group_ptr:
            self._clib.ncclEpHandleDestroy(self._ptr)
        self._ptr = None

    def __del__(self):
        try:
            self.destroy()
        except Exception:  # noqa: BLE001 (interpreter shutdown)
            pass


class LowLatencyRecvHook:
    """The receive half of a low-latency call whose send half was issued (return_recv_hook=True).
    Call it once, on the stream that should wait for the data (ordered after the send half)."""

    def __init__(self, fn, handle, cin, cout, keep, what):
        self._fn, self._handle, self._in, self._out, self._keep = fn, handle, cin, cout, keep
        self.what = what
        self.done = False

    def __call__(self):
        import torch  # noqa: PLC0415
        if self.done:
            raise RuntimeError("the receive half of this %s was already issued" % self.what)
        buf = self._handle.buffer
        buf.check_async_error()
        stream = torch.cuda.current_stream(buf.device).cuda_stream
        _lib.check(self._fn(self._handle._native(), C.byref(self._in), C.byref(self._out),
                            _abi.NCCL_EP_LL_RECV, C.c_void_p(stream)))
        self.done = True
        self._keep = ()


@dataclass
class LowLatencyDispatchOutput:
    """Buffer.low_latency_dispatch's result. Le = local experts, Rpe = rows_per_expert.

    recv_x: [Le, Rpe, hidden] bfloat16, or float8_e4m3fn with use_fp8; expert le's rows
        0 .. recv_count[le]-1 valid, in (source rank, source token) order; the rest unwritten.
    recv_x_scales: use_fp8: float32 [Le, Rpe, hidden/128] (value = fp8 value * scale); else None.
    recv_count: int32 [Le] (device). recv_src_info: int32 [Le, Rpe, 3] (source rank, source token,
    top-k slot) with return_src_info=True, else None. handle: for the combine.
    hook: the receive half with return_recv_hook=True (the outputs are valid after it ran), else None.
    """

    recv_x: Any
    recv_x_scales: Any
    recv_count: Any
    recv_src_info: Any
    handle: LowLatencyHandle
    hook: Any = None


def _ptr(t):
    return None if t is None else int(t.data_ptr())


def _nonempty(torch, t, shape, dtype, dev):
    """t, or a 1-row stand-in when t has no elements (libepx needs non-NULL pointers)."""
    return t if t.numel() else torch.empty(shape, dtype=dtype, device=dev)


def dispatch(buf, x, topk_idx, use_fp8, round_scale, return_src_info, handle, return_recv_hook):
    import torch  # noqa: PLC0415
    if round_scale and not use_fp8:
        raise ValueError("round_scale=True needs use_fp8=True")
    if use_fp8 and not buf.fp8:
        raise ValueError("use_fp8=True needs a buffer created with fp8=True")
    if handle is None:
        handle = buf._default_ll_handle()
    elif not isinstance(handle, LowLatencyHandle) or handle.buffer is not buf:
        raise ValueError("handle must be an epx.LowLatencyHandle of this Buffer")
    if x is None or len(tuple(x.shape)) != 2:
        raise ValueError("x must be 2-D [num_tokens, hidden] torch.bfloat16")
    t = int(x.shape[0])
    if t > buf.max_tokens_per_rank:
        raise ValueError("x has %d tokens but the buffer was created with max_tokens_per_rank=%d"
                         % (t, buf.max_tokens_per_rank))
    dev = buf.device
    _checks.check_tensor("x", x, (t, buf.hidden), (_checks.BF16,), 16, dev)
    _checks.check_tensor("topk_idx", topk_idx, (t, buf.topk), (_checks.I32, _checks.I64), 4, dev)
    is64 = _checks.dtype_name(topk_idx) == _checks.I64
    if is64 and int(topk_idx.data_ptr()) % 8:
        raise ValueError("topk_idx (int64) must be 8-byte aligned")
    buf.check_async_error()
    le, rpe, h = buf.low_latency_shape
    xin = _nonempty(torch, x, (1, h), torch.bfloat16, dev)
    iin = _nonempty(torch, topk_idx, (1, buf.topk), topk_idx.dtype, dev)
    recv_x = torch.empty((le, rpe, h), dtype=torch.float8_e4m3fn if use_fp8 else torch.bfloat16, device=dev)
    scales = torch.empty((le, rpe, h // 128), dtype=torch.float32, device=dev) if use_fp8 else None
    count = torch.empty((le,), dtype=torch.int32, device=dev)
    src = torch.empty((le, rpe, 3), dtype=torch.int32, device=dev) if return_src_info else None
    cin = _abi.ncclEpLowLatencyDispatchInputs_t(int(xin.data_ptr()), int(iin.data_ptr()),
                                                _abi.ncclInt64 if is64 else _abi.ncclInt32, t,
                                                1 if use_fp8 else 0, 1 if round_scale else 0)
    cout = _abi.ncclEpLowLatencyDispatchOutputs_t(int(recv_x.data_ptr()), _ptr(scales), int(count.data_ptr()),
                                                  _ptr(src))
    fn = _lib.lib().ncclEpLowLatencyDispatch
    flags = _abi.NCCL_EP_LL_SEND if return_recv_hook else _abi.NCCL_EP_LL_SEND_RECV
    stream = torch.cuda.current_stream(dev).cuda_stream
    _lib.check(fn(handle._native(), C.byref(cin), C.byref(cout), flags, C.c_void_p(stream)))
    handle.num_tokens = t
    hook = None
    if return_recv_hook:
        hook = LowLatencyRecvHook(fn, handle, cin, cout, (xin, iin, recv_x, scales, count, src),
                                  "low-latency dispatch")
    return LowLatencyDispatchOutput(recv_x, scales, count, src, handle, hook)


def combine(buf, x, topk_weights, handle, out, return_recv_hook):
    import torch  # noqa: PLC0415
    if not isinstance(handle, LowLatencyHandle) or handle.buffer is not buf:
        raise ValueError("handle must be the epx.LowLatencyHandle of a low_latency_dispatch of this Buffer")
    if handle.num_tokens is None:
        raise ValueError("the handle has no low-latency dispatch to combine")
    t = handle.num_tokens
    le, rpe, h = buf.low_latency_shape
    dev = buf.device
    _checks.check_tensor("x", x, (le, rpe, h), (_checks.BF16,), 16, dev)
    _checks.check_tensor("topk_weights", topk_weights, (t, buf.topk), (_checks.F32,), 4, dev)
    if out is None:
        out = torch.empty((t, h), dtype=torch.bfloat16, device=dev)
    else:
        _checks.check_tensor("out", out, (t, h), (_checks.BF16,), 16, dev)
    buf.check_async_error()
    win = _nonempty(torch, topk_weights, (1, buf.topk), torch.float32, dev)
    oin = _nonempty(torch, out, (1, h), torch.bfloat16, dev)
    cin = _abi.ncclEpLowLatencyCombineInputs_t(int(x.data_ptr()), int(win.data_ptr()))
    cout = _abi.ncclEpLowLatencyCombineOutputs_t(int(oin.data_ptr()))
    fn = _lib.lib().ncclEpLowLatencyCombine
    flags = _abi.NCCL_EP_LL_SEND if return_recv_hook else _abi.NCCL_EP_LL_SEND_RECV
    stream = torch.cuda.current_stream(dev).cuda_stream
    _lib.check(fn(handle._native(), C.byref(cin), C.byref(cout), flags, C.c_void_p(stream)))
    hook = None
    if return_recv_hook:
        hook = LowLatencyRecvHook(fn, handle, cin, cout, (x, win, oin), "low-latency combine")
    return out, hook
