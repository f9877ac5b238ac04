#!/usr/bin/env bash
# Set up .venv and run the main job: the echo benchmarks (overhead of an idle echo stage,
# and the training-step speedup of echoing when the input pipeline is the bottleneck) and
# shared vs independent data loading.
# Results: benchmarks/results/*.csv, with a summary printed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}  # TensorFlow start-up banner
mkdir -p benchmarks/results
.venv/bin/python -m benchmarks.echo_overhead --out benchmarks/results/echo_overhead.csv
.venv/bin/python -m benchmarks.echo_speedup --out benchmarks/results/echo_speedup.csv
.venv/bin/python -m benchmarks.sharing --modes own shared \
    --out benchmarks/results/shared_loading.csv
