#!/usr/bin/env python3
"""A phase model of epx's low-latency dispatch and combine time per call on a real NIC (a model:
nothing here ran on a NIC). Python 3 standard library only.

    python3 scripts/ll-model.py [--out CSV] [--no-write]      (default: docs/data/ll-model.csv)

Prints the derivation of the on-GPU rate, the table of docs/low-latency.md ("On a real NIC: a
model"), the comparison with DeepEP's published figures and a sensitivity table; writes one CSV
row per (configuration, tokens, op) with every phase.

Shape: hidden 7168, top-8 of 256 experts, uniform routing (expected, i.e. mean, bytes per rank),
8 GPUs per node, one 400 Gb/s NIC per GPU. EP8 is one node (NVLink only); "EP8 RDMA" is 8 nodes of
one GPU each (every peer over the network); EP16..EP64 are 2..8 nodes.

Phases, as the kernels run them (device/src/ll_dispatch.cu, ll_combine.cu), per rank and call:
  rows  = T*K, every (token, expert) its own row, not deduplicated per rank; shares by where the
          expert lives: self 1/R, NVLink peers (G-1)/R, other nodes (R-G)/R; P = R-G remote ranks
  stage = (self + network rows) * row bytes / (SMs * SM_GBPS)        rows written to the own window
        + NVLink rows * row bytes / min(SMs * NVLINK_SM_GBPS, NVLINK_GBPS)   stores to peers
  ops   = ceil(P / GIN_CONTEXTS) * GIN_OP_US   P put-with-signals, one per remote rank, posted by
          threads of the last CTA, taken as serialized per GIN context (peer % contexts)
  wire  = network rows * row bytes (+ P headers for dispatch) / NIC_GBPS
  lat   = GIN one-way latency (NVLINK_LATENCY_US when no peer is remote)
  recv  = dispatch: every received row copied to the outputs, rows * msg bytes / (SMs * SM_GBPS);
          combine: the weighted sum reads K rows per token, T*K*2H / (SMs * SM_GBPS)
  free  = P * GIN_OP_US: the receive half's last CTA signals the bank free to every remote rank,
          all on the one control context (transport.cuh publishWord), so serialized
  floor = wire + GIN one-way latency (NVLink only: NVLink bytes / NVLINK_GBPS + NVLink latency)
  today = FIXED_US + stage + ops + wire + lat + recv + free            (each waits for the last)
  overlapped, dispatch: FIXED_US + GIN_OP_US + max(stage + recv, stage/P + wire + lat + recv/P) + free
  overlapped, combine:  FIXED_US + GIN_OP_US + max(stage, stage/P + wire + lat) + recv + free
          (rows leave per destination while later ones are staged, and a source's rows are copied
          as they land; one destination's staging and one source's copy stay in line. The combine's
          sum waits for every row: it adds in slot order k = 0..K-1, which is part of its contract.)
  (stage/P and recv/P use the network rows only.)

Parameters and their sources are next to their values below; SM_GBPS is fitted at run time from
the rig's send halves at 2 fake nodes in docs/data/low-latency.csv."""
import argparse
import csv
import math
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RIG_CSV = ROOT / "docs/data/low-latency.csv"

# ---- shape (DeepSeek-V3 decode) ----
HIDDEN = 7168
TOPK = 8
EXPERTS = 256
SCALE_BLOCK = 128  # channels per FP32 scale (FP8)
META_BYTES = 16  # per dispatch message: source token, top-k slot, padding (ll_layout.h)
TOKENS = (1, 32, 128, 256)
# (label, EP size R, GPUs per node G)
CONFIGS = (("EP8", 8, 8), ("EP8 RDMA", 8, 1), ("EP16", 16, 8), ("EP32", 32, 8), ("EP64", 64, 8))
OPS = ("BF16 dispatch", "FP8 dispatch", "combine")

# ---- the rig's send half (for SM_GBPS) ----
RIG_FAKE_NODES = 2  # one rank per node: every row is written locally (self or staging)
RIG_SMS = 8


@dataclass(frozen=True)
class Params:
    # NIC: 400 Gb/s = 50 GB/s line rate; 46-48 GB/s is what RDMA writes reach in practice.
    nic_gbps: float = 47.0
    # Device-initiated GIN round trip for small messages on H100, GDAKI backend: "GPU-Initiated
    # Networking for NCCL" (Hamidouche et al., NVIDIA, arXiv:2511.15076); its NIC taken to be a
    # 400 Gb/s ConnectX-7 (not checked). One way = half of it (assumption: the round trip is two
    # alike one-way trips, issue and poll included).
    gin_round_trip_us: float = 16.7
    # Issue cost of one put-with-signal on the posting thread (assumption, not measured: WQEs for
    # the write and the signal, a fence ordering the staged rows before them, a doorbell write
    # across PCIe: about one PCIe round trip). The rig's `issue` (4-9 us) is its host proxy's.
    gin_op_us: float = 1.0
    # GIN contexts of a device communicator: NCCL 2.28.9 gives at most 4 (host/include/epx/ep.h).
    gin_contexts: int = 4
    # NVLink4 (18 links): copy-engine peer copies 381.3 GB/s per direction, SM stores 339.3 GB/s
    # at 24 CTAs (2xH200, docs/performance.md). Per-SM store rate: 339.3 / 24, a lower bound
    # (24 CTAs already nearly fill the link: 356.6 GB/s at 132).
    nvlink_gbps: float = 381.3
    nvlink_sm_gbps: float = 339.3 / 24
    nvlink_latency_us: float = 1.0  # assumption: a remote store's visibility plus a flag poll
    # SMs (CTAs) of the LL kernels: 8, as in the rig's bench.
    sms: int = 8
    # Written GB/s per SM in the on-GPU copies: main() fits it from the rig (fit_sm_gbps).
    sm_gbps: float = 0.0
    # Per call: kernel start, the routing count (every CTA reads T x K ids), two last-CTA
    # handoffs (assumption; the rig's 0-token times are its one-host GIN path, not this).
    fixed_us: float = 5.0

    @property
    def gin_one_way_us(self) -> float:
        return self.gin_round_trip_us / 2


def align16(n: int) -> int:
    return (n + 15) // 16 * 16


def row_bytes(op: str) -> int:
    """Bytes of one row as it crosses a link: a dispatch message (payload, FP8 scales, meta) or a
    BF16 combine row."""
    if op == "combine":
        return 2 * HIDDEN
    if op == "FP8 dispatch":
        return HIDDEN + align16(HIDDEN // SCALE_BLOCK * 4) + META_BYTES
    return 2 * HIDDEN + META_BYTES


def fit_sm_gbps() -> tuple:
    """Written GB/s per SM from the rig's BF16 send half at 2 fake nodes: least-squares slope of
    µs over tokens; each token writes K messages; the send half does not wait for the wire."""
    with open(RIG_CSV, newline="") as f:
        pts = [(int(r["tokens"]), float(r["send_half_us"])) for r in csv.DictReader(f)
               if int(r["fake_nodes"]) == RIG_FAKE_NODES]
    n = len(pts)
    mx = sum(x for x, _ in pts) / n
    my = sum(y for _, y in pts) / n
    slope = sum((x - mx) * (y - my) for x, y in pts) / sum((x - mx) ** 2 for x, _ in pts)
    per_token = TOPK * row_bytes("BF16 dispatch")
    gbps = per_token / slope / 1e3  # bytes per µs = 1e-3 GB/s
    return pts, slope, per_token, gbps, gbps / RIG_SMS


def us(nbytes: float, gbps: float) -> float:
    return nbytes / (gbps * 1e3)


def model(p: Params, op: str, R: int, G: int, T: int) -> dict:
    K, Le, P = TOPK, EXPERTS // R, R - G
    rows = T * K
    net_rows, nvl_rows, self_rows = rows * (R - G) / R, rows * (G - 1) / R, rows / R
    rb = row_bytes(op)
    dispatch = op != "combine"
    net_bytes = net_rows * rb + (P * align16(4 * Le) if dispatch else 0)
    nvl_bytes = nvl_rows * rb
    local_rate = p.sms * p.sm_gbps
    stage_net = us(net_rows * rb, local_rate)
    nvl_rate = min(p.sms * p.nvlink_sm_gbps, p.nvlink_gbps)
    stage = us((self_rows + net_rows) * rb, local_rate) + us(nvl_bytes, nvl_rate)
    recv = us(rows * rb, local_rate)  # dispatch copies every received row; combine reads K rows per token
    recv_net = us(net_rows * rb, local_rate)
    ops = math.ceil(P / p.gin_contexts) * p.gin_op_us
    wire = us(net_bytes, p.nic_gbps)
    lat = p.gin_one_way_us if P else p.nvlink_latency_us
    floor = (wire if P else us(nvl_bytes, p.nvlink_gbps)) + lat
    free = P * p.gin_op_us  # one control context (kControlContext): serialized
    today = p.fixed_us + stage + ops + wire + lat + recv + free
    first_op = p.gin_op_us if P else 0.0
    chunks = max(P, 1)
    if dispatch:
        overlap = p.fixed_us + first_op + max(stage + recv, stage_net / chunks + wire + lat + recv_net / chunks) + free
    else:
        overlap = p.fixed_us + first_op + max(stage, stage_net / chunks + wire + lat) + recv + free
    return dict(net_bytes=net_bytes, nvl_bytes=nvl_bytes, fixed=p.fixed_us, stage=stage, ops=ops, wire=wire,
                lat=lat, recv=recv, free=free, floor=floor, today=today, overlap=overlap)


def label(name: str, R: int, G: int) -> str:
    nodes = R // G
    return f"{name} ({nodes} node{'s' if nodes > 1 else ''} × {G} GPU{'s' if G > 1 else ''})"


# DeepEP's published low-latency figures (V1 kernels; H800 + ConnectX-7 400 Gb/s InfiniBand; 128
# tokens per rank, hidden 7168, top-8, FP8 dispatch, BF16 combine): EP -> (dispatch µs, combine µs).
# Current table (github.com/deepseek-ai/DeepEP: its README's, now on its V1 "legacy" documentation
# page), since the README's 2025-06-05 update that lets the low-latency kernels use NVLink inside a
# node (EP8..EP64 changed; EP128/EP256 unchanged).
DEEPEP_NVLINK = {8: (77, 114), 16: (118, 195), 32: (155, 273), 64: (173, 314), 128: (192, 369), 256: (194, 360)}
# The README's table before that update (every peer over RDMA, git history of the same repository).
DEEPEP_RDMA = {8: (163, 318), 16: (173, 329), 32: (182, 350), 64: (186, 353), 128: (192, 369), 256: (194, 360)}


def main() -> int:
    ap = argparse.ArgumentParser(description="Phase model of epx's low-latency calls on a real NIC "
                                 "(docs/low-latency.md, 'On a real NIC: a model').")
    ap.add_argument("--out", type=Path, default=ROOT / "docs/data/ll-model.csv",
                    help="CSV with every phase of every row (default: docs/data/ll-model.csv)")
    ap.add_argument("--no-write", action="store_true", help="print the tables only")
    args = ap.parse_args()
    out = args.out
    if not args.no_write and not out.parent.is_dir():
        ap.error(f"--out: folder {out.parent} does not exist")
    pts, slope, per_token, gbps, per_sm = fit_sm_gbps()
    p = Params(sm_gbps=per_sm)
    print("SM_GBPS from the rig's BF16 send half at 2 fake nodes (docs/data/low-latency.csv):")
    print("  tokens -> send half µs: " + ", ".join(f"{x} -> {y:g}" for x, y in pts))
    print(f"  least-squares slope {slope:.4f} µs/token; a token writes K x {row_bytes('BF16 dispatch')} B"
          f" = {per_token} B")
    print(f"  {per_token} B / {slope:.4f} µs = {gbps:.0f} GB/s over {RIG_SMS} SMs = {per_sm:.1f} GB/s per SM")
    print(f"GIN one-way latency = {p.gin_round_trip_us} / 2 = {p.gin_one_way_us:.2f} µs; NIC {p.nic_gbps} GB/s; "
          f"{p.gin_op_us} µs per GIN op, {p.gin_contexts} contexts; NVLink {p.nvlink_gbps} GB/s, "
          f"{p.nvlink_sm_gbps:.1f} GB/s per SM; {p.sms} SMs; fixed {p.fixed_us} µs per call\n")

    results = []
    for name, R, G in CONFIGS:
        for T in TOKENS:
            for op in OPS:
                results.append((name, R, G, T, op, model(p, op, R, G, T)))

    for op in ("FP8 dispatch", "combine"):
        m = model(p, op, 64, 8, 128)
        print(f"EP64, 128 tokens, {op}: " + ", ".join(f"{k} {m[k]:.2f}" for k in
              ("fixed", "stage", "ops", "wire", "lat", "recv", "free")) +
              f" µs; today = their sum = {m['today']:.1f}; floor {m['floor']:.1f}; overlapped {m['overlap']:.1f}")
    print()
    print("µs per call: floor / epx today / epx overlapped")
    print("| EP (nodes × GPUs) | tokens | BF16 dispatch | FP8 dispatch | combine |")
    print("|---|---|---|---|---|")
    for i in range(0, len(results), len(OPS)):
        name, R, G, T = results[i][:4]
        cells = " | ".join(f"{m['floor']:.0f} / {m['today']:.0f} / {m['overlap']:.0f}"
                           for *_, m in results[i:i + len(OPS)])
        print(f"| {label(name, R, G)} | {T} | {cells} |")

    print("\n128 tokens, FP8 dispatch and combine, µs: DeepEP published / model floor / today / overlapped")
    print("| EP | DeepEP dispatch | model dispatch | DeepEP combine | model combine |")
    print("|---|---|---|---|---|")
    for name, R, G in CONFIGS:
        ref = (DEEPEP_RDMA if G == 1 else DEEPEP_NVLINK)[R]
        d = next(m for n, _, _, t, o, m in results if n == name and t == 128 and o == "FP8 dispatch")
        c = next(m for n, _, _, t, o, m in results if n == name and t == 128 and o == "combine")
        tag = " (all RDMA)" if G == 1 else ""
        print(f"| {label(name, R, G)} | {ref[0]}{tag} | {d['floor']:.0f} / {d['today']:.0f} / {d['overlap']:.0f} "
              f"| {ref[1]}{tag} | {c['floor']:.0f} / {c['today']:.0f} / {c['overlap']:.0f} |")

    print("\nSensitivity at 128 tokens, µs today / overlapped: base, then each parameter alone ×0.5 and ×2")
    # Params field -> its name in docs/low-latency.md
    knobs = (("nic_gbps", "`B_nic`"), ("gin_round_trip_us", "`L`"), ("gin_op_us", "`t_op`"),
             ("sm_gbps", "`B_sm`"), ("nvlink_sm_gbps", "`B_nvsm`"), ("fixed_us", "`F`"), ("sms", "SMs"))
    cases = (("EP16", 16, 8, "FP8 dispatch"), ("EP64", 64, 8, "FP8 dispatch"), ("EP64", 64, 8, "combine"))
    print("| parameter (×0.5 · ×2) | " + " | ".join(f"{n} {o}" for n, _, _, o in cases) + " |")
    print("|---|" + "---|" * len(cases))

    def pair(q: Params, R: int, G: int, o: str) -> str:
        m = model(q, o, R, G, 128)
        return f"{m['today']:.0f} / {m['overlap']:.0f}"

    print("| (base) | " + " | ".join(pair(p, R, G, o) for _, R, G, o in cases) + " |")
    for k, name in knobs:
        cells = []
        for _, R, G, o in cases:
            half, double = (replace(p, **{k: type(getattr(p, k))(getattr(p, k) * f)}) for f in (0.5, 2))
            cells.append(f"{pair(half, R, G, o)} · {pair(double, R, G, o)}")
        print(f"| {name} | " + " | ".join(cells) + " |")

    cols = ["config", "ep", "nodes", "gpus_per_node", "tokens", "op", "network_bytes", "nvlink_bytes",
            "floor_us", "today_us", "overlapped_us", "fixed_us", "stage_us", "ops_us", "wire_us", "latency_us",
            "recv_us", "free_us"]
    keys = ("floor", "today", "overlap", "fixed", "stage", "ops", "wire", "lat", "recv", "free")
    if args.no_write:
        return 0
    with open(out, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(cols)
        for name, R, G, T, op, m in results:
            w.writerow([name, R, R // G, G, T, op, round(m["net_bytes"]), round(m["nvl_bytes"])]
                       + [f"{m[k]:.2f}" for k in keys])
    print(f"\nll-model: wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
