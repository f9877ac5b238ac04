#!/usr/bin/env bash
# stop-cluster.sh - stop the throwaway SLURM cluster started by start-cluster.sh.
#
# Usage:
#   scripts/slurm/stop-cluster.sh            # stop daemons, keep logs/state
#   scripts/slurm/stop-cluster.sh --purge    # ... and delete $SLURM_CLUSTER_DIR
#
# Works on the cluster in $SLURM_CLUSTER_DIR (default
# ${TMPDIR:-/tmp}/echo-share-slurm). Steps, each bounded in time:
#   1. cancel every job still known to slurmctld and wait (<= 15 s) for them;
#   2. SIGTERM slurmd, slurmctld, munged - found by their pid files only - and
#      wait (<= 15 s each); SIGKILL whatever is still there;
#   3. SIGKILL stray slurmstepd/job processes of *this* cluster (recognised by
#      SLURM_CONF=<this cluster's slurm.conf> in their environment).
# Exits 0 when nothing is left running (also when nothing was running), 1 if
# a process survived SIGKILL. Needs root or passwordless sudo when something
# is running.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/slurm/_common.sh
. "$HERE/_common.sh"

purge=0
for arg in "$@"; do
  case "$arg" in
    --purge) purge=1 ;;
    -h | --help)
      sc_usage
      exit 0
      ;;
    *) sc_die "unknown argument: $arg (try --help)" ;;
  esac
done

# Processes of this cluster that are not tracked by a pid file: slurmstepd and
# job processes (their environment holds SLURM_CONF=$SC_CONF). Prints pids.
stray_pids() {
  local d pid comm env_lines
  for d in /proc/[0-9]*; do
    pid="${d#/proc/}"
    [ "$pid" != "$$" ] || continue
    env_lines="$({ tr '\0' '\n' <"$d/environ"; } 2>/dev/null || true)"
    [ -n "$env_lines" ] || continue
    grep -qxF "SLURM_CONF=$SC_CONF" <<<"$env_lines" || continue
    comm="$(cat "$d/comm" 2>/dev/null || true)"
    if [ "$comm" = slurmstepd ] || grep -q '^SLURM_JOB_ID=' <<<"$env_lines"; then
      printf '%s\n' "$pid"
    fi
  done
}

all_pids() {
  sc_alive_pid "$SC_SLURMD_PID" slurmd
  sc_alive_pid "$SC_CTLD_PID" slurmctld
  sc_alive_pid "$SC_MUNGE_PID" munged
  stray_pids
}

if [ -z "$(all_pids 2>/dev/null || true)" ]; then
  sc_log "nothing running for $SLURM_CLUSTER_DIR"
  if [ -L "$SC_RUN_CONF" ] && [ "$(readlink "$SC_RUN_CONF" || true)" = "$SLURM_CLUSTER_DIR" ]; then
    rm -f "$SC_RUN_CONF" 2>/dev/null || sc_log "note: could not remove the stale link $SC_RUN_CONF (not root)"
  fi
  if [ "$purge" -eq 1 ] && [ -d "$SLURM_CLUSTER_DIR" ]; then
    if [ -w "$SLURM_CLUSTER_DIR" ]; then rm -rf "$SLURM_CLUSTER_DIR"; else sc_ensure_root "$HERE/$(basename "$0")" "$@"; fi
  fi
  [ -d "$SLURM_CLUSTER_DIR" ] || [ "$purge" -eq 0 ] || sc_log "removed $SLURM_CLUSTER_DIR"
  exit 0
fi
sc_ensure_root "$HERE/$(basename "$0")" "$@"

t_start="$(date +%s.%N)"
export SLURM_CONF="$SC_CONF"

# wait_gone SECONDS PID... : true when all given pids are gone in time.
wait_gone() {
  local timeout="$1"
  shift
  local deadline=$((SECONDS + timeout)) p left
  while true; do
    left=""
    for p in "$@"; do
      if [ -d "/proc/$p" ] && ! grep -qE '^State:[[:space:]]*[ZX]' "/proc/$p/status" 2>/dev/null; then
        left="$left $p"
      fi
    done
    [ -n "$left" ] || return 0
    [ "$SECONDS" -lt "$deadline" ] || return 1
    sleep 0.3
  done
}

# stop_daemon NAME PIDFILE
stop_daemon() {
  local name="$1" pidfile="$2" pid
  pid="$(sc_alive_pid "$pidfile" "$name")"
  if [ -z "$pid" ]; then
    rm -f "$pidfile"
    return 0
  fi
  sc_log "stopping $name (pid $pid)"
  kill -TERM "$pid" 2>/dev/null || true
  if ! wait_gone 15 "$pid"; then
    sc_log "$name (pid $pid) ignored SIGTERM for 15 s; sending SIGKILL"
    kill -KILL "$pid" 2>/dev/null || true
    wait_gone 5 "$pid" || sc_log "WARNING: $name (pid $pid) survived SIGKILL"
  fi
  rm -f "$pidfile"
  stopped_pids="$stopped_pids $pid"
}
stopped_pids=""

# 1. cancel jobs while slurmctld is still there.
if [ -n "$(sc_alive_pid "$SC_CTLD_PID" slurmctld)" ]; then
  jobs_left="$(timeout 10 squeue -h -t PD,R,CG,S,CF -o %i 2>/dev/null || true)"
  if [ -n "$jobs_left" ]; then
    sc_log "cancelling jobs: $(echo "$jobs_left" | tr '\n' ' ')"
    # shellcheck disable=SC2086  # word splitting of the id list is intended
    timeout 10 scancel $jobs_left 2>/dev/null || true
    deadline=$((SECONDS + 15))
    while [ -n "$(timeout 10 squeue -h -t PD,R,CG,S,CF -o %i 2>/dev/null || true)" ] &&
      [ "$SECONDS" -lt "$deadline" ]; do
      sleep 0.5
    done
  fi
fi

# 2. daemons, compute side first.
stop_daemon slurmd "$SC_SLURMD_PID"
stop_daemon slurmctld "$SC_CTLD_PID"
stop_daemon munged "$SC_MUNGE_PID"

# 3. strays of this cluster (slurmstepd and job processes).
strays="$(stray_pids || true)"
if [ -n "$strays" ]; then
  sc_log "killing stray processes of this cluster: $(echo "$strays" | tr '\n' ' ')"
  # shellcheck disable=SC2086
  kill -TERM $strays 2>/dev/null || true
  # shellcheck disable=SC2086
  wait_gone 5 $strays || {
    # shellcheck disable=SC2086
    kill -KILL $strays 2>/dev/null || true
    # shellcheck disable=SC2086
    wait_gone 5 $strays || true
  }
fi

# the /run/slurm/conf link made by start-cluster.sh, if it is ours
if [ -L "$SC_RUN_CONF" ] && [ "$(readlink "$SC_RUN_CONF" || true)" = "$SLURM_CLUSTER_DIR" ]; then
  rm -f "$SC_RUN_CONF"
fi

# Dead daemons can linger as zombies until init reaps them (seen on
# minimal init systems); give that a moment so `pgrep slurm` comes back clean.
deadline=$((SECONDS + 5))
for p in $stopped_pids; do
  while [ -d "/proc/$p" ] && [ "$SECONDS" -lt "$deadline" ]; do sleep 0.2; done
done

left="$(all_pids || true)"
if [ -n "$left" ]; then
  sc_log "ERROR: still running after SIGKILL: $(echo "$left" | tr '\n' ' ')"
  exit 1
fi
if [ "$purge" -eq 1 ]; then
  rm -rf "$SLURM_CLUSTER_DIR"
  sc_log "removed $SLURM_CLUSTER_DIR"
fi
sc_log "cluster stopped in $(awk -v a="$t_start" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}') s"
