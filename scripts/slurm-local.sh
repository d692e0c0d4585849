#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for tests: munged, slurmctld and slurmd on localhost.
#
#   scripts/slurm-local.sh start     start it (or say it already runs); prints `export SLURM_CONF=...`
#   scripts/slurm-local.sh stop      kill its daemons and remove its folder
#   scripts/slurm-local.sh status    exit 0 and describe it if it answers, exit 3 otherwise
#   scripts/slurm-local.sh env       print the `export SLURM_CONF=...` line only
#
#   eval "$(scripts/slurm-local.sh start)"   # start and point this shell's Slurm commands at it
#
# Everything lives in one folder, $TVOLIB_SLURM_DIR (default ${TMPDIR:-/tmp}/tvolib-slurm-<uid>):
# slurm.conf, munge key and socket, state, spool, logs and pid files. Nothing under /etc is read or
# written, and a system Slurm or munge on the same machine is left alone (own ports and socket).
# The node has the machine's cores (nproc) and memory (MemTotal, or the cgroup limit if lower), one
# partition `debug`, accounting storage off (so `sacct` does not answer), and timings made for
# tests: finished jobs leave `squeue` after MinJobAge seconds, a job is killed as soon as Slurm
# sees it past its time limit (OverTimeLimit=0, KillWait=2).
#
# Needs Debian's `slurm-wlm` and `munge` (apt-get install slurm-wlm munge). Environment:
#   TVOLIB_SLURM_DIR    the cluster's folder (see above)
#   TVOLIB_SLURM_PORT   slurmctld's port (default 16817); slurmd listens on the next one
#   TVOLIB_SLURM_WAIT   seconds `start` waits for the node to be idle (default 60)
set -euo pipefail

DIR="${TVOLIB_SLURM_DIR:-${TMPDIR:-/tmp}/tvolib-slurm-$(id -u)}"
CONF="$DIR/slurm.conf"
PORT="${TVOLIB_SLURM_PORT:-16817}"
WAIT="${TVOLIB_SLURM_WAIT:-60}"
MARKER="$DIR/.tvolib-slurm-local"      # only a folder holding this file is ever removed
NODE="$(hostname -s)"
DAEMONS=(slurmd slurmctld munged)     # stop order

say() { echo "slurm-local: $*" >&2; }
die() { say "error: $*"; exit 1; }

usage() {
  sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2
  exit 2
}

require_slurm() {
  local missing=()
  for cmd in munged mungekey slurmctld slurmd sinfo; do
    command -v "$cmd" >/dev/null 2>&1 || [[ -x /usr/sbin/$cmd ]] || missing+=("$cmd")
  done
  if ((${#missing[@]})); then
    die "Slurm is not installed here (missing: ${missing[*]}). On Debian/Ubuntu, as root:
    apt-get install -y slurm-wlm munge"
  fi
}

pid_of() {  # the pid of daemon $1 if it is alive, else nothing
  local file="$DIR/run/$1.pid" pid
  [[ -f $file ]] || return 0
  pid="$(cat "$file" 2>/dev/null || true)"
  [[ $pid =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null && echo "$pid"
  return 0
}

answers() {  # the node's state from sinfo ("idle", "mixed", ...), empty if the controller is down
  [[ -n $(pid_of slurmctld) ]] || return 0
  SLURM_CONF="$CONF" timeout 5 sinfo -h -o '%T' 2>/dev/null | head -1 || true
}

memory_mb() {  # MemTotal, or the cgroup's memory limit when it is lower
  local mb limit
  mb=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 ))
  for file in /sys/fs/cgroup/memory.max /sys/fs/cgroup/memory/memory.limit_in_bytes; do
    limit="$(cat "$file" 2>/dev/null || true)"
    if [[ $limit =~ ^[0-9]+$ ]] && (( limit / 1048576 < mb )); then mb=$(( limit / 1048576 )); fi
  done
  echo "$mb"
}

write_conf() {
  local user cpus mem
  user="$(id -un)"
  cpus="$(nproc)"
  mem="$(memory_mb)"
  cat >"$CONF" <<EOF
# One-node test cluster written by scripts/slurm-local.sh (tvolib); removed by its \`stop\`.
ClusterName=tvolib-local
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$PORT
SlurmdPort=$((PORT + 1))
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
# cred_expire: also how long a requeued job waits before it may start again (default 120 s).
AuthInfo=socket=$DIR/munge/munge.socket,cred_expire=10
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/run/slurmctld.pid
SlurmdPidFile=$DIR/run/slurmd.pid
SlurmctldLogFile=$DIR/log/slurmctld.log
SlurmdLogFile=$DIR/log/slurmd.log
SlurmctldDebug=info
SlurmdDebug=info
# No cgroups, no accounting: runs in containers; sacct does not answer.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
SchedulerType=sched/backfill
# Look at pending jobs every 2 s (default 60 s), so requeued jobs restart quickly.
SchedulerParameters=sched_interval=2,bf_interval=2
SlurmdParameters=config_overrides
ReturnToService=2
# Test timings: finished jobs leave squeue after 30 s; time limits enforced without grace.
MinJobAge=30
KillWait=2
OverTimeLimit=0
InactiveLimit=0
Waittime=0
MessageTimeout=10
SlurmctldTimeout=30
SlurmdTimeout=30
MaxArraySize=10001
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem State=UNKNOWN
# A job without --mem gets its share of memory per CPU (not the whole node).
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP DefMemPerCPU=$((mem / cpus))
EOF
}

start_munge() {
  mkdir -p "$DIR/munge"
  chmod 0755 "$DIR/munge"  # munged wants its socket's folder searchable by all; the key is 0600
  mungekey --create --keyfile="$DIR/munge/munge.key" --force >/dev/null
  chmod 0600 "$DIR/munge/munge.key"
  munged --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
    --pid-file="$DIR/run/munged.pid" --log-file="$DIR/log/munged.log" \
    --seed-file="$DIR/munge/munged.seed" \
    || die "munged did not start; see $DIR/log/munged.log"
}

print_env() { echo "export SLURM_CONF=$CONF"; }

cmd_start() {
  require_slurm
  if [[ -n $(answers) ]]; then
    say "already running (folder $DIR)"
    print_env
    return 0
  fi
  [[ -d $DIR ]] && cmd_stop quiet  # leftovers of a crashed or half-started cluster
  mkdir -p "$DIR"/{run,log,state,spool}
  chmod 0755 "$DIR"
  touch "$MARKER"
  write_conf
  start_munge
  SLURM_CONF="$CONF" slurmctld -f "$CONF" -i || die "slurmctld did not start; see $DIR/log/slurmctld.log"
  SLURM_CONF="$CONF" slurmd -f "$CONF" -N "$NODE" || die "slurmd did not start; see $DIR/log/slurmd.log"
  local state="" waited=0
  until [[ $state == idle* ]]; do
    if ((waited >= WAIT)); then
      say "the node is not idle after ${WAIT} s (state: '${state:-no answer}'); logs in $DIR/log"
      tail -n 5 "$DIR"/log/*.log >&2 || true
      cmd_stop quiet
      exit 1
    fi
    sleep 1
    waited=$((waited + 1))
    state="$(answers)"
  done
  say "one-node cluster up in ${waited} s: node $NODE ($(nproc) CPUs, $(memory_mb) MB), partition debug"
  say "use it from this shell with:   eval \"\$($0 env)\""
  say "then e.g.  sinfo; srun hostname; python -m tvolib run <figure> --executor slurm"
  say "stop it with:                  $0 stop"
  print_env
}

cancel_jobs() {  # cancel every job of this cluster, so that none outlives slurmd; up to 10 s
  [[ -n $(answers) ]] || return 0
  local ids
  ids="$(SLURM_CONF="$CONF" squeue -h -o '%A' 2>/dev/null || true)"
  [[ -n $ids ]] || return 0
  # shellcheck disable=SC2086 # one job id per word
  SLURM_CONF="$CONF" scancel $ids 2>/dev/null || true
  for _ in $(seq 20); do
    [[ -z $(SLURM_CONF="$CONF" squeue -h -t running,completing -o '%A' 2>/dev/null) ]] && return 0
    sleep 0.5
  done
}

cmd_stop() {
  local quiet="${1:-}" pid name
  if [[ ! -d $DIR ]]; then
    [[ -n $quiet ]] || say "not running (no folder $DIR)"
    return 0
  fi
  [[ -f $MARKER ]] || die "$DIR exists but was not made by this script; not touching it"
  cancel_jobs
  local pids=()  # read before killing: a daemon removes its pid file while it is still exiting
  for name in "${DAEMONS[@]}"; do
    pid="$(pid_of "$name")"
    [[ -n $pid ]] && pids+=("$pid")
  done
  ((${#pids[@]})) && kill "${pids[@]}" 2>/dev/null || true
  for _ in $(seq 50); do  # up to 5 s for a clean exit, then SIGKILL
    local alive=()
    for pid in "${pids[@]}"; do kill -0 "$pid" 2>/dev/null && alive+=("$pid"); done
    ((${#alive[@]})) || break
    sleep 0.1
  done
  for pid in "${pids[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
  rm -rf "$DIR"
  [[ -n $quiet ]] || say "stopped; removed $DIR"
}

cmd_status() {
  local state
  state="$(answers)"
  if [[ -n $state ]]; then
    say "running: node $NODE $state, folder $DIR"
    print_env
    return 0
  fi
  if [[ -d $DIR ]]; then
    say "not answering (folder $DIR exists; logs in $DIR/log); run '$0 stop' then '$0 start'"
  else
    say "not running"
  fi
  return 3
}

case "${1:-}" in
  start) cmd_start ;;
  stop) cmd_stop ;;
  status) cmd_status ;;
  env) print_env ;;
  *) usage ;;
esac
