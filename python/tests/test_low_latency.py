"""CPU tests of the low-latency binding (epx/low_latency.py over ep_ll.h) with the fake torch and
fake libepx of test_glue.py: the structs, flags and stream handed to ncclEpLowLatencyDispatch /
ncclEpLowLatencyCombine, the send/receive split through the hook (same inputs and outputs for both
halves), output shapes/dtypes, argument checks, errors. The kernels are the GPU suites' business.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_glue import STREAM, GlueTest, Tensor  # noqa: E402

import epx  # noqa: E402
from epx import _abi  # noqa: E402

LE, RPE = 4, 32  # the fake libepx's ncclEpLowLatencyGetShape (2 ranks x 16 tokens)


class LowLatencyTest(GlueTest):
    def ll_buffer(self, **kw):
        return self.buffer(algorithm="low_latency", **kw)

    def ll_inputs(self, t=5, idx="int64"):
        torch = self.torch
        return Tensor((t, self.H), torch.bfloat16), Tensor((t, self.K), getattr(torch, idx))

    def test_create(self):
        buf = self.ll_buffer(fp8=True)
        _, cfg = self.lib.last("ncclEpGroupCreate")
        self.assertEqual((cfg.algorithm, cfg.fp8Dispatch), (_abi.ncclEpAlgoLowLatency, 1))
        self.assertEqual(buf.low_latency_shape, (LE, RPE, self.H))
        self.assertEqual(buf.algorithm, "low_latency")

    def test_dispatch_send_recv_in_one_call(self):
        buf = self.ll_buffer()
        x, idx = self.ll_inputs()
        d = buf.low_latency_dispatch(x, idx, return_src_info=True)
        h, cin, cout, flags, stream = self.lib.last("ncclEpLowLatencyDispatch")
        self.assertEqual((flags, stream), (_abi.NCCL_EP_LL_SEND_RECV, STREAM))
        self.assertEqual((cin.x, cin.topkIdx, cin.topkIdxType, cin.numTokens, cin.useFp8, cin.roundScale),
                         (x.data_ptr(), idx.data_ptr(), _abi.ncclInt64, 5, 0, 0))
        self.assertEqual((cout.recvX, cout.recvScales, cout.recvCount, cout.recvSrcInfo),
                         (d.recv_x.data_ptr(), None, d.recv_count.data_ptr(), d.recv_src_info.data_ptr()))
        self.assertEqual((d.recv_x.shape, str(d.recv_x.dtype)), ((LE, RPE, self.H), "torch.bfloat16"))
        self.assertEqual((d.recv_count.shape, str(d.recv_count.dtype)), ((LE,), "torch.int32"))
        self.assertEqual(d.recv_src_info.shape, (LE, RPE, 3))
        self.assertIsNone(d.recv_x_scales)
        self.assertIsNone(d.hook)
        self.assertEqual(h, d.handle._ptr)
        self.assertEqual(d.handle.num_tokens, 5)
        # The buffer's own handle is reused by the next call.
        d2 = buf.low_latency_dispatch(*self.ll_inputs(3, "int32"))
        self.assertIs(d2.handle, d.handle)
        self.assertEqual(self.lib.last("ncclEpLowLatencyDispatch")[1].topkIdxType, _abi.ncclInt32)
        self.assertEqual(self.lib.names().count("ncclEpHandleCreate"), 1)

    def test_fp8_dispatch(self):
        buf = self.ll_buffer(fp8=True)
        d = buf.low_latency_dispatch(*self.ll_inputs(), use_fp8=True, round_scale=True)
        _, cin, cout, _, _ = self.lib.last("ncclEpLowLatencyDispatch")
        self.assertEqual((cin.useFp8, cin.roundScale), (1, 1))
        self.assertEqual(str(d.recv_x.dtype), "torch.float8_e4m3fn")
        self.assertEqual(d.recv_x_scales.shape, (LE, RPE, self.H // 128))
        self.assertEqual(cout.recvScales, d.recv_x_scales.data_ptr())

    def test_send_recv_split_through_the_hook(self):
        buf = self.ll_buffer()
        x, idx = self.ll_inputs()
        d = buf.low_latency_dispatch(x, idx, return_recv_hook=True)
        h, cin, cout, flags, _ = self.lib.last("ncclEpLowLatencyDispatch")
        self.assertEqual(flags, _abi.NCCL_EP_LL_SEND)
        self.assertIsInstance(d.hook, epx.LowLatencyRecvHook)
        d.hook()
        h2, cin2, cout2, flags2, stream2 = self.lib.last("ncclEpLowLatencyDispatch")
        self.assertEqual((h2, flags2, stream2), (h, _abi.NCCL_EP_LL_RECV, STREAM))
        self.assertEqual(bytes(cin2), bytes(cin))  # the same inputs and outputs for both halves
        self.assertEqual(bytes(cout2), bytes(cout))
        with self.assertRaisesRegex(RuntimeError, "already issued"):
            d.hook()
        self.assertEqual(self.lib.names().count("ncclEpLowLatencyDispatch"), 2)
        # combine, split too
        y = Tensor((LE, RPE, self.H), self.torch.bfloat16)
        w = Tensor((5, self.K), self.torch.float32)
        out, hook = buf.low_latency_combine(y, w, d.handle, return_recv_hook=True)
        hc, ccin, ccout, cflags, _ = self.lib.last("ncclEpLowLatencyCombine")
        self.assertEqual((hc, cflags), (h, _abi.NCCL_EP_LL_SEND))
        self.assertEqual((ccin.x, ccin.topkWeights, ccout.out), (y.data_ptr(), w.data_ptr(), out.data_ptr()))
        self.assertEqual(out.shape, (5, self.H))
        hook()
        _, ccin2, ccout2, cflags2, _ = self.lib.last("ncclEpLowLatencyCombine")
        self.assertEqual((cflags2, bytes(ccin2), bytes(ccout2)), (_abi.NCCL_EP_LL_RECV, bytes(ccin), bytes(ccout)))

    def test_combine_whole_and_zero_copy_buffer(self):
        buf = self.ll_buffer()
        d = buf.low_latency_dispatch(*self.ll_inputs())
        cb = buf.get_low_latency_combine_buffer()
        self.assertEqual((cb.data_ptr(), cb.shape, str(cb.dtype)), (0xE00000, (LE, RPE, self.H), "torch.bfloat16"))
        out = Tensor((5, self.H), self.torch.bfloat16)
        got, hook = buf.low_latency_combine(cb, Tensor((5, self.K), self.torch.float32), d.handle, out=out)
        self.assertIs(got, out)
        self.assertIsNone(hook)
        _, cin, cout, flags, _ = self.lib.last("ncclEpLowLatencyCombine")
        self.assertEqual((cin.x, cout.out, flags), (0xE00000, out.data_ptr(), _abi.NCCL_EP_LL_SEND_RECV))

    def test_two_handles_for_two_micro_batches(self):
        buf = self.ll_buffer()
        a, b = buf.create_low_latency_handle(), buf.create_low_latency_handle()
        self.assertNotEqual(a._ptr, b._ptr)
        da = buf.low_latency_dispatch(*self.ll_inputs(5), handle=a, return_recv_hook=True)
        db = buf.low_latency_dispatch(*self.ll_inputs(3), handle=b, return_recv_hook=True)
        da.hook()
        db.hook()
        handles = [c[1][0] for c in self.lib.calls if c[0] == "ncclEpLowLatencyDispatch"]
        self.assertEqual(handles, [a._ptr, b._ptr, a._ptr, b._ptr])
        self.assertEqual((a.num_tokens, b.num_tokens), (5, 3))
        pa, pb = a._ptr, b._ptr
        buf.destroy()
        destroyed = [c[1][0] for c in self.lib.calls if c[0] == "ncclEpHandleDestroy"]
        self.assertEqual(sorted(destroyed), sorted([pa, pb]))
        self.assertEqual(self.lib.names()[-1], "ncclEpGroupDestroy")
        with self.assertRaisesRegex(RuntimeError, "destroyed"):
            a._native()

    def test_argument_checks(self):
        buf = self.ll_buffer()
        torch = self.torch
        x, idx = self.ll_inputs()
        cases = [
            (dict(x=Tensor((17, self.H), torch.bfloat16), topk_idx=Tensor((17, self.K), torch.int64)),
             ValueError, "max_tokens_per_rank=16"),
            (dict(x=Tensor((5, self.H), torch.float32)), TypeError, "x must have dtype torch.bfloat16"),
            (dict(x=Tensor((5, 128), torch.bfloat16)), ValueError, r"x must have shape \[5, 256\]"),
            (dict(topk_idx=Tensor((5, 3), torch.int64)), ValueError, r"topk_idx must have shape \[5, 2\]"),
            (dict(topk_idx=Tensor((5, self.K), torch.float32)), TypeError, "torch.int32 or torch.int64"),
            (dict(use_fp8=True), ValueError, "fp8=True"),
            (dict(round_scale=True), ValueError, "round_scale=True needs use_fp8=True"),
            (dict(handle=object()), ValueError, "LowLatencyHandle of this Buffer"),
        ]
        for over, exc, text in cases:
            kw = dict(x=x, topk_idx=idx)
            kw.update(over)
            with self.assertRaisesRegex(exc, text, msg=str(over)):
                buf.low_latency_dispatch(**kw)
        self.assertNotIn("ncclEpLowLatencyDispatch", self.lib.names())
        h = buf.create_low_latency_handle()
        y, w = Tensor((LE, RPE, self.H), torch.bfloat16), Tensor((5, self.K), torch.float32)
        with self.assertRaisesRegex(ValueError, "no low-latency dispatch"):
            buf.low_latency_combine(y, w, h)
        d = buf.low_latency_dispatch(x, idx, handle=h)
        with self.assertRaisesRegex(ValueError, r"x must have shape \[4, 32, 256\]"):
            buf.low_latency_combine(Tensor((LE, 16, self.H), torch.bfloat16), w, d.handle)
        with self.assertRaisesRegex(ValueError, r"topk_weights must have shape \[5, 2\]"):
            buf.low_latency_combine(y, Tensor((4, self.K), torch.float32), d.handle)
        with self.assertRaisesRegex(ValueError, r"out must have shape \[5, 256\]"):
            buf.low_latency_combine(y, w, d.handle, out=Tensor((4, self.H), torch.bfloat16))
        # High-throughput calls are refused on a low-latency buffer.
        with self.assertRaisesRegex(ValueError, "serves only low_latency"):
            buf.dispatch(x, idx)
        with self.assertRaisesRegex(ValueError, "serves only low_latency"):
            buf.create_handle()

    def test_zero_tokens_get_non_null_pointers(self):
        buf = self.ll_buffer()
        t = self.torch
        d = buf.low_latency_dispatch(Tensor((0, self.H), t.bfloat16, ptr=0), Tensor((0, self.K), t.int32, ptr=0))
        _, cin, _, _, _ = self.lib.last("ncclEpLowLatencyDispatch")
        self.assertTrue(cin.x and cin.topkIdx)
        self.assertEqual(cin.numTokens, 0)
        out, _ = buf.low_latency_combine(Tensor((LE, RPE, self.H), t.bfloat16), Tensor((0, self.K), t.float32, ptr=0),
                                         d.handle)
        _, cin, cout, _, _ = self.lib.last("ncclEpLowLatencyCombine")
        self.assertTrue(cin.topkWeights and cout.out)
        self.assertEqual(out.shape, (0, self.H))

    def test_errors_carry_the_reason(self):
        buf = self.ll_buffer()
        self.lib.fail["ncclEpLowLatencyDispatch"] = _abi.ncclInvalidUsage
        with self.assertRaises(epx.EpError) as cm:
            buf.low_latency_dispatch(*self.ll_inputs())
        self.assertEqual((cm.exception.code, cm.exception.message), (_abi.ncclInvalidUsage, "fake reason"))
        self.lib.fail.clear()
        self.lib.async_code, self.lib.async_msg = _abi.ncclRemoteError, b"low-latency dispatch data: rank 1"
        with self.assertRaises(epx.EpAsyncError):
            buf.low_latency_dispatch(*self.ll_inputs())


if __name__ == "__main__":
    unittest.main()
