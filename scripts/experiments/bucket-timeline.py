#!/usr/bin/env python3
"""Summarizes the per-phase timeline of bucket calls that a build with bucket-timeline.patch prints
(EPX_BUCKET_TIMELINE=1: one "TL rank R slot S kind K name=us ... abs0=ns" line per call and rank at
ncclEpBucketDestroy). Kind 1 = all-gather, 3 = reduce-scatter with the FP32 wire, 4 = with the BF16
wire (all-reduce halves included). Medians over ranks and calls after each kind's first three, in
µs from each rank's kernel start; "credit lag" = this rank's `begun` minus the latest peer's end of
the previous call (one GIN signal through the rig: all ranks share one GPU clock).

  bucket-timeline.py LABEL TL-FILE [LABEL TL-FILE ...] [--csv OUT]
"""
import argparse
import csv
import re
import statistics as st
import sys

POINTS = ["begun", "firstPut", "lastPut", "cta0ConvDone", "lastCtaConvDone", "firstArr", "lastArr", "cta0Reduced",
          "cta0End"]
KINDS = {1: "all-gather", 3: "reduce-scatter FP32 wire", 4: "reduce-scatter BF16 wire"}


def load(path):
    calls = {}
    for line in open(path):
        m = re.match(r"TL rank (\d+) slot (\d+) kind (\d+) (.*) abs0=(\d+)", line)
        if not m:
            continue
        rank, slot, kind = map(int, m.groups()[:3])
        d = {k: float(v) for k, v in re.findall(r"(\w+)=(-?[\d.]+)", m.group(4))}
        d["abs"], d["kind"] = int(m.group(5)) / 1e3, kind
        calls[(slot, rank)] = d
    return calls


def summarize(label, calls):
    ranks = sorted({r for _, r in calls})
    rows = []
    for kind, name in KINDS.items():
        slots = sorted({s for (s, r), d in calls.items() if d["kind"] == kind and s > 0})[3:]
        if not slots:
            continue
        row = {"run": label, "op": name, "calls": len(slots)}
        for p in POINTS:
            vals = [calls[(s, r)][p] for s in slots for r in ranks if calls[(s, r)].get(p, -1) >= 0]
            row[p] = round(st.median(vals), 1) if vals else ""
        lags = []
        for s in slots:
            if any((s - 1, r) not in calls for r in ranks):
                continue
            for r in ranks:
                prev_end = max(calls[(s - 1, p)]["abs"] + calls[(s - 1, p)]["cta0End"] for p in ranks if p != r)
                lags.append(calls[(s, r)]["abs"] + calls[(s, r)]["begun"] - prev_end)
        row["creditLag"] = round(st.median(lags), 1) if lags else ""
        rows.append(row)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("pairs", nargs="+", help="LABEL TL-FILE pairs")
    ap.add_argument("--csv", help="write the table here")
    a = ap.parse_args()
    if len(a.pairs) % 2:
        ap.error("expected LABEL TL-FILE pairs")
    rows = []
    for label, path in zip(a.pairs[::2], a.pairs[1::2]):
        rows += summarize(label, load(path))
    cols = ["run", "op", "calls"] + POINTS + ["creditLag"]
    w = csv.DictWriter(open(a.csv, "w", newline="") if a.csv else sys.stdout, fieldnames=cols)
    w.writeheader()
    w.writerows(rows)


if __name__ == "__main__":
    main()
