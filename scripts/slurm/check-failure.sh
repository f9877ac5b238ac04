#!/usr/bin/env bash
# check-failure.sh - a rule that fails under SLURM must make snakemake exit
# non-zero, in bounded time.
#
# Usage:
#   eval "$(scripts/slurm/start-cluster.sh)"; scripts/slurm/check-failure.sh
#   scripts/slurm/check-failure.sh --with-cluster   # start + always stop it
#
# Writes a one-rule Snakefile (`exit 1`) into a fresh temp dir, runs it with
# the same profiles as run-workflow.sh
#   (--profile workflow/profiles/slurm --profile workflow/profiles/slurm-local)
# under `timeout ${ECHO_FAILURE_TIMEOUT:-180}` on the running cluster
# (SLURM_CONF, else $SLURM_CLUSTER_DIR/slurm.conf), and asserts:
#   * snakemake exited non-zero and not 124/137 (i.e. not killed by timeout);
#   * the job went through SLURM (a "submitted with SLURM jobid" log line) and
#     SLURM recorded it as FAILED.
# Prints the elapsed time. Exit 0 = check passed, 1 = check failed.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=scripts/slurm/_common.sh
. "$HERE/_common.sh"

with_cluster=0
for arg in "$@"; do
  case "$arg" in
    --with-cluster) with_cluster=1 ;;
    -h | --help)
      sc_usage
      exit 0
      ;;
    *) sc_die "unknown argument: $arg (try --help)" ;;
  esac
done
limit="${ECHO_FAILURE_TIMEOUT:-180}"
snakemake_bin="${ECHO_SNAKEMAKE:-$REPO/.venv/bin/snakemake}"
[ -x "$snakemake_bin" ] || snakemake_bin="$(command -v snakemake)" || sc_die "no snakemake found"

work=""
# shellcheck disable=SC2317  # invoked by the EXIT trap
cleanup() {
  local rc=$?
  if [ "$with_cluster" -eq 1 ]; then
    SLURM_CLUSTER_DIR="$SLURM_CLUSTER_DIR" "$HERE/stop-cluster.sh" || true
  fi
  if [ -n "$work" ]; then
    if [ "$rc" -eq 0 ]; then rm -rf "$work"; else sc_log "kept $work for inspection"; fi
  fi
  exit "$rc"
}
trap cleanup EXIT

if [ "$with_cluster" -eq 1 ]; then
  eval "$("$HERE/start-cluster.sh")"
fi
export SLURM_CONF="${SLURM_CONF:-$SC_CONF}"
scontrol ping 2>/dev/null | grep -q 'is UP' ||
  sc_die "no running cluster for SLURM_CONF=$SLURM_CONF (start one with $HERE/start-cluster.sh, or pass --with-cluster)"
export ECHO_SLURM_PARTITION="${ECHO_SLURM_PARTITION:-debug}"
work="$(mktemp -d "${TMPDIR:-/tmp}/slurm-failure-check.XXXXXX")"

cat >"$work/Snakefile" <<'EOF'
rule all:
    input: "never.txt"

rule fail_on_purpose:
    output: "never.txt"
    shell: "echo 'failing on purpose' >&2; exit 1"
EOF

sc_log "running a failing rule through SLURM (timeout ${limit}s) in $work"
t0="$(date +%s.%N)"
set +e
(cd "$REPO" && timeout --kill-after=20 "$limit" "$snakemake_bin" \
  --workflow-profile none \
  --profile "$REPO/workflow/profiles/slurm" \
  --profile "$REPO/workflow/profiles/slurm-local" \
  -s "$work/Snakefile" --directory "$work") >"$work/snakemake.log" 2>&1
rc=$?
set -e
elapsed="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN{printf "%.1f", b-a}')"

ok=1
if [ "$rc" -eq 0 ]; then
  sc_log "FAIL: snakemake exited 0 although the rule failed"
  ok=0
elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
  sc_log "FAIL: snakemake did not finish within ${limit}s (exit $rc)"
  ok=0
fi
job_id="$(sed -n 's/.*has been submitted with SLURM jobid \([0-9]*\).*/\1/p' "$work/snakemake.log" | head -n 1)"
if [ -z "$job_id" ]; then
  sc_log "FAIL: the rule was not submitted to SLURM"
  ok=0
else
  state="$(scontrol show job "$job_id" 2>/dev/null | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | head -n 1)"
  if [ "$state" != FAILED ]; then
    sc_log "FAIL: SLURM job $job_id is '${state:-unknown}', expected FAILED"
    ok=0
  fi
fi
if [ "$ok" -ne 1 ]; then
  sc_tail "$work/snakemake.log" 60
  exit 1
fi
sc_log "OK: failing rule -> SLURM job $job_id FAILED -> snakemake exit $rc after ${elapsed}s (limit ${limit}s)"
