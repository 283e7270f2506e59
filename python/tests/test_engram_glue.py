"""CPU tests of epx.EngramBuffer's glue with the fake torch and fake libepx of test_glue (no GPU, no
torch, no libepx): what it hands to ncclEpEngram* (plan, config, tables, pointers, token count,
stream), the output it allocates, the references it keeps, errors and teardown."""

import ctypes as C
import os
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import epx  # noqa: E402
from epx import _abi  # noqa: E402
from test_glue import COMM, STREAM, Device, FakeLib, GlueTest, Stream, Tensor, _copy  # noqa: E402

ENGRAM = 0xE000


class EngramFakeLib(FakeLib):
    def ncclEpEngramCreate(self, comm, plan, cfg, out):
        self.calls.append(("ncclEpEngramCreate", (comm.value, _copy(plan._obj), _copy(cfg._obj))))
        rc = self.fail.get("ncclEpEngramCreate", 0)
        if not rc:
            out._obj.value = ENGRAM
        return rc

    def ncclEpEngramDestroy(self, e):
        self.calls.append(("ncclEpEngramDestroy", (e,)))
        return self.fail.get("ncclEpEngramDestroy", 0)

    def ncclEpEngramSetTable(self, e, layer, shard):
        self.calls.append(("ncclEpEngramSetTable", (e, layer, shard.value)))
        return self.fail.get("ncclEpEngramSetTable", 0)

    def ncclEpEngramFetch(self, e, indices, tokens, output, stream):
        self.calls.append(("ncclEpEngramFetch", (e, indices.value or 0, tokens, output.value or 0, stream.value)))
        return self.fail.get("ncclEpEngramFetch", 0)

    def ncclEpEngramWaitLayer(self, e, layer, stream):
        self.calls.append(("ncclEpEngramWaitLayer", (e, layer, stream.value)))
        return 0

    def ncclEpEngramGetAsyncError(self, e, code, msg, n):
        code._obj.value = self.async_code
        msg.value = self.async_msg
        return 0


def host_tensor(shape, dtype, pinned):
    t = Tensor(shape, dtype)
    t.is_cuda = False
    t.device = Device("cpu", 0)
    t.is_pinned = lambda: pinned
    return t


class TestEngramGlue(GlueTest):
    def setUp(self):
        super().setUp()
        self.lib = EngramFakeLib()
        from epx import _lib  # noqa: PLC0415
        _lib._lib = self.lib

    def engram(self, **kw):
        # 2 ranks (fake): 64 rows, 32 per rank, rows of 32 bf16 (64 bytes); 3 layers, 8 tokens x 4 entries.
        row = kw.pop("row_bytes", (32, self.torch.bfloat16))
        return epx.EngramBuffer(None, 3, 64, row, 8, 4, **kw)

    def test_create_passes_plan_and_config(self):
        eb = self.engram()
        comm, plan, cfg = self.lib.last("ncclEpEngramCreate")
        self.assertEqual(comm, COMM)
        self.assertEqual((plan.numLayers, plan.numRows, plan.rowBytes, plan.maxTokens, plan.entriesPerToken),
                         (3, 64, 64, 8, 4))
        self.assertEqual((cfg.size, cfg.magic, cfg.version), (C.sizeof(_abi.ncclEpEngramConfig_t),
                                                              _abi.NCCL_EP_ENGRAM_CONFIG_MAGIC, _abi.EPX_VERSION_CODE))
        self.assertEqual((cfg.numCtas, cfg.timeoutMs, cfg.chunkBytes), (_abi.NCCL_EP_UNDEF_INT, _abi.NCCL_EP_UNDEF_INT, 0))
        self.assertEqual((eb.rows_per_rank, eb.row_bytes, eb.row_elems, eb.num_ranks), (32, 64, 32, 2))
        self.assertTrue(eb.comm_borrowed)
        eb.destroy()
        self.engram(num_ctas=16, chunk_bytes=4 << 20, timeout_ms=500).destroy()
        _, _, cfg = self.lib.last("ncclEpEngramCreate")
        self.assertEqual((cfg.numCtas, cfg.timeoutMs, cfg.chunkBytes), (16, 500, 4 << 20))

    def test_refused_create_raises_with_the_reason(self):
        self.lib.fail["ncclEpEngramCreate"] = _abi.ncclInvalidArgument
        with self.assertRaises(epx.EpError) as cm:
            self.engram()
        self.assertEqual(cm.exception.code, _abi.ncclInvalidArgument)
        self.assertIn("fake reason", str(cm.exception))
        self.assertNotIn("ncclEpEngramDestroy", self.lib.names())

    def test_tables_are_set_and_kept(self):
        t = self.torch
        eb = self.engram()
        dev = Tensor((32, 32), t.bfloat16)
        eb.set_table(0, dev)
        self.assertEqual(self.lib.last("ncclEpEngramSetTable"), (ENGRAM, 0, dev.data_ptr()))
        self.assertIs(eb.table(0), dev)
        pinned = host_tensor((32, 32), t.bfloat16, True)
        eb.set_table(2, pinned)
        self.assertEqual(self.lib.last("ncclEpEngramSetTable"), (ENGRAM, 2, pinned.data_ptr()))
        self.assertIs(eb.table(2), pinned)
        self.assertIsNone(eb.table(1))
        n = len(self.lib.calls)
        with self.assertRaisesRegex(ValueError, "pinned CPU tensor"):
            eb.set_table(1, host_tensor((32, 32), t.bfloat16, False))
        with self.assertRaisesRegex(ValueError, "layer 3 is not in 0 .. 2"):
            eb.set_table(3, dev)
        with self.assertRaisesRegex(TypeError, "dtype torch.bfloat16"):
            eb.set_table(1, Tensor((32, 16), t.float32))
        with self.assertRaisesRegex(ValueError, r"shape \[32, 32\]"):
            eb.set_table(1, Tensor((64, 32), t.bfloat16))  # the whole table, not this rank's shard
        self.assertEqual(len(self.lib.calls), n)  # nothing reached libepx
        # A refused table is not kept.
        self.lib.fail["ncclEpEngramSetTable"] = _abi.ncclInvalidArgument
        with self.assertRaises(epx.EpError):
            eb.set_table(1, Tensor((32, 32), t.bfloat16))
        self.assertIsNone(eb.table(1))
        eb.destroy()
        self.assertEqual(eb._tables, [])

    def test_fetch_allocates_and_passes_pointers_tokens_and_stream(self):
        t = self.torch
        eb = self.engram()
        idx = Tensor((3, 5, 4), t.int32)
        out = eb.fetch(idx)
        self.assertEqual(out.shape, (3, 5, 4, 32))
        self.assertIs(out.dtype, t.bfloat16)
        self.assertEqual(self.lib.last("ncclEpEngramFetch"), (ENGRAM, idx.data_ptr(), 5, out.data_ptr(), STREAM))
        mine = Tensor((3, 5, 4, 32), t.bfloat16)
        self.assertIs(eb.fetch(idx, out=mine), mine)
        self.assertEqual(self.lib.last("ncclEpEngramFetch")[3], mine.data_ptr())
        with self.assertRaisesRegex(ValueError, r"out must have shape \[3, 5, 4, 32\]"):
            eb.fetch(idx, out=Tensor((3, 6, 4, 32), t.bfloat16))
        with self.assertRaisesRegex(TypeError, "out must have dtype torch.bfloat16"):
            eb.fetch(idx, out=Tensor((3, 5, 4, 32), t.float32))
        with self.assertRaisesRegex(ValueError, "max_tokens=8"):
            eb.fetch(Tensor((3, 9, 4), t.int32))
        # 0 tokens: still collective, NULL pointers.
        out0 = eb.fetch(Tensor((3, 0, 4), t.int32))
        self.assertEqual(out0.shape, (3, 0, 4, 32))
        self.assertEqual(self.lib.last("ncclEpEngramFetch"), (ENGRAM, 0, 0, 0, STREAM))
        self.lib.fail["ncclEpEngramFetch"] = _abi.ncclInvalidUsage
        with self.assertRaises(epx.EpError):
            eb.fetch(idx)
        eb.destroy()

    def test_bytes_rows(self):
        t = self.torch
        eb = self.engram(row_bytes=64)
        self.assertIs(eb.dtype, t.uint8)
        eb.set_table(0, Tensor((32, 16), t.float32))  # any dtype of 64-byte rows
        out = eb.fetch(Tensor((3, 2, 4), t.int32))
        self.assertEqual(out.shape, (3, 2, 4, 64))
        self.assertIs(out.dtype, t.uint8)
        eb.destroy()

    def test_wait_layer(self):
        eb = self.engram()
        eb.wait_layer(1)
        self.assertEqual(self.lib.last("ncclEpEngramWaitLayer"), (ENGRAM, 1, STREAM))
        eb.wait_layer(2, Stream(0x77))
        self.assertEqual(self.lib.last("ncclEpEngramWaitLayer"), (ENGRAM, 2, 0x77))
        eb.wait_layer(0, 0x88)
        self.assertEqual(self.lib.last("ncclEpEngramWaitLayer"), (ENGRAM, 0, 0x88))
        with self.assertRaisesRegex(ValueError, "layer -1 is not in 0 .. 2"):
            eb.wait_layer(-1)
        eb.destroy()

    def test_async_error(self):
        eb = self.engram()
        self.assertEqual(eb.get_async_error(), (0, ""))
        eb.check_async_error()
        self.lib.async_code = _abi.ncclInvalidArgument
        self.lib.async_msg = b"layer 0 token 1 entry 2: index 99"
        with self.assertRaises(epx.EpAsyncError) as cm:
            eb.check_async_error()
        self.assertIn("index 99", str(cm.exception))
        eb.destroy()

    def test_destroy_once_and_context_manager(self):
        t = self.torch
        with self.engram() as eb:
            eb.set_table(0, Tensor((32, 32), t.bfloat16))
        self.assertEqual(self.lib.names().count("ncclEpEngramDestroy"), 1)
        eb.destroy()
        eb.close()
        self.assertEqual(self.lib.names().count("ncclEpEngramDestroy"), 1)
        with self.assertRaisesRegex(RuntimeError, "destroyed"):
            eb.fetch(Tensor((3, 1, 4), t.int32))
        with self.assertRaisesRegex(RuntimeError, "destroyed"):
            eb.wait_layer(0)


if __name__ == "__main__":
    unittest.main()
