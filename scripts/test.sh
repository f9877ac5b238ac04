#!/usr/bin/env bash
# Set up .venv and run the checks CI runs: ruff (lint + format), the test suite, and the
# workflow checks (lint, dry run of the default study, config/test.yaml end to end; with
# ECHO_SLURM_CHECKS=1 also through a throwaway SLURM cluster, which needs root or sudo).
# Extra arguments go to pytest and skip the workflow checks, e.g.
#   scripts/test.sh tests/test_echo_core.py -x
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
status=0
.venv/bin/python -m pytest "$@" || status=$?
if [ "$status" = 5 ]; then
    echo "test: pytest collected no tests; that is a failure, not a pass" >&2
fi
if [ "$status" != 0 ] || [ "$#" -gt 0 ]; then
    exit "$status"
fi
scripts/check-workflow.sh
if [ "${ECHO_SLURM_CHECKS:-0}" = 1 ]; then
    # The test config again, through SLURM, into .test-slurm/; the records must agree with
    # the local run's (timing aside); then a failing rule must fail the workflow in bounded time.
    rm -rf .test-slurm
    scripts/slurm/run-workflow.sh --timeout 900 -- --configfile config/test.yaml \
        --config out_dir=.test-slurm/results figures_dir=.test-slurm/paper_figures
    .venv/bin/python -m analysis compare .test/results .test-slurm/results
    scripts/slurm/check-failure.sh --with-cluster
fi
