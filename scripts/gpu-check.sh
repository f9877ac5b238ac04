#!/usr/bin/env bash
# The GPU paths, checked in one command on a CUDA machine (one GPU, ~16 cores), in order:
#   0. setup: the wheels of scripts/gpu-wheels.sh (in .gpu-wheels/) and the project
#      (pip install --no-deps -e .), keeping the image's torch; what the machine has;
#   1. plan: config/paper.yaml planned through the SLURM profile with GPU resources
#      (snakemake -n; where snakemake is installed, so here in --dry mode, not on the GPU);
#   2. tests: pytest -m gpu (CUDA IPC batches, harness runs on cuda, pinned batches);
#   3. sharing: benchmarks.gpu_sharing (1, 2, 4 collocated ResNet-18 trainers, own loaders
#      vs one CUDA-IPC producer);
#   4. echo: benchmarks.gpu_echo (ResNet-50 fed by a CPU-bound JPEG loader);
#   5. paper: benchmarks.paper_smoke (each paper-scale workload through the harness).
# Each step has a time limit and the next one runs whatever happened; the exit status says
# whether all passed. Written to OUT_DIR: gpu-check.log (everything printed), steps.csv (each
# step's status and seconds), gpu-tests.xml, gpu_sharing.csv, gpu_echo.csv, paper_smoke.csv.
#
#   scripts/gpu-check.sh [--dry] [--only STEP,...] [OUT_DIR]     # OUT_DIR defaults to $OUT
#
# --only runs setup and the steps named (e.g. --only sharing,paper), to rerun what failed
# within what is left of a GPU lease.
#
# --dry runs the same steps on the CPU at tiny sizes (no CUDA call; the GPU tests skip), in
# about a minute: CI runs it (tests/test_gpu_check.py). Through the device tool, from a
# checkout with the wheels downloaded (scripts/gpu-wheels.sh):
#   run(command="scripts/gpu-check.sh", carry=[".gpu-wheels"], timeout_s=590)
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu-check.sh [--dry] [--only STEP,...] [OUT_DIR]  (default \$OUT)"
steps="setup plan tests sharing echo paper"
dry=0
only=""
while [ $# -gt 0 ]; do
    case $1 in
        --dry) dry=1 ;;
        --only)
            only=",${2:-},"
            shift
            for name in ${only//,/ }; do
                [[ " $steps " == *" $name "* ]] || { echo "--only: no step $name; steps: $steps" >&2; exit 2; }
            done ;;
        -*) echo "$usage" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
out=${1:-${OUT:-}}
if [ -z "$out" ]; then
    echo "$usage" >&2
    exit 2
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)
exec > >(tee "$out/gpu-check.log") 2>&1
tee_pid=$!
# On exit, let tee write the log's last lines before the files are collected.
trap 'exec >&- 2>&-; wait "$tee_pid" 2> /dev/null' EXIT
python=${PYTHON:-}
if [ -z "$python" ]; then
    python=python3
    [ ! -x .venv/bin/python ] || python=.venv/bin/python
fi
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
started=$(date +%s)
failed=()
echo "step,status,seconds" > "$out/steps.csv"

# step NAME LIMIT_S COMMAND...: run COMMAND for at most LIMIT_S seconds (a function of this
# script runs in this shell, unlimited: setup exports what the steps after it need), noting
# the outcome.
step() {
    local name=$1 limit=$2 begin status
    shift 2
    if [ -n "$only" ] && [ "$name" != setup ] && [[ $only != *",$name,"* ]]; then
        return 0
    fi
    begin=$(date +%s)
    echo
    echo "== $name (at $((begin - started)) s, limit $limit s): $*"
    if declare -F "$1" > /dev/null; then
        "$@"
    else
        timeout --kill-after=15 "$limit" "$@"
    fi
    status=$?
    echo "== $name: exit $status after $(($(date +%s) - begin)) s"
    echo "$name,$status,$(($(date +%s) - begin))" >> "$out/steps.csv"
    [ "$status" = 0 ] || failed+=("$name")
}

setup() {
    if [ "$dry" = 0 ]; then
        if [ -d .gpu-wheels ]; then
            "$python" -m pip install -q --no-index --no-deps --no-compile --upgrade \
                --target /tmp/gpu-site .gpu-wheels/*.whl || return 1
            export PYTHONPATH="$PYTHONPATH:/tmp/gpu-site"
        else
            echo "no .gpu-wheels/ (scripts/gpu-wheels.sh makes it; carry it)"
        fi
        # The project itself; PYTHONPATH already finds it should this fail.
        "$python" -m pip install -q --no-deps --no-build-isolation -e . ||
            echo "pip install -e . failed; using PYTHONPATH=$PWD"
        command -v nvidia-smi >/dev/null && nvidia-smi
    fi
    nproc
    "$python" - <<'EOF'
import platform
from importlib.metadata import version

import datasets, jsonschema, pycocotools.coco, torch, transformers  # noqa: F401
print("python", platform.python_version(), "cuda:", torch.cuda.is_available() and torch.cuda.get_device_name(0))
names = "torch torchvision numpy jsonschema attrs pycocotools datasets pyarrow fsspec huggingface-hub transformers tokenizers"
print(", ".join(f"{name} {version(name)}" for name in names.split()))
EOF
}

# config/paper.yaml planned through the SLURM profile with a GPU per training job (the
# resources the profile's comments show for a site's GPU partition, given on the command
# line): every training job must ask for a GPU and train on cuda.
plan() {
    if ! "$python" -c "import snakemake" 2>/dev/null; then
        echo "skipped: snakemake is not installed here (scripts/gpu-check.sh --dry runs it)"
        return 0
    fi
    local plan_dir targets
    plan_dir=$(mktemp -d)
    # The paper's search budgets make thousands of runs: plan every 50th (all studies and
    # workloads appear) as targets, each with its data job, instead of the whole DAG.
    mapfile -t targets < <("$python" -m experiments.study paths --configfile config/paper.yaml |
        awk 'NR % 50 == 1')
    "$python" -m snakemake -n "${targets[@]}" --workflow-profile none \
        --profile workflow/profiles/slurm --configfile config/paper.yaml \
        --set-resources train:gpu=1 train:cpus_per_task=8 train:mem_mb=64000 \
        > "$plan_dir/plan.log" 2>&1 || { cat "$plan_dir/plan.log"; return 1; }
    local jobs gpu cuda
    jobs=$(grep -cE "^(localrule|rule) train:" "$plan_dir/plan.log")
    gpu=$(grep -c "cpus_per_task=8.*gpu=1" "$plan_dir/plan.log")
    cuda=$(grep -c "^Shell command: .*experiments.run .*--device cuda" "$plan_dir/plan.log")
    echo "paper.yaml through the SLURM profile: $jobs training jobs (every 50th of" \
        "$("$python" -m experiments.study paths --configfile config/paper.yaml | wc -l))," \
        "$gpu with gpu=1, $cuda on cuda"
    rm -rf "$plan_dir"
    [ "$jobs" -gt 0 ] && [ "$gpu" = "$jobs" ] && [ "$cuda" = "$jobs" ]
}

echo "gpu-check: $([ "$dry" = 1 ] && echo "dry (CPU)" || echo GPU) mode, $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null || echo "no git")"
step setup - setup
step plan - plan
# pytest -m gpu over the files that hold GPU tests: the same selection as over tests/, without
# collecting modules that need what the GPU machine lacks. Each test at most 45 s: a hung one
# fails alone and the others still run.
mapfile -t gpu_tests < <(grep -l "pytest.mark.gpu" tests/test_*.py)
step tests 120 "$python" -m pytest -p no:cacheprovider -m gpu -ra --timeout 45 \
    --junitxml "$out/gpu-tests.xml" "${gpu_tests[@]}"
if [ "$dry" = 1 ]; then
    # Limits twice what these tiny sizes take here alone: they catch a hang, not a slow machine.
    step sharing 180 "$python" -m benchmarks.gpu_sharing --device cpu --out "$out/gpu_sharing.csv" \
        --trainers 1 2 --workers 1 --arch resnet18 --batch-size 4 --image-size 32 --images 16 \
        --warmup 1 --steps 6 --trial-timeout 60
    step echo 120 "$python" -m benchmarks.gpu_echo --device cpu --out "$out/gpu_echo.csv" \
        --arch resnet18 --batch-size 4 --image-size 32 --workers 1 --images 16 --steps 2 \
        --rounds 1 --threads 1
    step paper 180 "$python" -m benchmarks.paper_smoke --device cpu --out "$out/paper_smoke.csv" \
        --threads 1 --num-workers 0 --batch-size 2 --steps 1 --examples 0.005 \
        --hparams '{"imagenet_resnet": {"image_size": 32},
                   "lm1b_transformer": {"vocab_size": 512, "eval_windows": 8},
                   "common_crawl_transformer": {"vocab_size": 512, "eval_windows": 8}}'
else
    # Limits: 120 + 150 + 80 + 140 s, with setup (~20 s, unlimited) 8.5 minutes at worst;
    # expected about 6.
    step sharing 150 "$python" -m benchmarks.gpu_sharing --device cuda \
        --out "$out/gpu_sharing.csv" --trial-timeout 45
    step echo 80 "$python" -m benchmarks.gpu_echo --device cuda --out "$out/gpu_echo.csv"
    step paper 140 "$python" -m benchmarks.paper_smoke --device cuda --steps 150 --batch-size 128 \
        --out "$out/paper_smoke.csv"
fi
echo
echo "gpu-check: $(($(date +%s) - started)) s in all; steps:"
cat "$out/steps.csv"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu-check: FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu-check: ok"
