"""The examples of examples/ that bring the user's own code: ``own_model.py`` (a LightningModule
and LightningDataModule of one's own, tuned with the callback and with the launcher) and
``local_search_sampler.py`` (an Optuna sampler of one's own, used by the launcher by class path).

The sampler is tested in this process on ordinary Optuna studies; both scripts are run as real
processes from another folder, as a user runs them, and the studies they write are read back.
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import math
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import optuna
import pytest
from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)
from optuna.trial import TrialState, create_trial

from lightning_hpo._optuna import claim_waiting_trial
from lightning_hpo.launch.config.space import parse_space, suggest
from lightning_hpo.schema import CONFIG_ATTR
from lightning_hpo.storage import open_storage

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load_example(name: str) -> ModuleType:
    """Import ``examples/<name>.py`` as module ``name`` (so ``"name:Class"`` paths resolve)."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


local_search = _load_example("local_search_sampler")
LocalSearchSampler = local_search.LocalSearchSampler

#: One distribution of every kind the sampler handles.
SPACE: dict[str, BaseDistribution] = {
    "x": FloatDistribution(-10.0, 10.0),
    "lr": FloatDistribution(1e-6, 1.0, log=True),
    "grid": FloatDistribution(0.0, 1.0, step=0.25),
    "width": IntDistribution(8, 512),
    "depth": IntDistribution(1, 64, log=True),
    "even": IntDistribution(0, 100, step=2),
    "act": CategoricalDistribution(["relu", "tanh", "gelu"]),
}


def _objective(params: dict[str, Any]) -> float:
    """A smooth function of every parameter of SPACE, lowest near x=2, lr=1e-3, width=100."""
    return ((params["x"] - 2) ** 2 + math.log10(params["lr"] / 1e-3) ** 2
            + ((params["width"] - 100) / 50) ** 2 + params["grid"] + params["depth"] / 64
            + params["even"] / 100 + (params["act"] != "gelu"))


def _ask(study: optuna.Study) -> optuna.Trial:
    """A new trial with a value for every parameter of SPACE."""
    trial = study.ask()
    for name, dist in SPACE.items():
        if isinstance(dist, FloatDistribution):
            trial.suggest_float(name, dist.low, dist.high, log=dist.log, step=dist.step)
        elif isinstance(dist, IntDistribution):
            trial.suggest_int(name, dist.low, dist.high, log=dist.log, step=dist.step)
        else:
            trial.suggest_categorical(name, dist.choices)
    return trial


def _run(study: optuna.Study, n_trials: int) -> None:
    for _ in range(n_trials):
        trial = _ask(study)
        study.tell(trial, _objective(trial.params))


def _assert_near(params: dict[str, Any], best: dict[str, Any], scale: float) -> None:
    """Every value of ``params`` is in its range and within ``scale`` of ``best``'s (in log
    space for a log range; half a grid step more after rounding to an int or a step)."""
    for name, dist in SPACE.items():
        value, center = params[name], best[name]
        if isinstance(dist, CategoricalDistribution):
            assert value in dist.choices
            continue
        assert dist.low <= value <= dist.high, (name, value)
        if isinstance(dist, IntDistribution):
            assert isinstance(value, int)
        if dist.step is not None:
            assert (value - dist.low) / dist.step == pytest.approx(round((value - dist.low)
                                                                         / dist.step))
        if dist.log:
            assert value > 0
            distance = abs(math.log(value) - math.log(center))
            width = scale * (math.log(dist.high) - math.log(dist.low))
            # rounding to an int moves it by <= 0.5: in log space by <= log(v / (v - 0.5))
            slack = math.log(value / (value - 0.5)) if isinstance(dist, IntDistribution) \
                else 1e-9
        else:
            distance = abs(value - center)
            width = scale * (dist.high - dist.low)
            slack = dist.step / 2 if dist.step is not None else 1e-9
        assert distance <= width + slack, (name, value, center)


def test_the_startup_trials_are_exactly_random_search() -> None:
    """Until ``n_startup_trials`` trials are COMPLETE it is a seeded RandomSampler; PRUNED
    trials do not count."""
    ours = optuna.create_study(sampler=LocalSearchSampler(n_startup_trials=4, seed=7))
    plain = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=7))
    for number in range(8):
        a, b = _ask(ours), _ask(plain)
        assert a.params == b.params
        state = TrialState.COMPLETE if number in (0, 3, 5) else TrialState.PRUNED
        for study, trial in ((ours, a), (plain, b)):
            study.tell(trial, _objective(trial.params) if state == TrialState.COMPLETE else None,
                       state=state)
    _run(ours, 1)  # a 4th COMPLETE trial: from now on the local search
    after = _ask(ours)
    assert after.params != _ask(plain).params
    best = min(ours.get_trials(states=(TrialState.COMPLETE,)), key=lambda t: float(t.value))
    _assert_near(after.params, best.params, 0.2)


@pytest.mark.parametrize("scale", [0.05, 0.2, 1.0])
def test_proposals_stay_in_range_and_within_scale_of_the_best_so_far(scale: float) -> None:
    study = optuna.create_study(
        sampler=LocalSearchSampler(n_startup_trials=5, scale=scale, seed=1)
    )
    _run(study, 60)
    trials = study.get_trials()
    around = local_search.proposed_around(trials, "minimize", 5)
    assert [around[t.number] for t in trials[:5]] == [None] * 5
    for trial in trials[5:]:
        best = trials[around[trial.number]]
        assert best.value == min(t.value for t in trials[: trial.number])  # type: ignore[type-var]
        _assert_near(trial.params, best.params, scale)
    if scale < 1:  # a search near the best finds better values than its random start
        assert study.best_value < min(t.value for t in trials[:5])  # type: ignore[type-var]


@pytest.mark.parametrize("direction", ["minimize", "maximize"])
def test_the_best_follows_the_study_direction(direction: str) -> None:
    """Proposals are made around the lowest value when minimising, the highest when
    maximising: the trial at x=-8 (value -8) or the one at x=8 (value 8)."""
    study = optuna.create_study(
        direction=direction, sampler=LocalSearchSampler(n_startup_trials=3, scale=0.1, seed=0)
    )
    dist = FloatDistribution(-10.0, 10.0)
    for x in (0.0, -8.0, 8.0):
        study.add_trial(create_trial(params={"x": x}, distributions={"x": dist}, value=x))
    study.add_trial(create_trial(params={"x": 9.5}, distributions={"x": dist},
                                 intermediate_values={1: 9.5}, state=TrialState.PRUNED))
    center = -8.0 if direction == "minimize" else 8.0
    for _ in range(30):
        x = study.ask().suggest_float("x", -10.0, 10.0)
        assert abs(x - center) <= 2.0  # 0.1 of the range; the PRUNED 9.5 is no best


def test_a_categorical_keeps_the_best_choice_with_probability_one_minus_scale() -> None:
    study = optuna.create_study(sampler=LocalSearchSampler(n_startup_trials=1, scale=0.25,
                                                           seed=0))
    choices = ("a", "b", "c", "d")
    dist = CategoricalDistribution(choices)
    study.add_trial(create_trial(params={"c": "b"}, distributions={"c": dist}, value=0.0))
    drawn = [study.ask().suggest_categorical("c", choices) for _ in range(400)]
    assert set(drawn) == set(choices)
    assert 0.70 <= drawn.count("b") / len(drawn) <= 0.80  # 0.75 expected; seeded, so exact


def test_a_seed_makes_it_deterministic() -> None:
    def params(seed: int) -> list[dict[str, Any]]:
        study = optuna.create_study(sampler=LocalSearchSampler(n_startup_trials=3, seed=seed))
        _run(study, 12)
        return [t.params for t in study.trials]

    assert params(3) == params(3)
    assert params(3)[5:] != params(4)[5:]


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        pytest.param({"n_startup_trials": -1}, "`n_startup_trials` is -1", id="negative"),
        pytest.param({"n_startup_trials": 2.5}, "`n_startup_trials` is 2.5", id="float"),
        pytest.param({"scale": 0}, "`scale` is 0, but must be `0 < scale <= 1`", id="zero"),
        pytest.param({"scale": 1.5}, "`scale` is 1.5", id="above-one"),
        pytest.param({"scale": True}, "`scale` is True", id="bool"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=f"^The value of {words}"):
        LocalSearchSampler(**kwargs)


def test_a_multi_objective_study_is_refused() -> None:
    study = optuna.create_study(directions=["minimize", "minimize"],
                                sampler=LocalSearchSampler(n_startup_trials=0))
    with pytest.raises(ValueError, match="single-objective studies only"):
        study.ask().suggest_float("x", 0.0, 1.0)


def test_the_examples_docstrings() -> None:
    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        for module in (local_search, _load_example("own_model")):
            result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
            assert result.attempted > 0 and result.failed == 0, module.__name__
    finally:
        optuna.logging.set_verbosity(verbosity)


def test_workers_with_their_own_samplers_fill_in_claimed_tickets_near_the_best(
    tmp_path: Path,
) -> None:
    """The launcher's way: two processes' samplers (here two studies on one journal file, two
    seeds) claim WAITING tickets and sample when they claim; each proposal after the startup
    is near the best COMPLETE trial in the storage at that moment."""
    space = parse_space({"lr": {"loguniform": [1e-4, 1.0]}, "width": {"randint": [8, 256]}})
    path = str(tmp_path / "s.journal")
    creator = optuna.create_study(study_name="s", storage=open_storage(path))
    for _ in range(16):  # the launcher's tickets
        creator.enqueue_trial({})
    workers = [
        optuna.load_study(study_name="s", storage=open_storage(path),
                          sampler=LocalSearchSampler(n_startup_trials=3, scale=0.1, seed=seed))
        for seed in (1, 2)
    ]
    for turn in range(16):
        study = workers[turn % 2]
        complete = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))
        trial = claim_waiting_trial(study)
        assert trial is not None
        params = suggest(trial, space)
        if len(complete) >= 3:
            best = min(complete, key=lambda t: (t.value, t.number)).params
            assert abs(math.log(params["lr"] / best["lr"])) <= 0.1 * math.log(1e4) + 1e-9
            assert abs(params["width"] - best["width"]) <= 0.1 * 248 + 0.5
        study.tell(trial, math.log10(params["lr"] / 0.01) ** 2 + abs(params["width"] - 64) / 64)
    assert claim_waiting_trial(workers[1]) is None
    trials = workers[1].get_trials()
    assert len({json.dumps(t.params) for t in trials}) == 16  # the two seeds differ


def _run_script(name: str, out: Path, cwd: Path) -> str:
    result = subprocess.run([sys.executable, str(EXAMPLES / f"{name}.py"), "--out", str(out)],
                            capture_output=True, text=True, cwd=cwd, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


@pytest.mark.slow
def test_the_own_model_example_tunes_it_with_the_callback_and_with_the_launcher(
    tmp_path: Path,
) -> None:
    out = tmp_path / "out"
    stdout = _run_script("own_model", out, cwd=tmp_path)
    # 1. The plain study: ordinary Optuna, the callback pruning at ASHA's rungs (1, 3 epochs).
    plain = optuna.load_study(study_name="own-model-plain", storage=open_storage(
        str(out / "plain.journal"), create=False))
    assert len(plain.trials) == 10
    assert {t.state for t in plain.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    for trial in plain.trials:
        epochs = len(trial.intermediate_values)
        assert epochs == 9 if trial.state == TrialState.COMPLETE else epochs in (1, 3)
    assert set(plain.best_params) == {"lr", "hidden", "dropout"}
    # 2. The launcher: the example's own classes by class path, all 8 trials finished.
    launched = optuna.load_study(study_name="own-model-launcher", storage=open_storage(
        str(out / "launcher.journal"), create=False))
    config = json.loads(launched.user_attrs[CONFIG_ATTR])
    assert (config["model"]["name"], config["data"]["name"]) == ("own_model:MLP",
                                                                 "own_model:DigitFeatures")
    assert len(launched.trials) == 8
    assert {t.state for t in launched.trials} <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert set(launched.best_params) == {"lr", "hidden", "dropout"}
    assert (out / "runs" / "own-model-launcher" / f"trial_{launched.best_trial.number:05d}"
            / "best.ckpt").is_file()
    states = {s: sum(t.state == s for t in plain.trials) for s in TrialState}
    assert (f"plain study.optimize: 10 trials, {states[TrialState.COMPLETE]} complete, "
            f"{states[TrialState.PRUNED]} pruned") in stdout
    assert (f"  best validation_error {plain.best_value:.4f}") in stdout
    assert "launcher with own_model:MLP: 8 trials, " in stdout


@pytest.mark.slow
def test_the_local_search_example_runs_the_sampler_in_the_launcher(tmp_path: Path) -> None:
    out = tmp_path / "out"
    stdout = _run_script("local_search_sampler", out, cwd=tmp_path)
    study = optuna.load_study(study_name="local-search", storage=open_storage(
        str(out / "local.journal"), create=False))
    trials = study.get_trials()
    assert len(trials) == local_search.N_TRIALS
    assert all(t.state == TrialState.COMPLETE for t in trials)
    config = json.loads(study.user_attrs[CONFIG_ATTR])
    assert config["sampler"] == {"class": "local_search_sampler:LocalSearchSampler",
                                 "n_startup_trials": 3, "scale": 0.2}
    space = parse_space(config["space"])
    # One worker, so the trials ran in number order: each was proposed around the best
    # COMPLETE trial before it, within 0.2 of every range.
    around = local_search.proposed_around(trials, "minimize", 3)
    assert [around[t.number] is None for t in trials] == [True] * 3 + [False] * (len(trials) - 3)
    for trial in trials[3:]:
        best = trials[around[trial.number]].params
        for name, dist in space.items():
            value = trial.params[name]
            assert dist.low <= value <= dist.high
            if dist.log:
                reach = 0.2 * math.log(dist.high / dist.low) + 1e-9
                assert abs(math.log(value / best[name])) <= reach, (trial.number, name)
            else:
                reach = 0.2 * (dist.high - dist.low) + (0.5 if dist.step else 1e-9)
                assert abs(value - best[name]) <= reach, (trial.number, name)
    rows = [line.split() for line in stdout.splitlines() if line[:5].strip().isdigit()]
    assert [row[1] for row in rows[:3]] == ["random"] * 3
    assert [f"near #{around[t.number]}" for t in trials[3:]] == [
        " ".join(row[1:3]) for row in rows[3:]]
    assert f"best: trial {study.best_trial.number}, validation_error {study.best_value:.4f}" \
        in stdout
