"""`benchmarks.echo_advise` writes, per R, advise's measured R beside the set one and the
advised setting's steps/s beside every fixed factor's, each round kept."""

from __future__ import annotations

import pandas as pd
import pytest

from benchmarks.echo_advise import main


def test_the_csv_holds_the_measured_r_and_the_advised_setting_beside_the_fixed_ones(tmp_path):
    out = tmp_path / "advise.csv"
    main(["--out", str(out), "--ratios", "3", "--factors", "1", "2", "--steps", "3",
          "--rounds", "2", "--windows", "2", "--batches", "2", "--step-ms", "5",
          "--step", "wait"])  # fmt: skip
    (row,) = pd.read_csv(out).to_dict("records")
    assert row["upstream_ratio_R"] == 3 and row["step"] == "wait"
    assert row["advise_R_low"] <= row["advise_R"] <= row["advise_R_high"]
    assert row["advise_R_error"] == pytest.approx(row["advise_R"] / 3 - 1)
    assert row["workload"] == "imagenet_resnet" and row["advised_factor"] >= 1  # timing: noisy
    assert row["best_fixed_factor"] in (1, 2)
    ratio = row["advised_steps_per_s"] / row["best_fixed_steps_per_s"]
    assert row["advised_over_best"] == pytest.approx(ratio)
    for case in ("fixed_e1", "fixed_e2", "advised", "on_stall"):
        assert len(str(row[f"{case}_steps_per_s_by_repeat"]).split(";")) == 2
