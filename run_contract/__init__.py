"""The run contract: what a training run is and what its record says, shared by everything
that trains runs, plans them or reads their records.

* `run_contract.identity`: a run's identity, declared once (`RunSpec`, and `RunOptions` for
  how it executes): its command-line options, record path, config hash and record check.
  Built on `run_contract.fields` (the field table's parts) and `run_contract.cli` (the
  command-line derivation).
* `run_contract.record`: the run-record schema (``schemas/run_record.schema.json``), reading
  and validating records, and writing them atomically.
* `run_contract.numerics`: the numerics mode a run computes in, and its stamp on a record.
* `run_contract.files`: the one atomic writer every result goes through.

A leaf package: it imports nothing of ``experiments``, ``analysis``, ``benchmarks`` or the
workflow (only `echo.points`, for the insertion points' names), and no torch at import.
"""
