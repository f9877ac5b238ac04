#!/usr/bin/env bash
# Set up .venv and run the checks CI runs: ruff (lint + format) and the test suite.
# Extra arguments go to pytest, e.g. scripts/test.sh tests/test_echo_core.py -x
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
exit "$status"
