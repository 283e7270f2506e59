"""GPU smoke test of the epx Python package: 1 rank, torch.distributed (world size 1, NCCL backend).

    EPX_LIBRARY=<prefix>/lib/libepx.so.0 python python/tests/gpu_smoke.py

Dispatch + combine of random data for both layouts and both modes (and FP8, biases, combined
weights, cached dispatch, a communicator of epx's own, one refused call), compared with a pure-torch
reference of what ep.h specifies. Prints one line per case and exits 1 if any failed.
Passed every case on one H200 (torch 2.11.0+cu130, pip NCCL 2.28.9) on 2026-12-02.
"""

import os
import sys
import traceback

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import epx  # noqa: E402

T, H, E, K = 96, 256, 8, 3
failures = []


def case(fn):
    try:
        fn()
        print("PASS", fn.__name__, flush=True)
    except Exception:  # noqa: BLE001
        failures.append(fn.__name__)
        print("FAIL", fn.__name__, flush=True)
        traceback.print_exc()


def routing(gen):
    scores = torch.rand((T, E), generator=gen, device="cuda")
    idx = scores.topk(K, dim=1).indices  # distinct experts per token, int64
    drop = torch.rand((T, K), generator=gen, device="cuda") < 0.2
    idx = idx.masked_fill(drop, -1)
    idx[:4] = -1  # a few tokens sent nowhere
    w = torch.rand((T, K), generator=gen, device="cuda", dtype=torch.float32)
    return idx, w


def ref_expanded(idx, alignment):
    """Rows (token, slot) per expert in expert order, token order inside; every segment padded to a
    multiple of `alignment` rows (gap rows are None), as host/ref/src/ep_ref.cc."""
    rows, offsets, counts = [], [0], []
    for e in range(E):
        tok, slot = (idx == e).nonzero(as_tuple=True)  # row-major: sorted by token
        rows += list(zip(tok.tolist(), slot.tolist()))
        counts.append(len(tok))
        rows += [None] * (-len(tok) % alignment)
        offsets.append(len(rows))
    return rows, offsets, counts


def check_combine_expanded(buf, d, x, idx, w, rows, bias=None):
    r = d.handle.num_rows
    y = torch.zeros((r, H), dtype=torch.bfloat16, device="cuda")
    for i, tk in enumerate(rows[:r]):
        if tk is not None:
            y[i] = (x[tk[0]].float() * w[tk[0], tk[1]]).bfloat16()
    out, _ = buf.combine(d.handle, y, bias=bias)
    ref = torch.zeros((T, H), dtype=torch.float32, device="cuda")
    for i, tk in enumerate(rows[:r]):
        if tk is not None:
            ref[tk[0]] += y[i].float()
    if bias is not None:
        ref += bias.float()
    torch.testing.assert_close(out.float(), ref.bfloat16().float(), rtol=1.6e-2, atol=1e-2)


def expanded(mode, alignment, zero_gaps):
    def run():
        gen = torch.Generator(device="cuda").manual_seed(1 + alignment)
        idx, w = routing(gen)
        x = torch.randn((T, H), generator=gen, device="cuda").bfloat16()
        with epx.Buffer(None, T, H, E, K) as buf:
            d = buf.dispatch(x, idx, w, layout="expanded", alignment=alignment, zero_gaps=zero_gaps, mode=mode)
            rows, offsets, counts = ref_expanded(idx, alignment)
            torch.cuda.synchronize()
            n = int(d.num_recv_rows.item())
            assert d.expert_counts.tolist() == counts, (d.expert_counts.tolist(), counts)
            assert d.expert_offsets.tolist() == offsets, (d.expert_offsets.tolist(), offsets)
            assert n == d.expert_offsets[E].item()
            if mode == "exact":
                assert d.handle.num_rows == n and d.handle.expert_counts == counts
            for i in range(n):
                tk = rows[i]
                if tk is None:
                    if zero_gaps:
                        assert torch.all(d.recv_x[i] == 0), "gap row %d not zeroed" % i
                    continue
                assert torch.equal(d.recv_x[i], x[tk[0]]), "row %d" % i
                assert d.recv_topk_weights[i].item() == w[tk[0], tk[1]].item(), "weight of row %d" % i
            assert d.recv_topk_idx is None
            check_combine_expanded(buf, d, x, idx, w, rows)
            bias = torch.randn((T, H), generator=gen, device="cuda").bfloat16()
            check_combine_expanded(buf, d, x, idx, w, rows, bias=bias)
    run.__name__ = "expanded_%s_align%d%s" % (mode, alignment, "_zerogaps" if zero_gaps else "")
    return run


def dedup(mode, fp8=False):
    def run():
        gen = torch.Generator(device="cuda").manual_seed(7)
        idx, w = routing(gen)
        idx = idx.to(torch.int32)
        x = torch.randn((T, H), generator=gen, device="cuda").bfloat16()
        sent = (idx >= 0).any(dim=1)
        with epx.Buffer(None, T, H, E, K, fp8=fp8) as buf:
            if fp8:
                x8 = x.to(torch.float8_e4m3fn)
                sc = torch.rand((T, H // 128), generator=gen, device="cuda") + 0.5
                d = buf.dispatch((x8, sc), idx, w, layout="dedup", mode=mode)
            else:
                d = buf.dispatch(x, idx, w, layout="dedup", mode=mode, return_src_info=True)
            torch.cuda.synchronize()
            n = int(d.num_recv_rows.item())
            assert n == int(sent.sum()), (n, int(sent.sum()))
            if fp8:
                assert torch.equal(d.recv_x[:n].view(torch.uint8), x8[sent].view(torch.uint8))
                assert torch.equal(d.recv_x_scales[:n], sc[sent])
                return
            assert torch.equal(d.recv_x[:n], x[sent])
            assert torch.equal(d.recv_topk_idx[:n], idx[sent])
            valid = idx[sent] >= 0
            assert torch.equal(d.recv_topk_weights[:n][valid], w[sent][valid])
            src = d.recv_src_info[:n]
            assert torch.equal(src[:, 0], torch.zeros_like(src[:, 0]))
            assert torch.equal(src[:, 1], sent.nonzero().flatten().to(torch.int32))
            y = torch.zeros((d.handle.num_rows, H), dtype=torch.bfloat16, device="cuda")
            y[:n] = (x[sent].float() * 0.5).bfloat16()
            bias = torch.randn((T, H), generator=gen, device="cuda").bfloat16()
            out, cw = buf.combine(d.handle, y, bias=bias, topk_weights=d.recv_topk_weights)
            ref = bias.float().clone()
            ref[sent] += y[:n].float()
            torch.testing.assert_close(out.float(), ref.bfloat16().float(), rtol=1.6e-2, atol=1e-2)
            cw_ref = torch.where(idx >= 0, w, torch.zeros_like(w))
            assert torch.equal(cw, cw_ref), "combined_topk_weights"
            # cached dispatch: same route, new data
            x2 = torch.randn((T, H), generator=gen, device="cuda").bfloat16()
            d2 = buf.dispatch(x2, None, handle=d.handle)
            torch.cuda.synchronize()
            assert torch.equal(d2.recv_x[:n], x2[sent])
    run.__name__ = "dedup_%s%s" % (mode, "_fp8" if fp8 else "")
    return run


def own_comm():
    with epx.Buffer(None, 16, 128, 4, 2, use_group_comm=False) as buf:
        assert not buf.comm_borrowed
        x = torch.randn((16, 128), device="cuda").bfloat16()
        idx = torch.tensor([[0, 1]] * 16, device="cuda", dtype=torch.int32)
        d = buf.dispatch(x, idx)
        out, _ = buf.combine(d.handle, d.recv_x)
        torch.testing.assert_close(out, x)


def refused_call():
    with epx.Buffer(None, 16, 128, 4, 2) as buf:
        x = torch.randn((16, 128), device="cuda").bfloat16()
        idx = torch.tensor([[0, 9]] * 16, device="cuda", dtype=torch.int32)  # 9 >= num_experts
        try:
            buf.dispatch(x, idx, mode="exact")
        except epx.EpError as e:
            assert e.code == epx.abi.ncclInvalidArgument, e
            assert "expert id" in e.message, e.message
            print("   refused as expected:", e)
        else:
            raise AssertionError("bad expert id was accepted")


def main():
    torch.cuda.set_device(0)
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", "29517")
    dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda", 0))
    print("libepx:", epx.library_path(), "torch", torch.__version__, "nccl", torch.cuda.nccl.version())
    with epx.Buffer(None, T, H, E, K) as buf:
        print("comm borrowed from torch:", buf.comm_borrowed, "SMs:", buf.num_sms)
    for c in [expanded("exact", 1, False), expanded("exact", 16, True), expanded("capacity", 8, False),
              dedup("exact"), dedup("capacity"), dedup("exact", fp8=True), own_comm, refused_call]:
        case(c)
    dist.destroy_process_group()
    print("FAILED:" if failures else "ALL PASSED", " ".join(failures))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
