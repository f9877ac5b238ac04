#!/usr/bin/env bash
# Create the project's virtual environment at .venv (reused when present) and install the
# project with its pinned dependencies (requirements/constraints.txt), extras `tf`, `dev` and `slurm`.
# Re-running it is cheap: it reinstalls only when pyproject.toml or the pins changed.
set -euo pipefail
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
if ! command -v "$python" >/dev/null; then
    echo "setup: $python not found; install Python >= 3.10 (apt-get install python3)" >&2
    exit 1
fi
if ! "$python" -c 'import sys; sys.exit(sys.version_info < (3, 10))'; then
    echo "setup: Python >= 3.10 is needed, $python is $("$python" --version 2>&1)" >&2
    exit 1
fi

if [ ! -x .venv/bin/python ]; then
    if ! "$python" -m venv .venv 2>/dev/null; then
        rm -rf .venv
        # Debian and Ubuntu ship venv/ensurepip in a separate package.
        if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
            apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        else
            echo "setup: 'python3 -m venv' failed; run: sudo apt-get install python3-venv" >&2
            exit 1
        fi
        "$python" -m venv .venv
    fi
fi

stamp=.venv/.installed
wanted=$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    echo "setup: installing into .venv (first time: a few minutes, torch is large)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -c requirements/constraints.txt -e ".[tf,dev,slurm]"
    echo "$wanted" > "$stamp"
fi
