#!/usr/bin/env bash
# Install tensorsocket 0.0.5 (and tornado, which it needs) into .bench-deps/tensorsocket, for
# the shared-loading benchmark only: the project itself never imports it.
#   benchmarks/install_tensorsocket.sh && .venv/bin/python -m benchmarks.sharing \
#       --out benchmarks/results/shared_loading.csv --tensorsocket-path .bench-deps/tensorsocket
set -euo pipefail
cd "$(dirname "$0")/.."
.venv/bin/python -m pip install --quiet --disable-pip-version-check --no-deps \
    --target .bench-deps/tensorsocket "tensorsocket==0.0.5" "tornado>=6,<7"
