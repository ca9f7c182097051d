"""ASHAPruner and HyperbandPruner on real Optuna trials, over every storage and both directions.

Values are written as *losses* (lower is better) and turned into the study's direction by
``_value``, so that every expected decision is exact in both directions.
"""

from __future__ import annotations

import inspect
import json
import logging
import math
import os
import pickle
import random
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import optuna
import pytest
import sqlalchemy as sa
from conftest import StorageSpec
from helpers.support import HELPERS, REPO
from optuna.storages import BaseStorage, RDBStorage
from optuna.trial import TrialState

from lightning_hpo._optuna import backend_of, storage_of, study_id_of
from lightning_hpo.pruners import (
    ASHAPruner,
    HyperbandPruner,
    RungRecord,
    asha_continues,
    rung_records,
    rungs,
)
from lightning_hpo.schema import BRACKET_ATTR, PRUNER_ATTR
from lightning_hpo.schema import RUNG_RECORD_TABLE as RECORD_TABLE

optuna.logging.set_verbosity(optuna.logging.WARNING)

_WORKER = HELPERS / "pruner_worker.py"
_REPO_ROOT = REPO


def _value(direction: str, loss: float) -> float:
    return loss if direction == "minimize" else -loss


def _asha_2_10() -> ASHAPruner:
    """ASHA with rungs 2, 4, 8, 10."""
    return ASHAPruner(2, max_resource=10, reduction_factor=2)


def _study(
    storage: StorageSpec, pruner: optuna.pruners.BasePruner, direction: str = "minimize",
    name: str = "study", sampler: optuna.samplers.BaseSampler | None = None,
) -> optuna.Study:
    return optuna.create_study(
        storage=storage.make(), study_name=name, pruner=pruner, direction=direction,
        sampler=sampler or optuna.samplers.RandomSampler(seed=0),
    )


def _report(trial: optuna.Trial, direction: str, loss: float, step: int) -> bool:
    trial.report(_value(direction, loss), step)
    return trial.should_prune()


def _trial(study: optuna.Study, direction: str, reports: list[tuple[int, float]]) -> list[bool]:
    """Run one trial through ``(step, loss)`` reports, stop when pruned; the decisions."""
    trial = study.ask()
    decisions = []
    for step, loss in reports:
        decisions.append(_report(trial, direction, loss, step))
        if decisions[-1]:
            study.tell(trial, state=TrialState.PRUNED)
            return decisions
    study.tell(trial, _value(direction, reports[-1][1]))
    return decisions


def _records(study: optuna.Study, direction: str) -> set[tuple[int, int, int, float]]:
    """Records as (bracket, rung, trial, loss)."""
    return {(b, r, t, _value(direction, v)) for b, r, t, v in rung_records(study)}


# -- the signatures: Optuna's argument orders ----------------------------------------------


def test_each_pruner_takes_positionally_what_its_optuna_counterpart_takes_in_that_order() -> None:
    """HyperbandPruner(1, 27, 3) is Optuna's HyperbandPruner order; ASHAPruner's counterpart,
    Optuna's SuccessiveHalvingPruner, takes (min_resource, reduction_factor): there
    ``max_resource`` and ``reduction_factor`` are keyword-only, so ASHAPruner(1, 9, 3) is
    refused rather than read as another ladder."""
    def positional(cls: type) -> list[str]:
        return [p.name for p in inspect.signature(cls).parameters.values()
                if p.kind == p.POSITIONAL_OR_KEYWORD]

    assert positional(HyperbandPruner) == positional(optuna.pruners.HyperbandPruner)[:3] == [
        "min_resource", "max_resource", "reduction_factor"]
    assert HyperbandPruner(1, 27, 3).bracket_levels(0) == HyperbandPruner(
        min_resource=1, max_resource=27, reduction_factor=3).bracket_levels(0) == [1, 3, 9, 27]
    assert positional(ASHAPruner) == positional(optuna.pruners.SuccessiveHalvingPruner)[:1] == [
        "min_resource"]
    with pytest.raises(TypeError, match="positional argument"):
        ASHAPruner(1, 9, 3)  # type: ignore[misc]
    assert ASHAPruner(1, max_resource=9, reduction_factor=3).levels == [1, 3, 9]


# -- the ASHA rule, alone ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("n", "eta", "quota"),
    [(1, 2, 1), (2, 2, 1), (3, 2, 1), (4, 2, 2), (5, 2, 2), (6, 2, 3), (7, 2, 3), (1, 3, 1),
     (2, 3, 1), (3, 3, 1), (5, 3, 1), (6, 3, 2), (9, 3, 3), (26, 3, 8), (27, 3, 9),
     (100, 3, 33), (4, 4, 1), (8, 4, 2), (99, 100, 1), (100, 100, 1), (200, 100, 2)],
)
def test_asha_continues_keeps_the_best_max_1_n_div_eta(n: int, eta: int, quota: int) -> None:
    # the best `quota` continue (n_better counts strictly better values: ties continue)
    decisions = [asha_continues(n, n_better, eta) for n_better in range(n)]
    assert decisions == [True] * quota + [False] * (n - quota)


@pytest.mark.parametrize("eta", [2, 3, 4])
@pytest.mark.parametrize("n", range(1, 13))
def test_asha_continues_keeps_exactly_the_quota(n: int, eta: int) -> None:
    decisions = [asha_continues(n, n_better, eta) for n_better in range(n)]
    assert sum(decisions) == max(1, n // eta) and decisions[0]


def test_asha_continues_the_first_trial_at_a_rung() -> None:
    assert asha_continues(1, 0, 2) and asha_continues(1, 0, 100)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((0, 0, 3), r"`n` is 0, but must be an integer `n >= 1`"),
        ((3.0, 0, 3), r"`n` is 3.0"),
        ((3, 0, 1), r"`reduction_factor` is 1, but must be an integer `reduction_factor >= 2`"),
        ((3, -1, 3), r"`n_better` is -1"),
        ((3, 3, 3), r"`n_better` is 3, but must be `n_better < n` \(3\)"),
        ((True, 0, 3), r"`n` is True"),
    ],
    ids=["n0", "n-float", "eta1", "better-neg", "better-n", "n-bool"],
)
def test_asha_continues_refuses_bad_counts(args: tuple[Any, Any, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        asha_continues(*args)


# -- the ASHA rules, on real trials -------------------------------------------------------


def test_first_trial_continues_and_records_each_rung_below_max(
    storage: StorageSpec, direction: str
) -> None:
    study = _study(storage, _asha_2_10(), direction)
    decisions = _trial(study, direction, [(step, 100.0 + step) for step in range(1, 11)])
    assert decisions == [False] * 10
    assert _records(study, direction) == {(0, 2, 0, 102.0), (0, 4, 0, 104.0), (0, 8, 0, 108.0)}


def test_promotion_quota_for_n_1_to_8(storage: StorageSpec, direction: str) -> None:
    # rung 2 with reduction_factor 2: keep the best max(1, n // 2) of n, the new value included
    study = _study(storage, _asha_2_10(), direction)
    losses = [5.0, 4.0, 6.0, 3.0, 7.0, 4.5, 4.5, 5.0]
    #   n:      1    2    3    4    5    6    7    8
    #   quota:  1    1    1    2    2    3    3    4
    #   better: 0    0    2    0    4    2    2    4   (ties are not better)
    expected = [False, False, True, False, True, False, False, True]
    assert [_trial(study, direction, [(2, loss)])[0] for loss in losses] == expected
    assert sorted(loss for *_, loss in _records(study, direction)) == sorted(losses)


def test_ties_continue(storage: StorageSpec, direction: str) -> None:
    study = _study(storage, _asha_2_10(), direction)
    assert [_trial(study, direction, [(2, 1.0)])[0] for _ in range(3)] == [False] * 3
    assert _trial(study, direction, [(2, 1.5)]) == [True]  # n=4, quota 2, 3 better


def test_skipped_rungs_are_recorded_and_the_highest_decides(
    storage: StorageSpec, direction: str
) -> None:
    study = _study(storage, _asha_2_10(), direction)
    assert _trial(study, direction, [(2, 1.0), (4, 1.0)]) == [False, False]
    assert _trial(study, direction, [(2, 0.5)]) == [False]
    assert _trial(study, direction, [(2, 0.7)]) == [True]  # rung 2: n=3, 1 better
    # Straight to step 5: at rung 2 (0.5 and 0.7 better, quota 2) it would be pruned, but
    # rung 4 decides (only 1.0 there, worse): it continues, recorded at both rungs.
    assert _trial(study, direction, [(1, 9.0), (5, 0.8)]) == [False, False]
    records = _records(study, direction)
    assert {(r, loss) for _, r, t, loss in records if t == 3} == {(2, 0.8), (4, 0.8)}
    assert len(records) == 6


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf], ids=["nan", "inf", "-inf"])
def test_non_finite_values_are_pruned_at_the_first_rung_and_never_recorded(
    storage: StorageSpec, direction: str, bad: float
) -> None:
    study = _study(storage, _asha_2_10(), direction)
    trial = study.ask()
    trial.report(bad, 1)
    assert trial.should_prune() is False  # step 1 is no rung: no decision
    trial.report(bad, 2)
    assert trial.should_prune() is True  # the first trial at a rung, yet pruned
    study.tell(trial, state=TrialState.PRUNED)
    assert rung_records(study) == []
    assert _trial(study, direction, [(2, 1.0)]) == [False]  # the next one is first at rung 2


def test_no_decision_and_no_record_at_max_resource(storage: StorageSpec, direction: str) -> None:
    study = _study(storage, _asha_2_10(), direction)
    assert _trial(study, direction, [(2, 0.0), (4, 0.0), (8, 0.0), (10, 0.0)]) == [False] * 4
    assert _trial(study, direction, [(10, 100.0)]) == [False]  # skips every rung: done
    assert _trial(study, direction, [(12, 100.0)]) == [False]
    assert _trial(study, direction, [(9, 100.0), (10, 100.0)]) == [True]  # 9 crosses 2, 4, 8
    assert {(r, t) for _, r, t, _ in _records(study, direction)} == {
        (2, 0), (4, 0), (8, 0), (2, 3), (4, 3), (8, 3)
    }


def test_repeated_decision_at_a_step_is_idempotent(storage: StorageSpec, direction: str) -> None:
    study = _study(storage, _asha_2_10(), direction)
    assert _trial(study, direction, [(2, 1.0)]) == [False]
    trial = study.ask()
    trial.report(_value(direction, 2.0), 2)
    assert [trial.should_prune() for _ in range(3)] == [True, True, True]
    assert sorted(t for *_, t, _ in _records(study, direction)) == [0, 1]


def test_unbounded_ladder(storage: StorageSpec, direction: str) -> None:
    study = _study(storage, ASHAPruner(1, reduction_factor=3), direction)
    assert _trial(study, direction, [(1, 1.0), (2, 1.0), (81, 1.0), (100, 1.0)]) == [False] * 4
    assert sorted(r for _, r, _, _ in _records(study, direction)) == [1, 3, 9, 27, 81]
    assert _trial(study, direction, [(200, 2.0)]) == [True]  # rungs 1..81 crossed, 81 decides


class _StorageSpy:
    """Counts every call into a study's storage: its public methods and, for RDB, each SQL
    statement (the rung store talks to the RDB engine directly)."""

    def __init__(self, study: optuna.Study, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: Counter[str] = Counter()
        self.counting = False
        front = storage_of(study)  # what Study and Trial call (Optuna's cache, for RDB)
        for name in dir(BaseStorage):
            if not name.startswith("_") and callable(getattr(front, name, None)):
                monkeypatch.setattr(front, name, self._wrap(name, getattr(front, name)))
        backend = backend_of(study)
        if isinstance(backend, RDBStorage):
            sa.event.listen(backend.engine, "before_cursor_execute", self._on_sql)
            self._engine = backend.engine

    def _wrap(self, name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def counted(*args: Any, **kwargs: Any) -> Any:
            if self.counting:
                self.calls[name] += 1
            return method(*args, **kwargs)

        return counted

    def _on_sql(self, *args: Any) -> None:
        if self.counting:
            self.calls["sql"] += 1

    def should_prune(self, trial: optuna.Trial) -> tuple[bool, Counter[str]]:
        self.calls.clear()
        self.counting = True
        try:
            return trial.should_prune(), Counter(self.calls)
        finally:
            self.counting = False

    def close(self) -> None:
        if hasattr(self, "_engine"):
            sa.event.remove(self._engine, "before_cursor_execute", self._on_sql)


@pytest.fixture
def spy_factory(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[optuna.Study], _StorageSpy]]:
    spies: list[_StorageSpy] = []

    def make(study: optuna.Study) -> _StorageSpy:
        spies.append(_StorageSpy(study, monkeypatch))
        return spies[-1]

    yield make
    for spy in spies:
        spy.close()


def test_steps_between_rungs_do_not_touch_the_storage(
    storage: StorageSpec, direction: str, spy_factory: Callable[[optuna.Study], _StorageSpy]
) -> None:
    study = _study(storage, _asha_2_10(), direction)
    _trial(study, direction, [(2, 1.0)])
    spy = spy_factory(study)
    trial = study.ask()
    touched = {}
    for step in range(1, 10):
        trial.report(_value(direction, 0.5), step)
        pruned, calls = spy.should_prune(trial)
        assert pruned is False
        touched[step] = sum(calls.values())
    assert {step for step, n in touched.items() if n} == {2, 4, 8}, touched
    # and writes stay minimal: no trial attribute, only the rung record
    trial2 = study.ask()
    trial2.report(_value(direction, 0.1), 2)
    _, first = spy.should_prune(trial2)
    trial2.report(_value(direction, 0.1), 4)
    _, second = spy.should_prune(trial2)
    assert first["set_trial_system_attr"] == 0 and second["set_trial_system_attr"] == 0
    assert "get_all_trials" not in first + second


def test_asha_records_its_rungs_and_no_trial_attr(storage: StorageSpec, direction: str) -> None:
    study = _study(storage, _asha_2_10(), direction)
    _trial(study, direction, [(1, 1.0), (2, 1.0), (4, 1.0)])
    (frozen,) = study.get_trials()
    assert not any(key.startswith("lightning_hpo:") for key in frozen.system_attrs)
    assert [(r.rung, r.trial_number) for r in rung_records(study)] == [(2, 0), (4, 0)]


def test_records_are_shared_through_the_storage(storage: StorageSpec, direction: str) -> None:
    first = _study(storage, _asha_2_10(), direction, name="shared")
    second = optuna.load_study(
        study_name="shared", storage=storage.make(), pruner=_asha_2_10()
    )
    assert _trial(first, direction, [(2, 1.0)]) == [False]
    assert _trial(second, direction, [(2, 2.0)]) == [True]  # it sees the first one's record
    assert _trial(first, direction, [(2, 0.5)]) == [False]  # and the first sees the second's
    assert _trial(first, direction, [(2, 3.0)]) == [True]  # n=4, quota 2, 3 better
    assert rung_records(first) == rung_records(second)
    assert [t for *_, t, _ in rung_records(second)] == [0, 1, 2, 3]


def test_matches_optuna_successive_halving_on_sequential_trials(
    storage: StorageSpec, direction: str
) -> None:
    # Where the semantics coincide (one trial at a time, a report at every step, finite values,
    # min_early_stopping_rate=0), ASHA here and Optuna's SuccessiveHalvingPruner decide alike,
    # ties included.
    def run(pruner: optuna.pruners.BasePruner, name: str) -> list[int | None]:
        rng = random.Random(7)
        study = _study(storage, pruner, direction, name=name)
        pruned_at = []
        for _ in range(20):
            base = rng.randint(0, 5)
            decisions = _trial(study, direction, [(s, base + rng.randint(0, 2)) for s in
                                                  range(1, 11)])
            pruned_at.append(len(decisions) if decisions[-1] else None)
        return pruned_at

    ours = run(ASHAPruner(1, max_resource=10, reduction_factor=3), "ours")
    assert ours == run(optuna.pruners.SuccessiveHalvingPruner(1, 3, 0), "optuna")
    assert 0 < sum(p is not None for p in ours) < len(ours)


@pytest.mark.parametrize("seed", range(4))
def test_matches_optuna_successive_halving_many_seeds(seed: int, direction: str) -> None:
    def run(pruner: optuna.pruners.BasePruner) -> list[list[bool]]:
        rng = random.Random(seed)
        study = optuna.create_study(pruner=pruner, direction=direction)
        runs = []
        for _ in range(60):
            base = rng.randint(0, 9)
            reports = [(s, float(base + rng.randint(0, 3))) for s in range(1, 31)]
            runs.append(_trial(study, direction, reports))
        return runs

    ours = run(ASHAPruner(1, reduction_factor=2))
    assert ours == run(optuna.pruners.SuccessiveHalvingPruner(1, 2, 0))


def test_deleting_a_study_deletes_its_records(storage: StorageSpec, direction: str) -> None:
    study = _study(storage, _asha_2_10(), direction, name="again")
    _trial(study, direction, [(2, 1.0), (4, 1.0)])
    assert len(rung_records(study)) == 2
    optuna.delete_study(study_name="again", storage=storage.make())
    reborn = _study(storage, _asha_2_10(), direction, name="again")
    assert rung_records(reborn) == []
    assert _trial(reborn, direction, [(2, 5.0)]) == [False]  # first at the rung, again
    assert [r.trial_number for r in rung_records(reborn)] == [0]


def test_reading_records_writes_nothing(storage: StorageSpec) -> None:
    if not storage.is_rdb:
        pytest.skip("only RDB storages have a records table")
    study = _study(storage, ASHAPruner())
    assert rung_records(study) == []
    backend = backend_of(study)
    assert isinstance(backend, RDBStorage)
    assert not sa.inspect(backend.engine).has_table(RECORD_TABLE)


# -- constructors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_resource": 0}, r"^The value of `min_resource` is 0, but must be "
                              r"`min_resource >= 1`\.$"),
        ({"reduction_factor": 1}, r"`reduction_factor` is 1, but must be `reduction_factor >= 2`"),
        ({"max_resource": 0}, r"`max_resource` is 0, but must be `max_resource >= min_resource`"),
        ({"min_resource": 2.0}, r"`min_resource` is 2.0, but must be an integer"),
        ({"max_resource": True}, r"`max_resource` is True"),
    ],
    ids=["min0", "eta1", "max0", "min-float", "max-bool"],
)
def test_constructor_errors_name_the_argument(kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ASHAPruner(**kwargs)
    with pytest.raises(ValueError, match=message):
        HyperbandPruner(**{"max_resource": 27, **kwargs})


@pytest.mark.parametrize("name", ["min_resource", "max_resource"])
def test_optunas_auto_is_refused_saying_what_to_give(name: str) -> None:
    """Optuna's default ``"auto"`` got "must be an integer" and no word on why or what."""
    for pruner, others in ((ASHAPruner, {}), (HyperbandPruner, {"max_resource": 27})):
        with pytest.raises(ValueError) as info:
            pruner(**{**others, name: "auto"})  # type: ignore[arg-type]
        message = str(info.value)
        assert message.startswith(f"The value of `{name}` is 'auto', but must be an integer: "
                                  "Optuna's 'auto' is read from the first trial to finish")
        assert message.endswith("(1 is the usual choice)." if name == "min_resource" else
                                "(or None: a ladder without a top)." if pruner is ASHAPruner
                                else "give the epochs a trial may train.")


def test_numpy_integers_are_integers(storage: StorageSpec) -> None:
    """``max_resource=np.int64(9)`` was refused as "is np.int64(9), but must be an integer"."""
    import numpy as np

    asha = ASHAPruner(min_resource=np.int64(1), max_resource=np.int64(9),
                      reduction_factor=np.int64(3))
    hyperband = HyperbandPruner(np.int64(1), np.int64(27), np.int64(3))
    assert repr(asha) == "ASHAPruner(min_resource=1, max_resource=9, reduction_factor=3)"
    assert type(asha.max_resource) is int and hyperband.n_brackets == 4
    study = optuna.create_study(storage=storage.make(), study_name="np", pruner=asha)
    trial = study.ask()
    trial.report(0.5, step=1)
    assert not trial.should_prune()  # its settings are written to the study as JSON
    assert _stored_settings(storage, "np")["max_resource"] == 9


def test_hyperband_needs_max_resource() -> None:
    with pytest.raises(ValueError, match=r"`max_resource` is None"):
        HyperbandPruner(min_resource=1)


def test_repr_and_properties() -> None:
    asha = _asha_2_10()
    assert repr(asha) == "ASHAPruner(min_resource=2, max_resource=10, reduction_factor=2)"
    assert asha.levels == [2, 4, 8, 10] and ASHAPruner().levels is None
    hyperband = HyperbandPruner(1, 27, 3)
    assert repr(hyperband) == "HyperbandPruner(min_resource=1, max_resource=27, reduction_factor=3)"
    assert hyperband.n_brackets == 4
    assert [hyperband.bracket_levels(s) for s in range(4)] == [
        [1, 3, 9, 27], [3, 9, 27], [9, 27], [27]
    ]
    assert hyperband.trial_allocation_budgets == rungs.trial_allocation_budgets(1, 27, 3)
    with pytest.raises(ValueError, match="`bracket` is 4"):
        hyperband.bracket_levels(4)
    assert isinstance(hyperband, optuna.pruners.HyperbandPruner)


# -- the pruner's settings, stored in the study ---------------------------------------------

_SETTINGS = {
    "asha": (lambda: ASHAPruner(1, max_resource=27, reduction_factor=3), {
        "name": "asha", "min_resource": 1, "reduction_factor": 3, "max_resource": 27,
        "brackets": [[1, 3, 9, 27]], "budgets": [],
    }),
    "asha-unbounded": (lambda: ASHAPruner(1, reduction_factor=3), {
        "name": "asha", "min_resource": 1, "reduction_factor": 3, "max_resource": None,
        "brackets": None, "budgets": [],
    }),
    "hyperband": (lambda: HyperbandPruner(1, 27, 3), {
        "name": "hyperband", "min_resource": 1, "reduction_factor": 3, "max_resource": 27,
        "brackets": [[1, 3, 9, 27], [3, 9, 27], [9, 27], [27]], "budgets": [27, 12, 6, 4],
    }),
}


def _stored_settings(storage: StorageSpec, name: str) -> Any:
    loaded = optuna.load_study(study_name=name, storage=storage.make())
    return storage_of(loaded).get_study_system_attrs(study_id_of(loaded)).get(PRUNER_ATTR)


@pytest.mark.parametrize("kind", list(_SETTINGS))
def test_the_first_decision_stores_the_settings_once(
    storage: StorageSpec, kind: str, spy_factory: Callable[[optuna.Study], _StorageSpy]
) -> None:
    make, expected = _SETTINGS[kind]
    study = _study(storage, make(), name="settings")
    assert _stored_settings(storage, "settings") is None  # nothing before a decision
    trial = study.ask()
    trial.report(1.0, 3)
    assert trial.should_prune() is False
    assert _stored_settings(storage, "settings") == expected
    json.dumps(expected)  # JSON as written, for every storage
    spy = spy_factory(study)
    trial.report(1.0, 4)  # no rung crossed: the same instance reads and writes no study attr
    _, calls = spy.should_prune(trial)
    assert calls["get_study_system_attrs"] == calls["set_study_system_attr"] == 0, calls


@pytest.mark.parametrize("kind", list(_SETTINGS))
def test_equal_settings_are_not_written_again(
    storage: StorageSpec, kind: str, spy_factory: Callable[[optuna.Study], _StorageSpy]
) -> None:
    make, expected = _SETTINGS[kind]
    _trial(_study(storage, make(), name="again"), "minimize", [(2, 1.0)])
    other = optuna.load_study(study_name="again", storage=storage.make(), pruner=make())
    spy = spy_factory(other)
    trial = other.ask()  # a decision before any report: no rung, only the settings are read
    _, calls = spy.should_prune(trial)
    assert (calls["get_study_system_attrs"], calls["set_study_system_attr"]) == (1, 0), calls
    assert _stored_settings(storage, "again") == expected


def test_other_settings_replace_the_stored_ones_with_a_warning(
    storage: StorageSpec, caplog: pytest.LogCaptureFixture
) -> None:
    asha = ASHAPruner(1, max_resource=27, reduction_factor=3)
    _trial(_study(storage, asha, name="changed"), "minimize", [(1, 1.0)])
    other = optuna.load_study(study_name="changed", storage=storage.make(),
                              pruner=HyperbandPruner(1, 27, 3))
    with caplog.at_level(logging.WARNING, logger="lightning_hpo.pruners._asha"):
        _trial(other, "minimize", [(2, 1.0)])
    assert _stored_settings(storage, "changed") == _SETTINGS["hyperband"][1]
    assert "was pruned with other settings" in caplog.text


def test_a_pruner_pickles_without_its_storages(storage: StorageSpec) -> None:
    pruner = HyperbandPruner(1, 9, 3)
    study = _study(storage, pruner, name="pickled")
    _trial(study, "minimize", [(1, 1.0), (3, 1.0)])
    copy = pickle.loads(pickle.dumps(pruner))
    assert repr(copy) == repr(pruner) and copy.trial_allocation_budgets == [9, 5, 3]
    again = optuna.load_study(study_name="pickled", storage=storage.make(), pruner=copy)
    assert [t.should_prune() for t in [again.ask()]] == [False]
    assert _stored_settings(storage, "pickled")["budgets"] == [9, 5, 3]


# -- Hyperband ------------------------------------------------------------------------------


def _ask_in_bracket(study: optuna.Study, pruner: HyperbandPruner, bracket: int) -> optuna.Trial:
    """Ask trials until one falls in ``bracket``; the others are told FAIL."""
    for _ in range(200):
        trial = study.ask()
        if pruner.bracket_of(study.study_name, trial.number) == bracket:
            return trial
        study.tell(trial, state=TrialState.FAIL)
    raise AssertionError(f"no trial fell in bracket {bracket}")


def test_hyperband_bracket_is_deterministic_and_stored(
    storage: StorageSpec, direction: str
) -> None:
    pruner = HyperbandPruner(1, 27, 3)
    study = _study(storage, pruner, direction, name="hb")
    for _ in range(12):
        trial = study.ask()
        bracket = pruner.bracket_of("hb", trial.number)
        first_rung = pruner.bracket_levels(bracket)[0]
        trial.report(_value(direction, 1.0), first_rung)
        trial.should_prune()
        study.tell(trial, state=TrialState.PRUNED)
    loaded = optuna.load_study(study_name="hb", storage=storage.make())
    for frozen in loaded.get_trials():
        bracket = rungs.bracket_of("hb", frozen.number, rungs.trial_allocation_budgets(1, 27, 3))
        if bracket == pruner.n_brackets - 1:  # [27]: no rung below max_resource, nothing stored
            assert BRACKET_ATTR not in frozen.system_attrs
            continue
        assert frozen.system_attrs[BRACKET_ATTR] == bracket
        assert HyperbandPruner(1, 27, 3).bracket_of("hb", frozen.number) == bracket


def test_hyperband_brackets_have_their_own_rungs(storage: StorageSpec, direction: str) -> None:
    pruner = HyperbandPruner(1, 27, 3)
    study = _study(storage, pruner, direction, name="hb-rungs")
    # bracket 0 (rungs 1, 3, 9): a good trial reaches rung 3
    trial = _ask_in_bracket(study, pruner, 0)
    assert [_report(trial, direction, 0.0, step) for step in (1, 2, 3)] == [False] * 3
    study.tell(trial, _value(direction, 0.0))
    # bracket 1 (rungs 3, 9): no decision before 3, and at 3 it is the first of its bracket
    # (in bracket 0's rung 3 it would be pruned: n=2, one better)
    trial = _ask_in_bracket(study, pruner, 1)
    assert [_report(trial, direction, 50.0, step) for step in (1, 2, 3)] == [False] * 3
    study.tell(trial, _value(direction, 50.0))
    trial = _ask_in_bracket(study, pruner, 1)
    assert [_report(trial, direction, 60.0, step) for step in (1, 2, 3)] == [False, False, True]
    study.tell(trial, state=TrialState.PRUNED)
    by_bracket = sorted((r.bracket, r.rung) for r in rung_records(study))
    assert by_bracket == [(0, 1), (0, 3), (1, 3), (1, 3)]


class _RecordingSampler(optuna.samplers.RandomSampler):
    """Random sampling that remembers which trials each sampling call was shown."""

    def __init__(self) -> None:
        super().__init__(seed=0)
        self.views: list[tuple[int, list[int]]] = []

    def infer_relative_search_space(
        self, study: optuna.Study, trial: optuna.trial.FrozenTrial
    ) -> dict[str, optuna.distributions.BaseDistribution]:
        self.views.append((trial.number, [t.number for t in study.get_trials(deepcopy=False)]))
        return super().infer_relative_search_space(study, trial)


def _objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", -5.0, 5.0)
    loss = 0.0
    for epoch in range(9):
        loss = (x - 1.0) ** 2 + 1.0 / (epoch + 1)
        trial.report(loss, epoch + 1)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return loss


def test_samplers_see_only_the_trials_of_their_bracket() -> None:
    pruner = HyperbandPruner(1, 9, 3)
    sampler = _RecordingSampler()
    study = optuna.create_study(study_name="views", sampler=sampler, pruner=pruner)
    study.optimize(_objective, n_trials=30)
    assert sampler.views
    brackets = {pruner.bracket_of("views", number) for number, _ in sampler.views}
    assert len(brackets) > 1
    for number, seen in sampler.views:
        bracket = pruner.bracket_of("views", number)
        assert all(pruner.bracket_of("views", other) == bracket for other in seen)


def test_tpe_with_hyperband_runs_end_to_end(storage: StorageSpec) -> None:
    pruner = HyperbandPruner(1, 9, 3)
    sampler = optuna.samplers.TPESampler(n_startup_trials=3, seed=0)
    study = _study(storage, pruner, name="tpe", sampler=sampler)
    study.optimize(_objective, n_trials=24)
    states = Counter(t.state for t in study.get_trials())
    assert set(states) <= {TrialState.COMPLETE, TrialState.PRUNED}
    assert states[TrialState.PRUNED] > 0 and states[TrialState.COMPLETE] > 0
    assert {r.bracket for r in rung_records(study)} <= set(range(pruner.n_brackets))


# -- several processes at one rung ----------------------------------------------------------


def _run_workers(
    storage: StorageSpec, study_name: str, pruner: dict, plans: list[list[list[list[float]]]],
    tmp_path: Path,
) -> list[dict]:
    barrier = tmp_path / "barrier"
    barrier.mkdir()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [str(_REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    procs = [
        subprocess.Popen(
            [sys.executable, str(_WORKER), storage.kind, str(storage.url), study_name,
             json.dumps(pruner), str(barrier), str(worker), str(len(plans)), json.dumps(plan)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=_REPO_ROOT,
        )
        for worker, plan in enumerate(plans)
    ]
    outputs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=300)
            assert proc.returncode == 0, err[-3000:]
            outputs.extend(json.loads(line) for line in out.splitlines())
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    return outputs


@pytest.mark.slow
def test_processes_reaching_a_rung_together_lose_no_record(
    storage: StorageSpec, tmp_path: Path
) -> None:
    if not storage.shareable:
        pytest.skip("an in-memory storage is not shared between processes")
    levels, max_resource = [2, 4, 8], 10
    _study(storage, ASHAPruner(2, max_resource=max_resource, reduction_factor=2), name="race")
    n_workers, n_trials = 4, 3
    plans = []
    for worker in range(n_workers):
        plan = []
        for trial in range(n_trials):
            loss = 1.0 + 0.1 * worker + 0.01 * trial
            steps = [4, 8] if trial == n_trials - 1 else [1, 2, 3, 4, 8]  # one skips rung 2
            plan.append([[step, loss - 0.001 * step] for step in steps])
        plans.append(plan)
    decisions = _run_workers(
        storage, "race", {"name": "asha", "min_resource": 2, "reduction_factor": 2,
                          "max_resource": max_resource}, plans, tmp_path,
    )
    # what each trial reached and where each decision was taken, from the workers' reports
    reached: dict[tuple[int, int], float] = {}
    deciding: dict[tuple[int, int], bool] = {}
    last_step: dict[int, int] = {}
    for d in decisions:  # in order within each trial: a trial runs in one worker
        crossed = rungs.crossed_rungs(levels, last_step.get(d["trial"], 0), d["step"])
        for rung in crossed:
            reached[(d["trial"], rung)] = d["value"]
        if crossed:
            deciding[(d["trial"], crossed[-1])] = d["pruned"]
        last_step[d["trial"]] = d["step"]
    study = optuna.load_study(study_name="race", storage=storage.make())
    records = rung_records(study)
    keys = [(r.trial_number, r.rung) for r in records]
    assert len(keys) == len(set(keys)), "a (trial, rung) was recorded twice"
    assert {(r.trial_number, r.rung): r.value for r in records} == reached  # none lost
    # every trial reached rung 2 (all 4 processes at once), and each left its record there
    assert len(last_step) == n_workers * n_trials
    assert sorted(t for t, rung in keys if rung == 2) == sorted(last_step)
    # whatever the order of arrival, the best value at a rung continues
    for rung in levels:
        at_rung = [r for r in records if r.rung == rung]
        best = min(at_rung, key=lambda r: r.value)
        if (best.trial_number, rung) in deciding:
            assert deciding[(best.trial_number, rung)] is False


def test_records_are_named_tuples(storage: StorageSpec) -> None:
    study = _study(storage, ASHAPruner(1, max_resource=9, reduction_factor=3))
    _trial(study, "minimize", [(1, 0.25)])
    assert rung_records(study) == [RungRecord(bracket=0, rung=1, trial_number=0, value=0.25)]


# -- the attribute store's incremental index ------------------------------------------------


class _InPlaceStorage(optuna.storages.InMemoryStorage):
    """A storage that mutates its study system-attribute dict in place (unlike Optuna's)."""

    def set_study_system_attr(self, study_id: int, key: str, value: Any) -> None:
        with self._lock:
            self._studies[study_id].system_attrs[key] = value

    def drop_study_system_attrs(self, study_id: int) -> None:
        with self._lock:
            self._studies[study_id].system_attrs.clear()


def test_attr_store_works_on_a_storage_that_mutates_in_place(direction: str) -> None:
    storage = _InPlaceStorage()
    study = optuna.create_study(storage=storage, pruner=_asha_2_10(), direction=direction)
    losses = [5.0, 4.0, 6.0, 3.0, 7.0, 4.5, 4.5, 5.0]
    expected = [False, False, True, False, True, False, False, True]
    assert [_trial(study, direction, [(2, loss)])[0] for loss in losses] == expected
    # the dict shrinks (records gone): the index starts over instead of trusting stale counts
    storage.drop_study_system_attrs(study._study_id)
    assert _trial(study, direction, [(2, 9.0)]) == [False]
    assert [r.trial_number for r in rung_records(study)] == [8]


class _ChangingAttrs(dict):
    """A dict whose reversed key and value views fail while ``failures`` lasts, as a dict
    changed by another thread during the scan would."""

    def __init__(self, data: dict[str, Any], failures: list[int]) -> None:
        super().__init__(data)
        self.failures = failures

    def _view(self, view: Any) -> Any:
        failures = self.failures

        class _View:
            def __reversed__(self) -> Iterator[Any]:
                if failures[0]:
                    failures[0] -= 1
                    raise RuntimeError("dictionary changed size during iteration")
                return reversed(view)

        return _View()

    def keys(self) -> Any:
        return self._view(dict.keys(self))

    def values(self) -> Any:
        return self._view(dict.values(self))


@pytest.mark.parametrize("failures", [1, 3, 100], ids=["once", "thrice", "always"])
def test_attr_index_reads_again_when_the_dict_changes_during_the_scan(failures: int) -> None:
    from lightning_hpo.pruners._store import _SCAN_ATTEMPTS, _AttrRungStore

    budget = [0]

    class _Storage(optuna.storages.InMemoryStorage):
        def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
            return _ChangingAttrs(super().get_study_system_attrs(study_id), budget)

    storage = _Storage()
    study_id = storage.create_new_study([optuna.study.StudyDirection.MINIMIZE], "s")
    store = _AttrRungStore(storage, study_id)
    for trial_number, value, expected in [(0, 1.0, (1, 0)), (1, 0.5, (2, 0)), (2, 2.0, (3, 2))]:
        budget[0] = failures
        assert store.add_and_rank(0, [2], trial_number, value, maximize=False) == expected
        assert budget[0] == max(0, failures - _SCAN_ATTEMPTS)  # the failing reads did happen


class _NewestFirstStorage(optuna.storages.InMemoryStorage):
    """System attributes listed newest first: what a storage of unknown order may do."""

    def get_study_system_attrs(self, study_id: int) -> dict[str, Any]:
        return dict(reversed(super().get_study_system_attrs(study_id).items()))


def test_a_storage_of_unknown_order_is_read_in_full(
    monkeypatch: pytest.MonkeyPatch, direction: str
) -> None:
    # A third-party storage (here: declared not to append) gets exact counts in any order.
    import lightning_hpo.pruners._store as rung_store

    monkeypatch.setattr(rung_store, "appends_study_system_attrs", lambda storage: False)
    study = optuna.create_study(
        storage=_NewestFirstStorage(), pruner=_asha_2_10(), direction=direction
    )
    losses = [5.0, 4.0, 6.0, 3.0, 7.0, 4.5, 4.5, 5.0]
    expected = [False, False, True, False, True, False, False, True]
    assert [_trial(study, direction, [(2, loss)])[0] for loss in losses] == expected


def test_a_new_handle_reads_many_records_at_once(storage: StorageSpec) -> None:
    from lightning_hpo.pruners import open_rung_store

    study = _study(storage, _asha_2_10(), name="bulk")
    values = [float(v) for v in range(100)]
    random.Random(3).shuffle(values)
    writer = open_rung_store(study)
    for number, value in enumerate(values):
        writer.add_and_rank(0, [2], number, value, maximize=False)
    fresh = optuna.load_study(study_name="bulk", storage=storage.make())
    reader = open_rung_store(fresh)
    assert reader.add_and_rank(0, [2], 100, 49.5, maximize=False) == (101, 50)  # linear count
    assert reader.add_and_rank(0, [2], 101, 10.5, maximize=True) == (102, 90)  # sorted in
    assert reader.add_and_rank(0, [2], 100, 49.5, maximize=False) == (102, 51)  # repeated
    assert writer.add_and_rank(0, [4], 5, 1.0, maximize=False) == (1, 0)
    assert len(rung_records(fresh)) == 103
