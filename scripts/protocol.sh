#!/usr/bin/env bash
# Train the protocol study (config/protocol.yaml) in a fixed order of parts, the claims the
# data-echoing paper is known for first (the insertion study, which decides "fewer fresh
# examples at e = 2 on every workload", with the factor sweeps to e = 8 among it), then the
# wall-time, batch-size, shuffle-buffer and no-harm studies (four claims rest on them) before
# the e = 16 sweeps (which train up to 16 steps per fresh batch: the costliest runs), then
# everything else (tables and figures included).
# Resumable: records are atomic and never recomputed, so run it again after a stop.
#   nohup scripts/protocol.sh > results/protocol/logs/driver.log 2>&1 &
# Extra arguments go to every snakemake call (e.g. --cores 4, or --profile for SLURM).
# The whole script is one group that bash reads before it runs any of it, so editing this
# file while a study trains does not change (or break) the run under way.
{
set -euo pipefail
cd "$(dirname "$0")/.."
py=.venv/bin/python
config=config/protocol.yaml
extra=(--cores 2 "$@")
[[ " $* " == *" --cores "* || " $* " == *" --profile "* ]] && extra=("$@")
part() {  # part STUDY WORKLOAD [ECHO_FACTOR ...]: that part's missing records
    local study=$1 workload=$2
    shift 2
    local paths
    paths=$("$py" -m experiments.study paths --configfile "$config" --study "$study" \
        --workload "$workload" --missing)
    if (($#)); then  # only the baselines (e1) and the given factors
        local pattern
        pattern="-e($(IFS='|'; echo "1|$*"))-"
        paths=$(grep -E -- "$pattern" <<<"$paths" || true)
    fi
    [[ -z $paths ]] && return 0
    echo "== $study / $workload ${*:-} ($(wc -l <<<"$paths") records)"
    # shellcheck disable=SC2086
    .venv/bin/snakemake $paths "${extra[@]}" --configfile "$config" --rerun-triggers mtime \
        --keep-going || true
}
order=(
    "insertion lm1b_transformer"
    "echo_factor lm1b_transformer 4 8"
    "insertion common_crawl_transformer"
    "insertion imagenet_resnet"
    "insertion cifar10_resnet"
    "echo_factor imagenet_resnet 4 8"
    "insertion coco_ssd"
    "echo_factor cifar10_resnet 4 8"
    "wall_time imagenet_resnet"
    "batch_size imagenet_resnet"
    "shuffle_buffer cifar10_resnet"
    "no_harm lm1b_transformer"
    "echo_factor lm1b_transformer 16"
    "echo_factor imagenet_resnet 16"
    "echo_factor cifar10_resnet 16"
)
for entry in "${order[@]}"; do
    # shellcheck disable=SC2086
    part $entry
done
.venv/bin/snakemake "${extra[@]}" --configfile "$config" --rerun-triggers mtime --keep-going
exit
}
