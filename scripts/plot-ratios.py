#!/usr/bin/env python3
"""Draws docs/ratio-to-floor.png from docs/data/ratio-to-floor.csv: each operation's time as a
multiple of its floor on the one-GPU rig (1.0 = the floor; lower is better).

    python3 scripts/plot-ratios.py [csv] [png]      (needs matplotlib: pip install matplotlib)

CSV columns: date, operation, fake_nodes, ratio, conditions, command (one row per measurement;
the rows of one operation and rank count are drawn as one bar each, in file order)."""
import csv
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else root / "docs/data/ratio-to-floor.csv"
    dst = Path(sys.argv[2]) if len(sys.argv) > 2 else root / "docs/ratio-to-floor.png"
    with open(src, newline="") as f:
        rows = [r for r in csv.DictReader(f)]
    if not rows:
        print(f"plot-ratios: {src} has no rows", file=sys.stderr)
        return 1
    labels = [f"{r['operation']} ({r['fake_nodes']} fake nodes)" for r in rows]
    ratios = [float(r["ratio"]) for r in rows]
    dates = sorted({r["date"] for r in rows})
    fig, ax = plt.subplots(figsize=(8, 0.38 * len(rows) + 1.4))
    colors = ["#4c72b0" if x <= 1.25 else "#dd8452" if x <= 2.0 else "#c44e52" for x in ratios]
    ax.barh(range(len(rows)), ratios, color=colors)
    ax.axvline(1.0, color="black", linewidth=1)
    for i, x in enumerate(ratios):
        ax.text(x + 0.03, i, f"{x:.2f}×", va="center", fontsize=8)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("time / floor (1.0 = floor; lower is better)")
    ax.set_title("epx on one H200: fake nodes, emulated NIC 50 GB/s + 3 µs\nmeasured " + ", ".join(dates), fontsize=9)
    ax.set_xlim(0, max(ratios) * 1.15)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)
    print(f"plot-ratios: wrote {dst}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
