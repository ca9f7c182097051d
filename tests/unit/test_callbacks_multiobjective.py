"""PruningCallback in a study with several objectives: a plain ``study.optimize`` with our
ASHAPruner, bad input, and DDP on 2 CPU processes.

The model (``TwoMetrics`` in ``helpers/ddp_multiobjective_script.py``, which the DDP test runs)
logs a validation error fixed by its ``quality`` hyperparameter and the epoch, and its parameter
count, logged once; so which trial is pruned at which epoch is known in advance (``EXPECTED``).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning as L
import optuna
import pytest
from helpers.ddp_multiobjective_script import (
    EXPECTED,
    MAX_EPOCHS,
    MONITOR,
    PLAN,
    TinyData,
    TwoMetrics,
    error_at,
    param_count,
    trainer_args,
)
from helpers.support import HELPERS, REPO, ddp_clean_env, run_job
from optuna.trial import TrialState

from lightning_hpo import ASHAPruner, PruningCallback
from lightning_hpo.errors import ConfigError
from lightning_hpo.pruners import open_vector_store
from lightning_hpo.schema import ATTR, objective_curve

optuna.logging.set_verbosity(optuna.logging.WARNING)

ROOT = REPO
_SCRIPT = HELPERS / "ddp_multiobjective_script.py"
TWO = ["minimize", "minimize"]


def _objective(monitor: Any = MONITOR) -> Any:
    def objective(trial: optuna.Trial) -> tuple[float, float]:
        L.seed_everything(0, verbose=False)
        model = TwoMetrics(width=trial.suggest_categorical("width", [1, 8]),
                           quality=trial.suggest_float("quality", 0.0, 1.0))
        pruning = PruningCallback(trial, monitor=monitor)
        trainer = L.Trainer(accelerator="cpu", devices=1, callbacks=[pruning], **trainer_args())
        trainer.fit(model, datamodule=TinyData())
        pruning.raise_if_pruned()
        metrics = trainer.callback_metrics
        return float(metrics["validation_error"]), float(metrics["param_count"])

    return objective


def _study(pruner: optuna.pruners.BasePruner | None, directions: list[str] = TWO,
           plan: list[tuple[int, float]] = PLAN) -> optuna.Study:
    study = optuna.create_study(directions=directions, pruner=pruner, study_name="mo",
                                sampler=optuna.samplers.RandomSampler(seed=0))
    for width, quality in plan:
        study.enqueue_trial({"width": width, "quality": quality})
    return study


def _run_script(tmp_path: Path, *args: str) -> Any:
    env = ddp_clean_env(OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
    return run_job([sys.executable, str(_SCRIPT), str(tmp_path), *args], cwd=tmp_path, env=env,
                   timeout=300)


def _expected_rows(width: int, quality: float, epochs: int) -> list[list[Any]]:
    return [[e, pytest.approx(error_at(quality, e), rel=1e-6), float(param_count(width))]
            for e in range(1, epochs + 1)]


def test_optimize_prunes_by_pareto_order_and_records_one_row_per_epoch() -> None:
    study = _study(ASHAPruner(1, max_resource=MAX_EPOCHS, reduction_factor=2))
    study.optimize(_objective(), n_trials=len(PLAN))
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [
        TrialState.PRUNED if EXPECTED[n] else TrialState.COMPLETE for n in range(len(PLAN))]
    for trial, (width, quality) in zip(trials, PLAN, strict=True):
        epochs = EXPECTED[trial.number] or MAX_EPOCHS
        rows = trial.user_attrs[ATTR.OBJECTIVE_VALUES]
        # one row per epoch; the parameter count, logged at the first epoch only, in every row
        assert rows == _expected_rows(width, quality, epochs), trial.number
        assert trial.intermediate_values == {}  # Optuna's report refuses several objectives
        if trial.state == TrialState.PRUNED:
            assert trial.user_attrs[ATTR.PRUNED_AT_EPOCH] == epochs
            assert trial.values is None
        else:
            assert ATTR.PRUNED_AT_EPOCH not in trial.user_attrs
            assert trial.values == rows[-1][1:]  # set by the objective: the last epoch's
    # the rungs' records: every trial at rung 1; 0, 2 and 3 went on to rung 2
    assert [(rung, number) for _, rung, number, _ in open_vector_store(study).records()] == [
        (1, 0), (1, 1), (1, 2), (1, 3), (2, 0), (2, 2), (2, 3)]
    assert objective_curve(trials[3])[2] == pytest.approx((0.95, 7.0))
    assert [t.number for t in study.best_trials] == [2]


def test_a_nop_pruner_never_prunes() -> None:
    study = _study(optuna.pruners.NopPruner())
    study.optimize(_objective(), n_trials=len(PLAN))
    for trial, (width, quality) in zip(study.trials, PLAN, strict=True):
        assert trial.state == TrialState.COMPLETE
        assert trial.user_attrs[ATTR.OBJECTIVE_VALUES] == _expected_rows(width, quality,
                                                                         MAX_EPOCHS)
    assert open_vector_store(study).records() == []


def test_a_replay_with_a_fixed_trial_trains_to_the_end() -> None:
    # optuna.trial.FixedTrial has no study: nothing to compare with, nothing written
    trial = optuna.trial.FixedTrial({"width": 8, "quality": 0.5})
    assert _objective()(trial) == pytest.approx((error_at(0.5, MAX_EPOCHS), 49.0), rel=1e-6)
    assert trial.user_attrs == {}


# -- bad input -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("directions", "monitor", "words"),
    [
        (TWO, ["validation_error"],
         "monitor: names 1 metric(s) ['validation_error'], but study 'mo' has 2 objective(s)"),
        (TWO, "validation_error", "names 1 metric(s) ['validation_error']"),
        (TWO, [*MONITOR, "param_count_2"], "names 3 metric(s)"),
        (["minimize"], MONITOR,
         "names 2 metric(s) ['validation_error', 'param_count'], but study 'mo' has 1 "
         "objective(s)"),
    ],
    ids=["one-of-two", "a-name-for-two", "three-for-two", "two-for-one"],
)
def test_a_monitor_list_of_another_length_than_the_objectives_is_a_config_error(
    directions: list[str], monitor: Any, words: str
) -> None:
    study = _study(ASHAPruner(1, max_resource=MAX_EPOCHS), directions, plan=PLAN[:1])

    class Extra(TwoMetrics):
        trained = 0

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            Extra.trained += 1
            return super().training_step(batch, batch_idx)

        def validation_step(self, batch: Any, batch_idx: int) -> None:
            super().validation_step(batch, batch_idx)
            self.log("param_count_2", 1.0)

    def objective(trial: optuna.Trial) -> Any:
        model = Extra(width=trial.suggest_categorical("width", [1, 8]),
                      quality=trial.suggest_float("quality", 0.0, 1.0))
        pruning = PruningCallback(trial, monitor=monitor)
        L.Trainer(accelerator="cpu", devices=1, callbacks=[pruning], **trainer_args()).fit(
            model, datamodule=TinyData())
        return 0.0

    with pytest.raises(ConfigError) as info:
        study.optimize(objective, n_trials=1)
    assert info.value.field == "monitor"
    assert words in str(info.value) and "\n" not in str(info.value)
    assert study.trials[0].state == TrialState.FAIL
    assert Extra.trained == 0  # refused when fit starts, not after an epoch of training


@pytest.mark.parametrize(
    ("monitor", "words"),
    [
        (["validation_error", "validation_error"],
         "monitor: is ['validation_error', 'validation_error'], but must not name a metric twice"),
        (["validation_error", "param_count", "validation_error"], "must not name a metric twice"),
        ([], "monitor: is [], but must be a metric name or a list of them"),
        (["validation_error", ""], "but must be a metric name or a list of them"),
        ([1, 2], "but must be a metric name or a list of them"),
    ],
    ids=["twice", "twice-of-three", "empty", "empty-name", "not-names"],
)
def test_a_monitor_that_is_not_a_list_of_distinct_names_is_refused_at_once(
    monitor: list[str], words: str
) -> None:
    trial = optuna.create_study(directions=TWO).ask()
    with pytest.raises(ConfigError) as info:
        PruningCallback(trial, monitor=monitor)
    assert info.value.field == "monitor" and words in str(info.value)
    assert str(info.value).startswith("monitor: is ")


@pytest.mark.parametrize("directions", [TWO, ["maximize", "minimize"]],
                         ids=["minimize", "maximize"])
@pytest.mark.parametrize("pruner", [optuna.pruners.MedianPruner(),
                                    optuna.pruners.SuccessiveHalvingPruner()],
                         ids=["median", "successive-halving"])
def test_an_optuna_pruner_in_a_multi_objective_study_is_refused_before_an_epoch_trains(
    pruner: optuna.pruners.BasePruner, directions: list[str]
) -> None:
    """It was refused at the first report: after epoch 1 trained, its values written."""
    study = _study(pruner, directions, plan=PLAN[:1])

    class Counted(TwoMetrics):
        trained = 0

        def training_step(self, batch: Any, batch_idx: int) -> Any:
            Counted.trained += 1
            return super().training_step(batch, batch_idx)

    def objective(trial: optuna.Trial) -> Any:
        model = Counted(width=trial.suggest_categorical("width", [1, 8]),
                        quality=trial.suggest_float("quality", 0.0, 1.0))
        pruning = PruningCallback(trial, monitor=MONITOR)
        L.Trainer(accelerator="cpu", devices=1, callbacks=[pruning], **trainer_args()).fit(
            model, datamodule=TinyData())
        return 0.0, 0.0

    with pytest.raises(ConfigError) as info:
        study.optimize(objective, n_trials=1)
    assert info.value.field == "pruner"
    default = (" (Optuna's default when create_study is given no pruner)"
               if type(pruner) is optuna.pruners.MedianPruner else "")
    assert str(info.value) == (
        f"pruner: is {type(pruner).__name__}, which cannot rank several objectives{default}; "
        "use lightning_hpo.ASHAPruner or HyperbandPruner (or optuna.pruners.NopPruner)")
    (trial,) = study.get_trials(deepcopy=False)
    assert trial.state == TrialState.FAIL
    assert ATTR.OBJECTIVE_VALUES not in trial.user_attrs  # nothing reported
    assert Counted.trained == 0  # refused when fit starts, not after an epoch of training


# -- DDP -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_ddp_both_ranks_stop_at_the_same_epoch_and_only_rank_zero_writes(
    tmp_path: Path,
) -> None:
    result = _run_script(tmp_path)
    assert result.returncode == 0, result.stderr[-4000:]
    assert (tmp_path / "done0.txt").exists() and (tmp_path / "done1.txt").exists()
    rows = {rank: [json.loads(line) for line in
                   (tmp_path / f"rank{rank}.jsonl").read_text().splitlines()]
            for rank in (0, 1)}
    numbers = list(range(len(PLAN)))
    assert [r["trial"] for r in rows[0]] == [r["trial"] for r in rows[1]] == numbers
    assert rows[0][0]["pid"] != rows[1][0]["pid"]  # two processes
    for zero, one in zip(rows[0], rows[1], strict=True):
        # both ranks stop after the same epoch, the pruner's
        assert zero["epochs"] == one["epochs"] == (EXPECTED[zero["trial"]] or MAX_EPOCHS)
        assert zero["pruned_at_epoch"] == one["pruned_at_epoch"] == EXPECTED[zero["trial"]]
        assert one["follower_attrs"] == {}  # the callback wrote nothing through rank 1's trial
    assert not (tmp_path / "writes1.txt").exists(), (tmp_path / "writes1.txt").read_text()

    study = optuna.load_study(study_name="mo-ddp", storage=f"sqlite:///{tmp_path / 'study.db'}")
    trials = study.get_trials(deepcopy=False)
    assert [t.state for t in trials] == [
        TrialState.PRUNED if EXPECTED[n] else TrialState.COMPLETE for n in numbers]
    for trial, (width, quality) in zip(trials, PLAN, strict=True):
        epochs = EXPECTED[trial.number] or MAX_EPOCHS
        rows_stored = trial.user_attrs[ATTR.OBJECTIVE_VALUES]
        assert rows_stored == _expected_rows(width, quality, epochs)  # one per epoch
        assert trial.params == {"width": width, "quality": quality}
        if trial.state == TrialState.COMPLETE:
            assert trial.values == rows_stored[-1][1:]
        else:
            assert trial.user_attrs[ATTR.PRUNED_AT_EPOCH] == epochs


@pytest.mark.slow
def test_ddp_a_follower_slower_than_rank_zero_at_the_end_exits(tmp_path: Path) -> None:
    # Rank 1 lingers 3 s in its last trial, after fit; rank 0 ends optimize and exits meanwhile.
    # A watchdog ends rank 1 (code 3, hung1.txt) 5 s later if it is still in optimize.
    result = _run_script(tmp_path, "--slow-follower")
    assert (tmp_path / "done0.txt").exists(), result.stderr[-4000:]
    assert not (tmp_path / "hung1.txt").exists(), "rank 1 was still in optimize 5 s later"
    assert (tmp_path / "done1.txt").exists()
