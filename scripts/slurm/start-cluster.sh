#!/usr/bin/env bash
# start-cluster.sh - start a throwaway single-node SLURM cluster on this machine.
#
# Usage:
#   eval "$(scripts/slurm/start-cluster.sh)"      # start, then export SLURM_CONF
#   scripts/slurm/start-cluster.sh --restart      # stop a running one first
#   scripts/slurm/stop-cluster.sh                 # stop it again
#
# What it does:
#   * installs the Debian/Ubuntu packages slurmctld slurmd slurm-client munge if
#     any of their programs is missing (apt-get; needs root or `sudo -n`);
#   * writes everything (slurm.conf, state, spool, logs, pid files and a
#     private munge key + socket) under $SLURM_CLUSTER_DIR
#     (default ${TMPDIR:-/tmp}/echo-share-slurm); nothing under /etc/slurm or
#     /run/munge is touched, so a system SLURM/munge is left alone. The one
#     global change: the symlink /run/slurm/conf -> $SLURM_CLUSTER_DIR (removed
#     by stop-cluster.sh), because the slurm plugin's job step drops
#     SLURM_CONF inside jobs and its nested srun must still find slurm.conf.
#     Refuses to start if /etc/slurm/slurm.conf exists (it would win);
#   * one node (this host, NodeAddr=127.0.0.1) with the machine's real CPU
#     count and memory (MemTotal or cgroup limit, minus max(512 MB, 5 %)), one
#     partition `debug` (Default=YES); no slurmdbd, so use the plugin option
#     `--slurm-status-command squeue` (MinJobAge is 3600 s here);
#   * starts munged (as user munge), slurmctld and slurmd directly (no systemd)
#     and waits, each at most $ECHO_SLURM_TIMEOUT (30) seconds, for munged,
#     slurmctld, slurmd and for the node to be `idle`. On failure it prints the
#     tail of the failing daemon's log, stops what it started and exits 1.
#   * If a healthy cluster from this script is already running in the same
#     folder it says so and exits 0 (use --restart to force a fresh one).
#
# SLURM client commands (sbatch, squeue, snakemake's slurm plugin) find the
# cluster through SLURM_CONF. Nothing is exported globally: the only line on
# stdout is `export SLURM_CONF=...`, meant for eval; it is also saved in
# $SLURM_CLUSTER_DIR/env.sh (`. /tmp/echo-share-slurm/env.sh`). All progress
# messages go to stderr.
#
# Knobs (environment): SLURM_CLUSTER_DIR, ECHO_SLURM_TIMEOUT, ECHO_SLURM_CPUS,
# ECHO_SLURM_MEM_MB, ECHO_SLURM_PORT (slurmctld port, default 6817; slurmd
# uses PORT+1). See _common.sh.
set -euo pipefail
umask 022

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/slurm/_common.sh
. "$HERE/_common.sh"

restart=0
for arg in "$@"; do
  case "$arg" in
    --restart) restart=1 ;;
    -h | --help)
      sc_usage
      exit 0
      ;;
    *) sc_die "unknown argument: $arg (try --help)" ;;
  esac
done

sc_ensure_root "$HERE/$(basename "$0")" "$@"

t_start="$(date +%s.%N)"
node="$(sc_nodename)"
port="${ECHO_SLURM_PORT:-6817}"
export SLURM_CONF="$SC_CONF"

print_env() {
  printf 'export SLURM_CONF=%q\n' "$SC_CONF"
}

# ---------------------------------------------------------------- helpers --
munge_ok() {
  munge -n -S "$SC_MUNGE_SOCKET" 2>/dev/null | unmunge -S "$SC_MUNGE_SOCKET" >/dev/null 2>&1
}
ctld_ok() {
  [ -n "$(sc_alive_pid "$SC_CTLD_PID" slurmctld)" ] &&
    scontrol ping 2>/dev/null | grep -q 'is UP'
}
slurmd_ok() {
  [ -n "$(sc_alive_pid "$SC_SLURMD_PID" slurmd)" ]
}
node_state() {
  sinfo -h -N -n "$node" -o '%T' 2>/dev/null | head -n 1
}
node_idle() {
  case "$(node_state)" in
    idle | mixed | allocated | completing) return 0 ;;
    *) return 1 ;;
  esac
}
healthy() {
  [ -n "$(sc_alive_pid "$SC_MUNGE_PID" munged)" ] && munge_ok && ctld_ok && slurmd_ok && node_idle
}
fail() { # fail MESSAGE LOGFILE...
  local msg="$1"
  shift
  local f
  for f in "$@"; do sc_tail "$f"; done
  sc_log "ERROR: $msg"
  sc_log "stopping whatever was started (logs stay in $SLURM_CLUSTER_DIR)"
  SLURM_CLUSTER_DIR="$SLURM_CLUSTER_DIR" "$HERE/stop-cluster.sh" >&2 || true
  exit 1
}
# Inside a job the jobstep plugin (snakemake-executor-plugin-slurm-jobstep
# 0.6.x) deletes every SLURM_* variable, SLURM_CONF included, before its
# nested `srun`. That srun then looks for /etc/slurm/slurm.conf and next for
# /run/slurm/conf/slurm.conf (where a configless slurmd keeps its copy), so
# point /run/slurm/conf at this cluster's folder. A real /etc/slurm/slurm.conf
# would win over it, hence the refusal.
ensure_run_conf_link() {
  if [ -e "$SC_ETC_CONF" ]; then
    sc_die "$SC_ETC_CONF exists (a real SLURM install?). Jobs of this throwaway cluster would use it for their nested srun; use that cluster instead, or move the file away."
  fi
  if [ -e "$SC_RUN_CONF" ] || [ -L "$SC_RUN_CONF" ]; then
    [ "$(readlink "$SC_RUN_CONF" || true)" = "$SLURM_CLUSTER_DIR" ] ||
      sc_die "$SC_RUN_CONF exists and is not a link to $SLURM_CLUSTER_DIR (configless slurmd of another cluster?)"
  fi
  mkdir -p "$(dirname "$SC_RUN_CONF")"
  ln -sfn "$SLURM_CLUSTER_DIR" "$SC_RUN_CONF"
}
# wait_daemon NAME PIDFILE CHECK_FUNCTION: wait up to $ECHO_SLURM_TIMEOUT s
# for CHECK_FUNCTION to succeed; give up early once the daemon has written
# its pid file and died. Returns 0 (up), 1 (timeout) or 2 (died).
wait_daemon() {
  local name="$1" pidfile="$2" check="$3"
  local deadline=$((SECONDS + ECHO_SLURM_TIMEOUT))
  while true; do
    if "$check" >/dev/null 2>&1; then return 0; fi
    if [ -s "$pidfile" ] && [ -z "$(sc_alive_pid "$pidfile" "$name")" ]; then
      sleep 0.5 # re-check: the pid file may just have been rewritten
      [ -n "$(sc_alive_pid "$pidfile" "$name")" ] || return 2
    fi
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.5
  done
}
wait_msg() { # wait_msg RC NAME WHAT
  if [ "$1" -eq 2 ]; then echo "$2 died during start-up"; else echo "$2 $3 after ${ECHO_SLURM_TIMEOUT}s"; fi
}
elapsed() { awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}'; }

# ---------------------------------------------------- already running? ----
if [ -r "$SC_CONF" ] && [ "$restart" -eq 0 ] && healthy; then
  ensure_run_conf_link
  sc_log "a cluster is already running from $SLURM_CLUSTER_DIR (node $node: $(node_state)); nothing to do"
  print_env
  exit 0
fi
if [ -n "$(sc_alive_pid "$SC_MUNGE_PID")$(sc_alive_pid "$SC_CTLD_PID")$(sc_alive_pid "$SC_SLURMD_PID")" ]; then
  sc_log "stopping the (partly) running cluster in $SLURM_CLUSTER_DIR first"
  SLURM_CLUSTER_DIR="$SLURM_CLUSTER_DIR" "$HERE/stop-cluster.sh" >&2 ||
    sc_die "could not stop the old cluster in $SLURM_CLUSTER_DIR"
fi

mkdir -p "$SLURM_CLUSTER_DIR" "$SC_LOGDIR"
chmod 0755 "$SLURM_CLUSTER_DIR" "$SC_LOGDIR"

# ------------------------------------------------------------- packages ----
missing=()
for prog in slurmctld slurmd sinfo sbatch squeue scontrol scancel munged munge unmunge; do
  command -v "$prog" >/dev/null 2>&1 || missing+=("$prog")
done
if [ "${#missing[@]}" -gt 0 ]; then
  command -v apt-get >/dev/null 2>&1 ||
    sc_die "missing ${missing[*]} and no apt-get: install SLURM (slurmctld, slurmd, client) and munge yourself"
  sc_log "installing slurmctld slurmd slurm-client munge (missing: ${missing[*]}) ..."
  apt_log="$SC_LOGDIR/apt.log"
  export DEBIAN_FRONTEND=noninteractive
  if ! apt-get install -y -q slurmctld slurmd slurm-client munge >"$apt_log" 2>&1; then
    sc_log "apt-get install failed; running apt-get update and retrying"
    { apt-get update -q && apt-get install -y -q slurmctld slurmd slurm-client munge; } >>"$apt_log" 2>&1 || {
      sc_tail "$apt_log"
      sc_die "could not install the SLURM packages"
    }
  fi
  sc_log "packages installed ($(elapsed) s)"
fi
id munge >/dev/null 2>&1 || sc_die "user 'munge' does not exist (is the munge package installed?)"

# ------------------------------------------------------ host name lookup ----
if ! getent hosts "$node" >/dev/null 2>&1; then
  sc_log "host name '$node' does not resolve; adding '127.0.0.1 $node' to /etc/hosts"
  printf '127.0.0.1 %s  # added by scripts/slurm/start-cluster.sh\n' "$node" >>/etc/hosts
fi

# ---------------------------------------------------------- node sizing ----
detected_cpus="$(nproc 2>/dev/null || getconf _NPROCESSORS_ONLN)"
cpus="${ECHO_SLURM_CPUS:-$detected_cpus}"
mem_total_mb=$(($(awk '/^MemTotal:/{print $2}' /proc/meminfo) / 1024))
if [ -r /sys/fs/cgroup/memory.max ]; then # cgroup v2 limit (containers)
  lim="$(cat /sys/fs/cgroup/memory.max)"
  if [ "$lim" != max ] && [ $((lim / 1048576)) -lt "$mem_total_mb" ]; then
    mem_total_mb=$((lim / 1048576))
  fi
fi
margin=$((mem_total_mb / 20))
[ "$margin" -ge 512 ] || margin=512
mem_mb="${ECHO_SLURM_MEM_MB:-$((mem_total_mb - margin))}"
[ "$mem_mb" -gt 0 ] || sc_die "computed RealMemory $mem_mb MB is not positive (MemTotal $mem_total_mb MB)"

# ---------------------------------------------------------- config files ----
rm -rf "$SLURM_CLUSTER_DIR/state" "$SLURM_CLUSTER_DIR/spool"
# Job ids restart at 1 with a fresh state: keep the completion log of the
# previous cluster apart so job ids in it are never mistaken for new ones.
# Same for the daemon logs, so a failure shows only this start's lines.
for f in "$SC_JOBCOMP_LOG" "$SC_CTLD_LOG" "$SC_SLURMD_LOG" "$SC_MUNGE_LOG" \
  "$SC_LOGDIR/slurmctld.stdout" "$SC_LOGDIR/slurmd.stdout" "$SC_MUNGEDIR/munged.stdout"; do
  [ ! -e "$f" ] || mv -f "$f" "$f.prev"
done
mkdir -p "$SLURM_CLUSTER_DIR/state" "$SLURM_CLUSTER_DIR/spool"
: >"$SLURM_CLUSTER_DIR/plugstack.conf"
cat >"$SC_CONF" <<EOF
# Generated by scripts/slurm/start-cluster.sh on $(date -u +%Y-%m-%dT%H:%M:%SZ).
# Throwaway single-node cluster for testing the Snakemake workflow; not for
# production. Stop it with scripts/slurm/stop-cluster.sh.
ClusterName=echoshare
SlurmctldHost=$node(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$SC_MUNGE_SOCKET
StateSaveLocation=$SLURM_CLUSTER_DIR/state
SlurmdSpoolDir=$SLURM_CLUSTER_DIR/spool
SlurmctldPidFile=$SC_CTLD_PID
SlurmdPidFile=$SC_SLURMD_PID
SlurmctldLogFile=$SC_CTLD_LOG
SlurmdLogFile=$SC_SLURMD_LOG
SlurmctldDebug=info
SlurmdDebug=info
PlugStackConfig=$SLURM_CLUSTER_DIR/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=1000
SlurmdParameters=config_overrides
ReturnToService=2
# No slurmdbd: sacct does not work, job history lives in slurmctld memory for
# MinJobAge seconds (squeue --states=all / scontrol show job) and in JobCompLoc.
AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$SC_JOBCOMP_LOG
MinJobAge=3600
InactiveLimit=0
KillWait=5
MailProg=/bin/true
Waittime=0
SlurmctldTimeout=30
SlurmdTimeout=60
NodeName=$node NodeAddr=127.0.0.1 NodeHostname=$node CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$node Default=YES MaxTime=INFINITE State=UP
EOF
chmod 0644 "$SC_CONF"
sc_log "wrote $SC_CONF (node $node: CPUs=$cpus RealMemory=${mem_mb}MB, partition debug)"

ensure_run_conf_link

# ---------------------------------------------------------------- munged ----
mkdir -p "$SC_MUNGEDIR"
chown munge:munge "$SC_MUNGEDIR"
chmod 0755 "$SC_MUNGEDIR"
if [ ! -s "$SC_MUNGEDIR/munge.key" ]; then
  if command -v mungekey >/dev/null 2>&1; then
    runuser -u munge -- mungekey -c -k "$SC_MUNGEDIR/munge.key"
  else
    dd if=/dev/urandom of="$SC_MUNGEDIR/munge.key" bs=1 count=1024 status=none
  fi
fi
chown munge:munge "$SC_MUNGEDIR/munge.key"
chmod 0400 "$SC_MUNGEDIR/munge.key"
rm -f "$SC_MUNGE_SOCKET" "$SC_MUNGE_SOCKET.lock" "$SC_MUNGE_PID"
runuser -u munge -- munged \
  --socket="$SC_MUNGE_SOCKET" \
  --key-file="$SC_MUNGEDIR/munge.key" \
  --pid-file="$SC_MUNGE_PID" \
  --log-file="$SC_MUNGE_LOG" \
  --seed-file="$SC_MUNGEDIR/munged.seed" \
  </dev/null >>"$SC_MUNGEDIR/munged.stdout" 2>&1 ||
  fail "munged did not start" "$SC_MUNGE_LOG" "$SC_MUNGEDIR/munged.stdout"
rc=0
wait_daemon munged "$SC_MUNGE_PID" munge_ok || rc=$?
[ "$rc" -eq 0 ] || fail "$(wait_msg "$rc" munged "not answering on $SC_MUNGE_SOCKET")" "$SC_MUNGE_LOG"
sc_log "munged up ($(elapsed) s)"

# ------------------------------------------------------------- slurmctld ----
rm -f "$SC_CTLD_PID" "$SC_SLURMD_PID"
slurmctld -f "$SC_CONF" </dev/null >>"$SC_LOGDIR/slurmctld.stdout" 2>&1 ||
  fail "slurmctld did not start" "$SC_CTLD_LOG" "$SC_LOGDIR/slurmctld.stdout"
rc=0
wait_daemon slurmctld "$SC_CTLD_PID" ctld_ok || rc=$?
[ "$rc" -eq 0 ] || fail "$(wait_msg "$rc" slurmctld "not answering 'scontrol ping'")" "$SC_CTLD_LOG" "$SC_LOGDIR/slurmctld.stdout"
sc_log "slurmctld up ($(elapsed) s)"

# ---------------------------------------------------------------- slurmd ----
# SLURM_CONF in slurmd's environment also marks its slurmstepd children, so
# stop-cluster.sh can find strays of *this* cluster.
env SLURM_CONF="$SC_CONF" slurmd -f "$SC_CONF" </dev/null >>"$SC_LOGDIR/slurmd.stdout" 2>&1 ||
  fail "slurmd did not start" "$SC_SLURMD_LOG" "$SC_LOGDIR/slurmd.stdout"
rc=0
wait_daemon slurmd "$SC_SLURMD_PID" slurmd_ok || rc=$?
[ "$rc" -eq 0 ] || fail "$(wait_msg "$rc" slurmd "not running")" "$SC_SLURMD_LOG" "$SC_LOGDIR/slurmd.stdout"
sc_log "slurmd up ($(elapsed) s)"

if ! sc_wait_for "$ECHO_SLURM_TIMEOUT" node_idle; then
  # A node left DOWN/DRAINED by an earlier run: try one resume.
  scontrol update nodename="$node" state=resume >/dev/null 2>&1 || true
  sc_wait_for 5 node_idle || {
    sinfo -R >&2 || true
    fail "node $node not idle after ${ECHO_SLURM_TIMEOUT}s (state: '$(node_state)')" "$SC_SLURMD_LOG" "$SC_CTLD_LOG"
  }
fi

print_env >"$SLURM_CLUSTER_DIR/env.sh"
chmod 0644 "$SLURM_CLUSTER_DIR/env.sh"
sc_log "cluster ready in $(elapsed) s: node $node $(node_state), partition debug, SLURM_CONF=$SC_CONF"
sc_log "use it with:  eval \"\$($0)\"   or   . $SLURM_CLUSTER_DIR/env.sh"
print_env
