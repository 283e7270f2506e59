"""A small, complete MoE layer on epx, checked against a single-GPU reference of the same layer.

    python python/examples/moe_layer.py                          # 1 rank (world size 1)
    torchrun --nproc-per-node 2 python/examples/moe_layer.py     # 2 ranks, one GPU each
    scripts/fake-nodes.sh -n 2 -- "$(command -v python3)" python/examples/moe_layer.py
                                                                 # 2 fake nodes on one GPU (GIN)

The layer, for the T tokens x [T, hidden] (bfloat16) of each rank:
  router   logits = x @ w_router [hidden, E]; probabilities = softmax; top-k experts per token,
           their probabilities renormalized to sum to 1 (gate weights, float32 [T, k]);
  experts  E SwiGLU MLPs, expert e: (silu(x @ w_gate[e]) * (x @ w_up[e])) @ w_down[e], with
           w_gate/w_up [E, hidden, ffn] and w_down [E, ffn, hidden] bfloat16; expert e lives on rank
           e // (E / world size);
  output   out[t] = sum over the top-k slots of gate weight * expert output (bfloat16 [T, hidden]).

With epx: route locally, dispatch the tokens to the ranks of their experts (epx.Buffer.dispatch),
run the local experts as grouped matmuls (one matmul per local expert over its segment of the
received rows), weight the rows, and combine them back (epx.Buffer.combine). The reference computes
the same layer on this rank's tokens with pure torch on one GPU (every rank holds every expert's
weights here, made from one seed, only to be able to compute the reference). Each rank prints the
largest difference between the two and PASS or FAIL; the exit status is 0 only if every rank passed.

Options: --layout expanded|dedup, --mode exact|capacity, --tokens, --hidden, --ffn, --experts,
--topk, --alignment, --iters, --seed (python moe_layer.py --help). Multi-process runs take the
torch.distributed environment of torchrun (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)
or of scripts/fake-nodes.sh (EPX_MP_RANK, EPX_MP_SIZE, EPX_MP_ID_FILE); without either, world size 1.
"""

import argparse
import os
import sys

import torch
import torch.distributed as dist
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import epx  # noqa: E402  (the package in python/, or an installed one)


# --- setup -----------------------------------------------------------------------------------------
def init_distributed(port=29531):
    """torch.distributed (NCCL backend) from the environment; returns (rank, world size).

    scripts/fake-nodes.sh: EPX_MP_RANK / EPX_MP_SIZE, rendezvous through a file next to
    EPX_MP_ID_FILE; torchrun: RANK / WORLD_SIZE / LOCAL_RANK (env://); otherwise 1 rank."""
    env = os.environ
    ndev = torch.cuda.device_count()
    if "EPX_MP_RANK" in env:
        rank, size = int(env["EPX_MP_RANK"]), int(env["EPX_MP_SIZE"])
        init, local = "file://" + env["EPX_MP_ID_FILE"] + ".torch-store", rank % ndev
    elif "RANK" in env and "WORLD_SIZE" in env:
        rank, size = int(env["RANK"]), int(env["WORLD_SIZE"])
        init, local = "env://", int(env.get("LOCAL_RANK", rank % ndev))
    else:
        env.setdefault("MASTER_ADDR", "127.0.0.1")
        env.setdefault("MASTER_PORT", str(port))
        rank, size, init, local = 0, 1, "env://", 0
    torch.cuda.set_device(local)
    dist.init_process_group("nccl", init_method=init, rank=rank, world_size=size,
                            device_id=torch.device("cuda", local))
    return rank, size


def default_sm_budget():
    """CTAs per epx kernel. 0 (libepx's analytic count) with one process per GPU. Several processes
    on one GPU (fake nodes under MPS, EPX_MP_PROCS_PER_GPU) must leave room for each other's
    spinning CTAs and use the same budget: min(24, (SMs - 4) / processes). EPX_SM_BUDGET overrides."""
    if os.environ.get("EPX_SM_BUDGET"):
        return int(os.environ["EPX_SM_BUDGET"])
    procs = int(os.environ.get("EPX_MP_PROCS_PER_GPU", "1"))
    if procs <= 1:
        return 0
    sms = torch.cuda.get_device_properties(torch.cuda.current_device()).multi_processor_count
    return max(1, min(24, (sms - 4) // procs))


class MoEWeights:
    """Router and expert weights, identical on every rank (made on the CPU from one seed)."""

    def __init__(self, hidden, ffn, num_experts, seed, device):
        g = torch.Generator().manual_seed(seed)

        def rand(*shape, fan_in):
            return (torch.randn(*shape, generator=g) * fan_in ** -0.5).to(device=device, dtype=torch.bfloat16)

        self.router = rand(hidden, num_experts, fan_in=hidden)
        self.w_gate = rand(num_experts, hidden, ffn, fan_in=hidden)
        self.w_up = rand(num_experts, hidden, ffn, fan_in=hidden)
        self.w_down = rand(num_experts, ffn, hidden, fan_in=ffn)
        self.num_experts = num_experts


def route(x, w, topk):
    """Top-k experts per token: (topk_idx int64 [T, k], gate weights float32 [T, k], rows summing to 1)."""
    probs = torch.softmax((x @ w.router).float(), dim=-1)
    weights, idx = probs.topk(topk, dim=-1)
    return idx, weights / weights.sum(dim=-1, keepdim=True)


def expert_mlp(x, w, e):
    """Expert e on rows x [n, hidden] bf16 -> [n, hidden] bf16 (SwiGLU)."""
    return (F.silu(x @ w.w_gate[e]) * (x @ w.w_up[e])) @ w.w_down[e]


# --- the layer ---------------------------------------------------------------------------------------
def reference_forward(x, w, topk):
    """The whole layer on one GPU, pure torch: every expert runs on the tokens routed to it."""
    idx, gate = route(x, w, topk)
    out = torch.zeros(x.shape, dtype=torch.float32, device=x.device)
    for e in range(w.num_experts):
        tok, slot = (idx == e).nonzero(as_tuple=True)
        if len(tok):
            out.index_add_(0, tok, expert_mlp(x[tok], w, e).float() * gate[tok, slot, None])
    return out.bfloat16()


def segments(d, alignment):
    """(start, rows) of each local expert's segment in an expanded dispatch output, on the host.
    Exact mode: from the counts libepx returned at the layout (no device sync). Capacity mode: the
    device offsets are read back (one sync; a graph-captured layer would instead use a grouped GEMM
    that takes device offsets)."""
    if d.handle.expert_counts is not None:
        counts, start, segs = d.handle.expert_counts, 0, []
        for c in counts:
            segs.append((start, c))
            start += -(-c // alignment) * alignment
        return segs
    offsets, counts = d.expert_offsets.tolist(), d.expert_counts.tolist()
    return list(zip(offsets[:-1], counts))


def epx_forward(buf, x, w, topk, layout="expanded", mode="exact", alignment=16):
    """The same layer with expert parallelism: route, dispatch, local experts, combine."""
    idx, gate = route(x, w, topk)
    first = buf.rank * buf.num_local_experts  # global id of this rank's first expert
    if layout == "expanded":
        # One row per (token, local expert), grouped by expert: a grouped matmul over the segments.
        d = buf.dispatch(x, idx, gate, layout="expanded", alignment=alignment, mode=mode)
        y = torch.zeros((d.recv_x.shape[0], x.shape[1]), dtype=torch.bfloat16, device=x.device)
        for j, (start, n) in enumerate(segments(d, alignment)):
            if n:
                rows = slice(start, start + n)
                h = expert_mlp(d.recv_x[rows], w, first + j)
                y[rows] = (h.float() * d.recv_topk_weights[rows, None]).bfloat16()
    else:
        # One row per (token, this rank) with the token's local expert ids and weights: each local
        # expert runs on the rows that chose it; a row's local experts are summed before combine.
        d = buf.dispatch(x, idx, gate, layout="dedup", mode=mode)
        n = d.handle.num_rows if mode == "exact" else int(d.num_recv_rows.item())
        acc = torch.zeros((d.recv_x.shape[0], x.shape[1]), dtype=torch.float32, device=x.device)
        for j in range(buf.num_local_experts):
            row, slot = (d.recv_topk_idx[:n] == j).nonzero(as_tuple=True)
            if len(row):
                h = expert_mlp(d.recv_x[row], w, first + j)
                acc.index_add_(0, row, h.float() * d.recv_topk_weights[row, slot, None])
        y = acc.bfloat16()
    out, _ = buf.combine(d.handle, y)
    return out


def compare(out, ref, rel_tol=2e-2):
    """(max |out - ref|, tolerance, passed): tolerance = rel_tol * max |ref| (bf16 roundings of the
    expert outputs, of the weighted rows and of per-rank partial sums; a misrouted token is off by
    the size of the output itself)."""
    err = (out.float() - ref.float()).abs().max().item() if out.numel() else 0.0
    tol = rel_tol * max(ref.float().abs().max().item() if ref.numel() else 0.0, 1e-3)
    return err, tol, err <= tol


def run(args, rank, size):
    """Build the layer and epx.Buffer, run args.iters steps, compare each with the reference.
    Returns True when every step of this rank passed."""
    if args.experts % size:
        raise SystemExit("--experts (%d) must be a multiple of the world size (%d)" % (args.experts, size))
    dev = torch.device("cuda", torch.cuda.current_device())
    w = MoEWeights(args.hidden, args.ffn, args.experts, args.seed, dev)
    ok = True
    with epx.Buffer(dist.group.WORLD, max_tokens_per_rank=args.tokens, hidden=args.hidden,
                    num_experts=args.experts, topk=args.topk, sm_budget=default_sm_budget()) as buf:
        for it in range(args.iters):
            g = torch.Generator(device=dev).manual_seed(args.seed * 1000 + it * 100 + rank + 1)
            t = max(args.tokens - (it % 3) * rank, 1)  # ranks may hold different token counts
            x = torch.randn((t, args.hidden), generator=g, device=dev).bfloat16()
            out = epx_forward(buf, x, w, args.topk, args.layout, args.mode, args.alignment)
            ref = reference_forward(x, w, args.topk)
            err, tol, good = compare(out, ref)
            ok &= good
            print("rank %d/%d step %d (%s, %s, T=%d): max |epx - reference| = %.3e (tolerance %.3e) %s"
                  % (rank, size, it, args.layout, args.mode, t, err, tol, "PASS" if good else "FAIL"), flush=True)
    return ok


def parse_args(argv=None):
    p = argparse.ArgumentParser(description="MoE layer on epx vs a single-GPU torch reference")
    p.add_argument("--tokens", type=int, default=64, help="tokens per rank (max_tokens_per_rank)")
    p.add_argument("--hidden", type=int, default=512, help="model width (multiple of 8)")
    p.add_argument("--ffn", type=int, default=256, help="expert MLP width")
    p.add_argument("--experts", type=int, default=16, help="experts in total (multiple of the world size)")
    p.add_argument("--topk", type=int, default=4)
    p.add_argument("--layout", choices=["expanded", "dedup"], default="expanded")
    p.add_argument("--mode", choices=["exact", "capacity"], default="exact")
    p.add_argument("--alignment", type=int, default=16, help="expanded layout: segment alignment in rows")
    p.add_argument("--iters", type=int, default=3)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    rank, size = init_distributed()
    ok = run(args, rank, size)
    flag = torch.tensor([0 if ok else 1], device="cuda")
    dist.all_reduce(flag)  # every rank exits with the same verdict
    if rank == 0:
        print("moe_layer: %s (%d rank(s))" % ("PASS" if flag.item() == 0 else "FAIL", size), flush=True)
    dist.destroy_process_group()
    return 0 if flag.item() == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
