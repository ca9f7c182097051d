"""The report's :mod:`~lightning_hpo.report.tables`: the trials, curves, incumbent, rungs and
segments frames against the study, paused trials included."""

from __future__ import annotations

import math
from pathlib import Path

import optuna
import pandas as pd
import pytest
from helpers import report_support
from helpers.report_support import (
    DISTRIBUTIONS,
    EPOCH_S,
    PAUSE_SCENARIO,
    PAUSE_TRAINED_S,
    SCENARIO,
    SETUP_S,
    STOPPED_BEST,
    T0,
    Spec,
    _points,
    make_launcher_study,
    paused_attr,
    record_rungs,
)
from optuna.trial import TrialState

from lightning_hpo.pruners import ASHAPruner, rung_records
from lightning_hpo.report import (
    RANK_ORDER,
    curves_frame,
    incumbent_frame,
    limitations,
    plot_rungs,
    rungs_frame,
    segments_frame,
    study_info,
    summarize,
    trials_frame,
)
from lightning_hpo.report.__main__ import main
from lightning_hpo.schema import ATTR

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal
study = report_support.study
paused_study = report_support.paused_study


def test_trials_frame_matches_the_study(study: optuna.Study) -> None:
    frame = trials_frame(study)
    started = [t for t in study.trials if t.state != TrialState.WAITING]
    assert len(frame) == len(started) == len(SCENARIO) + 1
    assert list(frame["trial"]) == [t.number for t in started]
    assert list(frame["state"]) == [t.state.name for t in started]
    for trial, (_, row) in zip(started, frame.iterrows(), strict=True):
        attrs = trial.user_attrs
        assert row["slot"] == attrs[ATTR.SLOT]
        assert row["start_time"] == pytest.approx(attrs[ATTR.START])
        if trial.state.is_finished():
            assert row["end_time"] == pytest.approx(attrs[ATTR.END])
            assert row["duration_s"] == pytest.approx(attrs[ATTR.END] - attrs[ATTR.START])
            assert row["epochs"] == attrs[ATTR.EPOCHS]
        else:
            assert math.isnan(row["end_time"]) and math.isnan(row["duration_s"])
            assert math.isnan(row["device_seconds"])
            assert row["epochs"] == 2
        assert row["params_lr"] == pytest.approx(trial.params["lr"])
        assert row["last_value"] == pytest.approx(trial.intermediate_values[max(
            trial.intermediate_values)])
        if trial.state == TrialState.COMPLETE:
            assert row["value"] == pytest.approx(trial.value)
        else:
            assert math.isnan(row["value"])
    assert frame.loc[frame["state"] == "FAIL", "fail_reason"].tolist() == ["RuntimeError: boom"]
    assert frame["start_s"].min() == 0.0
    # each trial's best value at any epoch, and the epoch: the ranking's key, whatever the state
    for trial, (_, row) in zip(started, frame.iterrows(), strict=True):
        values = trial.intermediate_values
        assert row["best_value"] == pytest.approx(min(values.values()))
        assert row["best_step"] == min(values, key=lambda s: (values[s], s))
        assert row["bracket"] == 0  # ASHA: one bracket
        assert pd.isna(row["stopped_by"]) if trial.state != TrialState.PRUNED else (
            row["stopped_by"] == "pruner")
    ranked = frame.sort_values("rank")
    assert ranked["rank"].tolist() == list(range(1, len(frame) + 1))
    assert ranked["best_value"].is_monotonic_increasing
    assert ranked["trial"].tolist() == [3, 0, 6, 7, 8, 2, 4, 1, 5]


def test_curves_frame_has_one_row_per_reported_epoch(study: optuna.Study) -> None:
    curves = curves_frame(study)
    started = [t for t in study.trials if t.state != TrialState.WAITING]
    assert len(curves) == sum(len(t.intermediate_values) for t in started)
    assert list(curves.columns) == ["trial", "state", "status", "stopped_by", "bracket", "step",
                                    "value", "time", "elapsed_s", "trial_elapsed_s"]
    for trial in started:
        rows = curves[curves["trial"] == trial.number]
        assert list(rows["step"]) == sorted(trial.intermediate_values)
        assert list(rows["value"]) == [trial.intermediate_values[s] for s in rows["step"]]
        if ATTR.EPOCH_END_TIMES in trial.user_attrs:
            assert list(rows["time"]) == pytest.approx(trial.user_attrs[ATTR.EPOCH_END_TIMES])
            assert list(rows["trial_elapsed_s"]) == pytest.approx(
                [SETUP_S + EPOCH_S * s for s in rows["step"]])
        else:  # the RUNNING trial: the launcher writes epoch times at the end
            assert rows["time"].isna().all()
    timed = curves.dropna(subset=["time"])
    assert (timed["elapsed_s"] == timed["time"] - T0).all()


def test_incumbent_frame_is_best_value_reported_so_far(study: optuna.Study) -> None:
    inc = incumbent_frame(study)
    started = [t for t in study.trials if t.state != TrialState.WAITING]
    complete = [t for t in started if t.state == TrialState.COMPLETE]
    # one row per value any trial reported, and one per COMPLETE trial's final value
    epochs = inc[inc["kind"] == "epoch"]
    assert len(epochs) == sum(len(t.intermediate_values) for t in started)
    assert sorted(inc.loc[inc["kind"] == "final", "trial"]) == [t.number for t in complete]
    assert inc["time"].is_monotonic_increasing
    for trial in started:  # every epoch at its recorded end time (the RUNNING one: estimated)
        rows = epochs[epochs["trial"] == trial.number].sort_values("step")
        assert rows["value"].tolist() == [trial.intermediate_values[s] for s in rows["step"]]
        if ATTR.EPOCH_END_TIMES in trial.user_attrs:
            assert rows["time"].tolist() == pytest.approx(trial.user_attrs[ATTR.EPOCH_END_TIMES])
            assert not rows["time_estimated"].any()
        else:
            assert rows["time_estimated"].all() and (rows["time"] >= trial.user_attrs[
                ATTR.START]).all()
    assert inc["best"].tolist() == pytest.approx(inc["value"].cummin().tolist())
    finals = inc["value"].where(inc["kind"] == "final")
    assert inc["best_complete"].tolist() == pytest.approx(finals.cummin().ffill().tolist(),
                                                          nan_ok=True)
    assert inc["best_complete"].iloc[-1] == pytest.approx(study.best_value)
    gains = inc[inc["improved"]]
    assert gains["best"].is_monotonic_decreasing and len(gains) == gains["best"].nunique()
    assert (gains["best_trial"] == gains["trial"]).all()
    assert inc["epochs_spent"].is_monotonic_increasing
    # every epoch that had ended by the last row is counted once, and the RUNNING trial
    # (no epoch times yet) its 2 reported epochs, pro rata up to the latest time known
    last = inc["time"].iloc[-1]
    ended = sum(x <= last for t in study.trials
                for x in t.user_attrs.get(ATTR.EPOCH_END_TIMES, []))
    assert inc["epochs_spent"].iloc[-1] == ended + 2


@pytest.mark.parametrize(
    ("device", "factor"),
    [pytest.param("cpu:0", 1, id="one-device"), pytest.param("cuda:0,1", 2, id="ddp-two"),
     pytest.param("cuda:0,1,2,3", 4, id="ddp-four")],
)
def test_device_seconds_count_every_device_of_a_trial(
    tmp_path: Path, device: str, factor: int
) -> None:
    scenario = tuple(Spec(s.state, s.curve, s.lr, s.activation, device) for s in SCENARIO)
    study = make_launcher_study(str(tmp_path / "d.journal"), scenario=scenario, running=False)
    frame = trials_frame(study)
    assert (frame["devices"] == factor).all()
    assert frame["device_seconds"].tolist() == pytest.approx(
        (frame["duration_s"] * factor).tolist())
    assert summarize(study)["device_seconds"] == pytest.approx(frame["duration_s"].sum() * factor)


def test_table_ranks_by_best_value_not_by_rung_reached(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "s.journal")
    study = make_launcher_study(spec, scenario=STOPPED_BEST, running=False, waiting=0)
    frame = trials_frame(study).sort_values("rank")
    # trial 1 reached rung 3 with 0.90, trial 3 only epoch 2 but with 0.009: 3 ranks first,
    # 1 last, whatever rung each reached
    assert frame["trial"].tolist() == [3, 2, 0, 1]
    assert frame["best_value"].tolist() == pytest.approx([0.009, 0.04, 0.06, 0.90])
    assert main(["--storage", spec, "--out", str(tmp_path / "rep"), "--top", "4"]) == 0
    out = capsys.readouterr().out
    assert " ".join(RANK_ORDER.split()) in " ".join(out.split())  # the table says its order
    ranks = [line.split("│")[1:3] for line in out.splitlines() if line.startswith("│")]
    assert [int(t) for r, t in ranks if r.strip()] == [3, 2, 0, 1]


def test_rungs_frame_is_the_pruners_records_with_outcomes(study: optuna.Study) -> None:
    rungs = rungs_frame(study)
    stored = rung_records(study)
    assert [tuple(r) for r in rungs[["bracket", "rung", "trial", "value"]].itertuples(
        index=False)] == [tuple(r) for r in stored]
    by_trial = {t.number: t for t in study.trials}
    for row in rungs.itertuples(index=False):
        trial = by_trial[row.trial]
        last = max(trial.intermediate_values)
        assert row.step == row.rung  # reports every epoch: the rung's own epoch reached it
        if last > row.rung:
            assert row.outcome == "promoted"
        else:  # here, only PRUNED trials stop at a rung
            assert trial.state == TrialState.PRUNED and row.outcome == "pruned", row


def test_summary_and_tables_count_paused_trials(paused_study: optuna.Study) -> None:
    summary = summarize(paused_study)
    assert summary["counts"] == {"COMPLETE": 2, "PRUNED": 2, "FAIL": 0, "RUNNING": 2,
                                 "WAITING": 1}
    assert summary["paused"] == 1
    # the best value was reported by the paused trial
    assert (summary["best_trial"], summary["best_step"], summary["best_state"]) == (1, 4, "PAUSED")
    assert summary["best_complete_trial"] == 3
    assert summary["epochs"] == 8 + 4 + 2 + 9 + 2 + 3  # trained, the retrained epoch included
    assert summary["device_seconds"] == pytest.approx(sum(PAUSE_TRAINED_S.values()))  # no pauses
    assert summary["unfinished"] == 1 and summary["slots"] == 2
    assert not any(n.startswith("rungs:") for n in limitations(paused_study))  # no records kept
    frame = trials_frame(paused_study).set_index("trial")
    assert frame["state"].tolist() == ["COMPLETE", "RUNNING", "PRUNED", "COMPLETE", "PRUNED",
                                       "RUNNING"]  # Optuna's
    assert frame["paused"].tolist() == [False, True, False, False, False, False]
    assert (frame.loc[1, "paused_epoch"], frame.loc[1, "paused_why"]) == (4, "rung 4")
    assert frame.loc[1, "paused_since"] == pytest.approx(T0 + 5.5)
    assert frame["paused_epoch"].drop(index=1).isna().all()
    assert frame["segments"].tolist() == [3, 2, 1, 2, pd.NA, 2]
    assert frame["epochs_trained"].tolist() == [8, 4, 2, 9, 2, 3]
    assert frame["device_seconds"].to_dict() == pytest.approx(PAUSE_TRAINED_S)
    assert frame.loc[[1, 5], ["duration_s", "end_time"]].isna().all(axis=None)  # RUNNING
    assert frame.loc[2, "stopped_by"] == "pruner" and frame.loc[4, "stopped_by"] == "budget"
    segments = segments_frame(paused_study)
    listed = sum(len(attrs.get(ATTR.SEGMENTS, [])) for *_, attrs in PAUSE_SCENARIO.values())
    assert len(segments) == listed + 1 and segments["listed"].sum() == listed  # + trial 4's
    assert segments.groupby("trial")["duration_s"].sum().to_dict() == pytest.approx(
        {**PAUSE_TRAINED_S, 5: 2.5})  # trial 5's segment in flight has no duration yet
    assert segments.loc[segments["trial"] == 0, "slot"].tolist() == [0, 1, 0]
    assert segments.loc[segments["how"] == "crashed", ["trial", "from_epoch", "to_epoch"]
                        ].values.tolist() == [[3, 0, 3]]
    assert segments["start_s"].min() == 0.0
    # compute spent over time: segments only, and the retrained epoch counted
    inc = incumbent_frame(paused_study)
    last = inc.iloc[-1]
    assert last["elapsed_s"] == pytest.approx(20.5)
    assert last["device_seconds_spent"] == pytest.approx(sum(PAUSE_TRAINED_S.values()) + 1.5)
    assert last["epochs_spent"] == 28 - 1  # trial 5's epoch 3 in flight has no end time yet


def test_rung_records_of_a_paused_trial_say_paused(tmp_path: Path) -> None:
    study = make_launcher_study(str(tmp_path / "p.journal"), running=False, waiting=0)
    pruner = ASHAPruner(min_resource=1, max_resource=9, reduction_factor=3)
    trial = optuna.trial.create_trial(
        state=TrialState.RUNNING, params={"lr": 0.05, "activation": "relu"},
        distributions=DISTRIBUTIONS, intermediate_values={1: 0.5, 2: 0.4, 3: 0.01},
        user_attrs={ATTR.SLOT: 0, ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                    ATTR.START: T0 + 40, ATTR.EPOCH_END_TIMES: [T0 + 41, T0 + 42, T0 + 43],
                    ATTR.PAUSED: paused_attr(3, 43.1, "rung 3")},
    )
    study.add_trial(trial)
    number = len(study.trials) - 1
    record_rungs(study, pruner, number)
    rungs = rungs_frame(study)
    mine = rungs[rungs["trial"] == number].set_index("rung")["outcome"].to_dict()
    assert mine == {1: "promoted", 3: "paused"}
    fig = plot_rungs(curves_frame(study), study_info(study), rungs, trials_frame(study))
    (paused,) = [c for c in fig.axes[0].collections if c.get_gid() == "paused"]
    assert [tuple(p) for p in paused.get_offsets()] == [(3.0, 0.01)]
    assert _points(fig, "running") == 0
    assert [t.get_text() for t in fig.axes[0].texts][1] == "6 in, 3 on, 1 paused"


def test_a_plain_optuna_study_using_the_launchers_attr_names_for_its_own_values() -> None:
    """``slot``, ``host``, ``device`` and ``fail_reason`` are plain names a study of its own may
    use: a text slot raised "invalid literal for int() with base 10: 'gpu-a'" from pandas, a
    list for a host "unhashable type: 'list'"; they are not the launcher's, so not shown."""
    plain = optuna.create_study()

    def objective(trial: optuna.Trial) -> float:
        own = {"slot": "gpu-a", "host": ["node1", "node2"], "device": {"kind": "cuda"},
               "fail_reason": ["none"]}
        for name, value in own.items():
            trial.set_user_attr(name, value)
        return trial.suggest_float("x", 0.0, 1.0)

    plain.optimize(objective, n_trials=2)
    trials = trials_frame(plain)
    assert trials[["slot", "host", "device", "fail_reason"]].isna().all(axis=None)
    assert summarize(plain)["slots"] == 0
