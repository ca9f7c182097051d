"""The launcher on a study with several objectives (issue 26): real launcher processes on
journal, SQLite and PostgreSQL, stopping and promotion ASHA, and the synchronous schedules.

What every run must show: an Optuna multi-objective study with the metric names, one row of
``objective_values`` per epoch a trial trained (none missing, none twice), COMPLETE trials with
one final value per objective equal to their last row, decisions taken on the Pareto order (the
records at each rung, or the paused trials), and a closing summary that names the Pareto front.
"""

from __future__ import annotations

import json
from pathlib import Path

import optuna
import pytest
from helpers.support import config_file, launch, study_of
from optuna.trial import TrialState

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.checks import check_against_registry
from lightning_hpo.launch.config import parse_config
from lightning_hpo.pareto import is_finite_point, nondominated_fronts, pareto_order
from lightning_hpo.pruners import open_vector_store
from lightning_hpo.schema import ATTR, CONFIG_ATTR, objective_curve

pytestmark = pytest.mark.slow

METRICS = ["validation_error", "parameters"]
SPACE = {"lr": {"loguniform": [0.01, 1.0]}, "width": {"loguniform": [0.1, 2.0]}}


def _config(tmp_path: Path, storage: str, pruner: dict, n_trials: int,
            directions: list[str] | None = None) -> Path:
    return config_file(
        tmp_path, storage=storage, metric=METRICS,
        direction=directions or ["minimize", "minimize"], space=SPACE,
        initial=[{"lr": 0.1, "width": 1.0}], pruner=pruner,
        trainer={"limit_train_batches": 4, "limit_val_batches": 2},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": n_trials},
    )


def _url(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> str:
    if kind == "postgres":
        return str(request.getfixturevalue("postgres_server").new_database("mo"))
    return {"journal": str(tmp_path / "t.journal"), "sqlite": f"sqlite:///{tmp_path}/t.db"}[kind]


def _check_study(study: optuna.Study, n_trials: int, max_epochs: int) -> None:
    """What every multi-objective run must leave in its study."""
    assert [d.name for d in study.directions] == ["MINIMIZE", "MINIMIZE"]
    assert study.metric_names == METRICS
    stored = json.loads(study.user_attrs[CONFIG_ATTR])
    assert stored["metric"] == METRICS and stored["direction"] == ["minimize", "minimize"]
    trials = study.get_trials(deepcopy=False)
    assert len(trials) == n_trials
    assert {t.state for t in trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert any(t.state == TrialState.COMPLETE for t in trials)
    for trial in trials:
        curve = objective_curve(trial)
        epochs = trial.user_attrs[ATTR.EPOCHS]
        # one row per epoch trained, from 1, none missing (Optuna's intermediate values unused)
        assert sorted(curve) == list(range(1, epochs + 1)), (trial.number, curve)
        assert not trial.intermediate_values
        # the parameter count is the same every epoch, and LeNet's for the trial's width
        assert len({values[1] for values in curve.values()}) == 1
        if trial.state == TrialState.COMPLETE:
            assert epochs == max_epochs
            assert tuple(trial.values) == curve[max_epochs]
        else:
            assert trial.values is None


@pytest.mark.parametrize("kind", ["journal", "sqlite", pytest.param(
    "postgres", marks=pytest.mark.postgres)])
def test_stopping_asha_ranks_each_rung_by_pareto_order(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(kind, tmp_path, request)
    pruner = {"name": "asha", "mode": "stop", "min_resource": 1, "max_resource": 3,
              "reduction_factor": 3}
    result = launch(str(_config(tmp_path, url, pruner, n_trials=8)), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Pareto front (validation_error minimize, parameters minimize):" in result.stdout
    study = study_of(url)
    _check_study(study, 8, max_epochs=3)
    # Replay the records in the order they were written: each decision is the Pareto order's.
    records = open_vector_store(study).records()
    assert {rung for _, rung, _, _ in records} <= {1}  # the rungs below max_resource
    by_number = {t.number: t for t in study.get_trials(deepcopy=False)}
    at_rung = {number: values for _, _, number, values in records}
    # every trial reached rung 1; one whose values were NaN there was pruned unrecorded
    for number, trial in by_number.items():
        assert (number in at_rung) == is_finite_point(objective_curve(trial)[1])
    for number, values in at_rung.items():
        assert values == objective_curve(by_number[number])[1]
    # A trial that went on past rung 1 was, when it got there, in the top third of the
    # records then: those of trials that reached rung 1 before it (by epoch end time).
    reached = sorted(at_rung, key=lambda n: by_number[n].user_attrs[ATTR.EPOCH_END_TIMES][0])
    for position, number in enumerate(reached):
        present = {n: at_rung[n] for n in reached[: position + 1]}
        keep = pareto_order(present, (True, True)).index(number) < max(1, len(present) // 3)
        went_on = by_number[number].user_attrs[ATTR.EPOCHS] > 1
        # reports of trials on two slots can cross (two reach the rung at once, and a trial's
        # record is written at its epoch's end, after the end time): allow the decision to
        # have seen one more or one fewer record only where that changes it
        if went_on != keep:
            neighbours = [reached[: max(position - 1, 0)], reached[: position + 2]]
            alternatives = [{n: at_rung[n] for n in [*group, number]} for group in neighbours]
            assert any((pareto_order(p, (True, True)).index(number) < max(1, len(p) // 3))
                       == went_on for p in alternatives), (number, present)


@pytest.mark.parametrize("kind", ["journal", "sqlite", pytest.param(
    "postgres", marks=pytest.mark.postgres)])
def test_promotion_asha_promotes_by_pareto_order(
    kind: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    url = _url(kind, tmp_path, request)
    pruner = {"name": "asha", "mode": "promotion", "min_resource": 1, "max_resource": 3,
              "reduction_factor": 3}
    result = launch(str(_config(tmp_path, url, pruner, n_trials=9)), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = study_of(url)
    _check_study(study, 9, max_epochs=3)
    trials = study.get_trials(deepcopy=False)
    # Algorithm 2, asynchronous: a trial promoted past rung 1 was, when its next segment began,
    # in the top floor(n / 3) of the n trials with a value at rung 1 by then, in Pareto order.
    rung1 = {t.number: objective_curve(t)[1] for t in trials}
    reached = {t.number: t.user_attrs[ATTR.EPOCH_END_TIMES][0] for t in trials}
    promoted = [t for t in trials if t.user_attrs[ATTR.EPOCHS] > 1]
    assert promoted
    for trial in promoted:
        start = min(seg["start"] for seg in trial.user_attrs[ATTR.SEGMENTS]
                    if seg["from_epoch"] == 1)
        present = sorted((n for n in rung1 if reached[n] <= start), key=reached.get)
        # the decision may have seen one record more or fewer than the clocks say (a trial
        # writing its value at the same moment)
        views = [present, present[:-1], sorted(rung1, key=reached.get)[: len(present) + 1]]
        assert any(trial.number in pareto_order({n: rung1[n] for n in view}, (True, True))[
            : len(view) // 3] for view in views if trial.number in view), (trial.number, present)
    # finish_best: some trial reached max_resource
    assert any(t.state == TrialState.COMPLETE for t in trials)


@pytest.mark.parametrize("name", ["sync_sh", "sync_hyperband"])
def test_synchronous_rounds_keep_the_pareto_best(tmp_path: Path, name: str) -> None:
    url = str(tmp_path / "t.journal")
    pruner = {"name": name, "min_resource": 1, "max_resource": 3, "reduction_factor": 3}
    result = launch(str(_config(tmp_path, url, pruner, n_trials=6)), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = study_of(url)
    _check_study(study, 6, max_epochs=3)


def test_maximized_objectives_and_the_pareto_front_in_the_summary(tmp_path: Path) -> None:
    """Mixed directions: the summary's front is the front of (error down, parameters up)."""
    url = str(tmp_path / "t.journal")
    config = _config(tmp_path, url, {"name": "asha", "min_resource": 1, "max_resource": 2},
                     n_trials=6, directions=["minimize", "maximize"])
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = study_of(url)
    assert [d.name for d in study.directions] == ["MINIMIZE", "MAXIMIZE"]
    complete = {t.number: tuple(t.values) for t in study.get_trials(deepcopy=False)
                if t.state == TrialState.COMPLETE}
    front = nondominated_fronts(complete, (True, False))[0]
    assert f"Pareto front (validation_error minimize, parameters maximize): {len(front)} trial" \
        in result.stdout
    assert {t.number for t in study.best_trials} == set(front)  # Optuna agrees
    for number in front[:5]:
        assert f"  trial {number}: validation_error " in result.stdout


def test_latency_measured_at_validation_is_an_objective(tmp_path: Path) -> None:
    """``latency_ms`` (the forward pass's milliseconds per validation example, logged with
    ``model.measure_latency: true``) against the error: a value measured, not trained."""
    url = str(tmp_path / "t.journal")
    config = config_file(
        tmp_path, storage=url, metric=["validation_error", "latency_ms"],
        direction=["minimize", "minimize"], space=SPACE, initial=[],
        model={"name": "lenet", "measure_latency": True},
        pruner={"name": "asha", "min_resource": 1, "max_resource": 2},
        trainer={"limit_train_batches": 4, "limit_val_batches": 2},
        devices={"accelerator": "cpu", "count": 2}, stop={"n_trials": 4},
    )
    result = launch(str(config), "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    study = study_of(url)
    assert study.metric_names == ["validation_error", "latency_ms"]
    for trial in study.get_trials(deepcopy=False):
        for error, latency in objective_curve(trial).values():
            assert 0.0 <= error <= 1.0 and 0.0 < latency < 1000.0
    assert "latency_ms" in result.stdout


def test_a_study_run_again_with_more_trials_resumes(tmp_path: Path) -> None:
    url = str(tmp_path / "t.journal")
    pruner = {"name": "asha", "mode": "promotion", "min_resource": 1, "max_resource": 3}
    first = launch(str(_config(tmp_path, url, pruner, n_trials=4)), "--quiet", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    again = launch(str(_config(tmp_path, url, pruner, n_trials=7)), "--quiet", cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    _check_study(study_of(url), 7, max_epochs=3)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"metric": METRICS, "direction": "minimize"},
         "error: direction: is 'minimize', but metric lists 2 metrics: give a list of 2 "
         "directions (minimize or maximize), one per metric"),
        ({"metric": METRICS, "direction": ["minimize"]},
         "error: direction: lists 1 direction(s) for 2 metrics; give one per metric, in the "
         "same order"),
        ({"metric": METRICS}, "error: direction: is missing, but metric lists 2 metrics"),
        ({"metric": "validation_error", "direction": ["minimize", "minimize"]},
         "error: direction: is a list of 2, but metric is one name (validation_error)"),
        ({"metric": ["validation_error", "validation_error"],
          "direction": ["minimize", "minimize"]},
         "error: metric: names validation_error twice"),
        ({"metric": ["validation_error", "latency"], "direction": ["minimize", "minimize"]},
         "error: metric[1]: 'latency' is not logged by lenet"),
        ({"metric": ["validation_error", "latency_ms"], "direction": ["minimize", "minimize"]},
         "error: metric[1]: 'latency_ms' is logged by lenet only with model.measure_latency: true"),
        ({"metric": METRICS, "direction": ["minimize", "down"]},
         "error: direction[1]: is 'down'; allowed: minimize, maximize"),
        ({"metric": [], "direction": []}, "error: metric: is an empty list"),
    ],
    ids=["one-direction", "short-list", "no-direction", "list-for-one-metric", "twice",
         "not-logged", "latency-not-measured", "bad-direction", "empty"],
)
def test_bad_objectives_are_one_line_exit_2_and_nothing_written(
    tmp_path: Path, fields: dict, expected: str
) -> None:
    config = config_file(tmp_path, space=SPACE, initial=[], **fields)
    result = launch(str(config), cwd=tmp_path, timeout=120)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(expected), lines
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.yaml"]


@pytest.mark.parametrize("sampler", [
    {"name": "random"}, {"name": "tpe"}, {"name": "gp"},
    {"class": "optuna.samplers:NSGAIISampler", "population_size": 4},
])
def test_samplers_of_several_objectives_pass_the_check(sampler: dict) -> None:
    check_against_registry(parse_config({
        "study": "t", "model": {"name": "lenet"}, "metric": METRICS,
        "direction": ["minimize", "maximize"], "space": SPACE, "sampler": sampler,
        "pruner": {"name": "asha", "max_resource": 3}, "stop": {"n_trials": 4}}))


def test_a_sampler_of_one_objective_is_refused_before_anything_runs() -> None:
    """CmaEsSampler raises when asked for a trial of a study with several objectives: the
    config passed --check, and every trial but the initial ones ended FAIL with that error."""
    raw = {"study": "t", "model": {"name": "lenet"}, "metric": METRICS,
           "direction": ["minimize", "minimize"], "space": SPACE,
           "sampler": {"class": "optuna.samplers:CmaEsSampler"},
           "pruner": {"name": "asha", "max_resource": 3}, "stop": {"n_trials": 4}}
    with pytest.raises(ConfigError) as info:
        check_against_registry(parse_config(raw))
    assert info.value.field == "sampler"
    assert info.value.message == (
        "'optuna.samplers:CmaEsSampler' cannot propose a trial of a study with 2 objectives (If "
        "the study is being used for multi-objective optimization, CmaEsSampler cannot be "
        "used.); random, tpe, gp and optuna.samplers:NSGAIISampler can")
    # the same sampler on one objective is fine
    check_against_registry(parse_config(raw | {"metric": "validation_error",
                                                "direction": "minimize"}))
