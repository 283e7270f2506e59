"""CPU test of python/bench/overhead.py's bookkeeping with a fake torch (no GPU, no torch): the timer
that wraps libepx's functions adds their host time and passes arguments and results through, and the
percentile helper."""

import os
import sys
import time
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from test_example import fake_torch  # noqa: E402

BENCH = os.path.join(os.path.dirname(HERE), "bench", "overhead.py")


def load_bench():
    import importlib.util  # noqa: PLC0415
    mods = fake_torch()
    with mock.patch.dict(sys.modules, mods):
        spec = importlib.util.spec_from_file_location("overhead_under_test", BENCH)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
    return m


class TestOverheadBench(unittest.TestCase):
    def test_timer_wraps_and_accumulates(self):
        m = load_bench()

        def slow(a, b):
            time.sleep(0.002)
            return a + b

        lib = types.SimpleNamespace(ncclEpDispatch=slow, ncclEpCombine=lambda: 7, other=lambda: 1)
        t = m.CTimer(lib)
        self.assertTrue(lib.ncclEpDispatch._epx_timed)
        self.assertFalse(hasattr(lib.other, "_epx_timed"))
        self.assertEqual(lib.ncclEpDispatch(2, 3), 5)
        self.assertGreaterEqual(t.ns, 2_000_000)
        before = t.ns
        self.assertEqual(lib.ncclEpCombine(), 7)
        self.assertLess(t.ns - before, 2_000_000)
        m.CTimer(lib)  # wrapping twice does not nest
        self.assertIs(lib.ncclEpDispatch.__closure__[0].cell_contents, slow)

    def test_percentile(self):
        m = load_bench()
        v = list(range(1, 101))
        self.assertEqual((m.pct(v, 50), m.pct(v, 90), m.pct(v, 100), m.pct([5], 90)), (51, 90, 100, 5))


if __name__ == "__main__":
    unittest.main()
