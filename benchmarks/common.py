"""Helpers shared by the benchmarks: atomic CSV output, a plain-text table, and the options
of a benchmark the workflow runs, read from its section of the workflow config's schema."""

from __future__ import annotations

import argparse
import copy
import csv
import functools
import os
import platform
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from run_contract.files import atomic_write

__all__ = [
    "add_schema_options",
    "check_schema_options",
    "finish_trial",
    "join_repeats",
    "machine_note",
    "print_table",
    "schema_section",
    "write_csv",
]

_TYPES = {"integer": int, "number": float, "string": str}


def write_csv(rows: Sequence[dict], path: str | Path) -> None:
    """Write ``rows`` (dicts with the same keys) to ``path`` atomically: a killed run leaves
    the previous file or none, never half a file (`run_contract.files.atomic_write`)."""

    def dump(temporary: Path) -> None:
        with temporary.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
            writer.writeheader()
            writer.writerows(rows)

    atomic_write(path, dump)


def join_repeats(values: Sequence[float]) -> str:
    """One value per repeat (a round, a trial repeated) as one CSV cell, ``;``-separated, in
    the order they ran: ``"96.5;97.1;95.8"``. Repeat ``i`` of one case ran beside repeat ``i``
    of every other case, so the claims (`analysis.claims.benchmark`) pair them."""
    return ";".join(f"{float(value):.6g}" for value in values)


def print_table(rows: Sequence[dict], columns: Sequence[str]) -> None:
    """Print ``columns`` of ``rows`` as an aligned table (floats with 3 significant digits)."""

    def cell(value: object) -> str:
        return f"{value:.3g}" if isinstance(value, float) else str(value)

    cells = [[cell(row[c]) for c in columns] for row in rows]
    widths = [max(len(c), *(len(r[i]) for r in cells)) for i, c in enumerate(columns)]
    print("  ".join(c.rjust(w) for c, w in zip(columns, widths, strict=True)))
    for r in cells:
        print("  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)))


def machine_note() -> str:
    """One line naming the machine a result was measured on."""
    return f"{platform.machine()}, {os.cpu_count()} CPUs, Python {platform.python_version()}"


def finish_trial(processes: Sequence, helpers: Sequence, timeout_s: float) -> None:
    """Wait for a trial's ``processes`` (``multiprocessing.Process``) for ``timeout_s`` in all,
    killing any still running then; then stop its ``helpers`` (a producer, a server):
    SIGTERM, and SIGKILL for one still alive 10 s later."""
    deadline = time.monotonic() + timeout_s
    for process in processes:
        process.join(max(0.1, deadline - time.monotonic()))
        if process.is_alive():
            process.kill()
            process.join()
    for helper in helpers:
        helper.terminate()
        helper.join(10)
        if helper.is_alive():
            helper.kill()
            helper.join()


@functools.cache
def _schema() -> dict[str, Any]:
    import yaml

    from experiments.study import SCHEMA

    return yaml.safe_load(SCHEMA.read_text())


def schema_section(section: str) -> dict[str, Any]:
    """The JSON Schema of section ``section`` (e.g. ``"sharing"``) of the workflow config:
    ``workflow/schemas/config.schema.yaml``, which states the options of the benchmark the
    workflow runs from that section, their defaults and descriptions.

    Args:
        section (str): A top-level key of the workflow config.

    Returns:
        dict[str, Any]: Its schema (a copy); ``["properties"]`` maps each option to its own.
    """
    return copy.deepcopy(_schema()["properties"][section])


def add_schema_options(parser: argparse.ArgumentParser, section: str) -> None:
    """Add one option to ``parser`` per option of ``section`` (`schema_section`): ``--ts-batches``
    for ``ts_batches``, with the schema's type (a list: several values; a boolean:
    ``--touch``/``--no-touch``), choices, default and description.

    Args:
        parser (argparse.ArgumentParser): The benchmark's parser.
        section (str): The workflow config's section the benchmark is run from.
    """
    for name, option in schema_section(section)["properties"].items():
        help = option["description"].replace("%", "%%") + " (default: %(default)s)"
        kwargs: dict[str, Any] = {"default": option["default"], "help": help}
        values = option["items"] if option.get("type") == "array" else option
        if values.get("type") == "boolean":
            kwargs["action"] = argparse.BooleanOptionalAction
        elif "enum" in values:
            kwargs["choices"] = values["enum"]
        else:
            kwargs["type"] = _TYPES[values["type"]]
        if values is not option:
            kwargs["nargs"] = "+"
        parser.add_argument("--" + name.replace("_", "-"), **kwargs)


def check_schema_options(section: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """``options`` with the defaults of ``section`` (`schema_section`) filled in, checked
    against its schema.

    Args:
        section (str): The workflow config's section the benchmark is run from.
        options (Mapping[str, Any]): Some of its options (the workflow passes them all).

    Returns:
        dict[str, Any]: Every option of the section.

    Raises:
        ValueError: ``SECTION.KEY: what is wrong``, e.g. ``sharing.batches: 0 is less than the
            minimum of 1``, or an option the section does not have.
    """
    import jsonschema

    schema = schema_section(section)
    defaults = {name: option["default"] for name, option in schema["properties"].items()}
    completed = {**copy.deepcopy(defaults), **options}
    validator = jsonschema.validators.validator_for(_schema())(schema)
    error = jsonschema.exceptions.best_match(validator.iter_errors(completed))
    if error is not None:
        key = ".".join(str(part) for part in (section, *error.absolute_path))
        raise ValueError(f"{key}: {error.message}")
    return completed
