# Sourced helper (bash): CUDA MPS for several processes sharing one GPU, so that their kernels run
# at the same time (without MPS the GPU time-slices between processes, and a kernel spinning on a
# peer process waits for that process's time slice). Used by fake-nodes.sh and plugin-gpu-check.sh.
#
#   . scripts/mps.sh
#   mps_up <dir for the start log>   # uses a running daemon, or starts one; sets MPS_NOTE
#   ...                              # processes started here inherit CUDA_MPS_PIPE_DIRECTORY
#   mps_down                         # stops the daemon only if mps_up started it
#
# EPX_MPS=0: no MPS. A daemon counts as running when its control pipe answers (the one in
# CUDA_MPS_PIPE_DIRECTORY, else the default /tmp/nvidia-mps). A new one gets its pipe and log
# directories under /tmp (/tmp/epx-mps-pipe, /tmp/epx-mps-log). nvidia-cuda-mps-control is taken
# from PATH or /usr/local/nvidia/bin. When MPS cannot start, MPS_NOTE says so (in capitals) and the
# processes run without it.

MPS_STARTED=0
MPS_NOTE=""
MPS_CTL=$(command -v nvidia-cuda-mps-control 2>/dev/null || true)
[ -z "$MPS_CTL" ] && [ -x /usr/local/nvidia/bin/nvidia-cuda-mps-control ] && MPS_CTL=/usr/local/nvidia/bin/nvidia-cuda-mps-control

gpu_count() {  # GPUs on this machine: nvidia-smi (PATH or /usr/local/nvidia/bin), else /dev/nvidia<N>
  local smi n
  smi=$(command -v nvidia-smi 2>/dev/null || true)
  [ -z "$smi" ] && [ -x /usr/local/nvidia/bin/nvidia-smi ] && smi=/usr/local/nvidia/bin/nvidia-smi
  if [ -n "$smi" ] && n=$("$smi" -L 2>/dev/null | grep -c '^GPU') && [ "$n" -gt 0 ]; then echo "$n"; return; fi
  ls /dev 2>/dev/null | grep -c '^nvidia[0-9][0-9]*$'
}

_mps_answers() {  # pipe dir: a daemon answers there (bounded: a stale pipe must not block us)
  [ -e "$1/control" ] || return 1
  [ -n "$MPS_CTL" ] || return 0
  CUDA_MPS_PIPE_DIRECTORY=$1 timeout 5 sh -c "echo get_server_list | '$MPS_CTL'" >/dev/null 2>&1
}

mps_up() {
  local logdir=${1:-/tmp} ngpu d
  MPS_STARTED=0
  ngpu=$(gpu_count)
  if [ "${EPX_MPS:-1}" = 0 ]; then
    MPS_NOTE="off (EPX_MPS=0): the GPU time-slices between processes"
    unset CUDA_MPS_PIPE_DIRECTORY
    return 0
  fi
  for d in ${CUDA_MPS_PIPE_DIRECTORY:-} /tmp/nvidia-mps /tmp/epx-mps-pipe; do
    if _mps_answers "$d"; then
      export CUDA_MPS_PIPE_DIRECTORY=$d
      MPS_NOTE="using the running daemon (CUDA_MPS_PIPE_DIRECTORY=$d)"
      return 0
    fi
  done
  if [ "$ngpu" -eq 0 ]; then
    MPS_NOTE="not started (no GPU found)"
    unset CUDA_MPS_PIPE_DIRECTORY
    return 0
  fi
  if [ -z "$MPS_CTL" ]; then
    MPS_NOTE="NOT AVAILABLE (nvidia-cuda-mps-control not in PATH or /usr/local/nvidia/bin): running WITHOUT MPS, the GPU time-slices between processes and cross-process waits get much slower"
    unset CUDA_MPS_PIPE_DIRECTORY
    return 0
  fi
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/epx-mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/epx-mps-log
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  rm -f "$CUDA_MPS_PIPE_DIRECTORY"/* 2>/dev/null  # stale pipes of a daemon that died
  if "$MPS_CTL" -d >>"$logdir/mps-start.txt" 2>&1; then
    for _ in $(seq 50); do _mps_answers "$CUDA_MPS_PIPE_DIRECTORY" && break; sleep 0.1; done
  fi
  if _mps_answers "$CUDA_MPS_PIPE_DIRECTORY"; then
    MPS_STARTED=1
    MPS_NOTE="started ($MPS_CTL -d; pipes in $CUDA_MPS_PIPE_DIRECTORY, log in $CUDA_MPS_LOG_DIRECTORY)"
  else
    MPS_NOTE="COULD NOT START ($MPS_CTL -d: $(tr '\n' ' ' <"$logdir/mps-start.txt" 2>/dev/null)): running WITHOUT MPS, the GPU time-slices between processes and cross-process waits get much slower"
    unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
  fi
  return 0
}

mps_down() {
  if [ "$MPS_STARTED" = 1 ]; then
    echo quit | timeout 20 "$MPS_CTL" >/dev/null 2>&1 || true
    MPS_STARTED=0
  fi
}

mps_loud() {  # prints MPS_NOTE framed when MPS is not running as asked; $1: prefix
  case $MPS_NOTE in
    *NOT\ AVAILABLE*|*COULD\ NOT*)
      echo "$1: ****************************************************************************" >&2
      echo "$1: *** MPS $MPS_NOTE" >&2
      echo "$1: ****************************************************************************" >&2 ;;
  esac
}
