#!/usr/bin/env bash
# run-workflow.sh - CI step: run the Snakemake workflow through a throwaway
# single-node SLURM cluster and check that the jobs really went through SLURM.
#
# Usage:
#   scripts/slurm/run-workflow.sh [OPTIONS] [--] [SNAKEMAKE ARGS...]
#
#   e.g. scripts/slurm/run-workflow.sh                       # whole workflow
#        scripts/slurm/run-workflow.sh -- --configfile config/ci.yaml
#        scripts/slurm/run-workflow.sh --compare-with /tmp/local-run -- -s /tmp/x/Snakefile --directory /tmp/x
#
# Options (before the snakemake arguments; `--` ends them):
#   --log FILE            snakemake log (tee'd) [$SLURM_CLUSTER_DIR/snakemake-slurm.log]
#   --timeout SECONDS     kill snakemake after this long (exit 124) [no limit]
#   --allow-no-jobs       do not fail when snakemake submitted no SLURM job
#                         (e.g. everything was up to date)
#   --keep-cluster        leave the cluster running afterwards (debugging only;
#                         the default is to ALWAYS stop it on exit)
#   --compare-with DIR    after success, compare the files matching the
#                         --compare-glob patterns (relative to the snakemake
#                         working directory: --directory/-d if given, else the
#                         repo root) byte for byte with the same paths in DIR
#   --compare-glob GLOB   pattern for --compare-with, repeatable [results/*.csv]
#
# Steps: (a) scripts/slurm/start-cluster.sh (exports SLURM_CONF), with an EXIT
# trap that always runs scripts/slurm/stop-cluster.sh; (b) in the repo root:
#   ECHO_SLURM_PARTITION=debug .venv/bin/snakemake --workflow-profile none \
#     --profile workflow/profiles/slurm --profile workflow/profiles/slurm-local "$@"
# teeing the output to the log; (c) takes the SLURM job ids from the lines
# "Job N has been submitted with SLURM jobid ID (log: ...)" of the log and
# checks each one with `scontrol show job ID` (finished jobs stay known for
# MinJobAge=3600 s) or in the cluster's job completion log; (d) exits with
# snakemake's exit status; if snakemake succeeded but the SLURM check fails it
# exits 3, and 4 if --compare-with finds differences.
#
# The snakemake used is $ECHO_SNAKEMAKE or <repo>/.venv/bin/snakemake (falls
# back to `snakemake` on PATH).
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(cd "$HERE/../.." && pwd)"
# shellcheck source=scripts/slurm/_common.sh
. "$HERE/_common.sh"

log_file=""
timeout_s=""
allow_no_jobs=0
keep_cluster=0
compare_with=""
compare_globs=()
while [ "$#" -gt 0 ]; do
  case "$1" in
    --log) log_file="$2"; shift 2 ;;
    --timeout) timeout_s="$2"; shift 2 ;;
    --allow-no-jobs) allow_no_jobs=1; shift ;;
    --keep-cluster) keep_cluster=1; shift ;;
    --compare-with) compare_with="$2"; shift 2 ;;
    --compare-glob) compare_globs+=("$2"); shift 2 ;;
    -h | --help)
      sc_usage
      exit 0
      ;;
    --) shift; break ;;
    *) break ;;
  esac
done
[ "${#compare_globs[@]}" -gt 0 ] || compare_globs=("results/*.csv")
if [ -n "$compare_with" ]; then
  [ -d "$compare_with" ] || sc_die "--compare-with: no such directory: $compare_with"
  compare_with="$(cd "$compare_with" && pwd)"
fi

snakemake_bin="${ECHO_SNAKEMAKE:-$REPO/.venv/bin/snakemake}"
if [ ! -x "$snakemake_bin" ]; then
  snakemake_bin="$(command -v snakemake || true)"
  [ -n "$snakemake_bin" ] || sc_die "no snakemake: create $REPO/.venv or set ECHO_SNAKEMAKE"
fi

# ------------------------------------------------------------ (a) cluster --
# shellcheck disable=SC2317  # invoked by the EXIT trap
stop_cluster() {
  local rc=$?
  if [ "$keep_cluster" -eq 1 ]; then
    sc_log "--keep-cluster: leaving the cluster running (stop it with $HERE/stop-cluster.sh)"
  else
    SLURM_CLUSTER_DIR="$SLURM_CLUSTER_DIR" "$HERE/stop-cluster.sh" || rc=$((rc == 0 ? 1 : rc))
  fi
  exit "$rc"
}
trap stop_cluster EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

env_line="$("$HERE/start-cluster.sh")" || sc_die "could not start the SLURM cluster"
eval "$env_line"
export SLURM_CONF
export ECHO_SLURM_PARTITION="${ECHO_SLURM_PARTITION:-debug}"

[ -n "$log_file" ] || log_file="$SLURM_CLUSTER_DIR/snakemake-slurm.log"
mkdir -p "$(dirname "$log_file")"
if [ ! -w "$(dirname "$log_file")" ]; then
  log_file="${TMPDIR:-/tmp}/snakemake-slurm.$$.log"
fi

# ----------------------------------------------------------- (b) snakemake --
# --workflow-profile none: a workflow profile (e.g. workflow/profiles/default
# if snakemake finds it) comes last and would replace whole keys such as
# default-resources/set-resources of the SLURM profile.
cmd=("$snakemake_bin"
  --workflow-profile none
  --profile "$REPO/workflow/profiles/slurm"
  --profile "$REPO/workflow/profiles/slurm-local"
  "$@")
[ -z "$timeout_s" ] || cmd=(timeout --signal=TERM --kill-after=60 "$timeout_s" "${cmd[@]}")
sc_log "running in $REPO: ${cmd[*]}"
sc_log "log: $log_file"
t0=$SECONDS
set +e
(cd "$REPO" && "${cmd[@]}") 2>&1 | tee "$log_file"
sm_rc=${PIPESTATUS[0]}
set -e
sc_log "snakemake exited with $sm_rc after $((SECONDS - t0)) s"

# ----------------------------------------------- (c) did it go via SLURM? --
mapfile -t job_ids < <(
  sed -n -e 's/.*has been submitted with SLURM jobid \([0-9][0-9_]*\).*/\1/p' \
    -e 's/.*Submitted array job with Snakemake IDs .* and SLURM job ID \([0-9][0-9]*\)\..*/\1/p' "$log_file" |
    sort -u
)
check_rc=0
if [ "${#job_ids[@]}" -eq 0 ]; then
  if [ "$allow_no_jobs" -eq 1 ] || [ "$sm_rc" -ne 0 ]; then
    sc_log "no SLURM job was submitted"
  else
    sc_log "ERROR: snakemake succeeded but submitted no SLURM job (is the executor slurm? pass --allow-no-jobs if this is expected)"
    check_rc=3
  fi
else
  sc_log "SLURM jobs of this run: ${job_ids[*]}"
  for id in "${job_ids[@]}"; do
    if info="$(scontrol show job "$id" 2>/dev/null)"; then
      state="$(sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' <<<"$info" | head -n 1)"
      name="$(sed -n 's/.*Comment=\(.*\)/\1/p' <<<"$info" | head -n 1)"
      exit_code="$(sed -n 's/.* ExitCode=\([0-9:]*\).*/\1/p' <<<"$info" | head -n 1)"
      sc_log "  job $id: $state exit=$exit_code ${name:+($name)}"
    elif grep -q "^JobId=$id " "$SC_JOBCOMP_LOG" 2>/dev/null; then
      state="$(grep "^JobId=$id " "$SC_JOBCOMP_LOG" | sed -n 's/.*JobState=\([A-Z_]*\).*/\1/p' | tail -n 1)"
      sc_log "  job $id: $state (from $SC_JOBCOMP_LOG)"
    else
      sc_log "ERROR: SLURM does not know job $id"
      state=UNKNOWN
      check_rc=3
    fi
    if [ "$sm_rc" -eq 0 ] && [ "$state" != COMPLETED ]; then
      sc_log "ERROR: snakemake succeeded but SLURM job $id is $state"
      check_rc=3
    fi
  done
fi

if [ "$sm_rc" -ne 0 ]; then
  exit "$sm_rc"
fi
[ "$check_rc" -eq 0 ] || exit "$check_rc"

# ------------------------------------------------------ optional compare --
if [ -n "$compare_with" ]; then
  # snakemake's working directory: the last --directory/-d in the arguments.
  workdir="$REPO"
  prev=""
  for a in "$@"; do
    case "$prev" in --directory | -d) workdir="$a" ;; esac
    case "$a" in --directory=*) workdir="${a#--directory=}" ;; esac
    prev="$a"
  done
  case "$workdir" in /*) ;; *) workdir="$REPO/$workdir" ;; esac
  sc_log "comparing ${compare_globs[*]} in $workdir with $compare_with"
  diffs=0
  nfiles=0
  rels="$(
    for root in "$workdir" "$compare_with"; do
      (cd "$root" && for g in "${compare_globs[@]}"; do
        # shellcheck disable=SC2086  # the glob must expand here
        for f in $g; do [ -e "$f" ] && printf '%s\n' "$f"; done
      done)
    done | sort -u
  )"
  while IFS= read -r rel; do
    [ -n "$rel" ] || continue
    nfiles=$((nfiles + 1))
    if [ ! -e "$workdir/$rel" ]; then
      sc_log "  only in $compare_with: $rel"
      diffs=$((diffs + 1))
    elif [ ! -e "$compare_with/$rel" ]; then
      sc_log "  only in the SLURM run: $rel"
      diffs=$((diffs + 1))
    elif ! cmp -s "$workdir/$rel" "$compare_with/$rel"; then
      sc_log "  differs: $rel"
      diff -u "$compare_with/$rel" "$workdir/$rel" | head -n 20 >&2 || true
      diffs=$((diffs + 1))
    fi
  done <<<"$rels"
  if [ "$nfiles" -eq 0 ]; then
    sc_log "ERROR: no file matched ${compare_globs[*]} in either directory"
    exit 4
  fi
  if [ "$diffs" -ne 0 ]; then
    sc_log "ERROR: $diffs of $nfiles compared files differ"
    exit 4
  fi
  sc_log "all $nfiles compared files are identical"
fi
exit 0
