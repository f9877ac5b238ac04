#!/usr/bin/env bash
# Train the protocol study (config/protocol.yaml) in a fixed order of parts, the parts that
# decide claims first. First the landed records that are stale (a crossing floored at the
# first evaluation, `python -m experiments.study paths --stale`), retrained in place: new
# trials are censored against them. Then the parts the config grows, in the order its budget
# ranks them: the language models' insertion study ("fewer fresh examples at e = 2 on every
# workload"; their baselines reached the target least often), e = 32 before augmentation (the
# factor peak), the batch-size study; then any part a later config grows (the insertion
# study's image workloads, the echo factors), then everything else (tables and figures
# included). A search's trials train in order (each censored against the earlier ones);
# searches and conditions run side by side.
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
# A stop (a killed session, a power loss) leaves snakemake's locks behind, on which every part
# would then fail: remove them, unless a snakemake runs in this directory.
running=false
for pid in $(pgrep -f snakemake || true); do
    [[ $(readlink "/proc/$pid/cwd" 2>/dev/null) == "$PWD" ]] && running=true
done
$running || .venv/bin/snakemake --unlock --configfile "$config" >/dev/null 2>&1 || true
# The stale records, retrained in place (--force: a record written is never remade otherwise).
# Snakemake leaves out a forced target that waits on another (a search's later trial): one
# round per such link, until none is stale or a round retrains none of them.
previous=""
for _ in 1 2 3 4 5; do
    stale=$("$py" -m experiments.study paths --configfile "$config" --stale)
    [[ -z $stale || $stale == "$previous" ]] && break
    previous=$stale
    echo "== stale records ($(wc -l <<<"$stale") records)"
    # shellcheck disable=SC2086
    .venv/bin/snakemake $stale --force "${extra[@]}" --configfile "$config" \
        --rerun-triggers mtime --keep-going || true
done
order=(
    "insertion lm1b_transformer"
    "insertion common_crawl_transformer"
    "echo_factor imagenet_resnet 32"
    "echo_factor cifar10_resnet 32"
    "batch_size imagenet_resnet"
    "insertion imagenet_resnet"
    "insertion cifar10_resnet"
    "insertion coco_ssd"
    "echo_factor lm1b_transformer"
    "echo_factor imagenet_resnet"
    "echo_factor cifar10_resnet"
)
for entry in "${order[@]}"; do
    # shellcheck disable=SC2086
    part $entry
done
.venv/bin/snakemake "${extra[@]}" --configfile "$config" --rerun-triggers mtime --keep-going
exit
}
