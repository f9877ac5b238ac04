"""Turns run records into tidy tables and the papers' figures.

* `analysis.records`: validate run records against the run-record schema and aggregate them
  into a runs table and an eval-curves table (``aggregate``, ``write_tables``).
* `analysis.time_to_target`: time to target relative to the no-echo baseline
  (``relative_to_baseline``) and its summary over seeds (``summarize``).
* `analysis.reference`: what the papers report (``load_reference``, ``for_figure``).
* `analysis.figures`: one module per figure, registered with ``@figure`` (``names``, ``get``),
  and ``save``.
* `analysis.compare`: do two runs of a study agree, timing aside (``compare_record_dirs``)?
* `analysis.claims`: one module per claim of the papers, each part decided by one paired sign
  test (``claims_table``); `analysis.calibration`: each rule's false-positive rate and power
  from a study's own records (``calibrate``).
* ``python -m analysis``: the command line (``aggregate``, ``figure``, ``summary``,
  ``claims``, ``calibrate``, ``cost``, ``compare``, ...).

It reads records through the schema file and benchmark CSVs only: it imports neither
``experiments``, ``echo``, ``sharing`` nor ``benchmarks``.

Importing it sets the numerics mode's environment (`run_contract.numerics.apply`), before
numpy is imported where it comes first (``python -m analysis``): numpy's SIMD loops then
sum alike on every x86-64 CPU, so tables and figures come out byte-identical from a command
run by hand and from the workflow (whose processes inherit the mode from ``experiments``).
"""

from run_contract import numerics

numerics.apply()  # before the imports below import numpy

from analysis.records import aggregate, load_record, read_curves, read_runs, write_tables  # noqa: E402
from analysis.reference import for_figure, load_reference  # noqa: E402
from analysis.time_to_target import relative_to_baseline, summarize  # noqa: E402

__all__ = [
    "aggregate",
    "for_figure",
    "load_record",
    "load_reference",
    "read_curves",
    "read_runs",
    "relative_to_baseline",
    "summarize",
    "write_tables",
]
