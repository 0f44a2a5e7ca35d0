#!/bin/bash
# A one-node SLURM cluster on this machine, for tests and for trying the
# package's cluster path (BiocParallel::BatchtoolsParam(cluster = "slurm")).
#
#   tools/slurm-local.sh install      the Debian packages (slurmctld, slurmd,
#                                     slurm-client, munge, r-cran-batchtools)
#   tools/slurm-local.sh start DIR    munge key, slurm.conf and the daemons
#                                     (munged, slurmctld, slurmd), all state in
#                                     DIR (made if absent); on success prints
#                                     the line SLURM_CONF=DIR/slurm.conf
#   tools/slurm-local.sh stop DIR     stops the daemons started in DIR by their
#                                     pids (from DIR/*.pid) and removes DIR
#
# Clients (sbatch, squeue, scancel, and R through batchtools) find this
# cluster through the environment variable SLURM_CONF. The node declares the
# machine's own CPUs and RealMemory (read by `slurmd -C`): without
# RealMemory a job that asks for memory (`--mem-per-cpu`, as batchtools'
# template does) never fits the node.
#
# `start` exits with status 3 when the daemons cannot be started here (not
# root, packages missing, a daemon refusing to start): the caller can then
# skip with a message, as `make test-cluster` does. Any other failure is 1.
set -u

die() { echo "slurm-local: $*" >&2; exit 1; }
cannot() { echo "slurm-local: cannot start a local SLURM: $*" >&2; exit 3; }

# A TCP port on 127.0.0.1 that nothing listens on, from `from` upwards.
free_port() {
  p=$1
  while (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; do p=$((p + 1)); done
  echo "$p"
}

write_conf() {
  dir=$1
  node=$(slurmd -C 2>/dev/null | sed -n 's/^\(NodeName=.*\)$/\1/p' | head -n 1)
  [ -n "$node" ] || cannot "\`slurmd -C\` did not describe this machine"
  name=$(printf '%s\n' "$node" | sed 's/^NodeName=\([^ ]*\).*/\1/')
  base=$((20000 + $$ % 20000))
  ctld_port=$(free_port "$base")
  slurmd_port=$(free_port $((ctld_port + 1)))
  cat >"$dir/slurm.conf" <<EOF
# written by tools/slurm-local.sh: one node, everything under $dir
ClusterName=sbglocal
SlurmctldHost=$name(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
MinJobAge=60
KillWait=5
InactiveLimit=0
$node NodeAddr=127.0.0.1 State=UNKNOWN
PartitionName=local Nodes=$name Default=YES MaxTime=INFINITE State=UP
EOF
  echo "$name"
}

start() {
  dir=$1
  [ "$(id -u)" -eq 0 ] || cannot "the daemons run as root here, and this is user $(id -un)"
  for b in munged slurmctld slurmd sbatch squeue sinfo scontrol; do
    command -v "$b" >/dev/null 2>&1 || cannot "$b is not installed (tools/slurm-local.sh install)"
  done
  mkdir -p "$dir" || die "cannot make $dir"
  dir=$(cd "$dir" && pwd)
  chmod 700 "$dir"
  mkdir -p "$dir/state" "$dir/spool"
  dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 2>/dev/null || die "cannot write $dir/munge.key"
  chmod 400 "$dir/munge.key"
  munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
    --seed-file="$dir/munged.seed" 2>"$dir/munged.err" ||
    { cat "$dir/munged.err" >&2; cannot "munged did not start (log: $dir/munged.log)"; }
  name=$(write_conf "$dir") || exit $?
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" 2>"$dir/slurmctld.err" ||
    { stop_daemons "$dir"; cannot "slurmctld did not start: $(tail -n 3 "$dir/slurmctld.err" "$dir/slurmctld.log" 2>/dev/null)"; }
  slurmd -f "$SLURM_CONF" -N "$name" 2>"$dir/slurmd.err" ||
    { stop_daemons "$dir"; cannot "slurmd did not start: $(tail -n 3 "$dir/slurmd.err" "$dir/slurmd.log" 2>/dev/null)"; }
  # The node is ready when the controller sees it idle.
  i=0
  while :; do
    state=$(sinfo -h -n "$name" -o '%T' 2>/dev/null)
    [ "$state" = "idle" ] && break
    i=$((i + 1))
    if [ "$i" -ge 60 ]; then
      echo "--- slurmctld.log" >&2; tail -n 15 "$dir/slurmctld.log" >&2
      echo "--- slurmd.log" >&2; tail -n 15 "$dir/slurmd.log" >&2
      stop_daemons "$dir"
      cannot "node $name not idle after 30 s (state: ${state:-none})"
    fi
    sleep 0.5
  done
  echo "SLURM_CONF=$SLURM_CONF"
}

# Each daemon by the pid it wrote, then wait for it to go.
stop_daemons() {
  dir=$1
  for d in slurmd slurmctld munged; do
    f="$dir/$d.pid"
    [ -s "$f" ] || continue
    pid=$(cat "$f")
    kill "$pid" 2>/dev/null || continue
    i=0
    while kill -0 "$pid" 2>/dev/null && [ "$i" -lt 50 ]; do sleep 0.2; i=$((i + 1)); done
    kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
  done
  return 0
}

stop() {
  dir=$1
  [ -d "$dir" ] || die "no such directory: $dir"
  [ -f "$dir/slurm.conf" ] || [ -f "$dir/munged.pid" ] || die "$dir holds no local SLURM"
  # Jobs still running are killed with their node.
  SLURM_CONF="$dir/slurm.conf" scancel -u "$(id -un)" 2>/dev/null
  stop_daemons "$dir"
  rm -rf "$dir"
  echo "slurm-local: stopped, $dir removed"
}

case "${1:-}" in
  install)
    exec sh "$(dirname "$0")/install-deps.sh" slurmctld slurmd slurm-client munge r-cran-batchtools r-bioc-biocparallel ;;
  start)
    [ $# -eq 2 ] || die "usage: $0 start DIR"
    start "$2" ;;
  stop)
    [ $# -eq 2 ] || die "usage: $0 stop DIR"
    stop "$2" ;;
  *)
    die "usage: $0 install | start DIR | stop DIR" ;;
esac
