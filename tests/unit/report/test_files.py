"""The report's :mod:`~lightning_hpo.report.files`: the CSV files against the study, and real PNG
files."""

from __future__ import annotations

import errno
from pathlib import Path
from typing import Any

import optuna
import pandas as pd
import pytest
from helpers import report_support
from helpers.report_support import EPOCH_S, PNGS, SCENARIO, SETUP_S, T0, _png_shape
from matplotlib.figure import Figure

from lightning_hpo.errors import ConfigError
from lightning_hpo.pruners import rung_records
from lightning_hpo.report import write_report

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal
study = report_support.study


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


def test_a_folder_that_fills_up_mid_report_is_left_without_any_of_its_files(
    study: optuna.Study, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CSVs were written and the second plot cut short before the error: a report in
    pieces, with an empty or half PNG beside files of the new study, the earlier report's
    replaced in part."""
    earlier = tmp_path / "earlier"
    kept = {name: path.read_bytes() for name, path in write_report(study, earlier).items()}
    real, saved = Figure.savefig, []

    def disk_full(self: Figure, fname: Any, *args: Any, **kwargs: Any) -> None:
        saved.append(fname)
        if len(saved) % 2 == 0:  # the second plot of each report: half a file, then ENOSPC
            Path(fname).write_bytes(b"\x89PNG\r\n")
            raise OSError(errno.ENOSPC, "No space left on device")
        real(self, fname, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", disk_full)
    for out in (tmp_path / "new", earlier):
        with pytest.raises(ConfigError, match=r"^out: cannot write to .*: No space left"):
            write_report(study, out)
    assert not (tmp_path / "new").exists()  # made for this report, removed again: empty
    assert {path.name: path.read_bytes() for path in earlier.iterdir()} == kept


def test_an_out_folder_under_a_file_says_which_file(
    study: optuna.Study, tmp_path: Path
) -> None:
    """It said "cannot create x: File exists", of a path that was not there to be created."""
    (tmp_path / "x").write_text("")
    for out in ("x", "x/sub"):
        with pytest.raises(ConfigError, match=rf"^out: cannot create {tmp_path}/{out}: "
                           rf"{tmp_path}/x is a file, not a folder$"):
            write_report(study, tmp_path / out)
