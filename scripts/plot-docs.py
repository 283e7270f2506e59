#!/usr/bin/env python3
"""Draws the figures of docs/ from the CSV files under docs/data/ (needs matplotlib:
pip install matplotlib).

    python3 scripts/plot-docs.py [out_dir]      (default: docs/)

  ratio-to-floor.png   time over floor per operation      (docs/data/ratio-to-floor.csv, via plot-ratios.py)
  ht-sms.png           HT × floor vs SMs per fake-node count (docs/data/ht-fake-nodes.csv, the SM sweeps)
  ll-tokens.png        low-latency µs vs tokens per rank  (docs/data/low-latency.csv)
  pp-size.png          PP % of line vs message size       (docs/data/bucket-pp.csv, PP rows of the size sweep)
  nccl-tests-size.png  nccl-tests bus GB/s vs size        (docs/data/nccl-tests-fake-nodes.txt)

Only measured points are drawn; nothing is interpolated beyond the lines between them."""
import csv
import runpy
import sys
from collections import defaultdict
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "docs/data"


def rows(name):
    with open(DATA / name, newline="") as f:
        return list(csv.DictReader(f))


def ratio_plot(out: Path) -> None:
    argv = sys.argv
    sys.argv = ["plot-ratios.py", str(DATA / "ratio-to-floor.csv"), str(out / "ratio-to-floor.png")]
    try:
        runpy.run_path(str(ROOT / "scripts/plot-ratios.py"), run_name="plot_ratios").get("main")()
    finally:
        sys.argv = argv


def ht_sms_plot(out: Path) -> None:
    # The SM-budget sweeps: rows whose command (explicit or "as above") swept --sms in one run.
    sweep, command = [], ""
    for r in rows("ht-fake-nodes.csv"):
        if r["command"] and r["command"] != "as above":
            command = r["command"]
        if r["routing"] == "uniform" and r["layout"] == "dedup-win" and ("--sms 8,16,24" in command or "--sms 8,12,14,16" in command):
            sweep.append(r)
    if not sweep:
        return
    ops = ["BF16 dispatch", "FP8 dispatch", "BF16 combine"]
    fig, axes = plt.subplots(1, len(ops), figsize=(10, 3.6), sharey=True)
    for ax, op in zip(axes, ops):
        by_n = defaultdict(list)
        for r in sweep:
            if r["op"] == op:
                by_n[int(r["fake_nodes"])].append((int(r["sms"]), float(r["x_floor"])))
        for n in sorted(by_n):
            pts = sorted(by_n[n])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{n} fake nodes")
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xlabel("SMs (CTAs) per rank")
        ax.set_title(op, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("time / floor")
    axes[0].legend(fontsize=8)
    dates = ", ".join(sorted({r["date"] for r in sweep}))
    fig.suptitle(f"HT on one H200, uniform, dedup into the window, emulated NIC 50 GB/s + 3 µs (measured {dates}; "
                 "8 fake nodes: one put round; 8 × 16 SMs fill the GPU)", fontsize=8)
    fig.tight_layout()
    fig.savefig(out / "ht-sms.png", dpi=110)
    print(f"plot-docs: wrote {out / 'ht-sms.png'}")


def ll_plot(out: Path) -> None:
    data = rows("low-latency.csv")
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.6), sharey=True)
    for ax, (col, title) in zip(axes, [("bf16_dispatch_us", "BF16 dispatch"), ("combine_us", "combine")]):
        by_n = defaultdict(list)
        for r in data:
            by_n[int(r["fake_nodes"])].append((int(r["tokens"]), float(r[col])))
        for n in sorted(by_n):
            pts = sorted(by_n[n])
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{n} fake nodes")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens per rank")
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("µs per call")
    axes[0].legend(fontsize=8)
    dates = ", ".join(sorted({r["date"] for r in data}))
    fig.suptitle(f"low-latency on one H200, emulated NIC 50 GB/s + 3 µs, 8 SMs (measured {dates})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "ll-tokens.png", dpi=110)
    print(f"plot-docs: wrote {out / 'll-tokens.png'}")


def pp_plot(out: Path) -> None:
    # The message-size sweep: PP rows at 4 fake nodes with the default 1 MiB chunks from one date.
    sweep = [r for r in rows("bucket-pp.csv")
             if r["op"] == "PP ring" and r["fake_nodes"] == "4" and r["chunk_kib"] == "1024" and r["stale"] == "yes"]
    if not sweep:
        return
    fig, ax = plt.subplots(figsize=(5.5, 3.6))
    for streams, label in [("1", "one stream"), ("2", "receives on a second stream")]:
        pts = sorted((float(r["size_mib"]), float(r["pct_of_line"])) for r in sweep if r["streams"] == streams)
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks([4, 16, 64], ["4", "16", "64"])
    ax.set_xlabel("message size (MiB)")
    ax.set_ylabel("% of the 50 GB/s line (bus bandwidth)")
    ax.set_ylim(0, 105)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    dates = ", ".join(sorted({r["date"] for r in sweep}))
    ax.set_title(f"PP ring, 4 fake nodes, 4 CTAs, 1 MiB chunks (measured {dates})", fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "pp-size.png", dpi=110)
    print(f"plot-docs: wrote {out / 'pp-size.png'}")


def nccl_tests_plot(out: Path) -> None:
    series = defaultdict(list)  # (test, procs, transport) -> [(bytes, busbw)]
    date = ""
    for line in open(DATA / "nccl-tests-fake-nodes.txt"):
        if line.startswith("# nccl-tests") and ";" in line:
            date = line.split(";")[1].strip().split()[0]
        f = line.split()
        if len(f) >= 5 and f[0] in ("epx", "socket") and f[1].isdigit() and f[3].isdigit():
            if int(f[3]) > 0:
                series[(f[2], int(f[1]), f[0])].append((int(f[3]), float(f[4])))
    tests = sorted({k[0] for k in series})
    fig, axes = plt.subplots(1, len(tests), figsize=(3.2 * len(tests), 3.4), sharey=True, squeeze=False)
    for ax, test in zip(axes[0], tests):
        for (t, procs, transport), pts in sorted(series.items()):
            if t != test:
                continue
            pts.sort()
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=".", color={2: "C0", 4: "C1", 8: "C2"}.get(procs),
                    linestyle="-" if transport == "epx" else "--", label=f"{transport}, {procs} proc")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("bytes")
        ax.set_title(test, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("bus GB/s (out of place)")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("nccl-tests across fake nodes on one H200: epx net plugin vs NCCL socket, loopback TCP"
                 + (f" ({date})" if date else ""), fontsize=9)
    fig.tight_layout()
    fig.savefig(out / "nccl-tests-size.png", dpi=100)
    print(f"plot-docs: wrote {out / 'nccl-tests-size.png'}")


def main() -> int:
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "docs"
    out.mkdir(parents=True, exist_ok=True)
    ratio_plot(out)
    ht_sms_plot(out)
    ll_plot(out)
    pp_plot(out)
    nccl_tests_plot(out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
