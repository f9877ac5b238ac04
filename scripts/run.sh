#!/usr/bin/env bash
# Set up .venv and run the main job: the default study, `snakemake --cores N` (N: $CORES, else
# every core). With the committed records in results/ nothing is retrained: the tables and
# figures are rebuilt (under a minute). Arguments go to snakemake, e.g. to train the whole
# study again into a new folder:
#   scripts/run.sh --config out_dir=results/mine figures_dir=paper_figures/mine
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
export TF_CPP_MIN_LOG_LEVEL=${TF_CPP_MIN_LOG_LEVEL:-2}  # TensorFlow start-up banner
exec .venv/bin/snakemake --cores "${CORES:-$(nproc)}" "$@"
