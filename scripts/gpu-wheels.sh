#!/usr/bin/env bash
# Download the wheels scripts/gpu-check.sh needs on a CUDA machine that reaches no package
# registry (DESIGN.md: its image has Python 3.12, torch, torchvision, numpy, matplotlib,
# attrs, pytest... but not these), for CPython 3.12 on manylinux x86-64, at the versions
# requirements/constraints.txt pins for CI:
#   jsonschema and the packages it needs (run records are validated), pycocotools (COCO mAP
#   and the COCO reader), datasets with dill and multiprocess (the language models' corpora
#   are read through it).
# pyzmq (TensorSocket's transport, benchmarks/sharing.py only) and snakemake (the workflow;
# its dry plans run in `scripts/gpu-check.sh --dry` here) are not needed there.
#
#   scripts/gpu-wheels.sh [DIR]      # default .gpu-wheels (ignored by git); prints its size
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-.gpu-wheels}
python=${PYTHON:-.venv/bin/python}
[ -x "$python" ] || python=python3
# Each listed by name with --no-deps: the closure is this list (their other requirements,
# e.g. attrs, typing-extensions, numpy, pyarrow, fsspec, huggingface-hub and xxhash, are in
# the image; scripts/gpu-check.sh logs their versions), and pip there installs it without
# resolving anything.
wheels=(jsonschema jsonschema-specifications referencing rpds-py pycocotools datasets dill multiprocess)
rm -rf "$dir"
mkdir -p "$dir"
"$python" -m pip download --quiet --no-deps --only-binary :all: --implementation cp \
    --python-version 3.12 --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 -c requirements/constraints.txt -d "$dir" "${wheels[@]}"
count=$(find "$dir" -name '*.whl' | wc -l)
[ "$count" = "${#wheels[@]}" ] || { ls "$dir"; echo "gpu-wheels: expected ${#wheels[@]} wheels" >&2; exit 1; }
bytes=$(du -sb "$dir" | cut -f1)
limit=$((64 << 20))
echo "gpu-wheels: $count wheels, $((bytes / 1024)) KiB in $dir"
ls "$dir"
if [ "$bytes" -ge "$limit" ]; then
    echo "gpu-wheels: over the 64 MiB a device call carries" >&2
    exit 1
fi
