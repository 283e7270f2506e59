"""CPU tests of python/examples/moe_layer.py's host-side logic with a fake torch (no GPU, no torch):
how it picks the torch.distributed rendezvous (fake nodes, torchrun, 1 rank), the SM budget for
several processes on one GPU, and the expert segments it cuts from an expanded dispatch output.
The layer's numbers against its reference are the GPU run's business (scripts/gpu-py.sh).
"""

import importlib.util
import os
import sys
import types
import unittest
from unittest import mock

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(os.path.dirname(HERE), "examples", "moe_layer.py")
ENV_KEYS = ("EPX_MP_RANK", "EPX_MP_SIZE", "EPX_MP_ID_FILE", "RANK", "WORLD_SIZE", "LOCAL_RANK",
            "MASTER_ADDR", "MASTER_PORT", "EPX_SM_BUDGET", "EPX_MP_PROCS_PER_GPU")


def fake_torch(ndev=2, sms=132):
    torch = types.ModuleType("torch")
    calls = []
    torch.calls = calls
    torch.device = lambda kind, index=0: (kind, index)
    torch.cuda = types.SimpleNamespace(
        device_count=lambda: ndev, set_device=lambda d: calls.append(("set_device", d)),
        current_device=lambda: 0,
        get_device_properties=lambda d: types.SimpleNamespace(multi_processor_count=sms))
    dist = types.ModuleType("torch.distributed")
    dist.init_process_group = lambda backend, **kw: calls.append(("init_process_group", backend, kw))
    torch.distributed = dist
    nn = types.ModuleType("torch.nn")
    fn = types.ModuleType("torch.nn.functional")
    nn.functional = fn
    torch.nn = nn
    return {"torch": torch, "torch.distributed": dist, "torch.nn": nn, "torch.nn.functional": fn}


def load_example(mods):
    with mock.patch.dict(sys.modules, mods):
        spec = importlib.util.spec_from_file_location("moe_layer_under_test", EXAMPLE)
        m = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(m)
    return m


class ExampleTest(unittest.TestCase):
    def setUp(self):
        self.mods = fake_torch()
        self.torch = self.mods["torch"]
        self.m = load_example(self.mods)
        self.env = mock.patch.dict(os.environ, {})
        self.env.start()
        for k in ENV_KEYS:
            os.environ.pop(k, None)

    def tearDown(self):
        self.env.stop()

    def test_fake_nodes_rendezvous_through_a_file(self):
        os.environ.update(EPX_MP_RANK="3", EPX_MP_SIZE="4", EPX_MP_ID_FILE="/tmp/logs/nccl-unique-id")
        self.assertEqual(self.m.init_distributed(), (3, 4))
        self.assertEqual(self.torch.calls[0], ("set_device", 1))  # rank 3 on 2 GPUs
        _, backend, kw = self.torch.calls[1]
        self.assertEqual(backend, "nccl")
        self.assertEqual((kw["init_method"], kw["rank"], kw["world_size"], kw["device_id"]),
                         ("file:///tmp/logs/nccl-unique-id.torch-store", 3, 4, ("cuda", 1)))

    def test_torchrun_environment(self):
        os.environ.update(RANK="5", WORLD_SIZE="8", LOCAL_RANK="1")
        self.assertEqual(self.m.init_distributed(), (5, 8))
        _, _, kw = self.torch.calls[1]
        self.assertEqual((kw["init_method"], kw["device_id"]), ("env://", ("cuda", 1)))

    def test_one_rank_without_environment(self):
        self.assertEqual(self.m.init_distributed(port=29999), (0, 1))
        _, _, kw = self.torch.calls[1]
        self.assertEqual((kw["init_method"], kw["rank"], kw["world_size"]), ("env://", 0, 1))
        self.assertEqual((os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"]), ("127.0.0.1", "29999"))

    def test_sm_budget(self):
        self.assertEqual(self.m.default_sm_budget(), 0)  # one process per GPU: analytic
        os.environ["EPX_MP_PROCS_PER_GPU"] = "2"
        self.assertEqual(self.m.default_sm_budget(), 24)  # min(24, 128 / 2)
        os.environ["EPX_MP_PROCS_PER_GPU"] = "8"
        self.assertEqual(self.m.default_sm_budget(), 16)  # (132 - 4) / 8
        os.environ["EPX_SM_BUDGET"] = "5"
        self.assertEqual(self.m.default_sm_budget(), 5)

    def test_segments_exact_from_host_counts(self):
        d = types.SimpleNamespace(handle=types.SimpleNamespace(expert_counts=[3, 0, 17, 1]))
        self.assertEqual(self.m.segments(d, 16), [(0, 3), (16, 0), (16, 17), (48, 1)])
        self.assertEqual(self.m.segments(d, 1), [(0, 3), (3, 0), (3, 17), (20, 1)])

    def test_segments_capacity_from_device_offsets(self):
        class L:
            def __init__(self, v):
                self.v = v

            def tolist(self):
                return self.v

        d = types.SimpleNamespace(handle=types.SimpleNamespace(expert_counts=None),
                                  expert_offsets=L([0, 8, 8, 24]), expert_counts=L([5, 0, 9]))
        self.assertEqual(self.m.segments(d, 8), [(0, 5), (8, 0), (8, 9)])

    def test_arguments(self):
        a = self.m.parse_args([])
        self.assertEqual((a.tokens, a.hidden, a.experts, a.topk, a.layout, a.mode, a.alignment),
                         (64, 512, 16, 4, "expanded", "exact", 16))
        a = self.m.parse_args(["--layout", "dedup", "--mode", "capacity", "--experts", "8"])
        self.assertEqual((a.layout, a.mode, a.experts), ("dedup", "capacity", 8))
        with self.assertRaises(SystemExit):
            self.m.run(a, 0, 3)  # 8 experts over 3 ranks


if __name__ == "__main__":
    unittest.main()
