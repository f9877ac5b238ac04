# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing scripts
# Shared helpers for the throwaway single-node SLURM cluster scripts in
# scripts/slurm/. Sourced (not executed) by start-cluster.sh, stop-cluster.sh,
# run-workflow.sh and check-failure.sh.
#
# Environment knobs (all optional):
#   SLURM_CLUSTER_DIR     folder holding slurm.conf, state, logs, pid files and
#                         the private munge socket/key
#                         (default: ${TMPDIR:-/tmp}/echo-share-slurm)
#   ECHO_SLURM_TIMEOUT    seconds to wait for each daemon / the node (default 30)
#   ECHO_SLURM_CPUS       CPUs to advertise for the node (default: detected)
#   ECHO_SLURM_MEM_MB     RealMemory to advertise in MB (default: MemTotal
#                         minus max(512 MB, 5 %))
#   ECHO_SLURM_PORT       slurmctld port (default 6817); slurmd uses PORT+1

# The daemons live in /usr/sbin, which is not on every user's PATH.
case ":$PATH:" in *:/usr/sbin:*) ;; *) PATH="$PATH:/usr/sbin" ;; esac
case ":$PATH:" in *:/sbin:*) ;; *) PATH="$PATH:/sbin" ;; esac
export PATH

SLURM_CLUSTER_DIR="${SLURM_CLUSTER_DIR:-${TMPDIR:-/tmp}/echo-share-slurm}"
case "$SLURM_CLUSTER_DIR" in
  /*) ;;
  *) SLURM_CLUSTER_DIR="$PWD/$SLURM_CLUSTER_DIR" ;;
esac
ECHO_SLURM_TIMEOUT="${ECHO_SLURM_TIMEOUT:-30}"

SC_CONF="$SLURM_CLUSTER_DIR/slurm.conf"
SC_LOGDIR="$SLURM_CLUSTER_DIR/log"
SC_MUNGEDIR="$SLURM_CLUSTER_DIR/munge"
SC_MUNGE_SOCKET="$SC_MUNGEDIR/munge.socket"
SC_MUNGE_PID="$SC_MUNGEDIR/munged.pid"
SC_MUNGE_LOG="$SC_MUNGEDIR/munged.log"
SC_CTLD_PID="$SLURM_CLUSTER_DIR/slurmctld.pid"
SC_SLURMD_PID="$SLURM_CLUSTER_DIR/slurmd.pid"
SC_CTLD_LOG="$SC_LOGDIR/slurmctld.log"
SC_SLURMD_LOG="$SC_LOGDIR/slurmd.log"
SC_JOBCOMP_LOG="$SC_LOGDIR/jobcomp.log"
# Fallback config locations of SLURM's client commands (see start-cluster.sh).
SC_ETC_CONF=/etc/slurm/slurm.conf
SC_RUN_CONF=/run/slurm/conf

sc_log() { printf '[slurm-cluster] %s\n' "$*" >&2; }
sc_die() { printf '[slurm-cluster] ERROR: %s\n' "$*" >&2; exit 1; }
# The calling script's header comment (from line 2 up to `set -euo`) as its --help text.
sc_usage() { sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "$0"; }

# Print the last lines of a log file to stderr (used on failures).
sc_tail() {
  local f="$1" n="${2:-40}"
  if [ -r "$f" ]; then
    printf '[slurm-cluster] ---- last %s lines of %s ----\n' "$n" "$f" >&2
    tail -n "$n" "$f" >&2 || true
    printf '[slurm-cluster] ---- end of %s ----\n' "$f" >&2
  else
    printf '[slurm-cluster] (no log file %s)\n' "$f" >&2
  fi
}

# pid stored in pid file $1, if that process is alive and (when $2 is given)
# its command name is $2; prints nothing otherwise. Never fails.
sc_alive_pid() {
  local f="$1" want="${2:-}" pid comm
  [ -r "$f" ] || return 0
  pid="$(tr -dc '0-9' <"$f" 2>/dev/null || true)"
  [ -n "$pid" ] || return 0
  [ -d "/proc/$pid" ] || return 0
  # a zombie is as good as gone
  case "$(sed -n 's/^State:[[:space:]]*\([A-Z]\).*/\1/p' "/proc/$pid/status" 2>/dev/null)" in
    Z | X) return 0 ;;
  esac
  if [ -n "$want" ]; then
    comm="$(cat "/proc/$pid/comm" 2>/dev/null || true)"
    [ "$comm" = "$want" ] || return 0
  fi
  printf '%s\n' "$pid"
}

# Re-run the calling script as root (via passwordless sudo) unless already
# root. Usage: sc_ensure_root "$0" "$@"
sc_ensure_root() {
  if [ "$(id -u)" -eq 0 ]; then
    return 0
  fi
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    exec sudo -n env \
      SLURM_CLUSTER_DIR="$SLURM_CLUSTER_DIR" \
      ECHO_SLURM_TIMEOUT="$ECHO_SLURM_TIMEOUT" \
      ECHO_SLURM_CPUS="${ECHO_SLURM_CPUS:-}" \
      ECHO_SLURM_MEM_MB="${ECHO_SLURM_MEM_MB:-}" \
      ECHO_SLURM_PORT="${ECHO_SLURM_PORT:-}" \
      PATH="$PATH" \
      "$@"
  fi
  sc_die "must run as root or with passwordless sudo ('sudo -n true' failed)"
}

# Wait up to $1 seconds for the command "$2..." to succeed (polls every 0.5 s).
sc_wait_for() {
  local timeout="$1"
  shift
  local deadline=$((SECONDS + timeout))
  while true; do
    if "$@" >/dev/null 2>&1; then
      return 0
    fi
    if [ "$SECONDS" -ge "$deadline" ]; then
      return 1
    fi
    sleep 0.5
  done
}

# Short host name that slurmd will use as its node name.
sc_nodename() { hostname -s 2>/dev/null || hostname; }
