#!/usr/bin/env bash
# Set up (scripts/setup.sh: system packages, .venv) and run the checks CI runs: ruff (lint +
# format), the test suite, and the workflow checks (lint, dry run of the default study,
# config/test.yaml end to end). Where it can start one (root or `sudo -n`), the workflow also
# runs through a throwaway SLURM cluster; ECHO_SLURM_CHECKS=0 skips that, =1 insists on it.
# Extra arguments go to pytest and skip the workflow checks, e.g.
#   scripts/test.sh tests/test_echo_core.py -x
# The tests marked slow run too. `scripts/test.sh --fast` (first argument) runs ruff and the
# tests not marked slow only, and no check after them (about 3 minutes). Without --fast or
# pytest arguments the documentation site is built too (mkdocs --strict), right after ruff.
set -euo pipefail
cd "$(dirname "$0")/.."
marks="slow or not slow"
fast=0
if [ "${1:-}" = --fast ]; then
    marks="not slow" fast=1
    shift
fi
scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
if [ "$fast" = 0 ] && [ "$#" = 0 ]; then
    # The documentation site into site/, warnings as errors (links, anchors, generated pages);
    # the two variables only silence the theme's and mkdocs' maintenance banners.
    NO_MKDOCS_2_WARNING=1 DISABLE_MKDOCS_2_WARNING=true .venv/bin/mkdocs build --strict
fi
ECHO_DATA_SKIPS_FILE=$(mktemp)
export ECHO_DATA_SKIPS_FILE
# Said again at the very end, whatever happened: tests skipped because their data is missing.
trap '[ ! -s "$ECHO_DATA_SKIPS_FILE" ] || echo "test: $(cat "$ECHO_DATA_SKIPS_FILE")" >&2
      rm -f "$ECHO_DATA_SKIPS_FILE"' EXIT
status=0
# --durations: the log names the slowest tests, where the suite's ~10-minute budget goes.
.venv/bin/python -m pytest -m "$marks" --durations=20 "$@" || status=$?
if [ "$status" = 5 ]; then
    echo "test: pytest collected no tests; that is a failure, not a pass" >&2
fi
if [ "$status" != 0 ] || [ "$#" -gt 0 ] || [ "$fast" = 1 ]; then
    exit "$status"
fi
scripts/check-workflow.sh
slurm=${ECHO_SLURM_CHECKS:-auto}
if [ "$slurm" = auto ]; then
    slurm=0
    if command -v apt-get >/dev/null && { [ "$(id -u)" = 0 ] || sudo -n true 2>/dev/null; }; then
        slurm=1
    fi
fi
if [ "$slurm" = 1 ]; then
    # The test config again, through SLURM, into .test-slurm/; the records must agree with
    # the local run's (timing aside); then a failing rule must fail the workflow in bounded time.
    rm -rf .test-slurm
    scripts/slurm/run-workflow.sh --timeout 900 -- --configfile config/test.yaml \
        --config out_dir=.test-slurm/results figures_dir=.test-slurm/paper_figures
    .venv/bin/python -m analysis compare .test/results .test-slurm/results
    scripts/slurm/check-failure.sh --with-cluster
else
    echo "test: SLURM checks skipped (they need root or sudo -n to start a throwaway cluster)" >&2
fi
