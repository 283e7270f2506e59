#!/usr/bin/env bash
# Runs the plugin's GPU checks: two processes with distinct NCCL_HOSTID, so NCCL sees two nodes and
# routes host collectives through libnccl-net-epx.so's socket transport and GIN through its ipc
# backend. Then the same host collectives with NCCL's built-in socket transport for comparison.
# With 2+ GPUs each process has its own GPU; with 1 GPU both share it under MPS (scripts/mps.sh:
# started if none runs, stopped at the end; without MPS the GIN waits only progress when the
# peer's time slice comes, and the run says so).
#   scripts/plugin-gpu-check.sh <dir with libnccl-net-epx.so and plugin_gpu_check> [log dir]
# (or EPX_PLUGIN_SO / EPX_GPU_CHECK_BIN pointing at each).
# Needs NCCL >= 2.28.9 (GIN): set EPX_NCCL_LIB to its lib directory if the default is older.
# EPX_SKIP_BUILTIN=1 skips the built-in socket comparison. EPX_GIN_CHECK_TIMEOUT_S bounds each GIN wait (default 10 s).
# Exit 0 when everything passed; 77 (skipped) when there is no GPU.
set -u
dir=$(cd "${1:?usage: $0 <build dir> [log dir]}" && pwd)
logs=${2:-$dir/plugin-gpu-logs}
so=${EPX_PLUGIN_SO:-$dir/libnccl-net-epx.so}
bin=${EPX_GPU_CHECK_BIN:-$dir/plugin_gpu_check}
mkdir -p "$logs"
if ! command -v nvidia-smi >/dev/null || ! nvidia-smi -L >/dev/null 2>&1; then
  echo "SKIPPED: plugin GPU checks need NVIDIA GPUs (none found)"; exit 77
fi
ngpu=$(nvidia-smi -L | grep -c '^GPU')
if [ "$ngpu" -lt 1 ]; then echo "SKIPPED: plugin GPU checks need a GPU, found none"; exit 77; fi
if [ "$ngpu" -lt 2 ]; then
  . "$(cd "$(dirname "$0")" && pwd)/mps.sh"
  mps_up "$logs"
  trap mps_down EXIT
  mps_loud plugin-gpu-check
  echo "== 1 GPU: both processes on GPU 0, MPS: $MPS_NOTE"
fi
nccl_lib=${EPX_NCCL_LIB:-/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl/lib}
[ -d "$nccl_lib" ] && export LD_LIBRARY_PATH="$nccl_lib:${LD_LIBRARY_PATH:-}"
export NCCL_NVLS_ENABLE=0 NCCL_MNNVL_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET,TUNING
export EPX_SOCKET_IFNAME=${EPX_SOCKET_IFNAME:-lo}
# The checks are of the socket transport; on a host with RDMA ports the plugin would otherwise pick
# its verbs transport, which has never run on a NIC. EPX_NET_TRANSPORT=auto|verbs to try it.
export EPX_NET_TRANSPORT=${EPX_NET_TRANSPORT:-socket}

run_pair() {  # name, extra args for the binary, then env assignments
  local name=$1 extra=$2; shift 2
  local id="$logs/$name.id"; rm -f "$id"
  for r in 0 1; do
    env "$@" NCCL_HOSTID="epx-node-$r" timeout 300 "$bin" $r 2 "$id" $extra \
      >"$logs/$name.rank$r.log" 2>&1 &
    pids[$r]=$!
  done
  local rc=0
  for r in 0 1; do wait ${pids[$r]} || rc=1; done
  echo "== $name: $([ $rc = 0 ] && echo passed || echo FAILED)"
  grep -h "PASS\|FAIL\|MEASURE\|ALL PASSED\|FAILED\|Assigned NET\|Assigned GIN\|Using network\|EPX tuner\|copies by\|GIN/EPX-ipc.*\(took\|pending\|warmed up\|did not warm\|landing\)" \
    "$logs/$name".rank*.log | sed 's/, [0-9.]* ms)/)/' | sort | uniq -c | sort -k2 | head -100
  grep -h "GIN ctx .*to peer.* ms)" "$logs/$name".rank0.log | sed 's/^/   rank0 timing: /' | head -40
  return $rc
}

rules="$logs/epx-tuner.rules"
printf '# collective bytes ranks nodes algorithm protocol [channels]\nallreduce 1M- 2 2 ring simple\n' >"$rules"
export EPX_TUNER_RULES="$rules"
status=0
run_pair epx "" NCCL_NET_PLUGIN="$so" || status=1
grep -q "Assigned GIN plugin EPX to comm" "$logs/epx.rank0.log" && echo "GIN plugin EPX assigned" \
  || { echo "GIN plugin EPX NOT assigned"; status=1; }
if [ "${EPX_SKIP_BUILTIN:-0}" != 1 ]; then
  run_pair builtin-socket --no-gin NCCL_NET_PLUGIN=none NCCL_NET=Socket NCCL_SOCKET_IFNAME=lo || status=1
fi
exit $status
