"""The report's :mod:`~lightning_hpo.report.summary`: counts, compute, the headline best and how
its trial ended, and the one note a plain Optuna study gets."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import optuna
import pandas as pd
import pytest
from helpers import report_support
from helpers.report_support import (
    BUDGET,
    DISTRIBUTIONS,
    SCENARIO,
    STOPPED_BEST,
    T0,
    _gids,
    _points,
    make_launcher_study,
)
from optuna.trial import TrialState

from lightning_hpo.report import (
    curves_frame,
    incumbent_frame,
    limitations,
    plot_incumbent,
    plot_learning_curves,
    plot_rungs,
    rungs_frame,
    study_info,
    summarize,
    trials_frame,
)
from lightning_hpo.report.__main__ import main
from lightning_hpo.schema import ATTR
from lightning_hpo.storage import open_storage

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal
study = report_support.study


def make_plain_study(
    storage: str | optuna.storages.BaseStorage, name: str = "plain"
) -> optuna.Study:
    """An ordinary Optuna study: intermediate values and datetimes, none of our attrs."""
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
    for k, spec in enumerate(SCENARIO):
        start = T0 + 10.0 * k
        trial = optuna.trial.create_trial(
            state=spec.state,
            value=spec.curve[-1] if spec.state == TrialState.COMPLETE else None,
            params={"lr": spec.lr, "activation": spec.activation}, distributions=DISTRIBUTIONS,
            intermediate_values={s + 1: v for s, v in enumerate(spec.curve)},
        )
        trial.datetime_start = dt.datetime.fromtimestamp(start)
        trial.datetime_complete = dt.datetime.fromtimestamp(start + 2.0 * len(spec.curve))
        study.add_trial(trial)
    return study


def test_summary_counts_compute_and_best(study: optuna.Study) -> None:
    summary = summarize(study)
    assert summary["counts"] == {"COMPLETE": 3, "PRUNED": 4, "FAIL": 1, "RUNNING": 1,
                                 "WAITING": 2}
    assert summary["n_trials"] == len(study.trials) == 11
    # the best value reported is the best COMPLETE trial's last epoch here
    assert summary["best_trial"] == summary["best_complete_trial"] == study.best_trial.number
    assert summary["best_value"] == summary["best_complete_value"] == pytest.approx(
        study.best_value)
    assert summary["best_step"] == summary["best_complete_epochs"] == 9
    assert summary["best_state"] == "COMPLETE" and summary["best_stopped_by"] is None
    assert summary["epochs"] == sum(len(s.curve) for s in SCENARIO) + 2
    finished = sum(t.user_attrs[ATTR.END] - t.user_attrs[ATTR.START]
                   for t in study.trials if t.state.is_finished())
    assert summary["device_seconds"] == pytest.approx(finished)  # the RUNNING one has no end
    assert summary["unfinished"] == 1
    assert summary["slots"] == 2 and summary["devices_unknown"] == 0
    assert limitations(study) == [
        "incumbent trajectory: 2 value(s) without an epoch end time placed pro rata over "
        "their trial's duration",
        "learning curves: 1 RUNNING trial(s) not drawn yet (the launcher writes epoch times "
        "when a trial ends)"]


def test_best_is_the_best_value_reported_anywhere_and_says_how_it_ended(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    study = make_launcher_study(spec, scenario=STOPPED_BEST, running=False, waiting=0)
    summary = summarize(study)
    assert (summary["best_value"], summary["best_trial"], summary["best_step"]) == (
        pytest.approx(0.009), 3, 2)
    assert summary["best_state"] == "PRUNED" and summary["best_stopped_by"] == "budget"
    assert summary["best_stop_reason"] == BUDGET
    assert summary["best_params"]["lr"] == pytest.approx(0.3)
    assert (summary["best_complete_trial"], summary["best_complete_value"],
            summary["best_complete_epochs"]) == (2, pytest.approx(0.04), 9)
    # the incumbent: both lines, each at its own best; the COMPLETE one is the old incumbent
    inc = incumbent_frame(study)
    assert inc["best"].iloc[-1] == pytest.approx(0.009) and inc["best_trial"].iloc[-1] == 3
    assert inc["best_step"].iloc[-1] == 2
    assert inc["best_complete"].iloc[-1] == pytest.approx(0.04)
    assert inc["best_complete_trial"].iloc[-1] == 2
    fig = plot_incumbent(inc, study_info(study))
    lines = {line.get_gid(): line for line in fig.axes[0].lines}
    assert min(lines["incumbent"].get_ydata()) == pytest.approx(0.009)
    assert min(lines["incumbent-complete"].get_ydata()) == pytest.approx(0.04)
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any("trial 3, epoch 2 (stopped by the budget)" in n for n in notes), notes
    # the rungs: trial 1 pruned at rung 3, trial 3 stopped by the budget after epoch 2
    rung_fig = plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))
    assert _points(rung_fig, "pruned") == 1 and _points(rung_fig, "stopped-by-budget") == 1
    (stop,) = [c for c in rung_fig.axes[0].collections if c.get_gid() == "stopped-by-budget"]
    assert tuple(stop.get_offsets()[0]) == pytest.approx((2, 0.009))
    curve_fig = plot_learning_curves(curves_frame(study), study_info(study), x="epochs")
    ends = {line.get_gid(): line for line in curve_fig.axes[0].lines}
    assert list(ends["pruned-end"].get_xdata()) == [3]  # trial 1, by the pruner
    assert list(ends["budget-end"].get_xdata()) == [2]  # trial 3, by the budget
    assert ends["trial-3"].get_color() == "black"  # it reported the best value
    # the CLI names both, and how the best trial ended
    assert main(["--storage", spec, "--out", str(tmp_path / "rep")]) == 0
    out = capsys.readouterr().out
    assert ("Best validation_error observed: 0.009, trial 3 at epoch 2 (stopped by the "
            f"study's budget: {BUDGET}; ") in out
    assert "Best COMPLETE trial: trial 2, validation_error 0.04 after 9 epochs" in out
    rows = pd.read_csv(tmp_path / "rep" / "trials.csv").set_index("trial")
    assert rows.loc[3, "stopped_by"] == "budget" and rows.loc[3, "stop_reason"] == BUDGET
    assert rows.loc[1, "stopped_by"] == "pruner"


def test_plain_optuna_study_gets_the_rest_and_one_note(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'plain.db'}"
    study = make_plain_study(url)
    trials = trials_frame(study)
    assert (trials["timing"] == "optuna").all()
    assert trials["duration_s"].tolist() == pytest.approx([2.0 * len(s.curve) for s in SCENARIO])
    assert curves_frame(study)["time"].isna().all()
    notes = limitations(study)
    assert any("epoch_end_times" in n for n in notes) and any("slot" in n for n in notes)
    out = tmp_path / "rep"
    assert main(["--storage", url, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    note_lines = [line for line in stdout.splitlines() if line.startswith("note:")]
    assert len(note_lines) == 1 and "worker timeline" in note_lines[0]
    assert sorted(p.name for p in out.iterdir()) == [
        "curves.csv", "incumbent.csv", "incumbent.png", "learning_curves.png", "rungs.png",
        "trials.csv"]
    fig = plot_learning_curves(curves_frame(study), study_info(study))
    assert fig.axes[0].get_xlabel() == "step (as reported to Optuna)"
    assert len(_gids(fig, "trial-")) == len(SCENARIO)
