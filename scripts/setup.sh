#!/usr/bin/env bash
# Install the system packages the suite needs (requirements/debian.txt: the data packages and
# the rest) when they are missing, then create the project's virtual environment at .venv
# (reused when present) and install the project with its pinned dependencies
# (requirements/constraints.txt), extras `tf`, `dev`, `slurm`, `bench` and `docs`.
# System packages are installed as root or through `sudo -n`; otherwise setup stops with the
# one command to run. Re-running it is cheap: it installs only what is missing or changed.
set -euo pipefail
cd "$(dirname "$0")/.."

# One apt-get for everything missing (python3-venv is added below when venv fails).
apt_install() {
    local sudo=""
    if [ "$(id -u)" != 0 ]; then
        if sudo -n true 2>/dev/null; then sudo="sudo -n"; else
            echo "setup: missing system packages; run: sudo apt-get install -y $*" >&2
            exit 1
        fi
    fi
    if ! command -v apt-get >/dev/null; then
        echo "setup: missing system packages and no apt-get: install $* yourself" >&2
        exit 1
    fi
    echo "setup: installing system packages: $*"
    $sudo apt-get install -y -qq "$@" >/dev/null 2>&1 ||
        { $sudo apt-get update -qq && $sudo apt-get install -y -qq "$@" >/dev/null; }
}

missing=()
while read -r package probe; do
    case "$package" in "" | "#"*) continue ;; esac
    if [ "${probe#/}" != "$probe" ]; then [ -e "$probe" ] || missing+=("$package")
    else command -v "$probe" >/dev/null || missing+=("$package"); fi
done < requirements/debian.txt
if [ "${#missing[@]}" -gt 0 ]; then apt_install "${missing[@]}"; fi

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
        apt_install python3-venv # Debian and Ubuntu ship venv/ensurepip in a separate package
        "$python" -m venv .venv
    fi
fi

stamp=.venv/.installed
wanted=$(cat pyproject.toml requirements/constraints.txt | sha256sum | cut -d' ' -f1)
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$wanted" ]; then
    echo "setup: installing into .venv (first time: a few minutes, torch is large)"
    .venv/bin/python -m pip install --quiet --disable-pip-version-check \
        -c requirements/constraints.txt -e ".[tf,dev,slurm,bench,docs,ray]"
    echo "$wanted" > "$stamp"
fi
