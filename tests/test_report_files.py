"""The report's :mod:`~lightning_hpo.report.files`: the CSV files against the study, and real PNG
files."""

from __future__ import annotations

from pathlib import Path

import _report_support
import optuna
import pandas as pd
import pytest
from _report_support import EPOCH_S, PNGS, SCENARIO, SETUP_S, T0, _png_shape

from lightning_hpo._rung_store import rung_records
from lightning_hpo.report import write_report

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = _report_support.journal
study = _report_support.study


def test_write_report_files_match_the_study(study: optuna.Study, tmp_path: Path) -> None:
    paths = write_report(study, tmp_path / "out")
    assert set(paths) == {"trials.csv", "curves.csv", "incumbent.csv", "rungs.csv", *PNGS}
    trials = pd.read_csv(paths["trials.csv"])
    assert len(trials) == len(SCENARIO) + 1
    assert trials["trial"].tolist() == list(range(len(SCENARIO) + 1))
    assert trials.loc[trials["trial"] == 3, "value"].item() == pytest.approx(0.04)
    assert {"params_lr", "params_activation", "device_seconds", "slot"} <= set(trials.columns)
    curves = pd.read_csv(paths["curves.csv"])
    assert len(curves) == sum(len(s.curve) for s in SCENARIO) + 2
    assert curves.groupby("trial")["step"].max().tolist() == [len(s.curve) for s in SCENARIO] + [2]
    assert curves.dropna(subset=["time"])["time"].min() == pytest.approx(T0 + SETUP_S + EPOCH_S)
    incumbent = pd.read_csv(paths["incumbent.csv"])
    assert incumbent["best_complete"].iloc[-1] == pytest.approx(study.best_value)
    assert len(pd.read_csv(paths["rungs.csv"])) == len(rung_records(study))
    for name in PNGS:
        height, width, channels = _png_shape(paths[name])
        assert 900 <= width <= 1600 and 250 <= height <= 900 and channels in (3, 4), name
