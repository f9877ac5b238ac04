"""Run records: one JSON file per run, written atomically and valid against
``run_contract/schemas/run_record.schema.json``."""

from __future__ import annotations

import contextlib
import json
import os
import platform
import subprocess
from functools import cache
from importlib import metadata
from pathlib import Path
from typing import Any

from run_contract.files import atomic_write

__all__ = [
    "SCHEMA_PATH",
    "floored",
    "git_revision",
    "load_record",
    "load_schema",
    "machine",
    "package_versions",
    "validate",
    "write_json_atomically",
    "write_record",
]

SCHEMA_PATH = Path(__file__).parent / "schemas" / "run_record.schema.json"
_PACKAGES = ("echo-share-suite", "torch", "torchvision", "numpy")


@cache
def load_schema() -> dict[str, Any]:
    """The JSON Schema of run records."""
    return json.loads(SCHEMA_PATH.read_text())


def validate(record: dict[str, Any]) -> None:
    """Check ``record`` against the run-record schema.

    Raises:
        jsonschema.ValidationError: The record does not match; the message names the field.
    """
    import jsonschema

    jsonschema.validate(record, load_schema())


@cache
def _validator() -> Any:
    import jsonschema

    schema = load_schema()
    return jsonschema.validators.validator_for(schema)(schema)


def load_record(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read one run record and check it against the run-record schema.

    Args:
        path: The record's JSON file.

    Returns:
        The record as a dict.

    Raises:
        ValueError: The file is not JSON or breaks the schema; the message names the file
            and the failing field.
    """
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"run record {path} is not valid JSON: {error}") from None
    import jsonschema

    error = jsonschema.exceptions.best_match(_validator().iter_errors(record))
    if error is not None:
        field = "/".join(str(part) for part in error.absolute_path) or "(top level)"
        raise ValueError(
            f"run record {path} does not match {SCHEMA_PATH.name}: field {field}: {error.message}"
        )
    return record


def floored(record: dict[str, Any]) -> int | None:
    """The first evaluation's fresh examples where a record's refined crossing is floored
    there: it reached the target at its first evaluation, and the bisection that located the
    crossing ended at that evaluation without trying every kept model before it (a record
    from before ``refined.below_first``); else None."""
    refined, curve = record.get("refined"), record.get("eval_curve", [])
    if not refined or not record.get("reached") or len(curve) < 2 or refined.get("below_first"):
        return None
    first = curve[1]["fresh_examples"]
    if refined["fresh_examples_to_target"] == first and refined["every_fresh"] < first:
        return first
    return None


def package_versions() -> dict[str, str | None]:
    """Versions of Python and the packages that shape a result (None: not installed)."""
    versions: dict[str, str | None] = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


_VECTOR_ISAS = (
    ("AVX512", {"avx512f", "avx512bw", "avx512vl", "avx512dq"}),
    ("AVX2", {"avx2", "fma"}),
    ("AVX", {"avx"}),
    ("SSE4_2", {"sse4_2"}),
)
"""The vector instruction sets torch's kernels distinguish, widest first, with the
/proc/cpuinfo flags each needs."""


def machine() -> dict[str, Any]:
    """The CPU a run trained on: model name, its widest vector instruction set, the one
    torch's CPU kernels use, CPU count, platform.

    Records name it because floating point differs between CPU types unless the numerics
    mode pins it (`run_contract.numerics`).
    """
    import torch

    model, flags = None, set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and model is None:
                model = value.strip()
            elif key.strip() == "flags" and not flags:
                flags = set(value.split())
    capability = getattr(torch.backends.cpu, "get_cpu_capability", lambda: None)()
    widest = next((name for name, needs in _VECTOR_ISAS if needs <= flags), None)
    return {
        "cpu_model": model or platform.processor() or None,
        "cpu_vector_isa": widest,
        "cpu_capability": capability,
        "cpus": os.cpu_count() or 1,
        "platform": platform.platform(),
    }


def git_revision(path: Path = Path(__file__).parent) -> str | None:
    """The commit checked out at ``path``, with ``-dirty`` when tracked files changed; None
    outside a git checkout or without git."""
    try:
        run = {"cwd": path, "capture_output": True, "text": True, "timeout": 10, "check": True}
        commit = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()
        changes = subprocess.run(["git", "status", "--porcelain", "-uno"], **run).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return commit + ("-dirty" if changes.strip() else "")


def write_json_atomically(data: Any, path: str | Path) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (`run_contract.files.atomic_write`), so a
    killed process leaves either no file or a complete one; the folder is created when missing."""

    def dump(temporary: Path) -> None:
        with temporary.open("w") as f:
            json.dump(data, f, indent=1, sort_keys=True)
            f.write("\n")

    return atomic_write(path, dump)


def write_record(record: dict[str, Any], path: str | Path) -> Path:
    """Validate ``record`` and write it to ``path`` atomically (temporary file + rename), so a
    killed run leaves either no record or a complete one.

    Args:
        record: The run record.
        path: Destination file; its folder is created when missing.

    Returns:
        The destination path.

    Raises:
        jsonschema.ValidationError: The record does not match the schema (nothing is written).
    """
    validate(record)
    return write_json_atomically(record, path)
