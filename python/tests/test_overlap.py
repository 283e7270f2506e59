"""CPU tests of events (async_finish / previous_event on the Buffer's comm_stream) and of the
zero-copy window tensors (get_buffers, zero_copy=True), with the fake torch and fake libepx of
test_glue.py: which stream each ncclEp* call gets, the waits and records around it, the pointers
handed to libepx. Whether the device then overlaps is the GPU tests' business.
"""

import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import ctypes as C  # noqa: E402

from test_glue import COMM_STREAM, DLPACK, LOG, STREAM, Event, GlueTest, Tensor  # noqa: E402

import epx  # noqa: E402
from epx import window  # noqa: E402


def ops(kind):
    return [e for e in LOG if e[0] == kind]


class TestEvents(GlueTest):
    def test_async_finish_runs_on_comm_stream_and_returns_an_event(self):
        buf = self.buffer()
        x, idx, w = self.inputs()
        d = buf.dispatch(x, idx, w, async_finish=True)
        self.assertEqual(self.lib.last("ncclEpDispatchLayout")[2], COMM_STREAM)
        self.assertEqual(self.lib.last("ncclEpDispatch")[3], COMM_STREAM)
        self.assertEqual(LOG[0], ("wait_stream", COMM_STREAM, STREAM))  # after the caller's work
        self.assertIsInstance(d.event, epx.EventOverlap)
        ev = d.event.event.id
        self.assertIn(("record", ev, COMM_STREAM), LOG)
        self.assertNotIn(("wait_event", STREAM, ev), LOG)  # the caller's stream goes on
        recorded = {p for _, p, s in ops("record_stream") if s == COMM_STREAM}
        for t in (x, idx, w, d.recv_x, d.recv_topk_idx, d.recv_topk_weights, d.expert_counts):
            self.assertIn(t.data_ptr(), recorded)
        self.assertTrue(d.event._tensors)
        d.event.current_stream_wait()
        self.assertEqual(LOG[-1], ("wait_event", STREAM, ev))
        self.assertEqual(d.event._tensors, ())
        # A later call on the current stream is ordered after the side call.
        LOG.clear()
        buf.combine(d.handle, Tensor((7, self.H), self.torch.bfloat16))
        self.assertEqual(LOG, [("wait_event", STREAM, ev)])
        self.assertEqual(self.lib.last("ncclEpCombine")[3], STREAM)

    def test_previous_event_without_async_finish(self):
        buf = self.buffer()
        prev = epx.EventOverlap(Event())
        d = buf.dispatch(*self.inputs(), previous_event=prev)
        self.assertIsNone(d.event)
        self.assertEqual(LOG[0], ("wait_event", COMM_STREAM, prev.event.id))
        self.assertNotIn("wait_stream", [e[0] for e in LOG])
        self.assertEqual(self.lib.last("ncclEpDispatch")[3], COMM_STREAM)
        rec = ops("record")[-1]
        self.assertEqual(LOG[-1], ("wait_event", STREAM, rec[1]))  # finished for the caller's stream
        # A torch.cuda.Event is accepted as it is.
        raw = Event()
        buf.combine(d.handle, Tensor((7, self.H), self.torch.bfloat16), previous_event=raw)
        self.assertIn(("wait_event", COMM_STREAM, raw.id), LOG)
        with self.assertRaisesRegex(TypeError, "previous_event must be"):
            buf.dispatch(*self.inputs(), previous_event=object())

    def test_async_combine_unpacks_as_a_pair(self):
        buf = self.buffer()
        d = buf.dispatch(*self.inputs())
        res = buf.combine(d.handle, Tensor((7, self.H), self.torch.bfloat16), async_finish=True)
        out, cw = res
        self.assertIs(out, res.out)
        self.assertIsNone(cw)
        self.assertIsNone(res.combined_topk_weights)
        self.assertIsInstance(res.event, epx.EventOverlap)
        self.assertEqual(self.lib.last("ncclEpCombine")[3], COMM_STREAM)
        self.assertEqual(len(res), 2)
        self.assertIsNone(buf.combine(d.handle, Tensor((7, self.H), self.torch.bfloat16)).event)

    def test_capture_skips_record_stream(self):
        buf = self.buffer()
        self.torch.cuda.state.capturing = True
        d = buf.dispatch(*self.inputs(), mode="capacity", async_finish=True)
        self.assertEqual(ops("record_stream"), [])
        self.assertTrue(ops("record"))
        d.event.current_stream_wait()
        # The side event was recorded while capturing; outside the capture it is not waited for.
        self.torch.cuda.state.capturing = False
        LOG.clear()
        buf.dispatch(*self.inputs())
        self.assertEqual(ops("wait_event"), [])

    def test_event_helpers(self):
        ev = epx.EventOverlap.capture()
        self.assertEqual(LOG[-1], ("record", ev.event.id, STREAM))
        self.assertTrue(ev.query())
        ev.synchronize()
        self.assertEqual(LOG[-1], ("synchronize", ev.event.id))
        none = epx.EventOverlap()
        none.current_stream_wait()  # nothing to wait for
        self.assertTrue(none.query())


class TestZeroCopy(GlueTest):
    def test_get_buffers_are_tensors_over_the_window(self):
        buf = self.buffer()
        b = buf.get_buffers()
        self.assertIs(buf.get_buffers(), b)  # asked once
        self.assertEqual(self.lib.names().count("ncclEpGroupGetBuffers"), 1)
        t, win = self.torch, self.lib.window
        want = [("recv_x", "recvX", (32, self.H), t.bfloat16), ("recv_topk_idx", "recvTopkIdx", (32, 2), t.int32),
                ("recv_topk_weights", "recvTopkWeights", (32, 2), t.float32),
                ("recv_src_info", "recvSrcInfo", (32, 2), t.int32), ("combine_x", "combineX", (32, self.H), t.bfloat16)]
        for name, field, shape, dtype in want:
            v = getattr(b, name)
            self.assertEqual((v.data_ptr(), v.shape, v.dtype), (win[field], shape, dtype), name)
        self.assertEqual(b.rows, 32)
        # One DLPack capsule of bytes per buffer: (pointer, bytes, device).
        self.assertIn((win["recvX"], 32 * self.H * 2, 0), DLPACK)
        self.assertIn((win["recvTopkWeights"], 32 * 2 * 4, 0), DLPACK)
        self.assertIn((win["combineX"], 32 * self.H * 2, 0), DLPACK)
        self.assertEqual(len(DLPACK), 5)
        self.assertIsNone(b.recv_x_fp8)
        self.assertIsNone(b.recv_x_scales)
        buf.destroy()
        self.assertIsNone(buf._buffers)

    def test_dlpack_deleter_releases_the_struct(self):
        n = len(window._alive)
        cap = window.dlpack_bytes(0x1234000, 4096, 3, owner="o")
        self.assertEqual(len(window._alive), n + 1)
        get = C.pythonapi.PyCapsule_GetPointer
        get.restype, get.argtypes = C.c_void_p, [C.py_object, C.c_char_p]
        addr = get(cap, b"dltensor")
        m = window.DLManagedTensor.from_address(addr)
        self.assertEqual((m.dl_tensor.data, m.dl_tensor.shape[0], m.dl_tensor.device.device_id), (0x1234000, 4096, 3))
        self.assertEqual(window._alive[addr][2], "o")
        m.deleter(C.pointer(m))  # what torch does when its last tensor over the memory goes
        self.assertNotIn(addr, window._alive)
        self.assertEqual(len(window._alive), n)

    def test_fp8_views(self):
        buf = self.buffer(fp8=True)
        b = buf.get_buffers()
        win = self.lib.window
        self.assertEqual((b.recv_x_fp8.data_ptr(), b.recv_x_fp8.shape, str(b.recv_x_fp8.dtype)),
                         (win["recvX"], (32, self.H), "torch.float8_e4m3fn"))
        self.assertEqual((b.recv_x_scales.data_ptr(), b.recv_x_scales.shape), (win["recvScales"], (32, 2)))

    def test_zero_copy_dispatch_and_in_place_combine(self):
        buf = self.buffer()
        x, idx, w = self.inputs()
        d = buf.dispatch(x, idx, w, zero_copy=True, return_src_info=True)
        _, _, dout, _ = self.lib.last("ncclEpDispatch")
        win = self.lib.window
        self.assertEqual((dout.recvX, dout.recvTopkIdx, dout.recvTopkWeights, dout.recvSrcInfo, dout.numRows),
                         (win["recvX"], win["recvTopkIdx"], win["recvTopkWeights"], win["recvSrcInfo"], 32))
        self.assertIsNone(dout.recvScales)
        self.assertEqual((d.recv_x.data_ptr(), d.recv_x.shape), (win["recvX"], (7, self.H)))
        self.assertEqual(d.recv_topk_weights.shape, (7, 2))
        cx = buf.get_buffers().combine_x[:7]
        buf.combine(d.handle, cx)
        _, cin, _, _ = self.lib.last("ncclEpCombine")
        self.assertEqual((cin.x, cin.numRows), (win["combineX"], 7))

    def test_zero_copy_fp8_uses_the_fp8_view(self):
        buf = self.buffer(fp8=True)
        t = self.torch
        _, idx, w = self.inputs()
        d = buf.dispatch((Tensor((self.T, self.H), t.float8_e4m3fn), Tensor((self.T, 2), t.float32)), idx, w,
                         zero_copy=True)
        _, _, dout, _ = self.lib.last("ncclEpDispatch")
        self.assertEqual((dout.recvX, dout.recvScales), (self.lib.window["recvX"], self.lib.window["recvScales"]))
        self.assertEqual(str(d.recv_x.dtype), "torch.float8_e4m3fn")
        self.assertIsNone(dout.recvSrcInfo)

    def test_zero_copy_needs_dedup(self):
        buf = self.buffer()
        with self.assertRaisesRegex(ValueError, "zero_copy=True needs the dedup layout"):
            buf.dispatch(*self.inputs(), layout="expanded", zero_copy=True)
        self.assertNotIn("ncclEpDispatchLayout", self.lib.names())
        d = buf.dispatch(*self.inputs(), layout="expanded")
        with self.assertRaisesRegex(ValueError, "expanded layout cannot take get_buffers"):
            buf.combine(d.handle, buf.get_buffers().combine_x[:7])


if __name__ == "__main__":
    unittest.main()
