"""The pausing schedules with several objectives: values are tuples, rungs rank by Pareto order.

The simulation of ``test_schedules.py`` (``_Sim``: N slots asking ``decide``, segments taking
simulated time) drives each schedule with two-objective learning curves; the checks are the
single-objective rules with :func:`lightning_hpo.pareto.pareto_order` as the ranking.
"""

from __future__ import annotations

import math
import random

import pytest

from lightning_hpo.pareto import dominates, pareto_order
from lightning_hpo.schedules import (
    PromotionASHA,
    PromotionHyperband,
    SyncHyperband,
    SyncSuccessiveHalving,
    TrialView,
    promotable,
)
from lightning_hpo.schedules._base import above_for_ever, check_minimize, ranked

from .test_schedules import _Sim

NAN = float("nan")
MIN2 = (True, True)


def _curves(seed: int, minimize: tuple[bool, ...] = MIN2):
    """Two-objective learning curves: an error that falls with epochs at a per-trial rate, and
    a per-trial constant size that trades off against it (bigger models learn faster)."""
    rng = random.Random(seed)
    cache: dict[int, tuple[float, float]] = {}

    def value(number: int, epoch: int) -> tuple[float, ...]:
        if number not in cache:
            size = rng.uniform(1.0, 100.0)
            cache[number] = (size, rng.uniform(0.5, 1.5) * math.log1p(size) / 5)
        size, rate = cache[number]
        point = (math.exp(-rate * epoch) + rng.uniform(0, 0.05), size)
        return tuple(v if low else -v for v, low in zip(point, minimize, strict=True))

    return value


# -- the ranking helpers ---------------------------------------------------------------------


def test_ranked_is_the_pareto_order_with_missing_values_last() -> None:
    values = {0: (0.5, 0.5), 1: (0.6, 0.6), 2: (0.7, 0.7), 3: (0.1, 0.1), 4: None, 5: (NAN, 0.0)}
    assert ranked(values, MIN2) == [3, 0, 1, 2, 4, 5]
    # a tuple of one objective is that objective's bool: the single-objective order
    assert check_minimize((True,)) is True
    assert ranked({0: 0.3, 1: 0.1, 2: None}, check_minimize([True])) == [1, 0, 2]


@pytest.mark.parametrize("bad", [None, "min", (), (True, "no"), 1])
def test_check_minimize_names_the_argument(bad: object) -> None:
    with pytest.raises(ValueError, match=r"^The value of `minimize` is .*, but must be True"):
        check_minimize(bad)


def test_promotable_puts_a_point_dominating_all_others_first() -> None:
    """Syne Tune 0.16's MOASHA would stop (0.1, 0.1) here; ours promotes it."""
    rung = {0: (0.5, 0.5), 1: (0.6, 0.6), 2: (0.7, 0.7), 3: (0.1, 0.1)}
    assert promotable(rung, paused={0, 1, 2, 3}, reduction_factor=3, minimize=MIN2) == [3]
    assert promotable(rung, paused={0, 1, 2}, reduction_factor=3, minimize=MIN2) == []
    assert promotable(rung, paused={0, 1, 2, 3}, reduction_factor=2, minimize=MIN2) == [3, 0]


@pytest.mark.parametrize("seed", range(20))
def test_above_for_ever_counts_the_dominating_points(seed: int) -> None:
    rng = random.Random(seed)
    values = {n: (rng.choice([0.1, 0.2, 0.3, 0.4]), rng.choice([1.0, 2.0, 3.0]))
              for n in range(rng.randint(1, 12))}
    for number, point in values.items():
        expected = sum(1 for other, p in values.items() if other != number
                       and dominates(p, point, MIN2))
        assert above_for_ever(values, number, MIN2) == expected
        # never more than its place in today's order: those that dominate it rank above it
        assert expected <= ranked(values, MIN2).index(number)


# -- promotion ASHA --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("minimize", [MIN2, (True, False)], ids=["min-min", "min-max"])
def test_promotion_asha_promotes_only_the_pareto_top(seed: int, minimize: tuple[bool, ...]
                                                      ) -> None:
    """Every promotion is a trial paused at a rung in the top floor(n / eta) of its rung's
    values by Pareto order at that moment, as Algorithm 2 with the MO ranking says."""
    schedule = PromotionASHA(1, 9, 3, minimize=minimize)
    checked = []

    def check(sim: _Sim, decision) -> None:
        job = decision.job
        if job.kind != "resume":
            return
        trial = sim.trials[job.trial]
        if trial.target is not None:  # interrupted: not a promotion
            return
        level = max(level for level in (1, 3) if level <= trial.epoch)
        rung = {t.number: t.values[level] for t in sim.trials.values() if level in t.values}
        top = pareto_order(rung, minimize)[: len(rung) // 3]
        assert job.trial in top, (job.trial, level, rung)
        checked.append(job.trial)

    sim = _Sim(schedule, _curves(seed, minimize), workers=3, tickets=30,
               duration=lambda n: 1.0 + (n * 7919 % 5) / 4, check=check).run()
    assert checked
    assert any(t.state == "complete" for t in sim.trials.values())  # finish_best
    # A trial pruned as never promotable is outside its rung's top at the end, too.
    for number, reason in sim.pruned_by.items():
        if not reason.startswith("cannot be promoted"):
            continue
        trial = sim.trials[number]
        level = max(level for level in (1, 3) if level in trial.values)
        rung = {t.number: t.values[level] for t in sim.trials.values() if level in t.values}
        assert number not in pareto_order(rung, minimize)[: len(rung) // 3], (number, reason)


def test_a_paused_trial_is_pruned_as_unpromotable_only_when_dominated_enough() -> None:
    """Rung 1 holds five points, four on the Pareto front. Trials 1 and 2 rank below the top
    two of today's order, but values still to come can reorder a front (the epsilon-net
    changes): nothing dominates them, so they are kept. Trial 3 is dominated by three points,
    which rank above it whatever comes: with at most 6 values at the rung (2 go on), it is
    pruned now."""
    trials = [
        TrialView(0, "paused", 1, {1: (0.1, 3.0)}),
        TrialView(1, "paused", 1, {1: (0.2, 2.0)}),
        TrialView(2, "paused", 1, {1: (0.3, 1.0)}),
        TrialView(3, "paused", 1, {1: (0.4, 4.0)}),  # dominated by 0, 1, 2
        TrialView(4, "complete", 9, {1: (0.05, 5.0), 3: (0.04, 5.0), 9: (0.03, 5.0)}),
    ]
    schedule = PromotionASHA(1, 9, 3, minimize=MIN2, finish_best=False)
    decision = schedule.decide(trials, tickets=1, next_number=5)
    order = pareto_order({t.number: t.values[1] for t in trials}, MIN2)
    assert order.index(1) >= 2 or order.index(2) >= 2  # below today's top two
    assert 3 in decision.prune
    assert {1, 2}.isdisjoint(decision.prune)


# -- synchronous rounds ----------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("make", [
    lambda m: SyncSuccessiveHalving(1, 9, 3, minimize=m),
    lambda m: SyncHyperband(1, 9, 3, minimize=m),
], ids=["sync_sh", "sync_hyperband"])
def test_sync_rounds_keep_the_pareto_top_of_each_rung(seed: int, make) -> None:
    schedule = make(MIN2)
    sim = _Sim(schedule, _curves(seed), workers=2, tickets=40).run()
    rounds: dict[int, list] = {}
    for trial in sim.trials.values():
        rounds.setdefault(trial.group, []).append(trial)
    for index, members in rounds.items():
        levels, _ = schedule.round_plan(index)
        admitted = members
        for level, above in zip(levels, levels[1:], strict=False):
            rung = {t.number: t.values[level] for t in admitted}
            keep = pareto_order(rung, MIN2)[: len(rung) // 3]
            went_on = [t for t in admitted if above in t.values]
            assert sorted(t.number for t in went_on) == sorted(keep), (index, level)
            admitted = went_on


def test_promotion_hyperband_takes_tuples_too() -> None:
    schedule = PromotionHyperband(1, 9, 3, minimize=MIN2, study_name="mo")
    sim = _Sim(schedule, _curves(3), workers=2, tickets=20).run()
    assert len(sim.trials) == 20
    assert any(t.state == "complete" for t in sim.trials.values())


def test_a_paused_trial_with_a_nan_value_is_not_said_to_be_dominated() -> None:
    """A NaN point ranks last but nothing dominates it (NaN compares with nothing): the reason
    its trial is pruned says so, where it said '2 dominate it'."""
    trials = [
        TrialView(0, "paused", 1, {1: (0.1, 3.0)}),
        TrialView(1, "paused", 1, {1: (0.2, 2.0)}),
        TrialView(2, "paused", 1, {1: (0.9, NAN)}),
    ]
    decision = PromotionASHA(1, 9, 3, minimize=MIN2, finish_best=False).decide(
        trials, tickets=1, next_number=3)
    assert decision.reasons[2] == (
        "cannot be promoted at rung 1: its values (0.9, nan) are not all finite, so all 2 others "
        "rank above it, and at most 4 trials reach the rung (1 go on)")
    assert not any(dominates(t.values[1], (0.9, NAN), MIN2) for t in trials[:2])
    # a finite point dominated for ever still says how many dominate it
    trials[2] = TrialView(2, "paused", 1, {1: (0.9, 4.0)})
    decision = PromotionASHA(1, 9, 3, minimize=MIN2, finish_best=False).decide(
        trials, tickets=1, next_number=3)
    assert decision.reasons[2] == ("cannot be promoted at rung 1: 2 dominate it, and at most 4 "
                                   "trials reach the rung (1 go on)")
