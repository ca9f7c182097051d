"""The report's :mod:`~lightning_hpo.report.info`: the config the launcher stored, and the rungs
and brackets from what the pruner stored (ASHA, Hyperband, synchronous Hyperband)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import optuna
import pytest
from helpers import report_support
from helpers.report_support import (
    CONFIG,
    EPOCH_S,
    GAP_S,
    PAUSE_CONFIG,
    RUNGS,
    SCENARIO,
    T0,
    _gids,
    make_launcher_study,
    store_pruner_settings,
)
from optuna.trial import TrialState

from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.pruners import HyperbandPruner, rung_records
from lightning_hpo.pruners.rungs import bracket_of, trial_allocation_budgets
from lightning_hpo.report import (
    curves_frame,
    limitations,
    plot_rungs,
    rungs_frame,
    study_info,
    trials_frame,
)
from lightning_hpo.schema import ATTR, BRACKET_ATTR, CONFIG_ATTR, PRUNER_ATTR
from lightning_hpo.storage import open_storage

# The shared fixtures these tests request (pytest finds fixtures among a module's names).
journal = report_support.journal
study = report_support.study


def test_study_info_reads_the_stored_config(study: optuna.Study) -> None:
    info = study_info(study)
    assert info.metric == "validation_error" and info.direction == "minimize"
    assert info.max_epochs == 9
    assert info.pruner == "asha" and list(info.rungs) == RUNGS == [1, 3, 9]
    assert info.brackets == ((1, 3, 9),) and info.budgets == ()
    assert info.from_launcher


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
