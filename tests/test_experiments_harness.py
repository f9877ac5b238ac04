"""The harness end to end on a throwaway workload: records, schedule, budget, timing, CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest
import torch

from experiments.devices import to_device
from experiments.harness import Run, RunConfig, run
from experiments.identity import RunOptions, RunSpec
from experiments.record import validate, write_record
from experiments.run import main
from experiments.upstream import TimedBatch

ROOT = Path(__file__).parents[1]
TIMING_KEYS = ("wall_s_to_target", "timing", "final", "eval_curve", "git_revision")
CPU = RunOptions(device="cpu")


def run_cli(tmp_path: Path, *args: str, name: str = "run.json") -> dict:
    out = tmp_path / name
    assert main([*args, "--threads", "1", "--out", str(out)]) == 0
    return json.loads(out.read_text())


def without_timing(record: dict) -> dict:
    rows = [{k: v for k, v in row.items() if k != "wall_s"} for row in record["eval_curve"]]
    final = {k: v for k, v in record["final"].items() if k != "wall_s"}
    kept = {k: v for k, v in record.items() if k not in TIMING_KEYS}
    return {**kept, "eval_curve": rows, "final": final}


def test_baseline_reaches_target_and_writes_a_valid_record(tmp_path, toy_workload):
    record = run_cli(tmp_path, "--workload", toy_workload, "--seed", "3")
    validate(record)
    assert record["reached"] is True
    assert record["echo_point"] == "none" and record["echo_factor"] == 1.0
    first, last = record["eval_curve"][0], record["eval_curve"][-1]
    assert (first["fresh_examples"], first["steps"]) == (0, 0)
    assert last["metric"] >= 0.9 and last["metrics"]["accuracy"] == last["metric"]
    assert record["fresh_examples_to_target"] == last["fresh_examples"]
    assert record["steps_to_target"] == last["steps"] == record["final"]["steps"]
    assert record["fresh_examples_to_target"] == 16 * record["steps_to_target"]
    assert all(row["metric"] < 0.9 for row in record["eval_curve"][:-1])


def test_evaluations_happen_every_eval_every_fresh_examples(tmp_path, toy_workload):
    record = run_cli(
        tmp_path,
        "--workload",
        toy_workload,
        "--hparam",
        "separation=0",
        "--eval-every-fresh",
        "100",
        "--max-fresh",
        "1000",
        "--batch-size",
        "16",
    )
    fresh = [row["fresh_examples"] for row in record["eval_curve"]]
    assert fresh == [0, 112, 208, 304, 400, 512, 608, 704, 800, 912, 1008]


def test_budget_exhausted_is_a_result_not_an_error(tmp_path, toy_workload):
    record = run_cli(
        tmp_path, "--workload", toy_workload, "--hparam", "separation=0", "--max-fresh", "300"
    )
    validate(record)
    assert record["reached"] is False
    assert record["fresh_examples_to_target"] is None and record["wall_s_to_target"] is None
    assert record["final"]["fresh_examples"] == 304  # first batch boundary past the budget
    assert record["eval_curve"][-1]["fresh_examples"] == 304


def test_no_stop_at_target_trains_on_to_the_budget(tmp_path, toy_workload):
    stopped = run_cli(tmp_path, "--workload", toy_workload, "--seed", "3")
    full = run_cli(
        tmp_path, "--workload", toy_workload, "--seed", "3", "--no-stop-at-target", name="f.json"
    )
    validate(full)
    assert full["stop_at_target"] is False and "stop_at_target" not in stopped
    assert full["config_hash"] != stopped["config_hash"]
    # the point at target is the same; the run then goes on to the 2048-example budget
    assert full["fresh_examples_to_target"] == stopped["fresh_examples_to_target"]
    assert full["final"]["fresh_examples"] == 2048 > stopped["final"]["fresh_examples"]
    assert full["eval_curve"][-1]["fresh_examples"] == 2048


def test_same_seed_same_record_up_to_timing(tmp_path, toy_workload):
    args = ("--workload", toy_workload, "--echo-point", "before_augment", "--echo-factor", "2")
    a = run_cli(tmp_path, *args, "--seed", "1", name="a.json")
    b = run_cli(tmp_path, *args, "--seed", "1", name="b.json")
    c = run_cli(tmp_path, *args, "--seed", "2", name="c.json")
    assert without_timing(a) == without_timing(b)
    assert a["config_hash"] == b["config_hash"] != c["config_hash"]
    losses = [[row["metrics"]["loss"] for row in r["eval_curve"]] for r in (a, c)]
    assert losses[0] != losses[1]


@pytest.mark.parametrize("point", ["before_augment", "after_augment", "after_batch"])
def test_echo_doubles_steps_per_fresh_example(tmp_path, toy_workload, point):
    record = run_cli(
        tmp_path,
        "--workload",
        toy_workload,
        "--echo-point",
        point,
        "--echo-factor",
        "2",
        "--hparam",
        "separation=0",
        "--max-fresh",
        "512",
    )
    assert record["final"]["fresh_examples"] == 512
    # The run stops at the first step that reaches the budget: with batch echo, that is the
    # first use of the 32nd fresh batch, before its echo.
    assert record["final"]["steps"] == (2 * 32 - 1 if point == "after_batch" else 2 * 32)
    assert record["timing"]["fresh_batches"] == (32 if point == "after_batch" else 64)


def test_fresh_examples_are_counted_with_workers(tmp_path, toy_workload):
    record = run_cli(
        tmp_path,
        "--workload",
        toy_workload,
        "--num-workers",
        "2",
        "--hparam",
        "separation=0",
        "--max-fresh",
        "256",
        "--echo-point",
        "after_augment",
        "--echo-factor",
        "3",
    )
    assert record["final"]["fresh_examples"] == 256
    assert record["final"]["steps"] == 3 * 256 // 16


def test_upstream_knobs_slow_the_upstream_and_set_r(tmp_path, toy_workload):
    common = ("--workload", toy_workload, "--hparam", "separation=0", "--max-fresh", "160")
    base = run_cli(tmp_path, *common, name="base.json")["timing"]
    per_example = run_cli(tmp_path, *common, "--upstream-latency-ms", "1", name="ex.json")["timing"]
    per_batch = run_cli(
        tmp_path,
        *common,
        "--upstream-latency-ms",
        "1",
        "--upstream-latency-per",
        "batch",
        name="batch.json",
    )["timing"]
    cpu = run_cli(tmp_path, *common, "--upstream-cpu-ms", "0.5", name="cpu.json")["timing"]
    assert per_example["upstream_s_per_batch"] >= 16 * 0.001
    assert 0.001 <= per_batch["upstream_s_per_batch"] < per_example["upstream_s_per_batch"]
    assert cpu["upstream_s_per_batch"] >= 16 * 0.0005
    assert base["upstream_s_per_batch"] < per_batch["upstream_s_per_batch"]
    for timing in (base, per_example, per_batch, cpu):
        ratio = timing["upstream_s_per_batch"] / timing["downstream_s_per_step"]
        assert timing["R"] == pytest.approx(ratio)
    assert per_example["R"] > base["R"]


@pytest.mark.parametrize(
    ("args", "names"),
    [
        (["--workload", "nope"], ["--workload", "toy_blobs"]),
        (["--echo-point", "middle"], ["--echo-point", "after_batch"]),
        (["--echo-factor", "0.5"], ["--echo-factor", ">= 1"]),
        (["--batch-size", "-4"], ["--batch-size", ">= 1"]),
        (["--shuffle-buffer", "-1"], ["--shuffle-buffer", ">= 0"]),
        (["--max-fresh", "0"], ["--max-fresh", ">= 1"]),
        (["--device", "tpu"], ["--device", "cuda"]),
        (["--echo-factor", "2"], ["--echo-point", "before_augment"]),
        (["--hparam", "width=3"], ["width", "batch_size, lr, momentum, noise"]),
        (["--hparam", "noise=loud"], ["noise='loud'", "float"]),
        (["--scale", "paper", "--data-dir", "x"], ["--scale", "valid: cpu"]),
    ],
)
def test_bad_arguments_exit_with_one_line_naming_them(tmp_path, toy_workload, capsys, args, names):
    base = {"--workload": toy_workload}
    for flag, value in zip(args[::2], args[1::2], strict=True):
        base[flag] = value
    argv = [part for item in base.items() for part in item] + ["--out", str(tmp_path / "r.json")]
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code != 0
    message = capsys.readouterr().err
    assert message.count("\n") == 1, message
    for name in names:
        assert name in message
    assert not (tmp_path / "r.json").exists()


def test_command_line_exits_nonzero_in_a_fresh_process(tmp_path):
    out = tmp_path / "r.json"
    result = subprocess.run(
        [sys.executable, "-m", "experiments.run", "--workload", "nope", "--out", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "--workload" in result.stderr
    assert not out.exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA error")
def test_cuda_without_a_device_is_a_clear_error(tmp_path, toy_workload, capsys):
    with pytest.raises(SystemExit):
        main(["--workload", toy_workload, "--device", "cuda", "--out", str(tmp_path / "r")])
    assert "device='cuda'" in capsys.readouterr().err


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_run_trains_on_the_gpu(tmp_path, toy_workload):
    record = run_cli(
        tmp_path,
        "--workload",
        toy_workload,
        "--device",
        "cuda",
        "--num-workers",
        "1",
        "--echo-point",
        "after_batch",
        "--echo-factor",
        "2",
    )
    validate(record)
    assert record["device"].startswith("cuda") and record["reached"]


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_run_trains_the_model_on_cuda_batches(toy_workload):
    prepared = Run(
        RunConfig(RunSpec(workload=toy_workload, num_workers=1), RunOptions(device="cuda"))
    )
    assert all(parameter.is_cuda for parameter in prepared.model.parameters())
    devices, train_step = set(), prepared.workload.train_step

    def recording_step(model, optimizer, batch):
        devices.update(tensor.device.type for tensor in batch)
        return train_step(model, optimizer, batch)

    prepared.workload.train_step = recording_step
    record = prepared.execute(progress=False)
    assert record["reached"] and devices == {"cuda"}
    assert record["timing"]["downstream_s_per_step"] > 0


def test_invalid_record_is_not_written(tmp_path, toy_workload):
    record = run_cli(tmp_path, "--workload", toy_workload, "--max-fresh", "64")
    broken = {**record, "reached": "yes"}
    with pytest.raises(jsonschema.ValidationError):
        write_record(broken, tmp_path / "broken.json")
    inconsistent = {**record, "reached": False}  # reached=false needs null *_to_target
    with pytest.raises(jsonschema.ValidationError):
        validate(inconsistent)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_interrupted_write_leaves_no_partial_record(tmp_path, toy_workload, monkeypatch):
    record = run_cli(tmp_path, "--workload", toy_workload, "--max-fresh", "64")
    target = tmp_path / "out.json"

    def crash(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(json, "dump", crash)
    with pytest.raises(KeyboardInterrupt):
        write_record(record, target)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]


def test_progress_bar_only_when_asked_or_on_a_terminal(toy_workload, capsys):
    run(RunConfig(RunSpec(workload=toy_workload, max_fresh=64), CPU), progress=True)
    shown = capsys.readouterr().err
    assert "ex/s" in shown and "64/64" in shown
    run(
        RunConfig(RunSpec(workload=toy_workload, max_fresh=64), CPU)
    )  # stderr is not a terminal here
    assert capsys.readouterr().err == ""


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="pinning needs a CUDA runtime")
def test_batches_are_pinned_for_asynchronous_copies():
    timed = TimedBatch((torch.ones(2), {"y": torch.zeros(3)}), 0.1).pin_memory()
    assert timed.batch[0].is_pinned() and timed.batch[1]["y"].is_pinned()


def test_to_device_keeps_the_batch_structure():
    batch = (torch.ones(2), [torch.zeros(1)], {"y": torch.arange(3)}, "label")
    moved = to_device(batch, torch.device("cpu"))
    assert isinstance(moved, tuple) and isinstance(moved[1], list) and moved[3] == "label"
    assert torch.equal(moved[2]["y"], torch.arange(3))


def test_the_record_names_the_machine_it_trained_on(tmp_path, toy_workload):
    import torch

    record = run(RunConfig(RunSpec(workload=toy_workload, max_fresh=64), CPU))
    machine = record["machine"]
    assert machine["cpu_capability"] == torch.backends.cpu.get_cpu_capability()
    assert machine["cpus"] >= 1 and machine["platform"]
    validate(record)
