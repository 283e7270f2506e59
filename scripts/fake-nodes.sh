#!/usr/bin/env bash
# Runs a program as N ranks, one process each, every group of -g ranks its own NCCL "node"
# (distinct NCCL_HOSTID), all on the local GPUs (rank r uses GPU r % GPUs): multi-node epx on one
# GPU. See docs/fake-nodes.md.
#
#   scripts/fake-nodes.sh -n N [-g ranks-per-node] [-t timeout_s] [-l logdir] -- <binary> [args]
#
#   -n N   ranks (processes)                       -g G   ranks per fake node (default 1)
#   -t S   wall-clock limit for the whole job in s (default 600); past it every rank is killed
#   -l DIR logs: DIR/rank<r>.log per rank, DIR/summary.txt (default: a new /tmp/epx-fake-nodes.*)
#
# Each rank gets EPX_MP_SIZE=N, EPX_MP_RANK=r, EPX_MP_ID_FILE=DIR/nccl-unique-id (the harness
# multi-process mode: host/testing/include/epx/testing/multigpu.h), EPX_MP_RANKS_PER_NODE=G,
# NCCL_HOSTID=epx-fake-node-<r/G>,
# NCCL_NET_PLUGIN=<absolute path of libnccl-net-epx.so> (EPX_PLUGIN_SO, else found next to the
# binary, in ../lib, in a build tree's plugin/, or in .devbuild/lib; EPX_PLUGIN_SO=none: NCCL's
# own transports), EPX_SOCKET_IFNAME=lo and EPX_NET_TRANSPORT=socket (unless set: on a host with
# RDMA ports the plugin would otherwise pick its never-run verbs transport), NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0,
# NCCL_RMA_DISABLE=1 unless set (NCCL 2.30+: no RMA proxy thread per rank, docs/fake-nodes.md "NCCL 2.30
# and newer"; epx does not use NCCL's host RMA API; 2.28.9 ignores it),
# CUDA_MODULE_LOADING=EAGER (a lazily loaded kernel launched while a GIN kernel spins stalls:
# docs/plugins.md), EPX_MP_PROCS_PER_GPU (the test harness caps SM budgets at min(24, (SMs-16) / that), so that the
# spinning CTAs of all processes fit on the GPU at once), EPX_GIN_STREAMS=process with more than 2
# processes per GPU (unless set), and one EPX_TEST_SEED for all (the caller's, else random). Everything else in the
# environment passes through (EPX_GIN_EMU_GBPS, EPX_GIN_EMU_LATENCY_US, NCCL_DEBUG,
# CUDA_DEVICE_MAX_CONNECTIONS: unless set, 32 with up to 2 processes per GPU, 16 with up to 4, else 12 —
# see "Hardware queues" below,
# CUDA_MPS_ACTIVE_THREAD_PERCENTAGE, ...).
#
# MPS (scripts/mps.sh): the processes' kernels run concurrently only under MPS (without it the GPU
# time-slices and a kernel spinning on a peer waits for the peer's slice). Unless EPX_MPS=0, an MPS
# control daemon is started when none is running (pipe/log directories under /tmp;
# nvidia-cuda-mps-control from PATH or /usr/local/nvidia/bin) and stopped at the end; when it
# cannot start, the job runs without MPS and says so loudly. Ranks of one fake node (-g > 1) must
# be on distinct GPUs (NCCL rejects two ranks of one host on one GPU).
#
# When a rank fails (non-zero exit), the others get EPX_FAKE_NODES_GRACE_S (default 15) seconds to
# finish, then SIGTERM, then SIGKILL. Exit status: 0 all ranks exited 0; 77 all ranks exited 77
# (skipped, e.g. no GPU); 124 the time limit was hit; 1 otherwise; 2 bad usage.
#
# When the time limit is hit, every rank still running gets SIGUSR1 first: epx's test and bench
# binaries then write their main thread's stack and current phase to their log
# (host/testing/include/epx/testing/stack_dump.h); 2 s later they are killed. (cuda-gdb cannot
# attach under MPS.) With EPX_FAKE_NODES_BEACONS=1 the ranks also run with
# EPX_DEBUG_BEACONS=/dev/shm/epx-beacons.<pid> (host/src/beacons.h: each CTA of epx's kernels writes
# where it is into a file there; tmpfs, so CUDA can register it) and the time limit decodes those
# files into DIR/beacons.txt.
set -u

usage() { sed -n '2,/^set -u/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 2; }
n=0 g=1 limit=600 logdir=""
# value <option> <its argument...>: the option's value, or a usage error when it has none.
value() { [ $# -ge 2 ] && [ -n "$2" ] || { echo "fake-nodes: $1 needs a value" >&2; exit 2; }; }
while [ $# -gt 0 ]; do
  case $1 in
    -n) value "$@"; n=$2; shift 2 ;;
    -g) value "$@"; g=$2; shift 2 ;;
    -t) value "$@"; limit=$2; shift 2 ;;
    -l) value "$@"; logdir=$2; shift 2 ;;
    -h|--help) usage ;;
    --) shift; break ;;
    *) echo "fake-nodes: unknown option '$1'" >&2; usage ;;
  esac
done
[ $# -ge 1 ] || { echo "fake-nodes: no program given (after --)" >&2; usage; }
case "$n$g$limit" in *[!0-9]*) echo "fake-nodes: -n, -g, -t take whole numbers (digits only)" >&2; exit 2 ;; esac
[ ${#n} -le 5 ] && [ ${#g} -le 5 ] && [ ${#limit} -le 7 ] || { echo "fake-nodes: -n, -g, -t: values too large" >&2; exit 2; }
[ "$n" -le 1024 ] || { echo "fake-nodes: -n $n: at most 1024 ranks (epx's rank limit)" >&2; exit 2; }
[ "$limit" -ge 1 ] || { echo "fake-nodes: -t $limit: the time limit is at least 1 s" >&2; exit 2; }
[ "$n" -ge 1 ] && [ "$g" -ge 1 ] || { echo "fake-nodes: need -n >= 1 and -g >= 1" >&2; exit 2; }
grace=${EPX_FAKE_NODES_GRACE_S:-15}
case "$grace" in ''|*[!0-9]*) echo "fake-nodes: EPX_FAKE_NODES_GRACE_S='$grace': whole seconds (digits only)" >&2; exit 2 ;; esac
[ $((n % g)) -eq 0 ] || { echo "fake-nodes: -g $g must divide -n $n (every fake node has -g ranks)" >&2; exit 2; }

bin=$1; shift
if [[ $bin != */* ]]; then name=$bin; bin=$(type -P "$name") || { echo "fake-nodes: program '$name' not found in PATH" >&2; exit 2; }; fi
[ -x "$bin" ] || { echo "fake-nodes: $bin is not an executable" >&2; exit 2; }
bin=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
bindir=$(dirname "$bin")
repo=$(cd "$(dirname "$0")/.." && pwd)

# ---- the net/GIN plugin --------------------------------------------------------------------------
so=${EPX_PLUGIN_SO:-}
if [ -z "$so" ]; then
  for c in "$bindir/libnccl-net-epx.so" "$bindir/../lib/libnccl-net-epx.so" "$bindir/../plugin/libnccl-net-epx.so" \
           "$bindir/../../plugin/libnccl-net-epx.so" "$bindir/../../../plugin/libnccl-net-epx.so" \
           "$repo/.devbuild/lib/libnccl-net-epx.so"; do
    [ -e "$c" ] && { so=$c; break; }
  done
fi
if [ "$so" = none ]; then
  echo "fake-nodes: EPX_PLUGIN_SO=none: NCCL's own transports, no EPX GIN plugin"
  so=""
elif [ -z "$so" ]; then
  echo "fake-nodes: libnccl-net-epx.so not found (set EPX_PLUGIN_SO=<path>, or EPX_PLUGIN_SO=none)" >&2
  exit 2
elif [ ! -e "$so" ]; then
  echo "fake-nodes: EPX_PLUGIN_SO=$so: no such file (set it to libnccl-net-epx.so's path, or to none)" >&2
  exit 2
else
  so=$(cd "$(dirname "$so")" && pwd)/$(basename "$so")
fi

# ---- logs ----------------------------------------------------------------------------------------
if [ -z "$logdir" ]; then logdir=$(mktemp -d /tmp/epx-fake-nodes.XXXXXX); else mkdir -p "$logdir"; fi
logdir=$(cd "$logdir" 2>/dev/null && pwd) || logdir=""
if [ -z "$logdir" ] || [ ! -w "$logdir" ]; then echo "fake-nodes: cannot create or write the log directory" >&2; exit 2; fi
bdir=""
if [ "${EPX_FAKE_NODES_BEACONS:-0}" = 1 ]; then bdir=/dev/shm/epx-beacons.$$; mkdir -p "$bdir"; fi
idfile=$logdir/nccl-unique-id
rm -f "$idfile" "$idfile".tmp.* "$logdir"/rank*.log
summary=$logdir/summary.txt
: > "$summary"
say() { echo "fake-nodes: $*" | tee -a "$summary"; }

seed=${EPX_TEST_SEED:-}
if [ -z "$seed" ]; then seed=$(od -An -N8 -tu8 /dev/urandom | tr -d ' '); fi

nodes=$(( (n + g - 1) / g ))
. "$repo/scripts/mps.sh"
ngpu=$(gpu_count)
if [ "$g" -gt 1 ] && [ "$ngpu" -gt 0 ] && [ "$g" -gt "$ngpu" ]; then
  say "WARNING: $g ranks per node but $ngpu GPU(s): ranks of one node would share a GPU, which NCCL rejects"
fi

# ---- MPS -----------------------------------------------------------------------------------------
mps_up "$logdir"
trap 'mps_down; [ -n "$bdir" ] && rm -rf "$bdir"' EXIT
mps_loud fake-nodes

# Hardware queues (docs/fake-nodes.md): the GIN ipc backend's copy and signal streams must not share
# a queue with a stream on which an epx kernel spins, or its copies wait behind the kernel until the
# kernel times out. More queues per process, within what MPS gives all its clients together (4
# processes x 32 failed to create their contexts, "out of memory"; 4 x 16 and 8 x 12 did).
per_gpu=$(( (n + (ngpu > 0 ? ngpu : 1) - 1) / (ngpu > 0 ? ngpu : 1) ))
if [ -z "${CUDA_DEVICE_MAX_CONNECTIONS:-}" ]; then
  if [ "$per_gpu" -le 2 ]; then CUDA_DEVICE_MAX_CONNECTIONS=32
  elif [ "$per_gpu" -le 4 ]; then CUDA_DEVICE_MAX_CONNECTIONS=16
  else
    CUDA_DEVICE_MAX_CONNECTIONS=12
  fi
  export CUDA_DEVICE_MAX_CONNECTIONS
fi
# With more than 2 processes per GPU the backend's per-peer streams can outnumber the 16 / 12 queues
# once the application adds streams of its own: one copy and one signal stream per process instead
# (docs/fake-nodes.md). (At 4 processes with per-peer streams, the Python test's overlap case — epx
# on a side stream — stalled in GIN completion; with EPX_GIN_STREAMS=process it passed.)
if [ "$per_gpu" -gt 2 ] && [ -z "${EPX_GIN_STREAMS:-}" ]; then export EPX_GIN_STREAMS=process; fi
# SMs: epx's dispatch/combine CTAs spin on peers, so the CTAs of ALL processes on a GPU must be
# resident at once. The test harness caps each group's SM budget at min(24, (SMs - 16) / processes
# per GPU) (EPX_MP_PROCS_PER_GPU; EPX_TEST_MAX_SMS overrides); epx-bench takes --sms.
export EPX_MP_PROCS_PER_GPU=$per_gpu
say "$n rank(s) on $nodes fake node(s) ($g per node), $ngpu GPU(s), limit ${limit} s, seed $seed"
say "program: $bin $*"
say "plugin: ${so:-none}; MPS: $MPS_NOTE"
say "logs: $logdir"
for v in EPX_GIN_EMU_GBPS EPX_GIN_EMU_LATENCY_US EPX_GIN_STREAMS EPX_TEST_QUICK CUDA_MPS_ACTIVE_THREAD_PERCENTAGE CUDA_DEVICE_MAX_CONNECTIONS; do
  [ -n "${!v:-}" ] && say "$v=${!v}"
done

# ---- ranks ---------------------------------------------------------------------------------------
declare -a pid rc start_s end_s
t0=$(date +%s.%N)
now() { date +%s.%N; }
for ((r = 0; r < n; ++r)); do
  node=$(( r / g ))
  (
    export EPX_MP_SIZE=$n EPX_MP_RANK=$r EPX_MP_ID_FILE=$idfile EPX_MP_RANKS_PER_NODE=$g
    export NCCL_HOSTID=epx-fake-node-$node
    [ -n "$so" ] && export NCCL_NET_PLUGIN=$so
    export EPX_SOCKET_IFNAME=${EPX_SOCKET_IFNAME:-lo}
    export EPX_NET_TRANSPORT=${EPX_NET_TRANSPORT:-socket}
    export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 CUDA_MODULE_LOADING=EAGER EPX_TEST_SEED=$seed
    export NCCL_RMA_DISABLE=${NCCL_RMA_DISABLE:-1}
    [ -n "$bdir" ] && export EPX_DEBUG_BEACONS=$bdir
    exec "$bin" "$@"
  ) >"$logdir/rank$r.log" 2>&1 &
  pid[$r]=$!
  rc[$r]=""
  start_s[$r]=$(now)
done

alive() {  # running and not a zombie
  local st
  st=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -d' ' -f1) || return 1
  [ -n "$st" ] && [ "$st" != Z ]
}
kill_all() {  # signal every rank still running
  local sig=$1 r
  for ((r = 0; r < n; ++r)); do [ -z "${rc[$r]}" ] && kill -"$sig" "${pid[$r]}" 2>/dev/null; done
}
# Ask the ranks still running for their stacks (see the header), then give them 2 s to write them.
dump_stacks() {
  if [ -n "$bdir" ] && [ -d "$bdir" ]; then  # word b = CTA b: (kernel << 24) | (step << 16) | (seq & 0xffff)
    for f in "$bdir"/*.bin; do
      [ -e "$f" ] || continue
      echo "== $(basename "$f")"
      od -A n -t u4 -v -w4 "$f" | awk 'BEGIN { split("layout dispatch combine", K, " ");
          split("start ready sent arrived completing completed end", S, " ") }
        { w = $1 + 0; b = NR - 1
          if (b == 256) { print "  dispatch/combine kernels started: " w; exit }
          if (w == 0) next
          k = int(w / 16777216); st = int(w / 65536) % 256; q = w % 65536
          printf "  CTA %3d: %s step %s seq %d\n", b, (k in K ? K[k] : k), (st in S ? S[st] : st), q }'
    done > "$logdir/beacons.txt" 2>&1
    say "kernel progress beacons: $logdir/beacons.txt"
  fi
  kill_all USR1
  sleep 2
  say "stacks of the ranks still running: in their logs, after '==== SIGUSR1'"
}
interrupted=0
on_signal() { interrupted=1; kill_all TERM; sleep 2; kill_all KILL; }
trap on_signal INT TERM

first_fail=""
timed_out=0
killed_at=""
left=$n
while [ "$left" -gt 0 ]; do
  for ((r = 0; r < n; ++r)); do
    [ -n "${rc[$r]}" ] && continue
    if ! alive "${pid[$r]}"; then
      wait "${pid[$r]}"; rc[$r]=$?
      end_s[$r]=$(now)
      left=$((left - 1))
      if [ "${rc[$r]}" -ne 0 ] && [ -z "$first_fail" ]; then
        first_fail=$(now)
        why="exited ${rc[$r]}"; [ "${rc[$r]}" -eq 77 ] && why="skipped (exit 77)"
        [ "$left" -gt 0 ] && say "rank $r $why: the others get ${grace} s to end, then are killed"
      fi
    fi
  done
  [ "$left" -eq 0 ] && break
  t=$(now)
  if [ -z "$killed_at" ]; then
    if awk -v a="$t" -v b="$t0" -v l="$limit" 'BEGIN{exit !(a - b > l)}'; then
      timed_out=1; killed_at=$t
      say "time limit ${limit} s reached: killing the $left rank(s) still running"
      dump_stacks
      kill_all TERM
    elif [ -n "$first_fail" ] && awk -v a="$t" -v b="$first_fail" -v l="$grace" 'BEGIN{exit !(a - b > l)}'; then
      killed_at=$t
      say "grace period over: killing the $left rank(s) still running"
      kill_all TERM
    elif [ "$interrupted" = 1 ]; then
      killed_at=$t
    fi
  elif awk -v a="$t" -v b="$killed_at" 'BEGIN{exit !(a - b > 5)}'; then
    kill_all KILL
  fi
  sleep 0.2
done

# ---- summary -------------------------------------------------------------------------------------
ok=0 skipped=0 failed=0
for ((r = 0; r < n; ++r)); do
  c=${rc[$r]}
  secs=$(awk -v a="${end_s[$r]}" -v b="${start_s[$r]}" 'BEGIN{printf "%.1f", a - b}')
  case $c in
    0) ok=$((ok + 1)); what="ok" ;;
    77) skipped=$((skipped + 1)); what="skipped" ;;
    124|137|143) failed=$((failed + 1)); what="killed/timeout" ;;
    *) failed=$((failed + 1)); what="FAILED" ;;
  esac
  last=$(sed 's/\x1b\[[0-9;]*m//g' "$logdir/rank$r.log" 2>/dev/null | grep -v '^[[:space:]]*$' | tail -1 | cut -c1-110)
  say "$(printf 'rank %-3d node %-3d exit %-3s %-14s %7s s  %s' "$r" $((r / g)) "$c" "$what" "$secs" "$last")"
done
for ((r = 0; r < n; ++r)); do
  c=${rc[$r]}
  if [ "$c" -ne 0 ] && [ "$c" -ne 77 ]; then
    echo "---- rank $r: last 25 lines of $logdir/rank$r.log" | tee -a "$summary"
    tail -25 "$logdir/rank$r.log" | sed 's/\x1b\[[0-9;]*m//g' | tee -a "$summary"
  fi
done
mps_down
if [ "$interrupted" = 1 ]; then say "interrupted"; exit 130; fi
if [ "$timed_out" = 1 ]; then say "result: TIMEOUT after ${limit} s"; exit 124; fi
if [ "$failed" -eq 0 ] && [ "$skipped" -eq "$n" ]; then say "result: SKIPPED (every rank exited 77)"; exit 77; fi
if [ "$failed" -eq 0 ] && [ "$skipped" -eq 0 ]; then say "result: OK ($n ranks)"; exit 0; fi
say "result: FAILED ($failed failed, $skipped skipped, $ok ok of $n)"
exit 1
