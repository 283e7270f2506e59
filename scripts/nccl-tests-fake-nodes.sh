#!/usr/bin/env bash
# Runs NVIDIA's nccl-tests (all_reduce_perf, all_gather_perf, alltoall_perf, sendrecv_perf, with
# -c 1 correctness checks) as 2, 4 and 8 MPI processes on one GPU, each process its own fake NCCL
# node (NCCL_HOSTID, as scripts/fake-nodes.sh does), once through epx's net plugin and tuner
# (NCCL_NET_PLUGIN=epx, NCCL_TUNER_PLUGIN=epx: socket transport on loopback) and once through
# NCCL's own socket transport, and writes a table: bus bandwidth per size and wrong elements.
#
#   scripts/nccl-tests-fake-nodes.sh [-n "2 4 8"] [-t "epx socket"] [-b 8] [-e 64M] [-o results]
#
#   -n  process counts              -t  transports: epx (plugin + tuner), socket (NCCL's own)
#   -b  -e  smallest / largest size (nccl-tests syntax; factor 4 between sizes)
#   -o  results file (default $OUT/nccl-tests-results.txt, else ./nccl-tests-results.txt);
#       raw output of each run goes next to it, in nccl-tests-logs/
#
# Needs .nccl-tests/ from scripts/nccl-tests-prepare.sh (carried to this machine; override with
# EPX_NCCL_TESTS_DIR): the OpenMPI .debs are unpacked into /tmp/mpi (dpkg -x, nothing is
# installed), the test binaries and the plugin come from there. NCCL: EPX_NCCL_LIB, default the pip
# NCCL 2.28.9 of /opt/torch. Runs as root (mpirun --allow-run-as-root), without network
# (loopback), under MPS when it can start (scripts/mps.sh). Each run is bounded by
# EPX_NT_TIMEOUT_S (default 300 s). Exit status: 0 when every run finished with no wrong element.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
procs="2 4 8" transports="epx socket" minb=8 maxb=64M results=""
while getopts "n:t:b:e:o:h" opt; do
  case $opt in
    n) procs=$OPTARG ;; t) transports=$OPTARG ;; b) minb=$OPTARG ;; e) maxb=$OPTARG ;; o) results=$OPTARG ;;
    *) sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
nt=${EPX_NCCL_TESTS_DIR:-$repo/.nccl-tests}
[ -x "$nt/bin/all_reduce_perf" ] || { echo "nccl-tests-fake-nodes: $nt/bin has no nccl-tests (run scripts/nccl-tests-prepare.sh, carry .nccl-tests)" >&2; exit 2; }
results=${results:-${OUT:-.}/nccl-tests-results.txt}
mkdir -p "$(dirname "$results")" || exit 2
logs=$(cd "$(dirname "$results")" && pwd)/nccl-tests-logs
mkdir -p "$logs"

# ---- OpenMPI from the .debs, relocated to /tmp/mpi ------------------------------------------------
mpi=/tmp/mpi
if [ ! -x "$mpi/usr/bin/orterun" ]; then
  for d in "$nt"/debs/*.deb; do dpkg -x "$d" "$mpi" || exit 1; done
fi
lib=$mpi/usr/lib/x86_64-linux-gnu
nccl_lib=${EPX_NCCL_LIB:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib}
export OPAL_PREFIX=$mpi/usr PATH=$mpi/usr/bin:$PATH
export PMIX_MCA_pcompress_base_silence_warning=1  # PMIx's help files are not relocated with it
export LD_LIBRARY_PATH=$lib:$nt/lib:$nccl_lib:${LD_LIBRARY_PATH:-}:${CUDA_HOME:-/usr/local/cuda}/lib64
# Debian's /etc/openmpi/openmpi-mca-params.conf is not under OPAL_PREFIX: its settings, plus
# shared memory only (one host, no network), no binding (all ranks share one GPU's host).
# shellcheck disable=SC2054  # the commas are inside MCA values
mpirun=(orterun --allow-run-as-root --oversubscribe --bind-to none --mca btl self,vader --mca pml ob1
        --mca mtl ^ofi --mca osc ^ucx,pt2pt --mca btl_base_warn_component_unused 0 --mca oob_tcp_if_include lo)
missing=$(for f in "$mpi/usr/bin/orterun" "$mpi/usr/bin/orted" "$lib/libmpi.so.40" "$nt"/bin/*_perf "$nt/lib/libnccl-net-epx.so"; do
  ldd "$f" 2>/dev/null | grep "not found"; done | sort -u)
[ -z "$missing" ] || { echo "nccl-tests-fake-nodes: libraries missing:"; echo "$missing"; exit 1; } >&2

# ---- one GPU shared by every process ----------------------------------------------------------------
. "$repo/scripts/mps.sh"
mps_up "$logs"
trap mps_down EXIT
mps_loud nccl-tests
echo "nccl-tests-fake-nodes: MPS: $MPS_NOTE"
export NCCL_TESTS_DEVICE=0           # nccl-tests would put local rank r on GPU r
export CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-0}
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=${NCCL_DEBUG:-INFO} NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,TUNING}

# run <transport> <procs> <test>: one nccl-tests run, its output in $logs/<transport>-<procs>-<test>.log
run() {
  local tr=$1 np=$2 test=$3 log=$logs/$1-$2-$3.log
  # The ranks are local children of orterun and inherit this environment; -x adds per-transport values.
  local env=()
  if [ "$tr" = epx ]; then
    # NCCL finds libnccl-net-epx.so and libnccl-tuner-epx.so on LD_LIBRARY_PATH ($nt/lib).
    env+=(-x NCCL_NET_PLUGIN=epx -x NCCL_TUNER_PLUGIN=epx -x EPX_SOCKET_IFNAME=lo -x EPX_NET_TRANSPORT=socket)
  else
    env+=(-x NCCL_NET_PLUGIN=none -x NCCL_NET=Socket -x NCCL_SOCKET_IFNAME=lo)
  fi
  # Each process is its own node: NCCL_HOSTID from its MPI rank (expanded by the rank's bash).
  # shellcheck disable=SC2016
  # NCCL's INFO lines go to files of their own: on stdout they interleave with the result rows.
  env+=(-x NCCL_DEBUG_FILE="$logs/$tr-$np-$test.nccl.%p")
  timeout "${EPX_NT_TIMEOUT_S:-300}" "${mpirun[@]}" -np "$np" "${env[@]}" \
    bash -c 'export NCCL_HOSTID=nccl-tests-fake-node-$OMPI_COMM_WORLD_RANK; exec "$@"' rank \
    "$nt/bin/${test}_perf" -b "$minb" -e "$maxb" -f 4 -g 1 -c 1 -n 20 -w 5 >"$log" 2>&1
}

status=0
{
  echo "# nccl-tests on one GPU, each MPI process a fake NCCL node; $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "# NCCL $nccl_lib; busbw in GB/s, out-of-place / in-place; wrong = elements -c 1 found wrong"
  printf '%-7s %5s %-11s %12s %10s %10s %7s %7s\n' transport procs test bytes busbw_oop busbw_ip wrong wrong_ip
} >"$results"
for np in $procs; do
  for test in all_reduce all_gather alltoall sendrecv; do
    for tr in $transports; do
      run "$tr" "$np" "$test"; rc=$?
      log=$logs/$tr-$np-$test.log
      rows=$(awk -v tr="$tr" -v np="$np" -v t="$test" \
        '$1 ~ /^[0-9]+$/ && $2 ~ /^[0-9]+$/ && $3 ~ /^[a-z0-9]+$/ && NF == 13 { printf "%-7s %5s %-11s %12s %10s %10s %7s %7s\n", tr, np, t, $1, $8, $12, $9, $13 }' "$log")
      oob=$(sed -n 's/^# Out of bounds values : *//p' "$log")
      plugin=$(cat "$log" "$logs/$tr-$np-$test".nccl.* 2>/dev/null |
        grep -hoE "Loaded net plugin [^ ]+|TUNER/Plugin: Using [^ ]+|Assigned NET plugin [^ ]+" | sort -u | tr '\n' ';')
      verdict=ok
      if [ "$rc" -ne 0 ] || [ -z "$rows" ] || [[ $oob != "0 OK"* ]]; then verdict=FAILED; status=1; fi
      [ "$tr" = epx ] && [[ $plugin != *"Loaded net plugin EPX"* ]] && { verdict="FAILED (plugin not loaded)"; status=1; }
      { [ -n "$rows" ] && echo "$rows"
        echo "# $tr $np $test: $verdict (exit $rc, out of bounds: ${oob:-none}; ${plugin:-no plugin lines}) log $log"
      } >>"$results"
      tail -1 "$results"
    done
  done
done
echo "nccl-tests-fake-nodes: results in $results"
exit $status
