"""CPU tests of epx.Buffer's glue with a fake torch and a fake libepx (no GPU, no torch, no libepx).

They check what the Python layer hands to the C API (struct fields, pointers, stream, handle
configs), what it returns (output shapes/dtypes), errors, async errors, the handle pool and
teardown. What libepx then does on the device is the GPU tests' business (tests/gpu_smoke.py).
"""

import ctypes as C
import os
import sys
import types
import unittest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import epx  # noqa: E402
from epx import _abi, _lib  # noqa: E402

STREAM = 0xABC0
COMM = 0x5000
COMM_STREAM = 0xC0FFEE
ITEMSIZE = {"bfloat16": 2, "float8_e4m3fn": 1, "float32": 4, "int32": 4, "int64": 8, "uint8": 1}
LOG = []  # stream/event operations of the fake torch, in order
DLPACK = []  # (data, bytes, device id) of every DLPack capsule the fake torch.from_dlpack consumed


# --- fake torch --------------------------------------------------------------------------------
class Dtype:
    def __init__(self, name):
        self.name = name

    def __str__(self):
        return "torch." + self.name


class Device:
    def __init__(self, kind, index=0):
        self.kind, self.index = kind, index

    def __str__(self):
        return "%s:%d" % (self.kind, self.index)


class Tensor:
    _next = 0x100000

    def __init__(self, shape, dtype, ptr=None):
        self.shape = tuple(shape)
        self.dtype = dtype
        self.device = Device("cuda", 0)
        self.is_cuda = True
        if ptr is None:
            ptr = Tensor._next
            n = 1
            for s in shape:
                n *= s
            Tensor._next += (n * ITEMSIZE[dtype.name] + 255) // 256 * 256 + 256
        self._ptr = ptr

    def is_contiguous(self):
        return True

    def data_ptr(self):
        return self._ptr

    def element_size(self):
        return ITEMSIZE[self.dtype.name]

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def view(self, what):
        if isinstance(what, Dtype):
            last = self.shape[-1] * ITEMSIZE[self.dtype.name] // ITEMSIZE[what.name]
            return Tensor(self.shape[:-1] + (last,), what, self._ptr)
        t = Tensor(tuple(what), self.dtype, self._ptr)
        assert t.numel() == self.numel(), (what, self.shape)
        return t

    def record_stream(self, stream):
        LOG.append(("record_stream", self._ptr, stream.cuda_stream))

    def __getitem__(self, sl):
        assert isinstance(sl, slice) and sl.step is None
        start, stop, _ = sl.indices(self.shape[0])
        row = ITEMSIZE[self.dtype.name]
        for s in self.shape[1:]:
            row *= s
        return Tensor((max(stop - start, 0),) + self.shape[1:], self.dtype, self._ptr + start * row)


class Stream:
    def __init__(self, handle):
        self.cuda_stream = handle

    def wait_event(self, ev):
        LOG.append(("wait_event", self.cuda_stream, ev.id))

    def wait_stream(self, other):
        LOG.append(("wait_stream", self.cuda_stream, other.cuda_stream))

    def synchronize(self):
        pass


class Event:
    _next = 1

    def __init__(self):
        self.id = Event._next
        Event._next += 1

    def record(self, stream):
        LOG.append(("record", self.id, stream.cuda_stream))

    def query(self):
        return True

    def synchronize(self):
        LOG.append(("synchronize", self.id))


def make_fake_torch(comm_ptr=COMM):
    torch = types.ModuleType("torch")
    for n in ITEMSIZE:
        setattr(torch, n, Dtype(n))
    torch.device = Device
    torch.Tensor = Tensor

    def empty(shape, dtype=None, device=None):
        return Tensor(shape, dtype)

    torch.empty = empty
    torch.zeros = lambda *shape, device=None, dtype=None: Tensor(shape, dtype or torch.float32)
    stream = Stream(STREAM)
    state = types.SimpleNamespace(capturing=False)
    torch.cuda = types.SimpleNamespace(current_device=lambda: 0, current_stream=lambda device=None: stream,
                                       Stream=lambda device=None: Stream(COMM_STREAM), Event=Event,
                                       is_current_stream_capturing=lambda: state.capturing, state=state)

    def from_dlpack(capsule):
        """Reads the capsule as torch does (name "dltensor", DLManagedTensor); the deleter is called
        when the fake tensor is dropped."""
        from epx import window  # noqa: PLC0415
        get = C.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
        m = window.DLManagedTensor.from_address(get(capsule, b"dltensor"))
        t = m.dl_tensor
        assert (t.device.device_type, t.ndim, t.dtype.code, t.dtype.bits, t.dtype.lanes, t.byte_offset) == \
            (window.kDLCUDA, 1, window.kDLUInt, 8, 1, 0)
        assert not t.strides
        DLPACK.append((t.data, t.shape[0], t.device.device_id))
        out = Tensor((t.shape[0],), torch.uint8, t.data)
        out._dl = m
        return out

    torch.from_dlpack = from_dlpack

    dist = types.ModuleType("torch.distributed")
    backend = types.SimpleNamespace(_comm_ptr=comm_ptr if callable(comm_ptr) else (lambda: comm_ptr))
    world = types.SimpleNamespace(_get_backend=lambda dev: backend)
    dist.group = types.SimpleNamespace(WORLD=world)
    dist.get_rank = lambda g=None: 0
    dist.get_world_size = lambda g=None: 2
    dist.get_global_rank = lambda g, r: r
    dist.all_reduce = lambda t, group=None: None
    dist.broadcast_object_list = lambda box, src=0, group=None: None
    torch.distributed = dist
    return torch, dist


# --- fake libepx -------------------------------------------------------------------------------
class FakeLib:
    """Records every call; fills outputs through the byref'd ctypes objects."""

    def __init__(self):
        self.calls = []
        self.fail = {}  # function name -> ncclResult_t to return
        self.async_code = 0
        self.async_msg = b""
        self.next_handle = 0x9000
        self.counts = (C.c_int * 4)(3, 0, 2, 2)
        self.window = dict(recvX=0x800000, recvScales=0x900000, recvTopkIdx=0xA00000, recvTopkWeights=0xB00000,
                           recvSrcInfo=0xC00000, combineX=0xD00000, rows=32)
        for name in ("ncclEpGroupDestroy", "ncclEpHandleDestroy"):
            setattr(self, name, self._rec(name))

    def _rec(self, name):
        def f(*args):
            self.calls.append((name, args))
            return self.fail.get(name, 0)
        return f

    def names(self):
        return [c[0] for c in self.calls]

    def last(self, name):
        return [c[1] for c in self.calls if c[0] == name][-1]

    def ncclEpGetLastError(self):
        return b"fake reason"

    def ncclEpGroupCreate(self, comm, cfg, out):
        self.calls.append(("ncclEpGroupCreate", (comm.value, _copy(cfg._obj))))
        out._obj.value = 0x7000
        return self.fail.get("ncclEpGroupCreate", 0)

    def ncclEpGroupGetSmCount(self, g, out):
        out._obj.value = 24
        return 0

    def ncclEpGroupGetAsyncError(self, g, code, msg, n):
        code._obj.value = self.async_code
        msg.value = self.async_msg
        return 0

    def ncclEpHandleCreate(self, g, hc, out):
        self.calls.append(("ncclEpHandleCreate", (_copy(hc._obj),)))
        self.next_handle += 0x10
        out._obj.value = self.next_handle
        return 0

    def ncclEpHandleGetCapacity(self, h, out):
        out._obj.value = 100
        return 0

    def ncclEpHandleGetCounts(self, h, out):
        c = out._obj
        c.numRows, c.numTokens, c.numLocalExperts = 7, 5, 4
        c.expertCounts = C.cast(self.counts, C.POINTER(C.c_int))
        return 0

    def ncclEpGroupGetBuffers(self, g, out):
        self.calls.append(("ncclEpGroupGetBuffers", (g,)))
        for k, v in self.window.items():
            setattr(out._obj, k, v)
        return 0

    def ncclEpLowLatencyGetShape(self, g, out):
        s = out._obj
        s.numLocalExperts, s.rowsPerExpert, s.hidden, s.scaleCols = 4, 32, 256, 2
        return self.fail.get("ncclEpLowLatencyGetShape", 0)

    def ncclEpLowLatencyGetCombineBuffer(self, g, out):
        out._obj.value = 0xE00000
        return 0

    def ncclEpLowLatencyDispatch(self, h, cin, cout, flags, stream):
        self.calls.append(("ncclEpLowLatencyDispatch", (h, _copy(cin._obj), _copy(cout._obj), flags, stream.value)))
        return self.fail.get("ncclEpLowLatencyDispatch", 0)

    def ncclEpLowLatencyCombine(self, h, cin, cout, flags, stream):
        self.calls.append(("ncclEpLowLatencyCombine", (h, _copy(cin._obj), _copy(cout._obj), flags, stream.value)))
        return self.fail.get("ncclEpLowLatencyCombine", 0)

    def ncclEpDispatchLayout(self, h, routing, stream):
        self.calls.append(("ncclEpDispatchLayout", (h, _copy(routing._obj), stream.value)))
        return self.fail.get("ncclEpDispatchLayout", 0)

    def ncclEpDispatch(self, h, din, dout, stream):
        self.calls.append(("ncclEpDispatch", (h, _copy(din._obj), _copy(dout._obj), stream.value)))
        return self.fail.get("ncclEpDispatch", 0)

    def ncclEpCombine(self, h, cin, cout, stream):
        self.calls.append(("ncclEpCombine", (h, _copy(cin._obj), _copy(cout._obj), stream.value)))
        return self.fail.get("ncclEpCombine", 0)


def _copy(s):
    d = type(s)()
    C.memmove(C.addressof(d), C.addressof(s), C.sizeof(s))
    return d


class FakeNccl:
    def __init__(self):
        self.calls = []

    def ncclGetUniqueId(self, uid):
        uid._obj.internal = b"\x01\x02"
        self.calls.append("ncclGetUniqueId")
        return 0

    def ncclCommInitRank(self, comm, n, uid, rank):
        self.calls.append(("ncclCommInitRank", n, rank))
        comm._obj.value = 0x6000
        return 0

    def ncclCommDestroy(self, comm):
        self.calls.append(("ncclCommDestroy", comm))
        return 0


class GlueTest(unittest.TestCase):
    comm_ptr = COMM

    def setUp(self):
        self.saved_modules = {k: sys.modules.get(k) for k in ("torch", "torch.distributed")}
        self.torch, self.dist = make_fake_torch(self.comm_ptr)
        sys.modules["torch"] = self.torch
        sys.modules["torch.distributed"] = self.dist
        self.saved_lib, self.saved_nccl = _lib._lib, _lib._nccl
        del LOG[:]
        del DLPACK[:]
        self.lib = FakeLib()
        self.nccl = FakeNccl()
        _lib._lib, _lib._nccl = self.lib, self.nccl
        self.T, self.H, self.E, self.K = 5, 256, 8, 2  # 2 ranks (fake), Le = 4

    def tearDown(self):
        _lib._lib, _lib._nccl = self.saved_lib, self.saved_nccl
        for k, v in self.saved_modules.items():
            if v is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = v

    def buffer(self, **kw):
        return epx.Buffer(None, 16, self.H, self.E, self.K, **kw)

    def inputs(self, idx_dtype="int64"):
        t = self.torch
        return (Tensor((self.T, self.H), t.bfloat16), Tensor((self.T, self.K), getattr(t, idx_dtype)),
                Tensor((self.T, self.K), t.float32))


class TestBufferGlue(GlueTest):
    def test_create_passes_config_and_borrowed_comm(self):
        buf = self.buffer(sm_budget=16, timeout_ms=500, exact_combine=True)
        comm, cfg = self.lib.last("ncclEpGroupCreate")
        self.assertEqual(comm, COMM)
        self.assertTrue(buf.comm_borrowed)
        self.assertEqual((cfg.size, cfg.magic, cfg.version), (C.sizeof(cfg), _abi.NCCL_EP_CONFIG_MAGIC, 100))
        self.assertEqual((cfg.maxTokensPerRank, cfg.hidden, cfg.numExperts, cfg.topk), (16, 256, 8, 2))
        self.assertEqual((cfg.smBudget, cfg.timeoutMs, cfg.exactCombine, cfg.fp8Dispatch), (16, 500, 1, 0))
        self.assertEqual((cfg.qpBudget, cfg.slIndex), (_abi.NCCL_EP_UNDEF_INT,) * 2)
        self.assertEqual((buf.num_sms, buf.num_ranks, buf.num_local_experts), (24, 2, 4))

    def test_group_create_error(self):
        self.lib.fail["ncclEpGroupCreate"] = _abi.ncclInvalidUsage
        with self.assertRaises(epx.EpError) as cm:
            self.buffer()
        self.assertEqual((cm.exception.code, cm.exception.message), (5, "fake reason"))

    def test_dispatch_exact_dedup(self):
        buf = self.buffer()
        x, idx, w = self.inputs()
        d = buf.dispatch(x, idx, w)
        hc = self.lib.last("ncclEpHandleCreate")[0]
        self.assertEqual((hc.layout, hc.mode, hc.expertAlignment, hc.zeroGaps, hc.combinePrecision),
                         (_abi.ncclEpLayoutDeduplicated, _abi.ncclEpModeExact, 1, 0, 0))
        h, routing, stream = self.lib.last("ncclEpDispatchLayout")
        self.assertEqual((routing.topkIdx, routing.topkIdxType, routing.numTokens, stream),
                         (idx.data_ptr(), _abi.ncclInt64, self.T, STREAM))
        h2, din, dout, stream = self.lib.last("ncclEpDispatch")
        self.assertEqual(h, h2)
        self.assertEqual((din.x, din.xType, din.xScales, din.topkWeights, din.hidden),
                         (x.data_ptr(), _abi.ncclBfloat16, None, w.data_ptr(), self.H))
        self.assertEqual(dout.numRows, 7)
        self.assertEqual(dout.recvX, d.recv_x.data_ptr())
        self.assertEqual(dout.recvTopkIdx, d.recv_topk_idx.data_ptr())
        self.assertEqual(dout.recvTopkWeights, d.recv_topk_weights.data_ptr())
        self.assertIsNone(dout.recvScales)
        self.assertIsNone(dout.recvSrcInfo)
        self.assertEqual(d.recv_x.shape, (7, self.H))
        self.assertEqual(d.recv_topk_idx.shape, (7, self.K))
        self.assertEqual(str(d.recv_topk_idx.dtype), "torch.int32")
        self.assertEqual(d.recv_topk_weights.shape, (7, self.K))
        self.assertEqual((d.expert_counts.shape, d.expert_offsets.shape, d.num_recv_rows.shape), ((4,), (5,), (1,)))
        self.assertEqual((dout.expertCounts, dout.expertOffsets, dout.numRecvRows),
                         (d.expert_counts.data_ptr(), d.expert_offsets.data_ptr(), d.num_recv_rows.data_ptr()))
        self.assertEqual((d.handle.num_rows, d.handle.num_recv_tokens, d.handle.expert_counts), (7, 5, [3, 0, 2, 2]))

    def test_dispatch_capacity_expanded_fp8(self):
        buf = self.buffer(fp8=True)
        t = self.torch
        x8, sc = Tensor((self.T, self.H), t.float8_e4m3fn), Tensor((self.T, 2), t.float32)
        _, idx, w = self.inputs("int32")
        d = buf.dispatch((x8, sc), idx, w, layout="expanded", mode="capacity", alignment=16, zero_gaps=True,
                         return_src_info=True)
        hc = self.lib.last("ncclEpHandleCreate")[0]
        self.assertEqual((hc.layout, hc.mode, hc.expertAlignment, hc.zeroGaps),
                         (_abi.ncclEpLayoutExpanded, _abi.ncclEpModeCapacity, 16, 1))
        self.assertEqual(self.lib.last("ncclEpDispatchLayout")[1].topkIdxType, _abi.ncclInt32)
        self.assertNotIn("ncclEpHandleGetCounts", self.lib.names())
        _, din, dout, _ = self.lib.last("ncclEpDispatch")
        self.assertEqual((din.xType, din.xScales), (_abi.ncclFloat8e4m3, sc.data_ptr()))
        self.assertEqual(dout.numRows, 100)
        self.assertIsNone(dout.recvTopkIdx)
        self.assertIsNone(d.recv_topk_idx)
        self.assertEqual(d.recv_x.shape, (100, self.H))
        self.assertEqual(str(d.recv_x.dtype), "torch.float8_e4m3fn")
        self.assertEqual(d.recv_x_scales.shape, (100, 2))
        self.assertEqual(d.recv_topk_weights.shape, (100,))
        self.assertEqual(d.recv_src_info.shape, (100, 2))
        self.assertIsNone(d.handle.expert_counts)

    def test_combine(self):
        buf = self.buffer()
        x, idx, w = self.inputs()
        d = buf.dispatch(x, idx, w)
        y = Tensor((7, self.H), self.torch.bfloat16)
        b0, b1 = Tensor((self.T, self.H), self.torch.bfloat16), Tensor((self.T, self.H), self.torch.bfloat16)
        out, cw = buf.combine(d.handle, y, bias=(b0, b1), topk_weights=d.recv_topk_weights)
        h, cin, cout, stream = self.lib.last("ncclEpCombine")
        self.assertEqual(h, d.handle._ptr)
        self.assertEqual((cin.x, cin.xType, cin.bias0, cin.bias1, cin.topkWeights, cin.numRows, cin.hidden),
                         (y.data_ptr(), _abi.ncclBfloat16, b0.data_ptr(), b1.data_ptr(),
                          d.recv_topk_weights.data_ptr(), 7, self.H))
        self.assertEqual((cout.out, cout.combinedTopkWeights, cout.numTokens, stream),
                         (out.data_ptr(), cw.data_ptr(), self.T, STREAM))
        self.assertEqual((out.shape, cw.shape), ((self.T, self.H), (self.T, self.K)))
        out2, cw2 = buf.combine(d.handle, y)
        self.assertIsNone(cw2)
        with self.assertRaisesRegex(ValueError, "rows >= 7"):
            buf.combine(d.handle, Tensor((6, self.H), self.torch.bfloat16))

    def test_zero_rows_and_tokens_get_non_null_pointers(self):
        buf = self.buffer()
        t = self.torch
        self.lib.ncclEpHandleGetCounts = lambda h, out: (setattr(out._obj, "numRows", 0), 0)[1]
        d = buf.dispatch(Tensor((0, self.H), t.bfloat16, ptr=0), Tensor((0, self.K), t.int32, ptr=0))
        _, din, dout, _ = self.lib.last("ncclEpDispatch")
        self.assertTrue(dout.recvX)
        self.assertEqual(d.recv_x.shape, (0, self.H))
        out, _ = buf.combine(d.handle, d.recv_x)
        _, cin, cout, _ = self.lib.last("ncclEpCombine")
        self.assertTrue(cin.x)
        self.assertEqual(cout.numTokens, 0)
        self.assertEqual(out.shape, (0, self.H))

    def test_error_from_c_carries_last_error(self):
        buf = self.buffer()
        self.lib.fail["ncclEpDispatchLayout"] = _abi.ncclInvalidArgument
        with self.assertRaises(epx.EpError) as cm:
            buf.dispatch(*self.inputs())
        self.assertEqual((cm.exception.code, cm.exception.name, cm.exception.message),
                         (4, "ncclInvalidArgument", "fake reason"))
        self.assertNotIn("ncclEpDispatch", self.lib.names())

    def test_async_errors(self):
        buf = self.buffer()
        self.lib.async_code, self.lib.async_msg = _abi.ncclInvalidArgument, b"token 3 slot 1: bad id"
        with self.assertRaises(epx.EpAsyncError) as cm:
            buf.dispatch(*self.inputs())
        self.assertIn("bad id", cm.exception.message)
        buf.dispatch(*self.inputs())  # reported once: the group stays usable
        self.lib.async_code, self.lib.async_msg = _abi.ncclRemoteError, b"rank 1 never arrived"
        for _ in range(2):  # a timeout at every call
            with self.assertRaises(epx.EpAsyncError) as cm:
                buf.dispatch(*self.inputs())
            self.assertEqual(cm.exception.code, _abi.ncclRemoteError)

    def test_cached_dispatch_and_handle_checks(self):
        buf = self.buffer()
        x, idx, w = self.inputs()
        d = buf.dispatch(x, idx, w)
        n_layouts = self.lib.names().count("ncclEpDispatchLayout")
        d2 = buf.dispatch(x, None, handle=d.handle)
        self.assertEqual(self.lib.names().count("ncclEpDispatchLayout"), n_layouts)
        self.assertIs(d2.handle, d.handle)
        with self.assertRaisesRegex(ValueError, "cached dispatch: x has 4 tokens but the handle's route has 5"):
            buf.dispatch(Tensor((4, self.H), self.torch.bfloat16), None, handle=d.handle)
        with self.assertRaisesRegex(ValueError, "layout='expanded' differs"):
            buf.dispatch(x, idx, handle=d.handle, layout="expanded")
        h = buf.create_handle(mode="capacity")
        with self.assertRaisesRegex(ValueError, "topk_idx is required"):
            buf.dispatch(x, None, handle=h)

    def test_handle_pool_and_destroy(self):
        buf = self.buffer()
        d = buf.dispatch(*self.inputs())
        first = d.handle._ptr
        del d
        d = buf.dispatch(*self.inputs())
        self.assertEqual(self.lib.names().count("ncclEpHandleCreate"), 1)
        self.assertEqual(d.handle._ptr, first)
        other = buf.create_handle(layout="expanded")
        spare = buf.create_handle()  # same config as d's: a second native handle
        ptrs = {first, other._ptr, spare._ptr}
        self.assertEqual(len(ptrs), 3)
        spare.destroy()  # back to the pool
        self.assertIsNone(spare._ptr)
        buf.destroy()
        destroyed = [a[0] for n, a in self.lib.calls if n == "ncclEpHandleDestroy"]
        self.assertEqual(sorted(destroyed), sorted(ptrs))  # live and pooled, each once
        self.assertEqual(self.lib.names()[-1], "ncclEpGroupDestroy")
        with self.assertRaisesRegex(RuntimeError, "destroyed"):
            d.handle._native()
        buf.destroy()  # idempotent
        self.assertEqual(self.lib.names().count("ncclEpGroupDestroy"), 1)

    def test_destroy_goes_to_the_library_that_created_the_buffer(self):
        # A Buffer collected after the process switched libraries (tests swap in fakes; a late
        # garbage collection at exit) must not hand its pointers to another libepx.
        buf = self.buffer()
        buf.create_handle()
        other = FakeLib()
        _lib._lib = other
        buf.destroy()
        self.assertEqual(other.calls, [])
        self.assertEqual(self.lib.names().count("ncclEpGroupDestroy"), 1)

    def test_low_latency_calls_refused_on_a_high_throughput_buffer(self):
        buf = self.buffer()
        self.assertIsNone(buf.low_latency_shape)
        x, idx, _ = self.inputs()
        for f, args in ((buf.low_latency_dispatch, (x, idx)), (buf.create_low_latency_handle, ()),
                        (buf.get_low_latency_combine_buffer, ())):
            with self.assertRaisesRegex(ValueError, "algorithm='low_latency'"):
                f(*args)
        self.assertNotIn("ncclEpLowLatencyDispatch", self.lib.names())


class TestOwnComm(GlueTest):
    comm_ptr = 0  # PyTorch exposes no communicator

    def test_own_communicator(self):
        buf = self.buffer()
        self.assertFalse(buf.comm_borrowed)
        self.assertEqual(self.lib.last("ncclEpGroupCreate")[0], 0x6000)
        self.assertEqual(self.nccl.calls[:2], ["ncclGetUniqueId", ("ncclCommInitRank", 2, 0)])
        buf.destroy()
        self.assertEqual(self.nccl.calls[-1], ("ncclCommDestroy", 0x6000))


def _raise():
    raise RuntimeError("communicator not initialized")


class TestOwnCommWhenCommPtrRaises(TestOwnComm):
    comm_ptr = staticmethod(_raise)


if __name__ == "__main__":
    unittest.main()
