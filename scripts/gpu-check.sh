#!/usr/bin/env bash
# The GPU paths, checked in one command on a CUDA machine (one H100 or H200, ~16 cores; nothing
# depends on which), in order, each step under its own time limit (seconds, on the GPU):
#   setup    45  install the carried wheels of scripts/gpu-wheels.sh (.gpu-wheels/) and the
#                project (pip --no-index), keeping the image's torch; log what the machine has;
#   cuda     75  pytest tests/test_sharing_cuda.py alone: CUDA batches through CUDA IPC, first
#                two consumers at different speeds checking every value after their GPU work;
#   tests    45  pytest -m gpu over the other test files (harness runs on cuda, pinned batches);
#   sharing  90  benchmarks.gpu_sharing: 1, 2, 4 collocated ResNet-18 trainers, own loaders vs
#                one CUDA-IPC producer, and one trainer fed from GPU memory;
#   echo     45  benchmarks.gpu_echo: ResNet-50 fed by a CPU-bound JPEG loader, e = 1, 2, 4;
#   paper    60  benchmarks.paper_smoke: each paper-scale workload through the harness, ResNet-50
#                first.
# The limits add up to 360 s (each step's processes get 5 s more to exit after SIGTERM), so a
# machine started for 15 minutes has room to rerun what failed (--only). A step that fails or
# runs out of time is recorded and the next one still runs; the exit status says whether all
# passed. Nothing reaches for the network: pip installs with --no-index, and Hugging Face
# libraries run offline (HF_HUB_OFFLINE=1, HF_DATASETS_OFFLINE=1).
#
#   scripts/gpu-check.sh [--dry] [--only STEP,...] [OUT_DIR]     # OUT_DIR defaults to $OUT
#
# What must travel with the checkout: .gpu-wheels/, made by scripts/gpu-wheels.sh where pip
# reaches PyPI (the GPU machine's image lacks jsonschema, pycocotools and datasets). Without it,
# setup fails and says so; the cuda step needs only torch and still runs.
#
# Written to OUT_DIR, and nowhere else: gpu-check.log (everything printed), steps.csv (each
# step's exit status and seconds; 124: out of time), cuda-tests.xml, gpu-tests.xml,
# gpu_sharing.csv, gpu_echo.csv, paper_smoke.csv (seven files).
#
# --only runs setup and the steps named (e.g. --only cuda,paper), to rerun what failed.
#
# --dry runs the same steps on the CPU at tiny sizes (no CUDA call; the GPU tests skip), plus
# plan: config/paper.yaml planned through the SLURM profile with a GPU per training job
# (snakemake -n; not on the GPU machine, which has no snakemake). CI runs it
# (tests/test_gpu_check.py). Through a device call, from a checkout with the wheels:
#   run(command="scripts/gpu-check.sh", carry=[".gpu-wheels"], timeout_s=420)
set -uo pipefail
cd "$(dirname "$0")/.."
usage="usage: scripts/gpu-check.sh [--dry] [--only STEP,...] [OUT_DIR]  (default \$OUT)"
dry=0
only=""
while [ $# -gt 0 ]; do
    case $1 in
        --dry) dry=1 ;;
        --only)
            only=",${2:-},"
            shift ;;
        -*) echo "$usage" >&2; exit 2 ;;
        *) break ;;
    esac
    shift
done
# Each step's time limit in seconds, in the order the steps run.
if [ "$dry" = 1 ]; then
    # Twice what these tiny sizes take here alone: they catch a hang, not a slow machine.
    steps=(setup:90 cuda:60 tests:120 sharing:180 echo:120 paper:180 plan:120)
else
    steps=(setup:45 cuda:75 tests:45 sharing:90 echo:45 paper:60)
fi
declare -A limit
names=()
for entry in "${steps[@]}"; do
    names+=("${entry%:*}")
    limit[${entry%:*}]=${entry#*:}
done
for name in ${only//,/ }; do
    [ -n "${limit[$name]:-}" ] || {
        echo "--only: no step '$name'; steps: ${names[*]}" >&2
        exit 2
    }
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
site=/tmp/gpu-site # where setup installs the carried wheels
# The checkout on the path whether or not pip can install it (an image's setuptools may not
# read pyproject's license = "Apache-2.0").
export PYTHONPATH="$PWD:$site${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1 TF_CPP_MIN_LOG_LEVEL=2 HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1
export python dry site out
started=$(date +%s)
failed=()
echo "step,status,seconds" > "$out/steps.csv"

# step NAME COMMAND...: run COMMAND (a function of this script or a program) for at most
# ${limit[NAME]} seconds, then 5 more after SIGTERM, with every process it starts; record the
# outcome.
step() {
    local name=$1 begin status
    shift
    if [ -n "$only" ] && [ "$name" != setup ] && [[ $only != *",$name,"* ]]; then
        return 0
    fi
    begin=$(date +%s)
    echo
    echo "== $name (at $((begin - started)) s, limit ${limit[$name]} s): $*"
    ! declare -F "$1" > /dev/null || export -f "$1"
    timeout --kill-after=5 "${limit[$name]}" bash -c '"$@"' "$name" "$@"
    status=$?
    echo "== $name: exit $status after $(($(date +%s) - begin)) s"
    echo "$name,$status,$(($(date +%s) - begin))" >> "$out/steps.csv"
    [ "$status" = 0 ] || failed+=("$name")
}

setup() {
    local status=0
    if [ "$dry" = 0 ]; then
        if [ -d .gpu-wheels ]; then
            "$python" -m pip install -q --no-index --no-deps --no-compile --upgrade \
                --target "$site" .gpu-wheels/*.whl || status=1
        else
            echo "MISSING .gpu-wheels/: run scripts/gpu-wheels.sh where pip reaches PyPI," \
                "and carry .gpu-wheels/ with the checkout"
            status=1
        fi
        "$python" -m pip install -q --no-index --no-deps --no-build-isolation -e . ||
            echo "pip install -e . failed; using PYTHONPATH=$PWD"
        command -v nvidia-smi > /dev/null && nvidia-smi
    fi
    nproc
    # Versions first, then the imports the steps need: a missing or broken one fails setup.
    "$python" - <<'EOF' || status=1
import platform
from importlib.metadata import PackageNotFoundError, version

import torch

print("python", platform.python_version(), "cuda:", torch.cuda.is_available() and torch.cuda.get_device_name(0))


def installed(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return "MISSING"


names = "torch torchvision numpy jsonschema attrs pycocotools datasets dill multiprocess pyarrow fsspec huggingface-hub transformers tokenizers"
print(", ".join(f"{name} {installed(name)}" for name in names.split()))
import datasets, jsonschema, pycocotools.coco, transformers  # noqa: E401, F401
EOF
    return $status
}

# config/paper.yaml planned through the SLURM profile with a GPU per training job (the
# resources the profile's comments show for a site's GPU partition, given on the command
# line): every training job must ask for a GPU and train on cuda.
plan() {
    local targets
    # The paper's search budgets make thousands of runs: plan every 50th (all studies and
    # workloads appear) as targets, each with its data job, instead of the whole DAG.
    mapfile -t targets < <("$python" -m experiments.study paths --configfile config/paper.yaml |
        awk 'NR % 50 == 1')
    "$python" -m snakemake -n "${targets[@]}" --workflow-profile none \
        --profile workflow/profiles/slurm --configfile config/paper.yaml \
        --set-resources train:gpu=1 train:cpus_per_task=8 train:mem_mb=64000 \
        > "$out/plan.log" 2>&1 || { cat "$out/plan.log"; return 1; }
    local jobs gpu cuda
    jobs=$(grep -cE "^(localrule|rule) train:" "$out/plan.log")
    gpu=$(grep -c "cpus_per_task=8.*gpu=1" "$out/plan.log")
    cuda=$(grep -c "^Shell command: .*experiments.run .*--device cuda" "$out/plan.log")
    echo "paper.yaml through the SLURM profile: $jobs training jobs (every 50th of" \
        "$("$python" -m experiments.study paths --configfile config/paper.yaml | wc -l))," \
        "$gpu with gpu=1, $cuda on cuda"
    [ "$jobs" -gt 0 ] && [ "$gpu" = "$jobs" ] && [ "$cuda" = "$jobs" ]
}

summary=""
total=0
for name in "${names[@]}"; do
    summary+=" $name ${limit[$name]} s,"
    total=$((total + limit[$name]))
done
echo "gpu-check: $([ "$dry" = 1 ] && echo "dry (CPU)" || echo GPU) mode," \
    "$(date -u +%FT%TZ), $(git rev-parse --short HEAD 2> /dev/null || echo "no git")"
echo "limits:${summary%,}: $total s at most"
[ "$dry" = 1 ] || echo "carried: $(find .gpu-wheels -name '*.whl' 2> /dev/null | wc -l) wheels in .gpu-wheels/"
pytest=("$python" -m pytest -p no:cacheprovider -m gpu -ra)
# Other files with GPU tests: the same selection as pytest -m gpu over tests/, without
# collecting the modules that need what the GPU machine lacks.
mapfile -t gpu_tests < <(grep -l "pytest.mark.gpu" tests/test_*.py | grep -v test_sharing_cuda.py)
step setup setup
# Alone and first: an import error elsewhere cannot stop it. A hung test fails alone.
step cuda "${pytest[@]}" --timeout 40 --junitxml "$out/cuda-tests.xml" tests/test_sharing_cuda.py
step tests "${pytest[@]}" --timeout 30 --junitxml "$out/gpu-tests.xml" "${gpu_tests[@]}"
if [ "$dry" = 1 ]; then
    step sharing "$python" -m benchmarks.gpu_sharing --device cpu --out "$out/gpu_sharing.csv" \
        --trainers 1 2 --workers 1 --arch resnet18 --batch-size 4 --image-size 32 --images 16 \
        --warmup 1 --steps 6 --trial-timeout 60
    step echo "$python" -m benchmarks.gpu_echo --device cpu --out "$out/gpu_echo.csv" \
        --arch resnet18 --batch-size 4 --image-size 32 --workers 1 --images 16 --steps 2 \
        --rounds 1 --threads 1
    step paper "$python" -m benchmarks.paper_smoke --device cpu --out "$out/paper_smoke.csv" \
        --threads 1 --num-workers 0 --batch-size 2 --steps 1 --examples 0.005 \
        --hparams '{"imagenet_resnet": {"image_size": 32},
                   "lm1b_transformer": {"vocab_size": 512, "eval_windows": 8},
                   "common_crawl_transformer": {"vocab_size": 512, "eval_windows": 8}}'
    step plan plan
else
    step sharing "$python" -m benchmarks.gpu_sharing --device cuda --out "$out/gpu_sharing.csv" \
        --images 512 --warmup 4 --steps 16 --trial-timeout 30
    step echo "$python" -m benchmarks.gpu_echo --device cuda --out "$out/gpu_echo.csv" \
        --images 512 --steps 16
    step paper "$python" -m benchmarks.paper_smoke --device cuda --out "$out/paper_smoke.csv" \
        --steps 40 --batch-size 128 --examples 0.5
fi
echo
echo "gpu-check: $(($(date +%s) - started)) s in all; steps:"
cat "$out/steps.csv"
if [ "${#failed[@]}" -gt 0 ]; then
    echo "gpu-check: FAILED: ${failed[*]}"
    exit 1
fi
echo "gpu-check: ok"
