# EXPERIMENT. High-throughput dispatch timeline from the "THT" lines (ht-timeline.patch) of rank logs:
#   python3 ht-timeline.py <logdir>/rank*.log
# One bench configuration per run (gpu-ht-timeline.sh): the launches of several would be pooled.
# Line: THT <rank> <launch> <fp8 0/1> <iteration> <warmup 0/1> <point>=<value> ... (points:
# device/include/epx/device/ht_timeline.h as applied by the patch; times are the GPU's global timer
# in ns, one clock for every process on the GPU). Per dtype (BF16 / FP8), the warmup launches left
# out, the median over launches per rank of each phase in us since that rank's launch start (CTA
# 0's entry), the durations that matter (start to the first put, last put to the last arrival, the
# tail), and across ranks (launch i is the same op on every rank) the skew of the starts and each
# round's time from a source's put to the arrival its receiver saw. An arrival is when CTA 0 saw
# it: CTA 0 starts receiving only after its last round, so when its wait was short ("waited" near
# 0) the rows had landed earlier; "% rows landed" (the arrival signals read, without waiting, when
# CTA 0 had staged each round) says how far the wire was then.
import re
import statistics as st
import sys

runs = {}  # rank -> launch -> (fp8, points)
for path in sys.argv[1:]:
    for line in open(path, errors='replace'):
        if not line.startswith('THT '):
            continue
        f = line.split()
        rank, launch, fp8, _it, warm = (int(x) for x in f[1:6])
        if warm:
            continue
        pts = {}
        for kv in f[6:]:
            k, _, v = kv.partition('=')
            pts[k] = int(v)
        runs.setdefault(rank, {})[launch] = (fp8, pts)
if not runs:
    sys.exit('ht-timeline: no THT lines (EPX_HT_TIMELINE=1 with a build of ht-timeline.patch?)')
ranks = sorted(runs)
R = max(ranks) + 1


def share(n, parts, p):  # protocol.h shareOf
    q, r = divmod(n, parts)
    b = p * q + min(p, r)
    return range(b, b + q + (1 if p < r else 0))


def info(p):
    v = p.get('info', 0)
    return v & 0xff, (v >> 8) & 0xff, (v >> 16) & 0xff, (v >> 24) & 0xffff  # rounds, waves, groups, CTAs


def rel(p, k):
    return (p[k] - p['start']) / 1000 if k in p and 'start' in p else None


def ctaMax(p, field):
    vals = [v for k, v in p.items() if re.fullmatch(r'c\d+\.' + field, k)]
    return max(vals) if vals else None


def arrivedAt(p, me, w):  # CTA 0 saw wave w of every source (own rank: NVLink, last wave only)
    _, waves, groups, _ = info(p)
    ends = []
    for g in range(groups):
        if me in share(R, groups, g) and w < waves - 1:
            continue
        k = f'w{w}.g{g}.end'
        if k in p:
            ends.append(p[k])
    return max(ends) if ends else None


def landedPct(p, j):  # of the rows from each network source, the share landed when CTA 0 staged round j
    pct = [100.0 * (p[f'landed.r{j}.s{s}'] - 1) / (p[f'rows.s{s}'] - 1)
           for s in range(R) if f'landed.r{j}.s{s}' in p and p.get(f'rows.s{s}', 1) > 1]
    return min(pct) if pct else None


def waited(p, w):
    _, _, groups, _ = info(p)
    t = [p[f'w{w}.g{g}.end'] - p[f'w{w}.g{g}.start'] for g in range(groups) if f'w{w}.g{g}.end' in p]
    return sum(t) / 1000 if t else None


def med(vals):
    vals = [v for v in vals if v is not None]
    return st.median(vals) if vals else None


def fmt(v):
    return f'{v:9.1f}' if isinstance(v, (int, float)) and v is not None else f'{"-":>9}'


for fp8, name in ((0, 'BF16'), (1, 'FP8')):
    launches = sorted(set.intersection(*[{i for i, (f, _) in runs[r].items() if f == fp8} for r in ranks]))
    if not launches:
        continue
    P = {r: {i: runs[r][i][1] for i in launches} for r in ranks}
    first = P[ranks[0]][launches[0]]
    rounds, waves, groups, ctas = info(first)
    rows = []  # (label, {rank: median})

    def row(label, fn):
        rows.append((label, {r: med([fn(r, P[r][i], i) for i in launches]) for r in ranks}))

    row('CTA entry spread (first..last CTA)',
        lambda r, p, i: (ctaMax(p, 'in') - min(v for k, v in p.items() if re.fullmatch(r'c\d+\.in', k))) / 1000
        if ctaMax(p, 'in') else None)
    row('begun (NVLink peers ready)', lambda r, p, i: rel(p, 'begun'))
    row('per-row arrays staged (CTA 0)', lambda r, p, i: rel(p, 'meta'))
    for j in range(rounds):
        row(f'round {j}: CTA 0 staged', lambda r, p, i, j=j: rel(p, f'c0.s{j}'))
        row(f'round {j}: last CTA staged', lambda r, p, i, j=j: rel(p, f'r{j}.staged'))
        row(f'round {j}: peers ready (readyAllGin)', lambda r, p, i, j=j: rel(p, f'r{j}.ready'))
        row(f'round {j}: puts posted', lambda r, p, i, j=j: rel(p, f'r{j}.posted'))
        row(f'round {j}: posting CTA (value)', lambda r, p, i, j=j: p.get(f'r{j}.cta'))
        row(f'round {j}: % rows landed at CTA 0 staged (slowest src)', lambda r, p, i, j=j: landedPct(p, j))
    row('sent (CTA 0: rounds done, arriveLsa)', lambda r, p, i: rel(p, 'sent'))
    for w in range(waves):
        row(f'wave {w}: arrived (CTA 0 saw the last source)',
            lambda r, p, i, w=w: (arrivedAt(p, r, w) - p['start']) / 1000 if arrivedAt(p, r, w) else None)
        row(f'wave {w}: CTA 0 waited (sum over groups)', lambda r, p, i, w=w: waited(p, w))
    row('receive done (CTA 0, copies included)', lambda r, p, i: rel(p, 'recv'))
    row('completeGin done (CTA 0)', lambda r, p, i: rel(p, 'gin'))
    row('completeGin done (last CTA)', lambda r, p, i: (ctaMax(p, 'gin') - p['start']) / 1000 if ctaMax(p, 'gin') else None)
    row('end() done (CTA 0)', lambda r, p, i: rel(p, 'end'))
    row('end() done (last CTA) = kernel end', lambda r, p, i: (ctaMax(p, 'out') - p['start']) / 1000 if ctaMax(p, 'out') else None)
    rows.append(('-- durations (us)', {}))
    last = rounds - 1
    row('start -> round 0 posted', lambda r, p, i: rel(p, 'r0.posted'))
    row(f'round {last} posted -> last arrival (the gap)',
        lambda r, p, i: (arrivedAt(p, r, waves - 1) - p[f'r{last}.posted']) / 1000
        if arrivedAt(p, r, waves - 1) and f'r{last}.posted' in p else None)
    row('last arrival -> kernel end (tail)',
        lambda r, p, i: (ctaMax(p, 'out') - arrivedAt(p, r, waves - 1)) / 1000
        if arrivedAt(p, r, waves - 1) and ctaMax(p, 'out') else None)
    row('kernel (first CTA in -> last CTA out)',
        lambda r, p, i: (ctaMax(p, 'out') - min(v for k, v in p.items() if re.fullmatch(r'c\d+\.in', k))) / 1000
        if ctaMax(p, 'out') else None)
    if len(ranks) > 1:
        rows.append(('-- across ranks (us; same launch on every rank)', {}))
        row('start - earliest rank\'s start', lambda r, p, i: (p['start'] - min(P[q][i]['start'] for q in ranks)) / 1000)
        # Round j's puts of the sources of group g (their latest) -> CTA 0 of this rank saw wave j of group g.
        for j in range(min(rounds, waves)):
            def lag(r, p, i, j=j):
                out = []
                for g in range(groups):
                    src = [s for s in share(R, groups, g) if s != r and s in P]
                    k = f'w{j}.g{g}.end'
                    posts = [P[s][i].get(f'r{j}.posted') for s in src]
                    if not src or k not in p or None in posts:
                        continue
                    out.append((p[k] - max(posts)) / 1000)
                return max(out) if out else None
            row(f'round {j}: source posted -> arrived here (slowest group)', lag)
    print(f'{name} dispatch: {len(launches)} launches per rank after warmup; rounds {rounds}, waves {waves}, '
          f'groups {groups}, CTAs {ctas}; median us since the rank\'s launch start unless said')
    width = max(len(l) for l, _ in rows)
    print(f'  {"":{width}} ' + ''.join(f'{"rank " + str(r):>9}' for r in ranks))
    for label, vals in rows:
        print(f'  {label:{width}} ' + ''.join(fmt(vals.get(r)) for r in ranks) if vals else f'  {label}')
    print()
