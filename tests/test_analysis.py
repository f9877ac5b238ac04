"""`analysis`: run records into tidy tables, time to target relative to the baseline, the
papers' reference values, and the package boundary. ``synthetic_study`` and ``make_record``
also feed `test_analysis_figures.py`."""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from analysis import aggregate, load_record, read_runs, relative_to_baseline, summarize
from analysis._io import atomic_write
from analysis.records import CURVE_COLUMNS, RUN_COLUMNS, write_tables
from analysis.reference import KINDS, REFERENCE_COLUMNS, describe, for_figure, load_reference

CE_START = 7.0  # a language model's cross-entropy before training


def make_record(
    workload: str = "cifar10_resnet",
    echo_point: str = "none",
    echo_factor: float = 1.0,
    seed: int = 0,
    fresh_to_target: int | None = 2000,
    *,
    batch_size: int = 32,
    shuffle_buffer: int = 0,
    latency_ms: float = 0.0,
    R: float | None = 0.5,
    stop_at_target: bool | None = None,
    max_fresh: int = 4000,
    eval_every: int = 200,
    s_per_fresh: float = 0.001,
) -> dict:
    """A schema-valid run record whose eval curve crosses the target at ``fresh_to_target``
    (None: never); image workloads maximize accuracy, ``lm*`` ones minimize cross-entropy."""
    direction, target = ("min", 4.0) if workload.startswith("lm") else ("max", 0.8)
    reached = fresh_to_target is not None
    stops = stop_at_target is not False and reached
    final = fresh_to_target if stops else max_fresh
    progress_end = fresh_to_target if reached else max_fresh / 0.9

    def metric(fresh: int) -> float:  # linear to the target, then levelling off
        done = fresh / progress_end
        if direction == "max":
            return target * done if done <= 1 else target + 0.1 * (1 - 1 / done)
        return CE_START - (CE_START - target) * done if done <= 1 else target - 1 + 1 / done

    steps_per_fresh = echo_factor / batch_size
    curve = [
        {"fresh_examples": f, "steps": round(f * steps_per_fresh), "wall_s": f * s_per_fresh,
         "metric": metric(f), "metrics": {"loss": 1.0}}
        for f in range(0, final + 1, eval_every)
    ]  # fmt: skip
    experiment = {
        "workload": workload,
        "scale": "cpu",
        "echo_point": echo_point,
        "echo_factor": float(echo_factor),
        "shuffle_buffer": shuffle_buffer,
        "seed": seed,
        "batch_size": batch_size,
        "hparams": {"batch_size": batch_size, "lr": 0.1},
        "budget": {"max_fresh": max_fresh, "eval_every_fresh": eval_every},
        "upstream": {"latency_ms": latency_ms, "latency_per": "example", "cpu_ms": 0.0},
        "num_workers": 0,
    }
    if stop_at_target is not None:
        experiment["stop_at_target"] = stop_at_target
    at_target = {
        "fresh_examples_to_target": None,
        "steps_to_target": None,
        "wall_s_to_target": None,
    }
    if reached:
        at_target = {
            "fresh_examples_to_target": fresh_to_target,
            "steps_to_target": round(fresh_to_target * steps_per_fresh),
            "wall_s_to_target": fresh_to_target * s_per_fresh,
        }
    digest = hashlib.sha256(json.dumps(experiment, sort_keys=True).encode()).hexdigest()[:16]
    return {
        "schema_version": 1,
        **experiment,
        "target": {
            "metric": "accuracy" if direction == "max" else "cross_entropy",
            "value": target,
            "direction": direction,
        },
        "reached": reached,
        **at_target,
        "eval_curve": curve,
        "final": {
            "fresh_examples": final,
            "steps": curve[-1]["steps"],
            "wall_s": final * s_per_fresh,
        },
        "timing": {
            "upstream_s_per_batch": None if R is None else 0.01 * R,
            "downstream_s_per_step": 0.01,
            "wait_s_per_step": 0.0,
            "R": R,
            "fresh_batches": 10,
            "eval_s": 1.0,
            "total_s": 10.0,
        },
        "device": "cpu",
        "threads": 1,
        "versions": {"python": "3.11", "torch": "2.14"},
        "git_revision": None,
        "config_hash": digest,
    }


def tuned_record(
    echo_point: str, factor: float, repetition: int, trial: int, fresh: int | None, **kwargs
) -> dict:
    """A search trial's record (``fresh`` None: it missed the target within its cap)."""
    record = make_record(
        kwargs.pop("workload", "cifar10_resnet"),
        echo_point,
        factor,
        seed=repetition * 8 + trial,
        fresh_to_target=fresh,
        **kwargs,
    )
    record["search"] = {"repetition": repetition, "trial": trial}
    record["budget"]["cap"] = 1.5
    record["budget"]["resolution"] = 64
    record["hparams"]["lr"] = 0.01 * (trial + 1)
    if fresh is not None:
        record["refined"] = {
            "every_fresh": 50,
            "fresh_examples_to_target": fresh - 50,
            "steps_to_target": record["steps_to_target"],
            "wall_s_to_target": record["wall_s_to_target"],
            "metric": record["eval_curve"][-1]["metric"],
            "evaluations": 2,
        }
    else:
        record["refined"] = {
            "every_fresh": 50,
            "fresh_examples_to_target": None,
            "steps_to_target": None,
            "wall_s_to_target": None,
            "metric": None,
            "evaluations": 0,
        }
    identity = {k: v for k, v in record.items() if k not in ("config_hash", "eval_curve")}
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode())
    record["config_hash"] = digest.hexdigest()[:16]
    return record


def write_record(folder: Path, record: dict) -> Path:
    path = folder / f"{record['config_hash']}.json"
    path.write_text(json.dumps(record))
    return path


_INSERTION = {"after_batch": 1400, "after_augment": 1200, "before_augment": 1600}
_FACTORS = {2: 1300, 4: 900, 8: 700, 16: 600}


def _configs() -> dict[str, list[dict]]:
    """Study -> keyword arguments of ``make_record`` (seeds added by the caller)."""
    cifar, lm = "cifar10_resnet", "lm1b_transformer"
    no_harm = [
        {"workload": w, "echo_point": p, "echo_factor": e, "stop_at_target": False,
         "fresh_to_target": f}
        for w in (cifar, lm)
        for p, e, f in (("none", 1, 2000), ("after_batch", 2, 1400), ("after_augment", 2, 1200))
    ]  # fmt: skip
    return {
        "insertion": [{"workload": cifar}, {"workload": lm}]
        + [
            {"workload": cifar, "echo_point": p, "echo_factor": 2, "fresh_to_target": f}
            for p, f in _INSERTION.items()
        ]
        + [
            {"workload": lm, "echo_point": p, "echo_factor": 2, "fresh_to_target": f}
            for p, f in _INSERTION.items()
            if p != "before_augment"
        ],
        "echo_factor": [
            {"workload": cifar, "echo_point": p, "echo_factor": e, "fresh_to_target": f}
            for p in ("after_batch", "after_augment")
            for e, f in _FACTORS.items()
        ],
        "wall_time": [{"latency_ms": 5.0, "R": 4.0}]
        + [
            {
                "latency_ms": 5.0,
                "R": 4.0,
                "echo_point": "after_batch",
                "echo_factor": e,
                "fresh_to_target": f,
                "s_per_fresh": 2.2 * max(1 / e, 1 / 4) / f,
            }
            for e, f in _FACTORS.items()
        ],
        "batch_size": [
            {"batch_size": b, "echo_point": p, "echo_factor": e, "fresh_to_target": f * b // 32}
            for b in (32, 64, 128)
            for p, e, f in (("none", 1, 2000), ("after_batch", 2, 1400), ("after_augment", 2, 1200))
        ],
        "shuffle_buffer": [{}]
        + [
            {
                "echo_point": "after_augment",
                "echo_factor": 2,
                "shuffle_buffer": b,
                "fresh_to_target": f,
            }
            for b, f in ((0, 1600), (16, 1400), (256, 1200))
        ],
        "no_harm": no_harm,
    }


def synthetic_study(folder: Path) -> dict[str, list[Path]]:
    """Write records for every study (three seeds each; seed 2 of e = 16 misses the target;
    the insertion baselines are reused by the echo_factor study) and return study -> paths."""
    studies: dict[str, list[Path]] = {}
    for study, configs in _configs().items():
        for config in configs:
            for seed in range(3):
                fresh = config.get("fresh_to_target", 2000)
                if config.get("echo_factor") == 16 and seed == 2:
                    fresh = None
                elif fresh is not None:
                    fresh += 200 * (seed - 1)  # seeds spread around the config's value
                record = make_record(seed=seed, **{**config, "fresh_to_target": fresh})
                studies.setdefault(study, []).append(write_record(folder, record))
    studies["echo_factor"] += studies["insertion"][:3]  # the CIFAR baseline's seeds
    return studies


@pytest.fixture(scope="session")
def tables(tmp_path_factory):
    folder = tmp_path_factory.mktemp("records")
    studies = synthetic_study(folder)
    return studies, *aggregate(studies)


def test_aggregate_gives_one_row_per_study_and_record(tables):
    studies, runs, curves = tables
    assert list(runs.columns) == RUN_COLUMNS
    assert list(curves.columns) == CURVE_COLUMNS
    assert len(runs) == sum(len(paths) for paths in studies.values())
    assert not runs.duplicated(["study", "record"]).any()
    assert set(runs["study"]) == set(studies)
    one = runs.iloc[0]
    assert len(curves[(curves["study"] == one["study"]) & (curves["record"] == one["record"])]) > 1


def test_a_record_in_two_studies_gives_a_row_in_each(tmp_path):
    path = write_record(tmp_path, make_record())
    runs, curves = aggregate({"insertion": [path], "echo_factor": [path]})
    assert sorted(runs["study"]) == ["echo_factor", "insertion"]
    assert set(curves.groupby("study").size()) == {len(make_record()["eval_curve"])}


def test_optional_fields_read_as_their_defaults_and_best_metric_follows_direction(tmp_path):
    lm = make_record("lm1b_transformer", fresh_to_target=1000, stop_at_target=False)
    paths = [write_record(tmp_path, make_record()), write_record(tmp_path, lm)]
    runs, _ = aggregate({"s": paths})
    assert runs["stop_at_target"].tolist() == [True, False]
    assert runs["consume"].tolist() == ["", ""]
    assert runs.loc[0, "best_metric"] == pytest.approx(0.8)  # stops at the target
    best_lm = min(row["metric"] for row in lm["eval_curve"])
    assert runs.loc[1, "best_metric"] == pytest.approx(best_lm) and best_lm < 4.0


def test_a_record_breaking_the_schema_names_the_file_and_field(tmp_path):
    record = make_record()
    record["echo_point"] = "after_everything"
    bad = write_record(tmp_path, record)
    with pytest.raises(ValueError, match=rf"{bad.name}.*echo_point"):
        aggregate({"insertion": [write_record(tmp_path, make_record(seed=5)), bad]})
    del record["final"]
    with pytest.raises(ValueError, match=rf"{bad.name}.*final"):
        load_record(write_record(tmp_path, record))
    (tmp_path / "cut.json").write_text("{")
    with pytest.raises(ValueError, match=r"cut\.json"):
        load_record(tmp_path / "cut.json")


def test_tables_round_trip_through_csv(tables, tmp_path):
    _, runs, curves = tables
    write_tables(runs, curves, tmp_path / "runs.csv", tmp_path / "out" / "curves.csv")
    back = read_runs(tmp_path / "runs.csv")
    pd.testing.assert_frame_equal(back, runs, check_dtype=False)
    assert back["consume"].tolist() == runs["consume"].tolist()
    assert back["reached"].dtype == bool
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["curves.csv", "out", "runs.csv"]


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_written_files_get_the_users_umask_not_owner_only(tables, tmp_path, umask, mode):
    _, runs, curves = tables
    previous = os.umask(umask)
    from benchmarks.common import write_csv
    from run_contract.record import write_json_atomically

    try:
        write_tables(runs, curves, tmp_path / "runs.csv", tmp_path / "curves.csv")
        atomic_write(tmp_path / "note.txt", lambda temporary: temporary.write_text("x"))
        write_json_atomically({"a": 1}, tmp_path / "record.json")  # run records' writer
        write_csv([{"a": 1}], tmp_path / "bench.csv")  # the benchmarks'
    finally:
        os.umask(previous)
    names = ["bench.csv", "curves.csv", "note.txt", "record.json", "runs.csv"]
    for name in names:
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == mode, name
    assert sorted(p.name for p in tmp_path.iterdir()) == names


def _runs(records: list[dict], tmp_path: Path, study: str = "s") -> pd.DataFrame:
    return aggregate({study: [write_record(tmp_path, r) for r in records]})[0]


def test_relative_values_divide_by_the_median_of_the_same_baseline_group(tmp_path):
    records = [make_record(seed=s, fresh_to_target=f) for s, f in enumerate((1800, 2000, 3000))]
    records += [make_record(seed=s, batch_size=64, fresh_to_target=4000) for s in range(2)]
    records += [
        make_record("cifar10_resnet", "after_batch", 2, seed=0, fresh_to_target=1000),
        make_record(
            "cifar10_resnet",
            "after_batch",
            2,
            seed=0,
            batch_size=64,
            fresh_to_target=1000,
            shuffle_buffer=8,
        ),
    ]
    relative = relative_to_baseline(_runs(records, tmp_path))
    echo = relative[relative["echo_point"] == "after_batch"].set_index("batch_size")
    assert echo.loc[32, "fresh_rel"] == pytest.approx(1000 / 2000)  # median, not mean
    assert echo.loc[64, "fresh_rel"] == pytest.approx(1000 / 4000)  # its own batch size
    assert echo.loc[32, "wall_rel"] == pytest.approx(0.5)
    assert echo.loc[32, "steps_rel"] == pytest.approx((1000 * 2 / 32) / (2000 / 32), rel=0.02)
    assert echo.loc[32, "baseline_runs"] == 3 and echo.loc[64, "baseline_runs"] == 2


def test_baselines_are_per_study(tmp_path):
    first = _runs(
        [
            make_record(fresh_to_target=2000),
            make_record(echo_point="after_batch", echo_factor=2, fresh_to_target=1000),
        ],
        tmp_path,
        "a",
    )
    second = _runs([make_record(seed=1, fresh_to_target=1000)], tmp_path, "b")
    relative = relative_to_baseline(pd.concat([first, second]))
    assert relative.loc[relative["echo_point"] == "after_batch", "fresh_rel"].item() == 0.5


def test_unreached_runs_are_counted_but_left_out_of_the_medians(tmp_path):
    echo = dict(echo_point="after_augment", echo_factor=4)
    records = [
        make_record(seed=0, fresh_to_target=2000),
        make_record(seed=1, fresh_to_target=None),
        make_record(seed=0, fresh_to_target=800, **echo),
        make_record(seed=1, fresh_to_target=1200, **echo),
        make_record(seed=2, fresh_to_target=None, **echo),
        make_record(seed=0, fresh_to_target=None, echo_point="after_batch", echo_factor=4),
    ]
    relative = relative_to_baseline(_runs(records, tmp_path))
    assert relative["fresh_rel"].isna().sum() == 3
    summary = summarize(relative).set_index("echo_point")
    assert summary.loc["none", "n_runs"] == 2 and summary.loc["none", "n_reached"] == 1
    assert summary.loc["after_augment", ["n_runs", "n_reached"]].tolist() == [3, 2]
    assert summary.loc["after_augment", "fresh_rel_median"] == pytest.approx(0.5)
    assert summary.loc["after_augment", "fresh_rel_min"] == pytest.approx(0.4)
    assert summary.loc["after_augment", "fresh_rel_max"] == pytest.approx(0.6)
    assert math.isnan(summary.loc["after_batch", "fresh_rel_median"])
    assert summary.loc["after_augment", "R_median"] == pytest.approx(0.5)  # over all runs


def test_a_baseline_that_never_reached_the_target_gives_nan(tmp_path):
    records = [
        make_record(fresh_to_target=None),
        make_record(echo_point="after_batch", echo_factor=2, fresh_to_target=900),
    ]
    relative = relative_to_baseline(_runs(records, tmp_path))
    assert relative["fresh_rel"].isna().all()
    assert relative["baseline_reached"].tolist() == [0, 0]


def _write_reference(path: Path, rows: list[dict]) -> Path:
    table = pd.DataFrame(rows, columns=REFERENCE_COLUMNS)
    table.to_csv(path, index=False)
    return path


def test_reference_may_be_empty_and_filters_by_figure(tmp_path):
    empty = load_reference(_write_reference(tmp_path / "empty.csv", []))
    assert list(empty.columns) == REFERENCE_COLUMNS and empty.empty
    assert for_figure(empty, "no_harm").empty and for_figure(None, "no_harm").empty
    rows = [
        {
            "paper": "Choi et al. 2019",
            "our_figure": "fresh_vs_echo_factor",
            "workload": "cifar10_resnet",
            "echo_point": "after_batch",
            "echo_factor": 4,
            "kind": "number",
            "quantity": "fresh_rel",
            "value": 0.4,
        },
        {
            "paper": "Robroek et al. 2024",
            "our_figure": "sharing_throughput",
            "consumers": 4,
            "kind": "number",
            "quantity": "per_consumer_vs_own",
            "value": 2.0,
            "unit": "x",
        },
        {"our_figure": "fresh_vs_echo_factor", "kind": "qualitative", "quantity": "claim_x"},
        {"our_figure": "fresh_vs_echo_factor", "kind": "protocol", "quantity": "batch_size"},
        {"kind": "protocol", "quantity": "optimizer", "note": "Nesterov momentum."},
    ]
    reference = load_reference(_write_reference(tmp_path / "papers.csv", rows))
    picked = for_figure(reference, "fresh_vs_echo_factor")  # protocol rows are never drawn
    assert picked["kind"].tolist() == ["number", "qualitative"]
    assert picked["value"].tolist()[0] == 0.4 and picked["echo_factor"].tolist()[0] == 4.0
    assert picked["batch_size"].isna().all() and picked["note"].tolist() == ["", ""]
    assert for_figure(reference, "figure_one").empty  # the registry checks the names


def test_reference_with_text_in_a_number_column_is_an_error(tmp_path):
    row = {"our_figure": "no_harm", "kind": "number", "value": "~3"}
    path = _write_reference(tmp_path / "papers.csv", [row])
    with pytest.raises(ValueError, match=r"'value' in data row 1"):
        load_reference(path)
    pd.DataFrame({"paper": ["x"]}).to_csv(tmp_path / "short.csv", index=False)
    with pytest.raises(ValueError, match="lacks the columns"):
        load_reference(tmp_path / "short.csv")


@pytest.mark.parametrize("kind", ["claim", "", "Number"])
def test_reference_with_an_unknown_kind_is_an_error_naming_the_row(tmp_path, kind):
    rows = [{"kind": "number", "quantity": "speedup", "value": 2}, {"kind": kind, "value": 1}]
    path = _write_reference(tmp_path / "papers.csv", rows)
    message = rf"'kind' in data row 2 is '{kind}'; expected one of \['number', 'qualitative'"
    with pytest.raises(ValueError, match=message):
        load_reference(path)


def test_reference_number_needs_a_value_and_a_claim_has_none(tmp_path):
    rows = [{"kind": "qualitative", "note": "Echoing helps."}, {"kind": "number", "unit": "x"}]
    with pytest.raises(ValueError, match=r"'value' in data row 2 \(kind 'number'\) is empty"):
        load_reference(_write_reference(tmp_path / "number.csv", rows))
    rows = [{"kind": "qualitative", "value": 3.25}]
    with pytest.raises(ValueError, match=r"data row 1 \(kind 'qualitative'\) is 3.25"):
        load_reference(_write_reference(tmp_path / "claim.csv", rows))


def test_describe_reads_a_claim_and_a_protocol_fact_without_nan(tmp_path):
    claim = {"paper": "data_echoing", "location": "Section 3", "workload": "imagenet_resnet"}
    claim |= {"kind": "qualitative", "quantity": "claim_x", "note": "Echoing helps."}
    optimizer = {"paper": "data_echoing", "workload": "coco_ssd", "kind": "protocol"}
    optimizer |= {"quantity": "optimizer", "note": "Momentum SGD."}
    trials = {"paper": "data_echoing", "kind": "protocol", "quantity": "search_trials"}
    trials |= {"value": 50, "unit": "trials"}
    path = _write_reference(tmp_path / "papers.csv", [claim, optimizer, trials])
    lines = [describe(row) for _, row in load_reference(path).iterrows()]
    assert lines == [
        "data_echoing, Section 3 (imagenet_resnet): Echoing helps.",
        "data_echoing (coco_ssd): optimizer: Momentum SGD.",
        "data_echoing: search_trials = 50 trials",
    ]


def test_the_committed_reference_loads_with_every_kind_and_names_only_registered_figures():
    from analysis.figures import names

    reference = load_reference(Path(__file__).parents[1] / "paper_figures/reference/papers.csv")
    assert set(reference["kind"]) == set(KINDS)
    named = reference["our_figure"] != ""
    assert set(reference.loc[named, "our_figure"]) <= set(names())
    assert named[reference["kind"] == "number"].all()  # a number is drawn beside a figure
    claims = reference.loc[reference["kind"] == "qualitative", "quantity"]
    assert claims.str.fullmatch(r"claim_[a-z0-9_]+").all() and claims.is_unique  # looked up by id
    assert "nan" not in " ".join(describe(row) for _, row in reference.iterrows())


@pytest.mark.slow
def test_importing_analysis_imports_no_pipeline_model_or_benchmark_code():
    """Only the run contract (run_contract: identity, record schema, numerics stamp, file
    writer; it needs the echo points' names) comes along: no workload, model, pipeline or
    benchmark, no torch."""
    allowed = {"run_contract", "run_contract.identity", "run_contract.fields", "run_contract.cli"}
    allowed |= {"run_contract.files", "run_contract.numerics", "run_contract.record"}
    allowed |= {"echo", "echo.core", "echo.points"}
    code = (
        "import sys, analysis, analysis.cli, analysis.figures; print(','.join(sorted(m for m in "
        "sys.modules if m.split('.')[0] in ('experiments', 'echo', 'sharing', 'benchmarks', "
        "'torch', 'tensorflow'))))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert set(result.stdout.strip().split(",")) <= allowed, result.stdout


def test_a_study_with_nothing_landed_gives_empty_tables_and_claims_without_data(tmp_path):
    """A long study's report before its first record: empty tables, every claim "no data"."""
    from analysis.cli import main

    landed = tmp_path / "landed.json"
    landed.write_text("{}")
    runs, curves = tmp_path / "runs.csv", tmp_path / "curves.csv"
    main(["aggregate", "--study-file", str(landed), "--runs-out", str(runs),
          "--curves-out", str(curves)])  # fmt: skip
    main(["claims", "--runs", str(runs), "--out", str(tmp_path / "claims.csv")])
    claims = pd.read_csv(tmp_path / "claims.csv")
    assert len(claims) and set(claims["verdict"]) == {"no data"}
    main(["resolution", "--runs", str(runs)])
