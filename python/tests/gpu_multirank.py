"""Multi-rank GPU test of the epx Python package: 2+ processes, each its own rank (and, under
scripts/fake-nodes.sh, its own fake NCCL node on one GPU, so epx reaches its peers through GIN).

    scripts/fake-nodes.sh -n 2 -t 300 -- "$(command -v python3)" python/tests/gpu_multirank.py
    torchrun --nproc-per-node 2 python/tests/gpu_multirank.py          # 2 GPUs of one host
    (scripts/gpu-py.sh runs it on the device machine with the bundled libraries)

Every rank makes every rank's inputs from the same seeds, so each can compute what it must receive
and what its combine must return. Cases: dispatch/combine for both layouts and both modes (counts,
offsets, rows, weights, source info, gaps), FP8, combined weights, the MoE example against its
single-GPU reference, and a configuration that differs between ranks (EpError on every rank).
Each case does all its collective calls first and checks afterwards, so a failed check on one rank
does not leave the others waiting. Prints PASS/FAIL per case and rank; exit 1 if any failed.
NOT RUN ON A GPU YET (written 2026-12-02 without a GPU or torch on the machine).
"""

import os
import sys
import traceback

import torch
import torch.distributed as dist

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "examples"))
import epx  # noqa: E402
import moe_layer  # noqa: E402

H, K = 256, 3
failures = []
RANK = SIZE = 0
E = LE = 0


def case(fn, *args):
    name = fn.__name__ + ("_" + "_".join(str(a) for a in args) if args else "")
    try:
        fn(*args)
        print("rank %d PASS %s" % (RANK, name), flush=True)
    except Exception:  # noqa: BLE001
        failures.append(name)
        print("rank %d FAIL %s" % (RANK, name), flush=True)
        traceback.print_exc()
        sys.stdout.flush()


def tokens(r):
    return max(48 - 5 * r, 1)  # ranks hold different token counts


def inputs(seed):
    """[(x, topk_idx int64, topk_weights)] of every rank, the same on every rank."""
    out = []
    for r in range(SIZE):
        g = torch.Generator(device="cuda").manual_seed(seed * 100 + r)
        t = tokens(r)
        idx = torch.rand((t, E), generator=g, device="cuda").topk(K, dim=1).indices
        idx = idx.masked_fill(torch.rand((t, K), generator=g, device="cuda") < 0.2, -1)
        idx[:2] = -1  # tokens sent nowhere
        w = torch.rand((t, K), generator=g, device="cuda")
        x = torch.randn((t, H), generator=g, device="cuda").bfloat16()
        out.append((x, idx, w))
    return out


def buffer(**kw):
    kw.setdefault("sm_budget", moe_layer.default_sm_budget())
    return epx.Buffer(None, max(tokens(r) for r in range(SIZE)), H, E, K, **kw)


def expected_expanded(data, alignment):
    """What this rank receives in the expanded layout: rows (src, token, slot) per local expert in
    (source rank, token) order, segments aligned. Returns (valid row positions, x, w, src info,
    counts, offsets)."""
    pos, valid, xs, ws, src, counts, offsets = 0, [], [], [], [], [], [0]
    for j in range(LE):
        e, n = RANK * LE + j, 0
        for s, (x, idx, w) in enumerate(data):
            tok, slot = (idx == e).nonzero(as_tuple=True)
            xs.append(x[tok])
            ws.append(w[tok, slot])
            src.append(torch.stack([torch.full_like(tok, s), tok], dim=1))
            valid += range(pos + n, pos + n + len(tok))
            n += len(tok)
        counts.append(n)
        pos += -(-n // alignment) * alignment
        offsets.append(pos)
    return valid, torch.cat(xs), torch.cat(ws), torch.cat(src).to(torch.int32), counts, offsets


def scale(e):
    return 0.5 + e / E


def expanded(mode, alignment, zero_gaps=False):
    data = inputs(11 + alignment)
    x, idx, w = data[RANK]
    with buffer() as buf:
        d = buf.dispatch(x, idx, w, layout="expanded", alignment=alignment, zero_gaps=zero_gaps, mode=mode,
                         return_src_info=True)
        torch.cuda.synchronize()
        offsets = d.expert_offsets.tolist()
        y = torch.zeros((d.recv_x.shape[0], H), dtype=torch.bfloat16, device="cuda")
        for j in range(LE):
            rows = slice(offsets[j], offsets[j] + d.expert_counts[j].item())
            y[rows] = (d.recv_x[rows].float() * d.recv_topk_weights[rows, None] * scale(RANK * LE + j)).bfloat16()
        out, _ = buf.combine(d.handle, y)
        torch.cuda.synchronize()
    valid, ex, ew, esrc, counts, eoffsets = expected_expanded(data, alignment)
    assert d.expert_counts.tolist() == counts, (d.expert_counts.tolist(), counts)
    assert offsets == eoffsets, (offsets, eoffsets)
    assert int(d.num_recv_rows.item()) == eoffsets[-1]
    if mode == "exact":
        assert d.handle.num_rows == eoffsets[-1] and d.handle.expert_counts == counts
    v = torch.tensor(valid, dtype=torch.long, device="cuda")
    assert torch.equal(d.recv_x[v], ex), "received rows"
    assert torch.equal(d.recv_topk_weights[v], ew), "received weights"
    assert torch.equal(d.recv_src_info[v], esrc), "source info"
    if zero_gaps:
        gap = torch.ones(eoffsets[-1], dtype=torch.bool, device="cuda")
        gap[v] = False
        assert torch.all(d.recv_x[:eoffsets[-1]][gap] == 0), "gap rows not zeroed"
    c = torch.tensor([scale(e) for e in range(E)], device="cuda")
    ref = (x.float()[:, None, :] * (w * c[idx.clamp(min=0)] * (idx >= 0))[:, :, None]).sum(dim=1)
    torch.testing.assert_close(out.float(), ref, rtol=2e-2, atol=5e-2)


def dedup(mode, fp8=False):
    data = inputs(23)
    x, idx, w = data[RANK]
    idx = idx.to(torch.int32)
    g = torch.Generator(device="cuda").manual_seed(99 + RANK)
    sc = torch.rand((len(x), H // 128), generator=g, device="cuda") + 0.5
    with buffer(fp8=fp8) as buf:
        if fp8:
            d = buf.dispatch((x.to(torch.float8_e4m3fn), sc), idx, w, layout="dedup", mode=mode)
        else:
            d = buf.dispatch(x, idx, w, layout="dedup", mode=mode, return_src_info=True)
        torch.cuda.synchronize()
        n = int(d.num_recv_rows.item())
        y = torch.zeros((d.recv_x.shape[0], H), dtype=torch.bfloat16, device="cuda")
        if not fp8:
            y[:n] = (d.recv_x[:n].float() * (RANK + 1) / SIZE).bfloat16()
        out, cw = buf.combine(d.handle, y, topk_weights=d.recv_topk_weights)
        torch.cuda.synchronize()
    lo = RANK * LE
    ex, eidx, ew, esrc, esc = [], [], [], [], []
    for s, (xs, idxs, ws) in enumerate(data):
        mine = (idxs >= lo) & (idxs < lo + LE)
        sent = mine.any(dim=1)
        ex.append(xs[sent])
        eidx.append(torch.where(mine, idxs - lo, -1)[sent].to(torch.int32))
        ew.append(ws[sent])
        esrc.append(torch.stack([torch.full_like(sent.nonzero()[:, 0], s), sent.nonzero()[:, 0]], dim=1))
        gs = torch.Generator(device="cuda").manual_seed(99 + s)
        esc.append((torch.rand((len(xs), H // 128), generator=gs, device="cuda") + 0.5)[sent])
    ex = torch.cat(ex)
    assert n == len(ex), (n, len(ex))
    if mode == "exact":
        assert d.handle.num_rows == n
    if fp8:
        assert torch.equal(d.recv_x[:n].view(torch.uint8), ex.to(torch.float8_e4m3fn).view(torch.uint8))
        assert torch.equal(d.recv_x_scales[:n], torch.cat(esc))
        return
    assert torch.equal(d.recv_x[:n], ex), "received rows"
    eidx = torch.cat(eidx)
    assert torch.equal(d.recv_topk_idx[:n], eidx), "received local expert ids"
    assert torch.equal(d.recv_topk_weights[:n][eidx >= 0], torch.cat(ew)[eidx >= 0]), "received weights"
    assert torch.equal(d.recv_src_info[:n], torch.cat(esrc).to(torch.int32)), "source info"
    # out[t] = sum over the ranks d holding one of t's experts of x[t] * (d + 1) / SIZE
    owner = torch.where(idx >= 0, idx // LE, -1)
    f = torch.zeros(len(x), device="cuda")
    for r in range(SIZE):
        f += (owner == r).any(dim=1).float() * (r + 1) / SIZE
    torch.testing.assert_close(out.float(), x.float() * f[:, None], rtol=2e-2, atol=5e-2)
    assert torch.equal(cw, torch.where(idx >= 0, w, torch.zeros_like(w))), "combined_topk_weights"


def moe_example(layout, mode):
    args = moe_layer.parse_args(["--layout", layout, "--mode", mode, "--experts", str(E), "--iters", "2"])
    assert moe_layer.run(args, RANK, SIZE), "MoE layer differs from its reference"


def config_mismatch():
    """A config that differs between ranks: libepx refuses it on every rank with the same message."""
    try:
        buffer(timeout_ms=10000 + RANK)
    except epx.EpError as e:
        if SIZE == 1:
            raise AssertionError("1 rank cannot differ from itself: %s" % e) from e
        assert e.code == epx.abi.ncclInvalidUsage, e
        assert "timeout" in e.message.lower(), e.message
        print("   refused as expected:", e.message, flush=True)
        return
    assert SIZE == 1, "ranks with different timeout_ms were accepted"


def main():
    global RANK, SIZE, E, LE
    RANK, SIZE = moe_layer.init_distributed(port=29533)
    E = 4 * SIZE
    LE = E // SIZE
    print("rank %d/%d: libepx %s, torch %s, NCCL %s, SM budget %d" % (
        RANK, SIZE, epx.library_path(), torch.__version__, torch.cuda.nccl.version(),
        moe_layer.default_sm_budget()), flush=True)
    with buffer() as buf:
        print("rank %d: comm borrowed from torch: %s, SMs %d" % (RANK, buf.comm_borrowed, buf.num_sms), flush=True)
    case(expanded, "exact", 1)
    case(expanded, "exact", 16, True)
    case(expanded, "capacity", 8)
    case(dedup, "exact")
    case(dedup, "capacity")
    case(dedup, "exact", True)
    case(moe_example, "expanded", "exact")
    case(moe_example, "dedup", "capacity")
    case(config_mismatch)
    flag = torch.tensor([len(failures)], device="cuda")
    dist.all_reduce(flag)
    dist.destroy_process_group()
    print("rank %d: %s %s" % (RANK, "FAILED:" if failures else "ALL PASSED", " ".join(failures)), flush=True)
    return 1 if failures or flag.item() else 0


if __name__ == "__main__":
    sys.exit(main())
