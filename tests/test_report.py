"""The report: tables and CSV files against the study, real PNG files, the drawn artists
counted from the figures, plain Optuna studies, comparisons, one-line errors, and one slow run
of the real launcher followed by the report CLI."""

from __future__ import annotations

import ast
import copy
import datetime as dt
import json
import math
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib.colors
import matplotlib.image
import optuna
import pandas as pd
import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution
from optuna.trial import TrialState

from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo._rung_store import rung_records
from lightning_hpo.errors import ConfigError
from lightning_hpo.pruners import ASHAPruner, HyperbandPruner
from lightning_hpo.report import (
    RANK_ORDER,
    STATE_COLORS,
    Comparison,
    Pause,
    StudySnapshot,
    compare,
    curves_frame,
    incumbent_frame,
    limitations,
    load,
    load_ref,
    plot_compare,
    plot_incumbent,
    plot_learning_curves,
    plot_rungs,
    plot_timeline,
    rungs_frame,
    segments_frame,
    study_info,
    summarize,
    trials_frame,
    write_compare,
    write_report,
)
from lightning_hpo.report.__main__ import main
from lightning_hpo.rungs import bracket_of, rung_levels, trial_allocation_budgets
from lightning_hpo.schema import ATTR, BRACKET_ATTR, CONFIG_ATTR, PRUNER_ATTR
from lightning_hpo.storage import open_storage

T0 = 1_700_000_000.0  # unix seconds: when the first simulated trial starts
EPOCH_S = 1.0  # simulated seconds per epoch
SETUP_S = 0.25  # simulated seconds from a trial's start to its first epoch
GAP_S = 0.1  # simulated idle seconds between two trials on one slot
DISTRIBUTIONS = {
    "lr": FloatDistribution(0.01, 1.0, log=True),
    "activation": CategoricalDistribution(["relu", "sigmoid"]),
}


@dataclass(frozen=True)
class Spec:
    """One simulated trial: final state and the metric after each epoch."""

    state: TrialState
    curve: tuple[float, ...]
    lr: float
    activation: str = "relu"
    devices: str = "cpu:0"
    stop_reason: str | None = None  # PRUNED by the launcher: the study's budget was spent


#: ASHA with rungs 1, 3, 9 (min_resource 1, reduction_factor 3, max_resource 9).
SCENARIO = (
    Spec(TrialState.COMPLETE, (0.5, 0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.07, 0.06), 0.1),
    Spec(TrialState.PRUNED, (0.8,), 0.9),
    Spec(TrialState.PRUNED, (0.6, 0.5, 0.45), 0.02, "sigmoid"),
    Spec(TrialState.COMPLETE, (0.4, 0.2, 0.1, 0.08, 0.06, 0.05, 0.045, 0.042, 0.04), 0.2),
    Spec(TrialState.FAIL, (0.7, 0.65), 0.5),
    Spec(TrialState.PRUNED, (0.9,), 0.03, "sigmoid"),
    Spec(TrialState.COMPLETE, (0.45, 0.3, 0.25, 0.2, 0.15, 0.12, 0.1, 0.09, 0.08), 0.3),
    Spec(TrialState.PRUNED, (0.35, 0.3, 0.28), 0.15),
)
CONFIG = {
    "study": "demo", "storage": "runs/demo.journal", "model": {"name": "lenet"},
    "metric": "validation_error", "direction": "minimize",
    "space": {"lr": {"loguniform": [0.01, 1.0]}, "activation": {"choice": ["relu", "sigmoid"]}},
    "pruner": {"name": "asha", "min_resource": 1, "max_resource": 9, "reduction_factor": 3},
    "trainer": {"max_epochs": 9},  # the launcher stores it resolved, as "metric" and "direction"
    "stop": {"n_trials": 10},
}
RUNGS = rung_levels(1, max_resource=9, reduction_factor=3)
PNGS = ("incumbent.png", "learning_curves.png", "rungs.png", "timeline.png")
BUDGET = "wall-clock budget reached (stop.max_wallclock_time=12 s); stopped after epoch 2"


def record_rungs(study: optuna.Study, pruner: optuna.pruners.BasePruner, number: int) -> None:
    """Write trial ``number``'s rung records as the pruner did, epoch by epoch.

    The real pruner decides on each prefix of the trial's reports, which writes its records
    to the storage; its answers are ignored (the scenario says how each trial ended).
    """
    frozen = study.get_trials(deepcopy=False)[number]
    for step in sorted(frozen.intermediate_values):
        prefix = copy.copy(frozen)
        prefix.intermediate_values = {
            s: v for s, v in frozen.intermediate_values.items() if s <= step}
        pruner.prune(study, prefix)


def make_launcher_study(
    storage: str | optuna.storages.BaseStorage,
    name: str = "demo",
    *,
    scenario: tuple[Spec, ...] = SCENARIO,
    slots: int = 2,
    waiting: int = 2,
    running: bool = True,
    epoch_s: float = EPOCH_S,
    pruner: optuna.pruners.BasePruner | None = None,
) -> optuna.Study:
    """A study with exactly what the launcher writes, simulated on ``slots`` slots, in-process.

    Each trial goes to the slot that frees first; it spends ``SETUP_S`` then ``epoch_s`` per
    epoch; ``waiting`` queued tickets stay WAITING and, with ``running``, one more trial is
    still RUNNING on slot 0 after 2 epochs (its times are not written yet, as in the launcher).
    The ASHA pruner of ``CONFIG`` (or ``pruner``; ``NopPruner`` for none of ours) writes its
    settings and its rung records for every trial's reports.
    """
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = optuna.create_study(study_name=name, storage=storage, direction="minimize")
    study.set_user_attr(CONFIG_ATTR, json.dumps(dict(CONFIG, study=name)))
    pruner = pruner or ASHAPruner(min_resource=1, max_resource=9, reduction_factor=3)
    free = [T0 + slot * 0.05 for slot in range(slots)]
    for spec in scenario:
        slot = min(range(slots), key=lambda s: free[s])
        start = free[slot]
        times = [start + SETUP_S + epoch_s * (k + 1) for k in range(len(spec.curve))]
        end = times[-1] + 0.05
        free[slot] = end + GAP_S
        trial = optuna.trial.create_trial(
            state=spec.state,
            value=spec.curve[-1] if spec.state == TrialState.COMPLETE else None,
            params={"lr": spec.lr, "activation": spec.activation},
            distributions=DISTRIBUTIONS,
            user_attrs={
                ATTR.SLOT: slot, ATTR.DEVICE: spec.devices, ATTR.HOST: "box", ATTR.PID: 100 + slot,
                ATTR.LAUNCHER_PID: 99, ATTR.START: start, ATTR.END: end,
                ATTR.EPOCHS: len(spec.curve), ATTR.EPOCH_END_TIMES: times, ATTR.SEED: 0,
                **({ATTR.FAIL_REASON: "RuntimeError: boom"} if spec.state == TrialState.FAIL
                   else {}),
                **({ATTR.STOP_REASON: spec.stop_reason} if spec.stop_reason else {}),
            },
            intermediate_values={k + 1: v for k, v in enumerate(spec.curve)},
        )
        trial.datetime_start = dt.datetime.fromtimestamp(start)
        trial.datetime_complete = dt.datetime.fromtimestamp(end)
        study.add_trial(trial)
        record_rungs(study, pruner, len(study.trials) - 1)
    if running:
        start = min(free)
        trial = optuna.trial.create_trial(
            state=TrialState.RUNNING, params={"lr": 0.05, "activation": "relu"},
            distributions=DISTRIBUTIONS,
            user_attrs={ATTR.SLOT: free.index(start), ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                        ATTR.START: start},
            intermediate_values={1: 0.55, 2: 0.4},
        )
        trial.datetime_start = dt.datetime.fromtimestamp(start)
        study.add_trial(trial)
        record_rungs(study, pruner, len(study.trials) - 1)
    for _ in range(waiting):
        study.enqueue_trial({})
    return study


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


def _gids(fig: Any, prefix: str) -> list[str]:
    ax = fig.axes[0]
    artists = [*ax.lines, *ax.patches, *ax.collections]
    return [a.get_gid() for a in artists if (a.get_gid() or "").startswith(prefix)]


def _points(fig: Any, gid: str) -> int:
    found = [c for c in fig.axes[0].collections if c.get_gid() == gid]
    return sum(len(c.get_offsets()) for c in found)


def _png_shape(path: Path) -> tuple[int, ...]:
    image = matplotlib.image.imread(path)
    return image.shape


@pytest.fixture
def journal(tmp_path: Path) -> str:
    spec = str(tmp_path / "demo.journal")
    make_launcher_study(spec)
    return spec


@pytest.fixture
def study(journal: str) -> optuna.Study:
    return load(journal)


# ------------------------------------------------------------------------------------------
# Tables.


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


def test_tables_of_a_snapshot_are_the_study_read_once(study: optuna.Study) -> None:
    snap = StudySnapshot.read(study)
    assert StudySnapshot.of(snap) is snap
    assert [t.number for t in snap.trials] == list(range(len(SCENARIO) + 1))  # WAITING left out
    for frame in (trials_frame, curves_frame, incumbent_frame, rungs_frame):
        pd.testing.assert_frame_equal(frame(snap), frame(study))
    assert summarize(snap) == summarize(study) and limitations(snap) == limitations(study)
    # a snapshot reads nothing more: a trial added since shows in the study's tables only
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE, value=0.001, params={"lr": 0.1, "activation": "relu"},
        distributions=DISTRIBUTIONS, intermediate_values={1: 0.001}))
    assert len(trials_frame(study)) == len(trials_frame(snap)) + 1
    assert summarize(study)["best_value"] == pytest.approx(0.001)
    assert summarize(snap)["best_value"] == pytest.approx(0.04)


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


def test_study_info_reads_the_stored_config(study: optuna.Study) -> None:
    info = study_info(study)
    assert info.metric == "validation_error" and info.direction == "minimize"
    assert info.max_epochs == 9
    assert info.pruner == "asha" and list(info.rungs) == RUNGS == [1, 3, 9]
    assert info.brackets == ((1, 3, 9),) and info.budgets == ()
    assert info.from_launcher


def store_pruner_settings(study: optuna.Study, settings: dict[str, Any]) -> None:
    """Write ``PRUNER_ATTR`` as our pruners do, for a study made without them."""
    storage_of(study).set_study_system_attr(study_id_of(study), PRUNER_ATTR, settings)


def stored_pruner_settings(study: optuna.Study) -> Any:
    return storage_of(study).get_study_system_attrs(study_id_of(study)).get(PRUNER_ATTR)


ASHA_UNBOUNDED = {"name": "asha", "min_resource": 1, "reduction_factor": 3, "max_resource": None,
                  "brackets": None, "budgets": []}


@pytest.mark.parametrize(
    ("settings", "max_epochs", "expected", "title"),
    [
        pytest.param({"name": "asha", "min_resource": 1, "reduction_factor": 3,
                      "max_resource": 9, "brackets": [[1, 3, 9]], "budgets": []},
                     9, ((1, 3, 9),), "asha, rungs 1, 3, 9", id="asha"),
        pytest.param({"name": "hyperband", "min_resource": 2, "reduction_factor": 2,
                      "max_resource": 10, "brackets": [[2, 4, 8, 10], [4, 8, 10], [8, 10]],
                      "budgets": trial_allocation_budgets(2, 10, 2)},
                     10, ((2, 4, 8, 10), (4, 8, 10), (8, 10)), "hyperband, 3 brackets",
                     id="hyperband-max-not-a-power"),
        pytest.param(ASHA_UNBOUNDED, 27, ((1, 3, 9, 27),), "asha, rungs 1, 3, 9, 27",
                     id="asha-unbounded-up-to-max-epochs"),
        pytest.param(ASHA_UNBOUNDED, 10, ((1, 3, 9),), "asha, rungs 1, 3, 9",
                     id="asha-unbounded-max-epochs-not-a-rung"),
        pytest.param(ASHA_UNBOUNDED, None, (), "rung levels unknown",
                     id="asha-unbounded-max-epochs-unknown"),
    ],
)
def test_rungs_come_from_what_the_pruner_stored(
    tmp_path: Path, settings: dict[str, Any], max_epochs: int | None,
    expected: tuple[tuple[int, ...], ...], title: str,
) -> None:
    # the study's trials were not run with our pruner and its config names ASHA with rungs
    # 1, 3, 9: what the pruner stored is all that counts
    study = make_launcher_study(str(tmp_path / "r.journal"), running=False,
                                pruner=optuna.pruners.NopPruner())
    assert stored_pruner_settings(study) is None
    trainer = {} if max_epochs is None else {"max_epochs": max_epochs}
    study.set_user_attr(CONFIG_ATTR, json.dumps(dict(CONFIG, trainer=trainer)))
    store_pruner_settings(study, settings)
    info = study_info(study)
    assert info.pruner == settings["name"] and info.max_epochs == max_epochs
    assert info.brackets == expected and info.rungs == (expected[0] if expected else ())
    assert info.budgets == tuple(settings["budgets"])
    if settings["budgets"]:  # each trial in the bracket the pruner would give it
        assert trials_frame(study)["bracket"].tolist() == [
            bracket_of("demo", n, settings["budgets"]) for n in range(len(SCENARIO))]
    fig = plot_rungs(curves_frame(study), info)
    assert len(_gids(fig, "rung-")) == len(expected[0] if expected else ())
    assert title in fig.get_suptitle()


@pytest.mark.parametrize(
    ("pruner", "expected", "title", "note"),
    [
        pytest.param(CONFIG["pruner"], None, "rung levels unknown",
                     "rung levels: no pruner settings in the study", id="config-says-asha"),
        pytest.param("none", "none", "no pruner", "rung levels: no pruner", id="config-says-none"),
    ],
)
def test_without_stored_pruner_settings_no_rungs_are_known(
    tmp_path: Path, pruner: object, expected: str | None, title: str, note: str
) -> None:
    # the config is not read for rungs: it may name a pruner that never decided anything
    study = make_launcher_study(str(tmp_path / "r.journal"), running=False,
                                pruner=optuna.pruners.NopPruner())
    study.set_user_attr(CONFIG_ATTR, json.dumps(dict(CONFIG, pruner=pruner)))
    info = study_info(study)
    assert info.pruner == expected and info.rungs == () and info.brackets == ()
    assert trials_frame(study)["bracket"].isna().all() and rungs_frame(study).empty
    assert any(n.startswith(note) for n in limitations(study)), limitations(study)
    assert title in plot_rungs(curves_frame(study), info).get_suptitle()


# ------------------------------------------------------------------------------------------
# The headline best, the ranking, Hyperband's brackets.

#: A study whose best value came from a trial the launcher stopped at its wall-clock budget.
STOPPED_BEST = (
    Spec(TrialState.COMPLETE, (0.5, 0.3, 0.2, 0.15, 0.12, 0.1, 0.08, 0.07, 0.06), 0.1),
    Spec(TrialState.PRUNED, (0.95, 0.92, 0.90), 0.9),  # pruned at rung 3 with 0.90
    Spec(TrialState.COMPLETE, (0.4, 0.2, 0.1, 0.08, 0.06, 0.05, 0.045, 0.042, 0.04), 0.2),
    Spec(TrialState.PRUNED, (0.3, 0.009), 0.3, stop_reason=BUDGET),  # 2 epochs: at rung 1
)


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


#: A config that names no pruner (as a callback-only study has no config at all): the rungs
#: must come from what the pruner stored.
HB_CONFIG = {k: v for k, v in CONFIG.items() if k != "pruner"} | {"study": "hb"}


def make_hyperband_study(storage: str, n_trials: int = 40) -> optuna.Study:
    """A Hyperband study run through the real pruner, trial after trial on one slot.

    Each trial reports a made-up curve epoch by epoch and stops when the pruner says so, as the
    launcher's workers do; the launcher's timing attrs are written as it would.
    """
    pruner = HyperbandPruner(min_resource=1, max_resource=9, reduction_factor=3)
    study = optuna.create_study(study_name="hb", storage=open_storage(storage), pruner=pruner,
                                sampler=optuna.samplers.RandomSampler(seed=0))
    study.set_user_attr(CONFIG_ATTR, json.dumps(HB_CONFIG))
    clock = T0
    for _ in range(n_trials):
        trial = study.ask()
        lr = trial.suggest_float("lr", 0.01, 1.0, log=True)
        trial.suggest_categorical("activation", ["relu", "sigmoid"])
        start, times, value, pruned = clock, [], 1.0, False
        for epoch in range(1, 10):
            value = 0.9 * abs(math.log10(lr) + 1.0) + 0.5 / epoch
            clock += EPOCH_S
            times.append(clock)
            trial.report(value, epoch)
            if trial.should_prune():
                pruned = True
                break
        for key, attr in {ATTR.SLOT: 0, ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                          ATTR.START: start, ATTR.END: clock, ATTR.EPOCHS: len(times),
                          ATTR.EPOCH_END_TIMES: times}.items():
            trial.set_user_attr(key, attr)
        if pruned:
            study.tell(trial, state=TrialState.PRUNED)
        else:
            study.tell(trial, value)
        clock += GAP_S
    return study


def test_hyperband_rungs_are_the_records_of_each_trials_own_bracket(tmp_path: Path) -> None:
    study = make_hyperband_study(str(tmp_path / "hb.journal"))
    pruner = HyperbandPruner(min_resource=1, max_resource=9, reduction_factor=3)
    info = study_info(study)
    stored = stored_pruner_settings(study)  # written by the pruner at its first decision
    assert stored["name"] == info.pruner == "hyperband"
    assert info.brackets == tuple(map(tuple, stored["brackets"])) == tuple(
        tuple(pruner.bracket_levels(b)) for b in range(pruner.n_brackets)) == (
        (1, 3, 9), (3, 9), (9,))
    assert info.budgets == tuple(stored["budgets"]) == tuple(pruner.trial_allocation_budgets)
    trials = trials_frame(study).set_index("trial")
    brackets = {t.number: pruner.bracket_of("hb", t.number) for t in study.trials}
    assert len(set(brackets.values())) == 3  # the scenario fills every bracket
    assert trials["bracket"].to_dict() == brackets  # stored, or as the pruner computes it
    stored = {t.number: t.system_attrs[BRACKET_ATTR] for t in study.trials
              if BRACKET_ATTR in t.system_attrs}
    assert stored and all(brackets[n] == b for n, b in stored.items())
    rungs = rungs_frame(study)
    assert len(rungs) == len(rung_records(study)) > 0
    for row in rungs.itertuples(index=False):
        trial = study.trials[row.trial]
        assert row.bracket == brackets[row.trial]
        assert row.rung in pruner.bracket_levels(row.bracket)[:-1]  # a decision was made there
        last = max(trial.intermediate_values)
        expected = "promoted" if last > row.rung else "pruned"
        assert row.outcome == expected and (expected == "promoted" or trial.state.name ==
                                            "PRUNED")
    fig = plot_rungs(curves_frame(study), info, rungs)
    panels = {ax.get_gid(): ax for ax in fig.axes if ax.get_visible()}
    assert sorted(panels) == ["bracket-0", "bracket-1", "bracket-2"]
    for bracket, levels in enumerate(info.brackets):
        ax = panels[f"bracket-{bracket}"]
        assert sorted(a.get_gid() for a in ax.lines if a.get_gid().startswith("rung-")) == sorted(
            f"rung-{r}" for r in levels)
        mine = {n for n, b in brackets.items() if b == bracket}
        drawn = {int(a.get_gid().split("-")[1]) for a in ax.lines
                 if a.get_gid().startswith("trial-")}
        assert drawn == mine, bracket
        for kind in ("promoted", "pruned"):
            points = [p for c in ax.collections if c.get_gid() == kind for p in c.get_offsets()]
            expected = rungs[(rungs["bracket"] == bracket) & (rungs["outcome"] == kind)]
            assert sorted(x for x, _ in points) == sorted(expected["rung"].tolist()), kind
            assert all(x in levels[:-1] for x, _ in points)  # only at the bracket's own rungs


# ------------------------------------------------------------------------------------------
# Files and plots.


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


def test_learning_curves_draw_every_trial_with_pruned_distinct(study: optuna.Study) -> None:
    fig = plot_learning_curves(curves_frame(study), study_info(study))
    lines = {line.get_gid(): line for line in fig.axes[0].lines
             if (line.get_gid() or "").startswith("trial-")}
    # the RUNNING trial has no epoch times yet: it cannot be placed on the wall-clock axis
    assert len(lines) == len(SCENARIO)
    for number, spec in enumerate(SCENARIO):
        line = lines[f"trial-{number}"]
        assert len(line.get_xdata()) == len(spec.curve)
        if spec.state == TrialState.PRUNED:
            assert line.get_linestyle() == "--"
        else:
            assert line.get_linestyle() in ("-", ":")
    assert lines["trial-3"].get_color() == "black"  # the best trial stands out
    assert fig.axes[0].get_xlabel().endswith("(s)")
    by_epochs = plot_learning_curves(curves_frame(study), study_info(study), x="epochs")
    assert len(_gids(by_epochs, "trial-")) == len(SCENARIO) + 1


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


def test_rung_plot_marks_rungs_promotions_and_stops(study: optuna.Study) -> None:
    fig = plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 1  # ASHA: one bracket
    assert sorted(_gids(fig, "rung-")) == sorted(f"rung-{r}" for r in RUNGS)
    curves = [s.curve for s in SCENARIO] + [(0.55, 0.4)]
    promoted = sum(1 for c in curves for r in RUNGS[:-1] if len(c) > r)
    pruned = sum(1 for s in SCENARIO if s.state == TrialState.PRUNED and len(s.curve) in RUNGS)
    assert _points(fig, "promoted") == promoted == 10
    assert _points(fig, "pruned") == pruned == 4
    assert _points(fig, "completed") == 3
    assert _points(fig, "failed") == 1 and _points(fig, "running") == 1
    assert _points(fig, "stopped-by-budget") == 0
    assert len(_gids(fig, "trial-")) == len(SCENARIO) + 1
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["9 in, 7 on", "5 in, 3 on", "3 in"]  # records at 1 and 3; 3 reached 9


def test_timeline_has_a_bar_per_trial_on_its_slot(study: optuna.Study) -> None:
    trials = trials_frame(study)
    fig = plot_timeline(trials, study_info(study), curves_frame(study))
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("trial-")}
    assert len(bars) == len(trials)
    latest = trials["end_s"].max()  # a RUNNING trial is drawn up to the latest time known
    for _, row in trials.iterrows():
        bar = bars[f"trial-{row['trial']}"]
        assert bar.get_x() == pytest.approx(row["start_s"])
        if row["state"] == "RUNNING":
            assert bar.get_width() == pytest.approx(latest - row["start_s"])
            assert bar.get_hatch() == "//"
        else:
            assert bar.get_width() == pytest.approx(row["duration_s"])
        assert round(bar.get_y() + bar.get_height() / 2) == row["slot"]
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert [label.split("\n")[0] for label in labels] == ["slot 0", "slot 1"]
    assert all("idle" in label for label in labels)


def test_incumbent_plot_draws_both_incumbents(study: optuna.Study) -> None:
    inc = incumbent_frame(study)
    fig = plot_incumbent(inc, study_info(study))
    assert _points(fig, "completed") == 3
    assert _points(fig, "reported") == int((inc["kind"] == "epoch").sum())
    assert _points(fig, "improvements") == int(inc["improved"].sum())
    lines = {line.get_gid(): line for line in fig.axes[0].lines}
    assert min(lines["incumbent"].get_ydata()) == pytest.approx(inc["best"].min())
    assert min(lines["incumbent-complete"].get_ydata()) == pytest.approx(study.best_value)
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any("any trial, any epoch" in label for label in labels)
    assert any("COMPLETE trial so far" in label for label in labels)


# ------------------------------------------------------------------------------------------
# Plain Optuna studies, comparisons, errors.


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


def test_compare_time_and_epochs_to_reach_the_other_best(tmp_path: Path) -> None:
    spec = str(tmp_path / "both.journal")
    fast = make_launcher_study(spec, "fast", running=False, waiting=0, epoch_s=0.5)
    slow = make_launcher_study(spec, "slow", running=False, waiting=0, epoch_s=1.0)
    pairs = compare([fast, slow])
    assert list(zip(pairs["study"], pairs["target"], strict=True)) == [("fast", "slow"),
                                                                        ("slow", "fast")]
    assert pairs["reached"].all()  # the same values, half the time per epoch
    row = pairs.set_index("study").loc["fast"]
    assert row["time_s"] < row["target_time_s"] and row["time_speedup"] > 1.5
    # the target is the best value reported anywhere: trial 3's last epoch in both studies
    inc = incumbent_frame(fast)
    first = inc[inc["best"] <= row["target_best"]].iloc[0]
    assert row["target_best"] == pytest.approx(0.04) and first["trial"] == 3
    assert row["time_s"] == pytest.approx(first["elapsed_s"])
    assert row["epochs"] == row["target_epochs"] == first["epochs_spent"]
    comparison = Comparison.of([fast, slow])  # read once: the table, the files, the plot
    pd.testing.assert_frame_equal(comparison.pairs, pairs)
    assert list(comparison.snapshots) == ["fast", "slow"]
    assert list(Comparison.of([fast, fast]).snapshots) == ["fast", "fast (2)"]
    paths = write_compare(comparison, tmp_path / "cmp")
    assert len(pd.read_csv(paths["compare.csv"])) == 2
    long = pd.read_csv(paths["incumbents.csv"])
    assert sorted(set(long["study"])) == ["fast", "slow"]
    fig = plot_compare(long, study_info(fast))
    assert len(fig.axes) == 2
    for ax in fig.axes:
        assert sorted(a.get_gid() for a in ax.lines if a.get_gid().startswith("study-")) == [
            "study-fast", "study-slow"]
    height, width, _ = _png_shape(paths["compare.png"])
    assert width >= 1000 and height >= 400


def test_compare_cli_takes_names_and_name_at_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shared = str(tmp_path / "shared.journal")
    other = f"sqlite:///{tmp_path / 'other.db'}"
    make_launcher_study(shared, "asha", running=False)
    make_launcher_study(shared, "rs", running=False, epoch_s=2.0)
    make_launcher_study(other, "four", running=False, epoch_s=0.25)
    out = tmp_path / "cmp"
    code = main(["--storage", shared, "--compare", "asha", "rs", f"four@{other}",
                 "--out", str(out)])
    stdout = capsys.readouterr().out
    assert code == 0, stdout
    assert len(pd.read_csv(out / "compare.csv")) == 6
    assert "Time and compute to reach" in stdout and "four" in stdout
    assert load_ref(f"four@{other}").study_name == "four"


def test_a_comparison_needs_two_studies_everywhere(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "one.journal")
    only = make_launcher_study(spec, "only", running=False)
    for call in (compare, Comparison.of, lambda s: write_compare(s, tmp_path / "cmp")):
        with pytest.raises(ConfigError, match="needs at least 2 studies, got 1") as caught:
            call([only])
        assert caught.value.field == "compare"
    with pytest.raises(ConfigError, match="got 0"):
        compare({})
    assert main(["--storage", spec, "--compare", "only"]) == 2
    assert capsys.readouterr().err == "error: compare: needs at least 2 studies, got 1\n"
    assert not (tmp_path / "cmp").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        pytest.param(["--study", "nope"], "error: study: no study named 'nope'", id="wrong-name"),
        pytest.param(["--study", "empty"], "error: study: 'empty' has no started trial",
                     id="empty-study"),
        pytest.param([], "error: study: ", id="several-studies-need-a-name"),
    ],
)
def test_bad_study_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    spec = str(tmp_path / "s.journal")
    make_launcher_study(spec, "demo")
    optuna.create_study(study_name="empty", storage=open_storage(spec)).enqueue_trial({})
    assert main(["--storage", spec, *args]) == 2
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1, err
    if not args:  # the error lists the studies to choose from
        assert "demo" in err and "empty" in err


@pytest.mark.parametrize(
    "spec",
    [
        pytest.param("postgresql+psycopg2://hpo:s3cret-pw@127.0.0.1:1/studies",
                     id="postgres-refused"),
        pytest.param("postgresql://hpo:s3cret-pw@127.0.0.1:1/studies", id="postgres-no-driver"),
        pytest.param("sqlite:///{tmp}/missing/none.db", id="sqlite-missing"),
        pytest.param("{tmp}/missing.journal", id="journal-missing"),
    ],
)
def test_unreachable_storage_is_one_masked_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], spec: str
) -> None:
    spec = spec.format(tmp=tmp_path)
    assert main(["--storage", spec]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: storage: cannot open") and err.count("\n") == 1, err
    assert "s3cret" not in err
    assert not (tmp_path / "missing").exists()  # nothing created


def test_load_takes_the_only_study_and_names_fields(tmp_path: Path) -> None:
    spec = str(tmp_path / "one.journal")
    make_launcher_study(spec, "only")
    assert load(spec).study_name == "only"
    assert load_ref(f"only@{spec}").study_name == "only"
    with pytest.raises(ConfigError) as caught:
        load(spec, "missing")
    assert caught.value.field == "study" and "only" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        load_ref("only")  # a bare name and no storage
    assert caught.value.field == "storage"


REPORT_DIR = Path(__file__).resolve().parents[1] / "lightning_hpo" / "report"
#: What the report may import of the package: the storage side only.
STORAGE_SIDE = {"lightning_hpo._optuna", "lightning_hpo._rung_store", "lightning_hpo.errors",
                "lightning_hpo.rungs", "lightning_hpo.schema", "lightning_hpo.storage"}


def _package_imports(path: Path) -> list[tuple[str, str | None]]:
    """(module, name) for every import of lightning_hpo in a file, function bodies included;
    name is None for ``import module``. Relative imports resolve inside the report."""
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(alias.name, None) for alias in node.names
                      if alias.name.split(".")[0] == "lightning_hpo"]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = "lightning_hpo.report" + (f".{module}" if module else "")
            if module.split(".")[0] == "lightning_hpo":
                found += [(module, alias.name) for alias in node.names]
    return found


def test_report_imports_only_the_storage_side_and_no_private_name() -> None:
    files = sorted(REPORT_DIR.glob("*.py"))
    assert {"__init__.py", "__main__.py", "plots.py", "snapshot.py", "tables.py"} <= {
        f.name for f in files}
    wrong, private = [], []
    for path in files:
        imports = _package_imports(path)
        assert imports, path  # every module of the report builds on the package
        for module, name in imports:
            if module not in STORAGE_SIDE and not module.startswith("lightning_hpo.report"):
                wrong.append(f"{path.name}: {module}")
            public_module = not module.rpartition(".")[2].startswith("_") or module.endswith(
                "__main__")
            if name is not None and name.startswith("_") and public_module:
                private.append(f"{path.name}: {module}.{name}")
    assert not wrong, wrong
    assert not private, private


def test_report_loads_no_launcher_pruner_config_or_torch(journal: str, tmp_path: Path) -> None:
    # the whole CLI path, imports inside functions included, on a study of our pruner
    code = (
        "import sys\n"
        "from lightning_hpo.report.__main__ import main\n"
        f"assert main(['--storage', {journal!r}, '--out', {str(tmp_path / 'rep')!r}]) == 0\n"
        "print(' '.join(sorted(m for m in sys.modules if m.startswith(('lightning_hpo', "
        "'torch')))))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr[-2000:]
    loaded = set(out.stdout.split("\n")[-2].split())
    assert "lightning_hpo.report.tables" in loaded and "lightning_hpo._rung_store" in loaded
    assert not {m for m in loaded if m.startswith(("lightning_hpo.launch.config",
                                                   "lightning_hpo.launch",
                                                   "lightning_hpo.pruners", "torch"))}, loaded
    assert (tmp_path / "rep" / "rungs.png").exists()


def test_help_shows_an_example() -> None:
    result = subprocess.run([sys.executable, "-m", "lightning_hpo.report", "--help"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0
    assert "python -m lightning_hpo.report --storage" in result.stdout
    assert "--compare" in result.stdout


# ------------------------------------------------------------------------------------------
# The real launcher, then the report CLI on its storage.


@pytest.mark.slow
def test_report_on_a_real_launcher_run(tmp_path: Path) -> None:
    storage = str(tmp_path / "e2e.journal")
    config = {
        "study": "e2e", "storage": storage, "run_dir": str(tmp_path / "runs"),
        "model": {"name": "lenet"}, "data": {"name": "digits"},
        "space": {"lr": {"loguniform": [0.01, 1.0]}},
        "initial": [{"lr": 0.1}], "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "asha", "max_resource": 3},
        "trainer": {"limit_train_batches": 5, "limit_val_batches": 2},
        "devices": {"accelerator": "cpu"}, "stop": {"n_trials": 6},
    }
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    env = dict(os.environ)
    launched = subprocess.run([sys.executable, "-m", "lightning_hpo.launch", str(path), "-q"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=420)
    assert launched.returncode == 0, launched.stdout[-3000:] + launched.stderr[-3000:]
    out = tmp_path / "report"
    reported = subprocess.run(
        [sys.executable, "-m", "lightning_hpo.report", "--storage", storage, "--out", str(out)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120,
    )
    assert reported.returncode == 0, reported.stderr
    assert "note:" not in reported.stdout  # a launcher study lacks nothing
    assert "Compute:" in reported.stdout and "device-s" in reported.stdout
    study = load(storage, "e2e")
    trials = [t for t in study.trials if t.state != TrialState.WAITING]
    assert len(trials) == 6
    frame = pd.read_csv(out / "trials.csv")
    assert frame["trial"].tolist() == [t.number for t in trials]
    assert frame["state"].tolist() == [t.state.name for t in trials]
    assert frame["epochs"].tolist() == [t.user_attrs[ATTR.EPOCHS] for t in trials]
    assert frame["slot"].tolist() == [t.user_attrs[ATTR.SLOT] for t in trials]
    curves = pd.read_csv(out / "curves.csv")
    assert len(curves) == sum(len(t.intermediate_values) for t in trials)
    assert curves["time"].notna().all()  # the launcher wrote every epoch's end time
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    incumbent = pd.read_csv(out / "incumbent.csv")
    values = [v for t in trials for v in t.intermediate_values.values()]  # any epoch, any trial
    assert incumbent["best"].iloc[-1] == pytest.approx(min(values))
    assert f"Best validation_error observed: {min(values):.4g}, trial " in reported.stdout
    if complete:
        assert incumbent["best_complete"].iloc[-1] == pytest.approx(study.best_value)
    for name in PNGS:  # incumbent.png too: a value was reported even if no trial completed
        height, width, _ = _png_shape(out / name)
        assert width >= 900 and height >= 250, name
    rungs = pd.read_csv(out / "rungs.csv")
    assert len(rungs) == len(rung_records(study)) > 0  # the pruner's own records
    rung_fig = plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))
    assert sorted(_gids(rung_fig, "rung-")) == ["rung-1", "rung-3"]
    for kind in ("promoted", "pruned"):
        assert _points(rung_fig, kind) == int((rungs["outcome"] == kind).sum()), kind


# ------------------------------------------------------------------------------------------
# Pausing schedules and crash resume: paused trials, training segments.

#: A sync_sh study with rungs 2, 4, 8 (min_resource 2, reduction_factor 2, max_resource 8).
PAUSE_CONFIG = dict(CONFIG, study="paused",
                    pruner={"name": "sync_sh", "min_resource": 2, "max_resource": 8,
                            "reduction_factor": 2},
                    trainer={"max_epochs": 8})
PAUSE_RUNGS = (2, 4, 8)
NOT_PROMOTED = "not promoted from rung 2"


def seg(slot: int, start: float, end: float | None, from_epoch: int, to_epoch: int | None,
        how: str | None) -> dict[str, Any]:
    """One ATTR.SEGMENTS entry, times in s after T0, as the launcher writes it."""
    return {"slot": slot, "device": f"cpu:{slot}", "start": T0 + start,
            "end": None if end is None else T0 + end, "from_epoch": from_epoch,
            "to_epoch": to_epoch, "how": how}


def paused_attr(epoch: int, since: float, why: str) -> dict[str, Any]:
    return {"epoch": epoch, "checkpoint": f"/ckpt/e{epoch}.ckpt", "since": T0 + since,
            "target": None, "why": why}


#: trial -> (state, curve, epoch end times (s after T0), user attrs). Trial 0 trains in three
#: segments on slots 0, 1, 0 and completes; 1 waits PAUSED at rung 4 after two segments (and
#: reported the best value); 2 was not promoted from rung 2 (its pause is left behind, as the
#: scheduler leaves it); 3 crashed after 3 epochs on slot 1 and was resumed from its epoch-2
#: checkpoint on slot 0 (epoch 3 trained twice); 4 was stopped by the budget and lists no
#: segment; 5 trains its second segment now.
PAUSE_SCENARIO: dict[int, tuple[TrialState, tuple[float, ...], list[float], dict[str, Any]]] = {
    0: (TrialState.COMPLETE, (0.6, 0.5, 0.4, 0.35, 0.3, 0.27, 0.25, 0.24),
        [1.25, 2.25, 7.25, 8.25, 10.25, 11.25, 12.25, 13.25],
        {ATTR.START: T0, ATTR.END: T0 + 13.5, ATTR.SLOT: 0,
         ATTR.SEGMENTS: [seg(0, 0, 2.5, 0, 2, "paused"), seg(1, 6, 8.5, 2, 4, "paused"),
                         seg(0, 9, 13.5, 4, 8, "complete")]}),
    1: (TrialState.RUNNING, (0.7, 0.55, 0.45, 0.2), [1.3, 2.3, 4.25, 5.25],
        {ATTR.START: T0 + 0.05, ATTR.END: T0 + 5.5, ATTR.SLOT: 0,  # its last segment's end
         ATTR.PAUSED: paused_attr(4, 5.5, "rung 4"),
         ATTR.SEGMENTS: [seg(1, 0.05, 2.55, 0, 2, "paused"), seg(0, 3, 5.5, 2, 4, "paused")]}),
    2: (TrialState.PRUNED, (0.9, 0.8), [3.85, 4.85],
        {ATTR.START: T0 + 2.6, ATTR.END: T0 + 8.6, ATTR.SLOT: 1,
         ATTR.STOP_REASON: NOT_PROMOTED, ATTR.PAUSED: paused_attr(2, 5.1, "rung 2"),
         ATTR.SEGMENTS: [seg(1, 2.6, 5.1, 0, 2, "paused")]}),
    3: (TrialState.COMPLETE, (0.65, 0.5, 0.42, 0.36, 0.31, 0.28, 0.26, 0.23),
        [9.85, 10.85, 15.25, 16.25, 17.25, 18.25, 19.25, 20.25],
        {ATTR.START: T0 + 8.6, ATTR.END: T0 + 20.5, ATTR.SLOT: 0,
         ATTR.ATTEMPTS: ["worker for slot 1 (pid 7) was killed by SIGKILL"],
         ATTR.SEGMENTS: [seg(1, 8.6, 12.0, 0, 3, "crashed"),
                         seg(0, 14.0, 20.5, 2, 8, "complete")]}),
    4: (TrialState.PRUNED, (0.85, 0.75), [13.75, 14.75],
        {ATTR.START: T0 + 12.5, ATTR.END: T0 + 15.0, ATTR.SLOT: 1, ATTR.STOP_REASON: BUDGET}),
    5: (TrialState.RUNNING, (0.75, 0.6, 0.5), [16.75, 17.75],
        {ATTR.START: T0 + 15.5, ATTR.END: T0 + 18.0, ATTR.SLOT: 1, ATTR.TARGET: 4,
         ATTR.SEGMENTS: [seg(1, 15.5, 18.0, 0, 2, "paused"), seg(1, 19.0, None, 2, None, None)]}),
}
#: Seconds each trial trained (its segments, pauses left out), all on one device.
PAUSE_TRAINED_S = {0: 9.5, 1: 5.0, 2: 2.5, 3: 9.9, 4: 2.5, 5: 2.5}


def make_paused_study(storage: str | optuna.storages.BaseStorage) -> optuna.Study:
    """:data:`PAUSE_SCENARIO` as the launcher's scheduler leaves it, with one ticket WAITING;
    the schedule's rung ladder is stored where the pruners store theirs."""
    if isinstance(storage, str):
        storage = open_storage(storage)
    study = optuna.create_study(study_name="paused", storage=storage, direction="minimize")
    study.set_user_attr(CONFIG_ATTR, json.dumps(PAUSE_CONFIG))
    store_pruner_settings(study, {"name": "sync_sh", "min_resource": 2, "reduction_factor": 2,
                                  "max_resource": 8, "brackets": [list(PAUSE_RUNGS)],
                                  "budgets": []})
    for number, (state, curve, times, attrs) in PAUSE_SCENARIO.items():
        trial = optuna.trial.create_trial(
            state=state, value=curve[-1] if state == TrialState.COMPLETE else None,
            params={"lr": 0.1 + number / 100, "activation": "relu"}, distributions=DISTRIBUTIONS,
            user_attrs={ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                        ATTR.EPOCH_END_TIMES: [T0 + x for x in times], **attrs},
            intermediate_values={k + 1: v for k, v in enumerate(curve)},
        )
        study.add_trial(trial)
        assert study.trials[-1].number == number
    study.enqueue_trial({})
    return study


@pytest.fixture(params=["inmemory", "journal"])
def paused_study(request: pytest.FixtureRequest, tmp_path: Path) -> optuna.Study:
    if request.param == "inmemory":
        return make_paused_study(optuna.storages.InMemoryStorage())
    spec = str(tmp_path / "paused.journal")
    make_paused_study(spec)
    return load(spec)  # read back from the file


def test_snapshot_reads_pauses_and_segments(paused_study: optuna.Study) -> None:
    snap = StudySnapshot.read(paused_study)
    trials = {t.number: t for t in snap.trials}
    paused = trials[1]
    assert paused.state == "RUNNING" and paused.status == "PAUSED"
    assert paused.paused == Pause(epoch=4, checkpoint="/ckpt/e4.ckpt", since=T0 + 5.5,
                                  target=None, why="rung 4")
    assert paused.paused.at_rung and paused.end is None
    assert [(s.slot, s.from_epoch, s.to_epoch, s.how) for s in paused.segments] == [
        (1, 0, 2, "paused"), (0, 2, 4, "paused")]
    assert [(s.start, s.end) for s in paused.segments] == [
        (pytest.approx(T0 + 0.05), pytest.approx(T0 + 2.55)), (T0 + 3.0, T0 + 5.5)]
    assert all(s.listed and s.host == "box" and s.devices == 1 for s in paused.segments)
    assert paused.busy_until(snap.horizon) == pytest.approx(T0 + 5.5)  # not up to the horizon
    assert paused.times == tuple(pytest.approx(T0 + x) for x in PAUSE_SCENARIO[1][2])
    # a finished trial is never paused, even with its last pause left behind
    assert trials[2].paused is None and trials[2].status == "PRUNED"
    assert trials[2].stopped_by == "pruner"  # not promoted by the schedule, not the budget
    assert trials[4].stopped_by == "budget" and trials[4].segments == ()
    (whole,) = trials[4].spans  # one segment: its whole run, on its slot
    assert not whole.listed and (whole.slot, whole.start, whole.end) == (
        1, T0 + 12.5, T0 + 15.0)
    assert trials[3].epochs == 8 and trials[3].epochs_trained == 9  # epoch 3 trained twice
    assert trials[5].status == "RUNNING" and trials[5].in_flight
    assert trials[5].segments[-1].end is None and trials[5].epochs_trained == 3
    assert {n: t.device_seconds for n, t in trials.items()} == pytest.approx(PAUSE_TRAINED_S)
    assert [t.number for t in snap.paused] == [1]
    assert snap.counts["RUNNING"] == 2  # Optuna's counts: a paused trial is RUNNING
    assert snap.statuses == {"COMPLETE": 2, "PRUNED": 2, "FAIL": 0, "RUNNING": 1, "PAUSED": 1,
                             "WAITING": 1}
    assert snap.horizon == pytest.approx(T0 + 20.5)


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


def test_report_files_and_cli_show_paused_trials(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    spec = str(tmp_path / "paused.journal")
    make_paused_study(spec)
    out = tmp_path / "rep"
    assert main(["--storage", spec, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "Trials: 7 (2 complete, 2 pruned, 1 running, 1 paused, 1 waiting)" in stdout
    assert ("Paused (RUNNING in Optuna, resumed from their checkpoint by the next run): trial 1 "
            "at epoch 4 (rung 4)") in stdout
    assert "Best validation_error observed: 0.2, trial 1 at epoch 4 (PAUSED, to be resumed;" in (
        stdout)
    rows = {int(cells[2]): cells[3].split()[0] for line in stdout.splitlines()
            if line.startswith("│") and (cells := line.split("│"))[1].strip()}
    assert rows == {1: "PAUSED", 3: "COMPLETE", 0: "COMPLETE", 5: "RUNNING", 4: "PRUNED",
                    2: "PRUNED"}
    assert "rung records" not in stdout  # a pausing schedule keeps none: nothing is missing
    assert "(+ 1 trial(s) training now: the segment in flight not counted in device-s)" in stdout
    files = sorted(p.name for p in out.iterdir())
    assert files == sorted(["trials.csv", "curves.csv", "incumbent.csv", "rungs.csv",
                            "segments.csv", *PNGS])
    trials = pd.read_csv(out / "trials.csv").set_index("trial")
    assert trials.loc[1, "state"] == "RUNNING" and bool(trials.loc[1, "paused"])
    assert trials.loc[1, "paused_epoch"] == 4 and not trials["paused"].drop(index=1).any()
    segments = pd.read_csv(out / "segments.csv")
    assert len(segments) == 11 and segments["trial"].tolist() == [0, 0, 0, 1, 1, 2, 3, 3, 4, 5, 5]
    for name in PNGS:
        height, width, _ = _png_shape(out / name)
        assert width >= 900 and height >= 250, name


def test_timeline_draws_each_segment_on_its_slot_with_the_pauses(
    paused_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(paused_study)
    segments = segments_frame(snap)
    fig = plot_timeline(trials_frame(snap), snap.info, curves_frame(snap), segments)
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("trial-")}
    assert sorted(bars) == sorted(["trial-0:1", "trial-0:2", "trial-0:3", "trial-1:1",
                                   "trial-1:2", "trial-2:1", "trial-3:1", "trial-3:2",
                                   "trial-4", "trial-5:1", "trial-5:2"])
    for row in segments.itertuples(index=False):
        bar = bars[f"trial-{row.trial}:{row.segment}" if row.listed else f"trial-{row.trial}"]
        assert bar.get_x() == pytest.approx(row.start_s)
        assert round(bar.get_y() + bar.get_height() / 2) == row.slot  # on its own slot
        if pd.isna(row.end_s):  # in flight: up to the latest time known, hatched
            assert bar.get_width() == pytest.approx(20.5 - row.start_s)
            assert bar.get_hatch() == "//"
        else:
            assert bar.get_width() == pytest.approx(row.duration_s) and not bar.get_hatch()
    paused_color = matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"])
    assert bars["trial-1:1"].get_facecolor() == bars["trial-1:2"].get_facecolor() == paused_color
    assert bars["trial-0:1"].get_facecolor() == matplotlib.colors.to_rgba(
        STATE_COLORS["COMPLETE"])
    assert bars["trial-3:1"].get_edgecolor() == matplotlib.colors.to_rgba(STATE_COLORS["FAIL"])
    # one dotted line per pause, from a segment's end to the next one's start
    pauses = [line for line in ax.lines if (line.get_gid() or "").startswith("pause-")]
    assert sorted(line.get_gid() for line in pauses) == [
        "pause-0", "pause-0", "pause-1", "pause-3", "pause-5"]
    joins = sorted((tuple(line.get_xdata()), tuple(line.get_ydata()))
                   for line in pauses if line.get_gid() == "pause-0")
    assert joins == [((2.5, 6.0), (0, 1)), ((8.5, 9.0), (1, 0))]
    # the pauses are idle time: slot 0 trained 16 s, slot 1 17.4 s of the 20.5 s
    labels = [t.get_text() for t in ax.get_yticklabels()]
    assert labels == ["slot 0\nidle 22%", "slot 1\nidle 15%"]
    assert "1 paused" in ax.get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "PAUSED (1)" in legend and "pause between a trial's segments" in legend
    # without the segments: one bar per trial, a paused one up to its pause
    whole = plot_timeline(trials_frame(snap), snap.info, curves_frame(snap))
    bars = {p.get_gid(): p for p in whole.axes[0].patches}
    assert len(bars) == len(snap.trials)
    assert bars["trial-1"].get_width() == pytest.approx(5.45) and not bars["trial-1"].get_hatch()
    assert bars["trial-1"].get_facecolor() == paused_color
    assert bars["trial-5"].get_width() == pytest.approx(20.5 - 15.5)  # RUNNING: to the horizon
    assert bars["trial-5"].get_hatch() == "//"


def test_rung_plot_shows_paused_promoted_and_stopped_trials(paused_study: optuna.Study) -> None:
    snap = StudySnapshot.read(paused_study)
    assert rungs_frame(snap).empty  # a pausing schedule keeps no rung records
    fig = plot_rungs(curves_frame(snap), snap.info, rungs_frame(snap), trials_frame(snap))
    assert "sync_sh, rungs 2, 4, 8 epochs" in fig.get_suptitle()

    def points(gid: str) -> list[tuple[float, float]]:
        return sorted((float(x), float(y)) for c in fig.axes[0].collections
                      if c.get_gid() == gid for x, y in c.get_offsets())

    # promoted: reported an epoch past the rung (the value where it reached the rung)
    assert points("promoted") == sorted(  # trials 0, 1, 3, 5 at rung 2; 0 and 3 at rung 4
        [(2, 0.5), (2, 0.55), (2, 0.5), (2, 0.6), (4, 0.35), (4, 0.36)])
    assert points("paused") == [(4.0, 0.2)]  # trial 1 waits at rung 4
    assert points("pruned") == [(2.0, 0.8)]  # trial 2 was not promoted from rung 2
    assert points("stopped-by-budget") == [(2.0, 0.75)]
    assert points("completed") == [(8.0, 0.23), (8.0, 0.24)]
    assert points("running") == [(3.0, 0.5)]  # trial 5, training on
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert texts == ["6 in, 4 on", "3 in, 2 on, 1 paused", "2 in"]
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert any(label.startswith("PAUSED here") and label.endswith("(1)") for label in legend)
    # without the trials frame the curves' status says who is paused (at its last epoch)
    plain = plot_rungs(curves_frame(snap), snap.info, rungs_frame(snap))
    assert [tuple(p) for c in plain.axes[0].collections if c.get_gid() == "paused"
            for p in c.get_offsets()] == [(4.0, 0.2)]
    assert _points(plain, "running") == 1


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


JUNK = [
    pytest.param("yes", "segments", id="strings"),
    pytest.param(1, 3, id="numbers"),
    pytest.param([4], {"start": 1}, id="list-and-dict"),
    pytest.param(True, [1, None, "x", [2]], id="bool-and-list-of-junk"),
    pytest.param({"epoch": "four", "since": "x", "target": True, "why": 5},
                 [{"start": "a"}, {"end": 3}, {"start": T0 + 5, "end": T0 + 4}],
                 id="fields-of-the-wrong-kind"),
]


@pytest.mark.parametrize(("paused", "segments"), JUNK)
def test_attributes_written_by_another_tool_are_read_as_far_as_they_make_sense(
    tmp_path: Path, paused: Any, segments: Any
) -> None:
    study = optuna.create_study(study_name="other", storage=open_storage(
        str(tmp_path / "o.journal")))
    for state in (TrialState.RUNNING, TrialState.COMPLETE):
        study.add_trial(optuna.trial.create_trial(
            state=state, value=0.5 if state == TrialState.COMPLETE else None,
            params={"lr": 0.1}, distributions={"lr": DISTRIBUTIONS["lr"]},
            intermediate_values={1: 0.6, 2: 0.5},
            user_attrs={ATTR.PAUSED: paused, ATTR.SEGMENTS: segments, ATTR.SLOT: 0,
                        ATTR.START: T0, ATTR.END: T0 + 3 if state.is_finished() else None}))
    snap = StudySnapshot.read(study)
    running, complete = snap.trials
    assert running.segments == complete.segments == ()  # nothing placeable
    assert complete.paused is None and complete.status == "COMPLETE"
    if isinstance(paused, dict):  # a mapping says paused; its fields of the wrong kind don't
        assert running.paused == Pause() and running.status == "PAUSED"
    else:
        assert running.paused is None and running.status == "RUNNING"
    assert summarize(snap)["paused"] == int(isinstance(paused, dict))
    paths = write_report(snap, tmp_path / "rep")
    assert "segments.csv" not in paths and "timeline.png" in paths
    assert len(segments_frame(snap)) == 2  # each trial's whole run


def test_a_segment_with_fields_of_the_wrong_kind_keeps_what_it_can(tmp_path: Path) -> None:
    study = optuna.create_study(study_name="other", storage=open_storage(
        str(tmp_path / "o.journal")))
    entries = [{"start": T0, "end": T0 + 2, "slot": "zero", "from_epoch": -1, "to_epoch": True,
                "how": 5, "device": ["cpu"]}, {"start": T0 + 3, "end": T0 + 5, "slot": 1}]
    study.add_trial(optuna.trial.create_trial(
        state=TrialState.COMPLETE, value=0.5, params={}, distributions={},
        intermediate_values={1: 0.6, 2: 0.5},
        user_attrs={ATTR.SEGMENTS: entries, ATTR.DEVICE: "cuda:0,1", ATTR.END: T0 + 5}))
    (trial,) = StudySnapshot.read(study).trials
    first, second = trial.segments
    assert (first.slot, first.from_epoch, first.to_epoch, first.how, first.device) == (
        None, None, None, None, None)
    assert trial.start == T0 and trial.end == T0 + 5 and trial.timing == "launcher"
    assert trial.epochs_trained == 2  # the segments cannot say: the epochs reported
    assert trial.device_seconds == pytest.approx((2 + 2) * 2)  # the trial's 2 devices each
    fig = plot_timeline(trials_frame(study), study_info(study), None, segments_frame(study))
    assert [p.get_gid() for p in fig.axes[0].patches] == ["trial-0:2"]  # the one with a slot


def test_sync_hyperband_trials_are_in_their_rounds_bracket(tmp_path: Path) -> None:
    # synchronous Hyperband stores its ladders in round order and each trial's round: round j
    # runs bracket j % 3 (a trial's own bracket attribute, where written, wins)
    study = optuna.create_study(study_name="shb", storage=open_storage(
        str(tmp_path / "shb.journal")))
    study.set_user_attr(CONFIG_ATTR, json.dumps(dict(
        PAUSE_CONFIG, study="shb", pruner={"name": "sync_hyperband", "min_resource": 1,
                                           "max_resource": 9, "reduction_factor": 3})))
    store_pruner_settings(study, {"name": "sync_hyperband", "mode": "sync", "min_resource": 1,
                                  "reduction_factor": 3, "max_resource": 9,
                                  "brackets": [[1, 3, 9], [3, 9], [9]], "budgets": []})
    for round_index in (0, 1, 2, 3, 4, None):
        study.add_trial(optuna.trial.create_trial(
            state=TrialState.PRUNED, params={}, distributions={},
            intermediate_values={k: 0.5 for k in range(1, 4)},
            user_attrs={} if round_index is None else {ATTR.ROUND: round_index}))
    explicit = optuna.trial.create_trial(state=TrialState.PRUNED, params={}, distributions={},
                                         intermediate_values={1: 0.5},
                                         user_attrs={ATTR.ROUND: 0},
                                         system_attrs={BRACKET_ATTR: 2})
    study.add_trial(explicit)
    assert trials_frame(study)["bracket"].tolist() == [0, 1, 2, 0, 1, 0, 2]
    fig = plot_rungs(curves_frame(study), study_info(study), rungs_frame(study))
    assert "sync_hyperband, 3 brackets, one panel each" in fig.get_suptitle()
    drawn = {ax.get_gid(): sorted(int(a.get_gid().split("-")[1]) for a in ax.lines
                                  if a.get_gid().startswith("trial-"))
             for ax in fig.axes if ax.get_visible()}
    assert drawn == {"bracket-0": [0, 3, 5], "bracket-1": [1, 4], "bracket-2": [2, 6]}


# ------------------------------------------------------------------------------------------
# Paused trials in every view; open segment entries (``end: None``) as the launcher writes one
# when a segment starts, and entries left behind when a worker dies.


def test_learning_curves_incumbent_and_tables_show_paused_trials_as_paused(
    paused_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(paused_study)
    curves, inc = curves_frame(snap), incumbent_frame(snap)
    status = curves.groupby("trial")["status"].first().to_dict()
    assert status == {0: "COMPLETE", 1: "PAUSED", 2: "PRUNED", 3: "COMPLETE", 4: "PRUNED",
                      5: "RUNNING"}
    assert curves.groupby("trial")["state"].first()[1] == "RUNNING"  # Optuna's, as it was
    for frame in (trials_frame(snap), segments_frame(snap), inc):
        assert set(frame.loc[frame["trial"] == 1, "status"]) == {"PAUSED"}
        assert set(frame.loc[frame["trial"] == 5, "status"]) == {"RUNNING"}
    # trial 1 (paused) reported the best value: the incumbent's label says it waits
    fig = plot_incumbent(inc, snap.info)
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any(n.startswith("0.2: trial 1, epoch 4 (PAUSED, to be resumed)") for n in notes)
    curves_fig = plot_learning_curves(curves, snap.info, best_trial=0,
                                      trials=trials_frame(snap))
    ax = curves_fig.axes[0]
    lines = {line.get_gid(): line for line in ax.lines}
    paused_color = matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"])
    assert matplotlib.colors.to_rgba(lines["trial-1"].get_color()) == paused_color
    assert matplotlib.colors.to_rgba(lines["trial-5"].get_color()) == matplotlib.colors.to_rgba(
        STATE_COLORS["RUNNING"])
    assert list(zip(lines["paused-at"].get_xdata(), lines["paused-at"].get_ydata(),
                    strict=True)) == [(pytest.approx(5.25), 0.2)]  # epoch 4, at its end time
    assert [t.get_text() for t in ax.texts if t.get_gid() == "paused-1"] == ["PAUSED @ 4"]
    legend = [t.get_text() for t in curves_fig.legends[0].get_texts()]
    assert "PAUSED (1)" in legend and "RUNNING (1)" in legend
    assert "PAUSED @ the epoch it resumes from" in legend


def _open(slot: int, start: float, from_epoch: int) -> dict[str, Any]:
    """The entry the launcher lists when a segment starts: no end yet."""
    return seg(slot, start, None, from_epoch, None, "running")


#: trial -> (state, curve, epoch end times (s after T0), user attrs). 0 completed in three
#: segments; its last one's open entry is left beside the closed one, and its first is listed
#: twice. 1 crashed in its second segment and waits PAUSED at epoch 2: the dead worker's open
#: entry is left beside the supervisor's crash record (whose clock says 10.1, not 10.2). 2 trains
#: its second segment now (an open entry). 3 trained in one go. 4 waits PAUSED after a crash
#: in its third segment whose record starts at its first segment's start (where the supervisor
#: wrote it for a resumed trial) and whose open entry is left behind. 5's second segment died
#: unrecorded after its epoch 2 (its open entry left, that epoch's end time kept) and a third
#: completed it. 6 completed while its last segment's entry was still open.
OPEN_SCENARIO: dict[int, tuple[TrialState, tuple[float, ...], list[float], dict[str, Any]]] = {
    0: (TrialState.COMPLETE, (0.8, 0.7, 0.6, 0.5, 0.45, 0.4, 0.35, 0.3),
        [1, 2, 4, 5, 7, 8, 9, 10],
        {ATTR.START: T0, ATTR.END: T0 + 10, ATTR.SLOT: 0, ATTR.EPOCHS: 8,
         ATTR.SEGMENTS: [seg(0, 0, 2, 0, 2, "paused"), seg(0, 0, 2, 0, 2, "paused"),
                         seg(1, 3, 5, 2, 4, "paused"), _open(0, 6, 4),
                         seg(0, 6, 10, 4, 8, "complete")]}),
    1: (TrialState.RUNNING, (0.9, 0.8, 0.75), [1.5, 2.5],
        {ATTR.START: T0 + 0.5, ATTR.END: T0 + 2.5, ATTR.SLOT: 0, ATTR.EPOCHS: 3,
         ATTR.PAUSED: {**paused_attr(2, 11.6, "worker died; resumed from epoch 2"),
                       "target": 8},
         ATTR.SEGMENTS: [seg(1, 0.5, 2.5, 0, 2, "paused"), _open(0, 10.2, 2),
                         seg(0, 10.1, 11.5, 2, 3, "crashed")]}),
    2: (TrialState.RUNNING, (0.85, 0.7, 0.65), [3.8, 5.5],
        {ATTR.START: T0 + 2.2, ATTR.END: T0 + 5.8, ATTR.SLOT: 1, ATTR.EPOCHS: 2,
         ATTR.SEGMENTS: [seg(0, 2.2, 5.8, 0, 2, "paused"), _open(1, 12, 2)]}),
    3: (TrialState.COMPLETE, (0.6, 0.4, 0.3, 0.2), [12.2, 12.8, 13.4, 14.0],
        {ATTR.START: T0 + 11.6, ATTR.END: T0 + 14, ATTR.SLOT: 0, ATTR.EPOCHS: 4}),
    4: (TrialState.RUNNING, (0.95, 0.9, 0.85, 0.8, 0.78), [1, 2, 4, 5],
        {ATTR.START: T0, ATTR.END: T0 + 8, ATTR.SLOT: 2, ATTR.EPOCHS: 5,
         ATTR.PAUSED: {**paused_attr(4, 8.1, "worker died; resumed from epoch 4"), "target": 8},
         ATTR.SEGMENTS: [seg(2, 0, 2, 0, 2, "paused"), seg(2, 3, 5, 2, 4, "paused"),
                         _open(2, 6, 4), seg(2, 0, 8, 4, 5, "crashed")]}),
    5: (TrialState.COMPLETE, (0.7, 0.6, 0.5, 0.45), [10, 11.5, 12.5, 13],
        {ATTR.START: T0 + 9, ATTR.END: T0 + 13, ATTR.SLOT: 2, ATTR.EPOCHS: 4,
         ATTR.SEGMENTS: [seg(2, 9, 10, 0, 1, "paused"), _open(2, 10.5, 1),
                         seg(2, 12, 13, 2, 4, "complete")]}),
    6: (TrialState.COMPLETE, (0.75, 0.65, 0.55), [7.5, 10, 11.5],
        {ATTR.START: T0 + 6.5, ATTR.END: T0 + 11.5, ATTR.SLOT: 1, ATTR.EPOCHS: 3,
         ATTR.SEGMENTS: [seg(1, 6.5, 8, 0, 1, "paused"), _open(1, 9, 1)]}),
}
#: Each trial's segments once settled: (slot, start, end (s after T0; None in flight), how).
OPEN_SPANS = {
    0: [(0, 0, 2, "paused"), (1, 3, 5, "paused"), (0, 6, 10, "complete")],
    1: [(1, 0.5, 2.5, "paused"), (0, 10.1, 11.5, "crashed")],
    2: [(0, 2.2, 5.8, "paused"), (1, 12, None, "running")],
    3: [(0, 11.6, 14, None)],
    4: [(2, 0, 2, "paused"), (2, 3, 5, "paused"), (2, 5, 8, "crashed")],
    5: [(2, 9, 10, "paused"), (2, 10.5, 11.5, None), (2, 12, 13, "complete")],
    6: [(1, 6.5, 8, "paused"), (1, 9, 11.5, None)],
}


def make_open_segment_study(storage: str) -> optuna.Study:
    """:data:`OPEN_SCENARIO` in a new study (plain: no config, no pruner settings)."""
    study = optuna.create_study(study_name="open", storage=open_storage(storage))
    for number, (state, curve, times, attrs) in OPEN_SCENARIO.items():
        study.add_trial(optuna.trial.create_trial(
            state=state, value=curve[-1] if state == TrialState.COMPLETE else None,
            params={"lr": 0.1 + number / 100}, distributions={"lr": DISTRIBUTIONS["lr"]},
            user_attrs={ATTR.DEVICE: "cpu:0", ATTR.HOST: "box",
                        ATTR.EPOCH_END_TIMES: [T0 + x for x in times], **attrs},
            intermediate_values={k + 1: v for k, v in enumerate(curve)},
        ))
    return study


@pytest.fixture
def open_study(tmp_path: Path) -> optuna.Study:
    return make_open_segment_study(f"sqlite:///{tmp_path / 'open.db'}")


def test_open_segment_entries_are_in_flight_or_settled_never_counted_twice(
    open_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(open_study)
    trials = {t.number: t for t in snap.trials}
    spans = {n: [(s.slot, s.start - T0, None if s.end is None else s.end - T0, s.how)
                 for s in t.spans] for n, t in trials.items()}
    assert spans == {n: [(slot, pytest.approx(a), None if b is None else pytest.approx(b), how)
                         for slot, a, b, how in v] for n, v in OPEN_SPANS.items()}
    assert {n: t.status for n, t in trials.items()} == {
        0: "COMPLETE", 1: "PAUSED", 2: "RUNNING", 3: "COMPLETE", 4: "PAUSED", 5: "COMPLETE",
        6: "COMPLETE"}
    assert [n for n, t in trials.items() if t.in_flight] == [2]
    trained = {n: sum(b - a for _, a, b, _ in v if b is not None) for n, v in OPEN_SPANS.items()}
    assert {n: t.device_seconds for n, t in trials.items()} == pytest.approx(trained)
    assert trials[1].busy_until(snap.horizon) == pytest.approx(T0 + 11.5)
    assert snap.horizon == pytest.approx(T0 + 14)
    summary = summarize(snap)
    assert summary["unfinished"] == 1 and summary["paused"] == 2
    assert summary["device_seconds"] == pytest.approx(sum(trained.values()))
    assert ("learning curves: 1 RUNNING and 2 PAUSED trial(s) not drawn yet (the launcher "
            "writes epoch times when a trial ends)") in limitations(snap)  # their last epochs
    # every epoch trained counted once: a segment left open counts only the epochs that
    # ended within it (trial 5's epoch 2, not its third segment's 3 and 4)
    assert summary["epochs"] == 8 + 3 + 2 + 4 + 5 + 4 + 3
    assert incumbent_frame(snap)["epochs_spent"].iloc[-1] == summary["epochs"]
    segments = segments_frame(snap)
    assert len(segments) == sum(len(v) for v in OPEN_SPANS.values())
    flying = segments[segments["end_s"].isna()]
    assert flying[["trial", "status", "how"]].values.tolist() == [[2, "RUNNING", "running"]]
    assert flying["duration_s"].isna().all()
    assert set(segments.loc[segments["trial"].isin([1, 4]), "status"]) == {"PAUSED"}


def test_timeline_draws_the_segment_in_flight_up_to_the_latest_time(
    open_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(open_study)
    fig = plot_timeline(trials_frame(snap), snap.info, curves_frame(snap), segments_frame(snap))
    ax = fig.axes[0]
    bars = {p.get_gid(): p for p in ax.patches if (p.get_gid() or "").startswith("trial-")}
    expected = {f"trial-{n}:{k}" if n != 3 else "trial-3": (slot, a, (14 if b is None else b) - a)
                for n, v in OPEN_SPANS.items() for k, (slot, a, b, _) in enumerate(v, 1)}
    assert sorted(bars) == sorted(expected)
    for gid, (slot, start, width) in expected.items():
        bar = bars[gid]
        assert (bar.get_x(), bar.get_width()) == (pytest.approx(start), pytest.approx(width))
        assert round(bar.get_y() + bar.get_height() / 2) == slot
        assert bool(bar.get_hatch()) == (gid == "trial-2:2")  # only the one in flight
    colors = {gid: bar.get_facecolor() for gid, bar in bars.items()}
    for gid in ("trial-1:1", "trial-1:2", "trial-4:3"):
        assert colors[gid] == matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"])
    assert colors["trial-2:2"] == matplotlib.colors.to_rgba(STATE_COLORS["RUNNING"])
    assert "2 paused" in ax.get_title()
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert {"COMPLETE (4)", "PAUSED (2)", "RUNNING (1)"} <= set(legend)
    assert any(label.startswith("segment in flight (1)") for label in legend)


def test_learning_curves_and_rungs_mark_paused_trials_at_their_epoch(
    open_study: optuna.Study,
) -> None:
    snap = StudySnapshot.read(open_study)
    curves, trials = curves_frame(snap), trials_frame(snap)
    assert curves.groupby("trial")["status"].first().to_dict() == {
        0: "COMPLETE", 1: "PAUSED", 2: "RUNNING", 3: "COMPLETE", 4: "PAUSED", 5: "COMPLETE",
        6: "COMPLETE"}
    assert trials.set_index("trial")["status"].to_dict()[4] == "PAUSED"
    for x in ("epochs", "wallclock"):
        fig = plot_learning_curves(curves, snap.info, x=x, trials=trials)
        ax = fig.axes[0]
        lines = {line.get_gid(): line for line in ax.lines}
        for number in (1, 4):
            assert matplotlib.colors.to_rgba(lines[f"trial-{number}"].get_color()) == (
                matplotlib.colors.to_rgba(STATE_COLORS["PAUSED"]))
        assert lines["trial-2"].get_color() == STATE_COLORS["RUNNING"]
        marks = sorted(zip(lines["paused-at"].get_xdata(), lines["paused-at"].get_ydata(),
                           strict=True))  # trial 1 at epoch 2 (ended at 2.5 s), 4 at 4 (5 s)
        assert marks == ([(2, 0.8), (4, 0.8)] if x == "epochs" else [(2.5, 0.8), (5.0, 0.8)])
        labels = {t.get_gid(): t.get_text() for t in ax.texts if t.get_gid()}
        assert labels == {"paused-1": "PAUSED @ 2", "paused-4": "PAUSED @ 4"}
        legend = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "PAUSED (2)" in legend and "RUNNING (1)" in legend
    rungs = plot_rungs(curves, snap.info, None, trials)
    paused = sorted(tuple(p) for c in rungs.axes[0].collections if c.get_gid() == "paused"
                    for p in c.get_offsets())
    assert paused == [(2.0, 0.8), (4.0, 0.8)]
    assert _points(rungs, "running") == 1  # trial 2


def test_report_cli_exits_0_on_a_study_with_open_and_left_open_segments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    url = f"sqlite:///{tmp_path / 'open.db'}"
    make_open_segment_study(url)
    out = tmp_path / "rep"
    assert main(["--storage", url, "--out", str(out)]) == 0
    stdout = capsys.readouterr().out
    assert "Trials: 7 (4 complete, 1 running, 2 paused)" in stdout
    rows = {int(cells[2]): cells[3].strip() for line in stdout.splitlines()
            if line.startswith("│") and (cells := line.split("│"))[1].strip()}
    assert rows == {0: "COMPLETE", 1: "PAUSED @ 2", 2: "RUNNING", 3: "COMPLETE", 4: "PAUSED @ 4",
                    5: "COMPLETE", 6: "COMPLETE"}
    assert "trial 1 at epoch 2 (worker died; resumed from epoch 2)" in stdout
    assert "(+ 1 trial(s) training now" in stdout
    assert {"segments.csv", "timeline.png", "learning_curves.png"} <= {
        p.name for p in out.iterdir()}
    segments = pd.read_csv(out / "segments.csv")
    assert len(segments) == sum(len(v) for v in OPEN_SPANS.values())
    assert segments.loc[segments["end_s"].isna(), "trial"].tolist() == [2]
    curves = pd.read_csv(out / "curves.csv")
    assert set(curves.loc[curves["trial"].isin([1, 4]), "status"]) == {"PAUSED"}


SETTLE = [  # (Optuna state, paused since (s after T0) or None, end, segments, settled spans)
    pytest.param(TrialState.RUNNING, 6.0, None,
                 [seg(0, 0, 2, 0, 2, "paused"), _open(0, 3.0, 2), seg(0, 3.1, 5, 2, 3, "crashed")],
                 [(0, 2, "paused"), (3.1, 5, "crashed")], id="crash-record-starts-after-it"),
    pytest.param(TrialState.RUNNING, 6.0, None, [seg(0, 0, 2, 0, 2, "paused"), _open(0, 3.0, 2)],
                 [(0, 2, "paused"), (3.0, 6.0, None)], id="left-open-closed-at-the-pause"),
    pytest.param(TrialState.RUNNING, None, None, [_open(0, 0, 0), _open(1, 4, 0)],
                 [(4, None, "running")], id="handed-over-the-earlier-one-dropped"),
    pytest.param(TrialState.COMPLETE, None, 5.0, [_open(0, 1, 0)], [(1, 5.0, None)],
                 id="finished-closed-at-its-end"),
    pytest.param(TrialState.RUNNING, None, None, [seg(0, 0, 2, 0, 2, "paused"), _open(1, 1.9, 2)],
                 [(0, 2, "paused"), (2, None, "running")], id="in-flight-trimmed-to-no-overlap"),
    pytest.param(TrialState.RUNNING, 9.0, None,
                 [seg(0, 0, 2, 0, 2, "paused"), seg(0, 3, 5, 2, 4, "paused"),
                  seg(0, 0, 8, 4, 5, "crashed")],
                 [(0, 2, "paused"), (3, 5, "paused"), (5, 8, "crashed")],
                 id="crash-record-from-the-first-start-trimmed"),
]


@pytest.mark.parametrize(("state", "since", "end", "segments", "spans"), SETTLE)
def test_segment_entries_settle_into_one_stretch_at_a_time(
    state: TrialState, since: float | None, end: float | None, segments: list[dict[str, Any]],
    spans: list[tuple[float, float | None, str | None]],
) -> None:
    attrs: dict[str, Any] = {ATTR.SEGMENTS: segments, ATTR.SLOT: 0, ATTR.DEVICE: "cpu:0"}
    if since is not None:
        attrs[ATTR.PAUSED] = paused_attr(2, since, "rung 2")
    if end is not None:
        attrs[ATTR.END] = T0 + end
    study = optuna.create_study()
    study.add_trial(optuna.trial.create_trial(
        state=state, value=0.5 if state == TrialState.COMPLETE else None,
        intermediate_values={1: 0.6}, user_attrs=attrs))
    (trial,) = StudySnapshot.read(study).trials
    assert [(s.start - T0, None if s.end is None else s.end - T0, s.how)
            for s in trial.spans] == [(pytest.approx(a), None if b is None else pytest.approx(b),
                                       how) for a, b, how in spans]
    assert trial.in_flight == (spans[-1][1] is None)
    assert trial.device_seconds == pytest.approx(
        sum(b - a for a, b, _ in spans if b is not None) or None)
    plot_timeline(trials_frame(study), study_info(study), None, segments_frame(study))
