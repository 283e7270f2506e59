"""Python overhead of epx.Buffer.dispatch / combine beyond their C calls (benchmark, not a test).

    EPX_LIBRARY=<prefix>/lib/libepx.so.0 python python/bench/overhead.py [--tokens 4096 ...]
    (scripts/gpu-py.sh 1 bench runs it on the device machine)

World size 1, capacity mode (no host synchronization, so the host times are the wrapper's own), the
DeepSeek-V3 shape by default (4096 tokens, hidden 7168, 256 experts, top-8). Every ncclEp* function
of libepx is wrapped by a timer, so for each dispatch and combine the host time splits into the time
inside libepx (argument checks and kernel launches) and the rest: argument checks in Python, torch
allocations of the outputs, ctypes struct packing, the stream lookups. Prints the median and the
90th percentile in microseconds per call of both, for each layout.
"""

import argparse
import os
import statistics
import sys
import time

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import epx  # noqa: E402
from epx import _lib  # noqa: E402
import moe_layer  # noqa: E402


class CTimer:
    """Replaces every ncclEp* function of the loaded libepx by a wrapper adding its host time to .ns."""

    def __init__(self, lib):
        self.ns = 0
        for name in [n for n in dir(lib) if n.startswith("ncclEp")] + list(_DECLARED):
            f = getattr(lib, name, None)
            if f is not None and not getattr(f, "_epx_timed", False):
                setattr(lib, name, self._wrap(f))

    def _wrap(self, f):
        def timed(*args):
            t0 = time.perf_counter_ns()
            try:
                return f(*args)
            finally:
                self.ns += time.perf_counter_ns() - t0
        timed._epx_timed = True
        return timed


_DECLARED = ("ncclEpGroupGetAsyncError", "ncclEpDispatchLayout", "ncclEpDispatch", "ncclEpCombine",
             "ncclEpHandleGetCapacity", "ncclEpHandleGetCounts")


def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def measure(buf, x, idx, w, layout, iters, warmup, timer):
    h = buf.create_handle(layout=layout, mode="capacity", alignment=128 if layout == "expanded" else 1)
    d = buf.dispatch(x, idx, w, handle=h)
    y = torch.zeros((d.recv_x.shape[0], x.shape[1]), dtype=torch.bfloat16, device=x.device)
    rows = {"dispatch": ([], []), "combine": ([], [])}
    for it in range(warmup + iters):
        for what in ("dispatch", "combine"):
            timer.ns = 0
            t0 = time.perf_counter_ns()
            if what == "dispatch":
                buf.dispatch(x, idx, w, handle=h)
            else:
                buf.combine(h, y)
            total = time.perf_counter_ns() - t0
            if it >= warmup:
                rows[what][0].append((total - timer.ns) / 1e3)
                rows[what][1].append(timer.ns / 1e3)
        if it % 8 == 7:
            torch.cuda.synchronize()  # keep the launch queue short
    torch.cuda.synchronize()
    h.destroy()
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--topk", type=int, default=8)
    p.add_argument("--iters", type=int, default=100)
    p.add_argument("--warmup", type=int, default=10)
    a = p.parse_args(argv)
    rank, size = moe_layer.init_distributed(port=29535)
    dev = torch.device("cuda", torch.cuda.current_device())
    g = torch.Generator(device=dev).manual_seed(rank)
    x = torch.randn((a.tokens, a.hidden), generator=g, device=dev).bfloat16()
    idx = torch.rand((a.tokens, a.experts), generator=g, device=dev).topk(a.topk, dim=1).indices
    w = torch.rand((a.tokens, a.topk), generator=g, device=dev)
    with epx.Buffer(None, a.tokens, a.hidden, a.experts, a.topk,
                    sm_budget=moe_layer.default_sm_budget()) as buf:
        timer = CTimer(_lib.lib())
        print("epx Python overhead, %d rank(s), T=%d hidden=%d E=%d top-%d, capacity mode, %d calls"
              % (size, a.tokens, a.hidden, a.experts, a.topk, a.iters))
        print("%-9s %-8s %12s %12s %12s %12s" % ("layout", "call", "python p50", "python p90", "libepx p50",
                                                 "libepx p90"))
        for layout in ("dedup", "expanded"):
            rows = measure(buf, x, idx, w, layout, a.iters, a.warmup, timer)
            for what, (py, c) in rows.items():
                print("%-9s %-8s %9.1f us %9.1f us %9.1f us %9.1f us"
                      % (layout, what, statistics.median(py), pct(py, 90), statistics.median(c), pct(c, 90)))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
