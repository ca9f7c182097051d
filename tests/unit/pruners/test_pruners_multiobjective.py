"""Multi-objective ASHA and Hyperband (MOASHA) against a reference written here.

:class:`ReferenceMOASHA` is MOASHA's rule written from its description, sharing no code with
``lightning_hpo``: one dict of value vectors per ``(bracket, rung)``; a report that reaches new
rungs is recorded at each (a NaN or infinite one is stopped instead, unrecorded); the trial is
ranked at the highest of them by a plain non-dominated sort (peeling) and an epsilon-net in
range-scaled space, computed with exact fractions; it continues iff its position is below
``max(1, n // eta)``. Real Optuna studies with several directions, over every storage, get seeded
random interleaved reports, written as the PruningCallback writes them (the ``objective_values``
user attribute, then ``pruner.prune(study, frozen_trial)``), and every decision, and every record
stored at the end, must equal the reference's.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Mapping, Sequence
from fractions import Fraction
from typing import Any

import optuna
import pytest
from conftest import StorageSpec
from optuna.trial import TrialState

from lightning_hpo._optuna import storage_of, study_id_of, trial_id_of
from lightning_hpo.pareto import pareto_order
from lightning_hpo.pruners import ASHAPruner, HyperbandPruner, open_vector_store, rung_records
from lightning_hpo.schema import ATTR, BRACKET_ATTR, RUNG_VECTOR_ATTR_PREFIX, with_objective_values

optuna.logging.set_verbosity(optuna.logging.WARNING)

Vector = tuple[float, ...]
MIN_MIN, MIN_MAX, MAX_MAX = ("minimize", "minimize"), ("minimize", "maximize"), (
    "maximize", "maximize")


# -- the reference -------------------------------------------------------------------------


def _is_finite(values: Sequence[float]) -> bool:
    return not any(math.isnan(v) or math.isinf(v) for v in values)


def reference_order(points: Mapping[int, Vector], minimize: Sequence[bool]) -> list[int]:
    """Fronts by peeling, an epsilon-net in each (exact squared distances), NaN last."""
    numbers = sorted(points)
    finite = [n for n in numbers if _is_finite(points[n])]
    low = {n: [Fraction(v) if m else -Fraction(v) for v, m in zip(points[n], minimize, strict=True)]
           for n in finite}  # lower is better in every objective

    def beats(p: list[Fraction], q: list[Fraction]) -> bool:
        return all(a <= b for a, b in zip(p, q, strict=True)) and p != q

    fronts, left = [], list(finite)
    while left:
        front = [n for n in left if not any(beats(low[m], low[n]) for m in left)]
        fronts.append(front)
        left = [n for n in left if n not in front]

    k = len(minimize)
    lows = [min(low[n][i] for n in finite) for i in range(k)] if finite else []
    spans = [max(low[n][i] for n in finite) - lows[i] for i in range(k)] if finite else []
    scaled = {n: [(low[n][i] - lows[i]) / spans[i] if spans[i] else Fraction(0)
                  for i in range(k)] for n in finite}

    def gap(a: int, b: int) -> Fraction:
        return sum(((x - y) ** 2 for x, y in zip(scaled[a], scaled[b], strict=True)),
                   Fraction(0))

    order: list[int] = []
    for front in fronts:
        taken = [min(front, key=lambda n: (scaled[n][0], n))]
        rest = [n for n in front if n != taken[0]]
        while rest:
            pick = max(rest, key=lambda n: (min(gap(n, t) for t in taken), -n))
            taken.append(pick)
            rest.remove(pick)
        order += taken
    return order + [n for n in numbers if n not in scaled]


def ladder(min_resource: int, max_resource: int | None, eta: int, up_to: int = 1000
           ) -> list[int]:
    """Rungs ``min_resource * eta**k`` below ``max_resource``, then ``max_resource``."""
    levels, rung = [], min_resource
    while rung < (max_resource if max_resource is not None else up_to + 1):
        levels.append(rung)
        rung *= eta
    return levels + ([max_resource] if max_resource is not None else [])


class ReferenceMOASHA:
    """MOASHA's decisions for one study, as documented.

    Args:
        ladders: each bracket's rungs, ascending, ``max_resource`` last when bounded.
        max_resource: where a trial is done (no decision), or None.
        eta: keep one in ``eta``.
        minimize: per objective, whether lower is better.
    """

    def __init__(self, ladders: Mapping[int, list[int]], max_resource: int | None, eta: int,
                 minimize: Sequence[bool]) -> None:
        self.ladders, self.max_resource, self.eta = ladders, max_resource, eta
        self.minimize = tuple(minimize)
        self.records: dict[tuple[int, int], dict[int, Vector]] = defaultdict(dict)
        self.curves: dict[int, dict[int, Vector]] = defaultdict(dict)

    def report(self, trial: int, bracket: int, epoch: int, values: Sequence[float]) -> bool:
        """Whether the trial stops after reporting ``values`` at ``epoch``."""
        curve = self.curves[trial]
        # What JSON keeps: a NaN or infinite value reads back as NaN.
        curve[epoch] = tuple(float(v) if _is_finite([v]) else math.nan for v in values)
        latest = max(curve)
        if self.max_resource is not None and latest >= self.max_resource:
            return False
        before = max((e for e in curve if e < latest), default=0)
        crossed = [r for r in self.ladders[bracket] if before < r <= latest]
        if not crossed:
            return False
        if not _is_finite(curve[latest]):
            return True
        for rung in crossed:
            self.records[(bracket, rung)].setdefault(trial, curve[latest])
        here = self.records[(bracket, crossed[-1])]
        position = reference_order(here, self.minimize).index(trial)
        return not position < max(1, len(here) // self.eta)

    def all_records(self) -> list[tuple[int, int, int, Vector]]:
        return sorted((b, r, t, v) for (b, r), at in self.records.items() for t, v in at.items())


# -- driving real studies ------------------------------------------------------------------


def _study(storage: StorageSpec, pruner: optuna.pruners.BasePruner,
           directions: Sequence[str], name: str = "mo") -> optuna.Study:
    return optuna.create_study(storage=storage.make(), study_name=name, pruner=pruner,
                               directions=list(directions),
                               sampler=optuna.samplers.RandomSampler(seed=0))


def _report(study: optuna.Study, trial: optuna.Trial, epoch: int,
            values: Sequence[float]) -> bool:
    """As the PruningCallback does on rank 0: the row, then the study's pruner."""
    trial.set_user_attr(ATTR.OBJECTIVE_VALUES, with_objective_values(trial, epoch, values))
    return _decide(study, trial)


def _decide(study: optuna.Study, trial: optuna.Trial) -> bool:
    frozen = storage_of(study).get_trial(trial_id_of(trial))
    return bool(study.pruner.prune(study, frozen))


def _stored(study: optuna.Study) -> list[tuple[int, int, int, Vector]]:
    return open_vector_store(study).records()


#: Each objective's scale (an error rate, a parameter count, a latency in hours): the order must
#: scale each by its range, not let the largest decide.
SCALES = (1.0, 1000.0, 0.001)


def _random_vector(rng: random.Random, k: int) -> Vector:
    return tuple(round(rng.uniform(-1.0, 1.0), 6) * scale for scale in SCALES[:k])


def _plans(rng: random.Random, n_trials: int, last_epoch: int, k: int
           ) -> list[list[tuple[int, Vector]]]:
    """Each trial's reports ``(epoch, values)``, epochs ascending with gaps (skipped rungs), up
    to ``last_epoch``. Values: fresh random ones, repeats of a small pool (equal points), pool
    points with a new second objective (equal first objectives), and a few NaN or infinite."""
    pool = [_random_vector(rng, k) for _ in range(4)]
    plans = []
    for _ in range(n_trials):
        plan, epoch = [], 0
        while epoch < last_epoch:
            epoch += rng.choice([1, 1, 1, 2, 3])
            roll = rng.random()
            if roll < 0.04:
                values: Vector = tuple(rng.choice([math.nan, math.inf, -math.inf, 0.5])
                                       for _ in range(k))
                values = (math.nan, *values[1:]) if _is_finite(values) else values
            elif roll < 0.3:
                values = rng.choice(pool)
            elif roll < 0.45:
                values = (rng.choice(pool)[0], *_random_vector(rng, k)[1:])
            else:
                values = _random_vector(rng, k)
            plan.append((epoch, values))
        plans.append(plan)
    return plans


def _drive(study: optuna.Study, reference: ReferenceMOASHA, plans: list[list[tuple[int, Vector]]],
           rng: random.Random, bracket_of: Any) -> dict[str, int]:
    """Interleave the plans' reports at random; assert each decision equals the reference's."""
    trials = [study.ask() for _ in plans]
    cursor = [0] * len(plans)
    active = list(range(len(plans)))
    counts = {"continued": 0, "pruned": 0}
    while active:
        i = rng.choice(active)
        trial = trials[i]
        epoch, values = plans[i][cursor[i]]
        cursor[i] += 1
        got = _report(study, trial, epoch, values)
        expected = reference.report(trial.number, bracket_of(trial.number), epoch, values)
        assert got == expected, (
            f"trial {trial.number} epoch {epoch} values {values}: pruner {got}, reference "
            f"{expected}; rung records {dict(reference.records)}")
        counts["pruned" if got else "continued"] += 1
        if got:
            study.tell(trial, state=TrialState.PRUNED)
        if got or cursor[i] == len(plans[i]):
            active.remove(i)
    return counts


# -- the reference itself ------------------------------------------------------------------


def test_the_reference_order_equals_pareto_order_on_random_rungs() -> None:
    rng = random.Random(0)
    for _ in range(400):
        k = rng.randint(1, 3)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        plans = _plans(rng, rng.randint(1, 9), 1, k)
        numbers = rng.sample(range(30), len(plans))
        points = {n: plan[0][1] for n, plan in zip(numbers, plans, strict=True)}
        assert reference_order(points, minimize) == pareto_order(points, minimize), points


def test_the_reference_ranks_the_syne_tune_counter_example_first() -> None:
    points = {0: (0.5, 0.5), 1: (0.6, 0.6), 2: (0.7, 0.7), 3: (0.1, 0.1)}
    assert reference_order(points, (True, True)) == [3, 0, 1, 2]


# -- every decision equals the reference's ----------------------------------------------------


@pytest.mark.parametrize(
    ("directions", "min_resource", "max_resource", "eta"),
    [(MIN_MIN, 1, 9, 3), (MIN_MAX, 1, 10, 2), (MAX_MAX, 2, 12, 2)],
    ids=["min-min-1-9-eta3", "min-max-1-10-eta2", "max-max-2-12-eta2"],
)
def test_asha_decides_as_the_reference(
    storage: StorageSpec, directions: tuple[str, str], min_resource: int, max_resource: int,
    eta: int,
) -> None:
    rng = random.Random(f"asha:{':'.join(directions)}")
    pruner = ASHAPruner(min_resource, max_resource=max_resource, reduction_factor=eta)
    levels = ladder(min_resource, max_resource, eta)
    assert pruner.levels == levels
    study = _study(storage, pruner, directions)
    reference = ReferenceMOASHA({0: levels}, max_resource, eta,
                                [d == "minimize" for d in directions])
    n_trials = 16 if storage.kind == "inmemory" else 8
    counts = _drive(study, reference, _plans(rng, n_trials, max_resource + 1, 2), rng,
                    lambda number: 0)
    assert counts["pruned"] >= 3 and counts["continued"] >= 8, counts  # both were exercised
    assert _stored(study) == reference.all_records()
    assert rung_records(study) == []  # nothing in the single-objective records


@pytest.mark.parametrize("eta", [2, 3])
@pytest.mark.parametrize("directions", [MIN_MIN, MIN_MAX, MAX_MAX, ("minimize", "maximize",
                                                                    "minimize")],
                         ids=["min-min", "min-max", "max-max", "min-max-min"])
def test_asha_decides_as_the_reference_on_crowded_rungs(
    directions: tuple[str, ...], eta: int
) -> None:
    # In memory, many trials: large fronts, where the epsilon-net and the scaling decide.
    rng = random.Random(f"crowded:{eta}:{':'.join(directions)}")
    study = _study(StorageSpec("inmemory", None), ASHAPruner(1, max_resource=9,
                                                             reduction_factor=eta), directions)
    reference = ReferenceMOASHA({0: ladder(1, 9, eta)}, 9, eta,
                                [d == "minimize" for d in directions])
    counts = _drive(study, reference, _plans(rng, 50, 10, len(directions)), rng,
                    lambda number: 0)
    assert counts["pruned"] >= 20 and counts["continued"] >= 30, counts
    assert _stored(study) == reference.all_records()


def test_asha_with_three_objectives_and_an_unbounded_ladder(storage: StorageSpec) -> None:
    rng = random.Random(3)
    directions = ("minimize", "maximize", "minimize")
    study = _study(storage, ASHAPruner(1, reduction_factor=2), directions)
    reference = ReferenceMOASHA({0: ladder(1, None, 2, up_to=64)}, None, 2,
                                [d == "minimize" for d in directions])
    _drive(study, reference, _plans(rng, 10 if storage.kind == "inmemory" else 7, 12, 3), rng,
           lambda number: 0)
    assert _stored(study) == reference.all_records()


@pytest.mark.parametrize("directions", [MIN_MIN, MIN_MAX, MAX_MAX], ids=["min-min", "min-max",
                                                                          "max-max"])
def test_hyperband_decides_as_the_reference_in_each_bracket(
    storage: StorageSpec, directions: tuple[str, str]
) -> None:
    rng = random.Random(f"hyperband:{':'.join(directions)}")
    pruner = HyperbandPruner(1, max_resource=9, reduction_factor=3)
    ladders = {b: ladder(3 ** b, 9, 3) for b in range(3)}  # [1, 3, 9], [3, 9], [9]
    assert pruner.n_brackets == 3
    assert {b: pruner.bracket_levels(b) for b in ladders} == ladders
    study = _study(storage, pruner, directions)
    reference = ReferenceMOASHA(ladders, 9, 3, [d == "minimize" for d in directions])
    n_trials = 24 if storage.kind == "inmemory" else 10

    def bracket(number: int) -> int:
        return pruner.bracket_of(study.study_name, number)

    counts = _drive(study, reference, _plans(rng, n_trials, 10, 2), rng, bracket)
    assert counts["pruned"] >= 2, counts
    assert len({bracket(n) for n in range(n_trials)}) >= 2  # several brackets were exercised
    assert _stored(study) == reference.all_records()
    for trial in study.get_trials(deepcopy=False):  # the bracket is stored at the first rung
        if BRACKET_ATTR in trial.system_attrs:
            assert trial.system_attrs[BRACKET_ATTR] == bracket(trial.number)
    assert any(BRACKET_ATTR in t.system_attrs for t in study.get_trials(deepcopy=False))


# -- the rules, one at a time -----------------------------------------------------------------


def test_nan_is_pruned_and_not_recorded(storage: StorageSpec) -> None:
    study = _study(storage, ASHAPruner(1, max_resource=9, reduction_factor=3), MIN_MIN)
    first, second, third, fourth = (study.ask() for _ in range(4))
    assert _report(study, first, 1, (math.nan, 1.0)) is True  # the first at its rung, yet pruned
    assert _report(study, second, 1, (0.0, math.inf)) is True  # infinite: written as null
    assert first.user_attrs[ATTR.OBJECTIVE_VALUES] == [[1, None, 1.0]]
    assert _stored(study) == []
    assert _report(study, third, 1, (0.9, 0.9)) is False  # the first recorded there
    assert _report(study, fourth, 1, (0.5, 0.5)) is False  # it dominates the third
    assert _report(study, fourth, 2, (math.nan, math.nan)) is False  # epoch 2: no rung
    assert _report(study, fourth, 3, (0.4, 0.4)) is False
    assert _stored(study) == [(0, 1, 2, (0.9, 0.9)), (0, 1, 3, (0.5, 0.5)),
                              (0, 3, 3, (0.4, 0.4))]


def test_a_repeated_report_changes_nothing(storage: StorageSpec) -> None:
    study = _study(storage, ASHAPruner(1, max_resource=9, reduction_factor=3), MIN_MIN)
    leader, follower = study.ask(), study.ask()
    assert _report(study, leader, 1, (0.5, 0.5)) is False
    assert _report(study, follower, 1, (0.6, 0.6)) is True  # dominated, quota 1 of 2
    records = _stored(study)
    assert [_decide(study, follower) for _ in range(3)] == [True] * 3  # the same decision
    assert [_report(study, leader, 1, (0.5, 0.5)) for _ in range(2)] == [False] * 2
    # a new value for an epoch already reported replaces the row, not the rung's record
    assert _report(study, follower, 1, (0.1, 0.1)) is True
    assert follower.user_attrs[ATTR.OBJECTIVE_VALUES] == [[1, 0.1, 0.1]]
    assert _stored(study) == records == [(0, 1, 0, (0.5, 0.5)), (0, 1, 1, (0.6, 0.6))]


@pytest.mark.parametrize("make", [lambda: ASHAPruner(1, max_resource=9, reduction_factor=3),
                                  lambda: HyperbandPruner(1, max_resource=9, reduction_factor=3)],
                         ids=["asha", "hyperband"])
@pytest.mark.parametrize("directions", [MIN_MIN, MAX_MAX], ids=["min-min", "max-max"])
def test_a_trial_at_max_resource_is_never_pruned(make: Any, directions: tuple[str, str]) -> None:
    study = optuna.create_study(directions=list(directions), pruner=make())
    sign = 1.0 if directions[0] == "minimize" else -1.0
    good, worst = (sign * 0.0, sign * 0.0), (sign * 100.0, sign * 100.0)
    for i in range(6):  # good trials at the rungs below 9
        trial = study.ask()
        for epoch in (1, 3):
            _report(study, trial, epoch, (sign * 0.01 * i, sign * 0.01 * i))
    records = _stored(study)
    for epoch in (9, 12):  # straight to max_resource, and past it, with the worst values
        trial = study.ask()
        assert _report(study, trial, epoch, worst) is False
        assert _report(study, trial, epoch + 1, (math.nan, math.nan)) is False
    assert _stored(study) == records  # nothing recorded at or past max_resource
    trial = study.ask()
    _report(study, trial, 1, good)
    records = _stored(study)
    assert _report(study, trial, 9, worst) is False  # 9 crosses rung 3 too, but a trial is done
    assert _stored(study) == records


@pytest.mark.parametrize("eta", [3, 4])
@pytest.mark.parametrize("directions", [MIN_MIN, MAX_MAX], ids=["min-min", "max-max"])
def test_the_syne_tune_counter_example_continues(eta: int, directions: tuple[str, str]) -> None:
    # Syne Tune 0.16's MOASHA took the index order of its non-dominated sort for each point's
    # rank: a new trial dominating the whole rung got rank n - 1 and was stopped.
    study = _study(StorageSpec("inmemory", None),
                   ASHAPruner(1, max_resource=9, reduction_factor=eta), directions)
    sign = 1.0 if directions[0] == "minimize" else -1.0
    decisions = [_report(study, study.ask(), 1, (sign * v, sign * v))
                 for v in (0.5, 0.6, 0.7, 0.1, 0.8)]
    # n: 1, 2, 3, 4, 5; quota max(1, n // eta) = 1 throughout
    assert decisions == [False, True, True, False, True]


def test_single_objective_studies_are_unaffected() -> None:
    study = optuna.create_study(pruner=ASHAPruner(1, max_resource=9, reduction_factor=2))
    decisions = []
    for loss in (0.5, 0.6, 0.1):
        trial = study.ask()
        trial.report(loss, 1)
        decisions.append(trial.should_prune())
    assert decisions == [False, True, False]  # n=3, quota 1: 0.6 pruned, 0.1 the best
    # objective_values is the multi-objective attribute: a single-objective pruner ignores it
    trial = study.ask()
    trial.set_user_attr(ATTR.OBJECTIVE_VALUES, [[1, 0.0]])
    trial.report(0.9, 1)
    assert trial.should_prune() is True
    assert sorted(v for *_, v in rung_records(study)) == [0.1, 0.5, 0.6, 0.9]
    attrs = storage_of(study).get_study_system_attrs(study_id_of(study))
    assert not any(key.startswith(RUNG_VECTOR_ATTR_PREFIX) for key in attrs)


def test_no_values_yet_decides_nothing() -> None:
    study = optuna.create_study(directions=list(MIN_MIN), pruner=ASHAPruner(1, max_resource=9))
    trial = study.ask()
    assert _decide(study, trial) is False
    trial.set_user_attr(ATTR.OBJECTIVE_VALUES, "not a list")
    assert _decide(study, trial) is False
    assert _stored(study) == []


def test_values_for_another_number_of_objectives_are_refused() -> None:
    study = optuna.create_study(directions=list(MIN_MIN), pruner=ASHAPruner(1, max_resource=9),
                                study_name="two")
    trial = study.ask()
    with pytest.raises(ValueError) as info:
        _report(study, trial, 1, (0.1, 0.2, 0.3))
    assert str(info.value) == "trial 0 reported 3 values, but study 'two' has 2 objectives"
    assert _stored(study) == []


def test_records_that_are_not_lists_of_numbers_are_left_out() -> None:
    """Another tool's (or a damaged) attribute under the records' prefix changes no decision
    and no report: it is not read as a record."""
    study = optuna.create_study(directions=["minimize", "minimize"])
    storage, study_id = storage_of(study), study_id_of(study)
    for key, value in [("0:1:999", "garbage"), ("0:1:998", [None, "x"]), ("0:1:997", []),
                       ("0:1:x", [0.1, 0.1]), ("bad", [0.1, 0.1])]:
        storage.set_study_system_attr(study_id, RUNG_VECTOR_ATTR_PREFIX + key, value)
    store = open_vector_store(study)
    assert store.add_and_read(0, [1], trial_number=0, values=(0.5, 0.5)) == {0: (0.5, 0.5)}
    assert store.records() == [(0, 1, 0, (0.5, 0.5))]
