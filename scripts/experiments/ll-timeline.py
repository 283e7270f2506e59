# Low-latency dispatch timeline from the "TLL" lines (ll-timeline.patch) of rank logs:
#   python3 ll-timeline.py <logdir>/rank*.log
# Per kind of launch (halves: 1 send, 2 receive, 3 both; tokens; FP8), median over launches after
# the first five, in us: the send half (GIN counters, free wait, staging, posting) and the receive
# half (arrival wait, copies, last CTA, free signals) per rank, and across ranks the time from one
# rank's post to the other's arrival (the global timer is one clock for every process on a GPU).
import sys, re, statistics as st
runs = {}
for path in sys.argv[1:]:
    r = int(re.search(r'rank(\d+)\.log', path).group(1))
    for line in open(path, errors='replace'):
        if line.startswith('TLL '):
            f = line.split()
            i, halves, tok, fp8 = int(f[2]), int(f[3]), int(f[4]), int(f[5])
            runs.setdefault(r, {})[i] = (halves, tok, fp8, [int(x) for x in f[6:]])
ranks = sorted(runs)
names = ['ctr', 'free', 'stage', 'post', '|', 'waitArr', 'copy', 'lastRecv', 'freeSig']
for key in sorted({(v[0], v[1], v[2]) for v in runs[ranks[0]].values()}):
    rows = []
    for i, (h, tok, fp8, p) in runs[ranks[0]].items():
        if (h, tok, fp8) != key: continue
        rows.append(i)
    rows = rows[5:]  # skip warmup-ish
    def med(fn):
        vals = [fn(i) for i in rows]
        vals = [v for v in vals if v is not None]
        return st.median(vals) / 1000 if vals else float('nan')
    out = []
    for r in ranks:
        def d(a, b, r=r):
            return lambda i: (runs[r][i][3][b] - runs[r][i][3][a]) if runs[r][i][3][a] and runs[r][i][3][b] else None
        seg = [('ctr', d(0, 1)), ('free', d(1, 2)), ('stage', d(2, 3)), ('post', d(3, 4)), ('sendTot', d(0, 4)),
               ('waitArr', d(5, 6)), ('copy', d(6, 7)), ('last', d(7, 8)), ('freeSig', d(8, 9)), ('recvTot', d(5, 9)), ('launch', d(0, 9))]
        out.append(f"  rank {r}: " + ' '.join(f"{n} {med(fn):.1f}" for n, fn in seg))
    # cross rank: peer's post (p4) -> my arrival seen (p6)
    if len(ranks) >= 2:
        a, b = ranks[0], ranks[1]
        # A receive-only launch (halves 2) pairs with the peer's send-only launch just before it.
        prev = 1 if key[0] == 2 else 0
        def lagOf(me, peer):
            def f(i):
                j = i - prev
                if j not in runs[peer] or i not in runs[me]: return None
                arrived, posted = runs[me][i][3][6], runs[peer][j][3][4]
                return arrived - posted if arrived and posted else None
            return f
        lag, lag2 = lagOf(a, b), lagOf(b, a)
        skew = lambda i: (runs[a][i][3][0] - runs[b][i][3][0]) if runs[a][i][3][0] and i in runs[b] and runs[b][i][3][0] else None
        out.append(f"  cross: post(r{b})->arrived(r{a}) {med(lag):.1f}  post(r{a})->arrived(r{b}) {med(lag2):.1f}  start skew r{a}-r{b} {med(skew):.1f}")
    print(f"halves {key[0]} tokens {key[1]} fp8 {key[2]} ({len(rows)} launches, us, median)")
    print('\n'.join(out))
