"""``lightning_hpo.pareto`` as pure functions: dominance, fronts, the rung order, hypervolume.

Hand-made fronts with hand-computed answers first, then each function against an independent
brute-force definition written here (exact arithmetic with ``fractions.Fraction`` where the answer
is a number) on many small random sets, seeded: duplicates, ties, NaN and infinities included.
"""

from __future__ import annotations

import itertools
import math
import random
from collections.abc import Mapping, Sequence
from fractions import Fraction

import numpy as np
import optuna
import pytest
from optuna.study import StudyDirection

from lightning_hpo.pareto import (
    directions_minimize,
    dominates,
    front_ranks,
    hypervolume,
    is_finite_point,
    nondominated_fronts,
    pareto_order,
    reference_point,
)

NAN, INF = math.nan, math.inf
MIN2, MAX2, MIXED = (True, True), (False, False), (True, False)


# -- independent definitions -----------------------------------------------------------------


def _finite(point: Sequence[float]) -> bool:
    return all(not (math.isnan(v) or math.isinf(v)) for v in point)


def _better_or_equal(x: float, y: float, low: bool) -> bool:
    return x <= y if low else x >= y


def _brute_dominates(a: Sequence[float], b: Sequence[float], minimize: Sequence[bool]) -> bool:
    """No worse everywhere, strictly better somewhere."""
    return (all(_better_or_equal(x, y, low) for x, y, low in zip(a, b, minimize, strict=True))
            and any(x != y for x, y in zip(a, b, strict=True)))


def _brute_fronts(points: Mapping[int, Sequence[float]], minimize: Sequence[bool]
                  ) -> list[list[int]]:
    """Peel: the finite points no remaining point dominates, again and again."""
    left = {n for n, p in points.items() if _finite(p)}
    fronts = []
    while left:
        front = sorted(n for n in left
                       if not any(_brute_dominates(points[m], points[n], minimize) for m in left))
        fronts.append(front)
        left -= set(front)
    return fronts


def _flip(points: Mapping[int, Sequence[float]], minimize: Sequence[bool]
          ) -> dict[int, tuple[float, ...]]:
    """The same points with every maximised objective negated (all minimised)."""
    return {n: tuple(v if low else -v for v, low in zip(p, minimize, strict=True))
            for n, p in points.items()}


def _grid_volume(points: Sequence[Sequence[float]], reference: Sequence[float],
                 minimize: Sequence[bool]) -> Fraction:
    """Exact hypervolume by cells: cut every axis at every coordinate, add each cell whose lower
    corner (all objectives minimised) some point dominates weakly."""
    sign = [1 if low else -1 for low in minimize]
    ref = [Fraction(r) * s for r, s in zip(reference, sign, strict=True)]
    kept = [[Fraction(v) * s for v, s in zip(p, sign, strict=True)] for p in points if _finite(p)]
    kept = [p for p in kept if all(v < r for v, r in zip(p, ref, strict=True))]
    if not kept:
        return Fraction(0)
    cuts = [sorted({p[k] for p in kept} | {ref[k]}) for k in range(len(ref))]
    total = Fraction(0)
    for cell in itertools.product(*(range(len(c) - 1) for c in cuts)):
        low = [cuts[k][i] for k, i in enumerate(cell)]
        if any(all(v <= c for v, c in zip(p, low, strict=True)) for p in kept):
            size = Fraction(1)
            for k, i in enumerate(cell):
                size *= cuts[k][i + 1] - cuts[k][i]
            total += size
    return total


def _random_points(rng: random.Random, objectives: int, n: int, *, grid: Sequence[float],
                   odd: float = 0.0) -> dict[int, tuple[float, ...]]:
    """``n`` points on trial numbers drawn from a range 3x wider (not 0..n-1), values from
    ``grid`` (duplicates and ties), each value NaN or +-inf with probability ``odd``."""
    numbers = rng.sample(range(3 * n + 3), n)
    points = {}
    for number in numbers:
        point = []
        for _ in range(objectives):
            if rng.random() < odd:
                point.append(rng.choice([NAN, INF, -INF]))
            else:
                point.append(rng.choice(grid))
        points[number] = tuple(point)
    return points


def _continuous_points(rng: random.Random, objectives: int, n: int
                       ) -> dict[int, tuple[float, ...]]:
    """Random floats (no accidental distance ties), with some whole points repeated and some first
    objectives shared: the ties that the documented order breaks by trial number."""
    numbers = rng.sample(range(3 * n + 3), n)
    points: dict[int, tuple[float, ...]] = {}
    for number in numbers:
        roll = rng.random()
        if points and roll < 0.2:
            points[number] = rng.choice(list(points.values()))
        elif points and roll < 0.35:
            first = rng.choice(list(points.values()))[0]
            points[number] = (first, *(rng.uniform(-1, 1) for _ in range(objectives - 1)))
        else:
            points[number] = tuple(rng.uniform(-1, 1) for _ in range(objectives))
    return points


GRIDS = ([0, 1, 2, 3], [0.1, 0.2, 0.3, 0.7], [-1.5, 0.0, 2.25], [5.0])


# -- directions_minimize, is_finite_point ----------------------------------------------------


def test_directions_minimize() -> None:
    assert directions_minimize(["minimize", "maximize", "minimize"]) == (True, False, True)
    assert directions_minimize(("maximize",)) == (False,)


def test_directions_minimize_takes_optunas_study_directions() -> None:
    study = optuna.create_study(directions=["maximize", "minimize", "maximize"])
    assert directions_minimize(study.directions) == (False, True, False)
    assert directions_minimize([StudyDirection.MINIMIZE]) == (True,)


@pytest.mark.parametrize(
    ("minimize", "words"),
    [
        (["minimize", "maximize"], "`minimize[0]` is 'minimize', but must be True or False"),
        ([StudyDirection.MINIMIZE, StudyDirection.MAXIMIZE],
         "`minimize[0]` is <StudyDirection.MINIMIZE: 1>, but must be True or False"),
        ((1, 0), "`minimize[0]` is 1, but must be True or False"),
        ((True, "maximize"), "`minimize[1]` is 'maximize'"),
        ("minimize", "`minimize` is 'minimize', but must be a list of True or False"),
    ],
    ids=["names", "study-directions", "integers", "one-name", "a-string"],
)
def test_a_direction_where_a_bool_belongs_is_refused_not_read_as_minimize(
    minimize: Sequence[object], words: str
) -> None:
    """Optuna's directions (and their names) are truthy: read as bools, every objective would be
    minimised, a maximised one's best point called dominated. Each function says so instead."""
    points = {0: (1.0, 1.0), 1: (2.0, 2.0)}  # with (minimize, maximize): both on the front
    calls = [lambda: front_ranks(points, minimize), lambda: nondominated_fronts(points, minimize),
             lambda: pareto_order(points, minimize), lambda: dominates((1, 1), (2, 2), minimize),
             lambda: hypervolume(points.values(), (3, 0), minimize),
             lambda: reference_point(points.values(), minimize)]
    for call in calls:
        with pytest.raises(ValueError) as info:
            call()
        message = str(info.value)
        assert words in message and "\n" not in message
        if not isinstance(minimize, str):
            assert "directions_minimize(study.directions)" in message


def test_directions_minimize_refuses_one_string() -> None:
    with pytest.raises(ValueError, match=r"The value of `directions` is 'minimize', but must be a "
                       r"list of directions"):
        directions_minimize("minimize")


def test_numpy_points_and_minimize_are_numbers_and_bools() -> None:
    """NumPy numbers are numbers: points from an array count (they were taken for non-finite and
    left out, a hypervolume of 0 and no front), and a boolean array is a ``minimize``."""
    ints, floats = np.array([[1, 2], [2, 1], [3, 3]]), np.array([[1, 2], [2, 1], [3, 3]], "f4")
    for array in (ints, floats):
        assert is_finite_point(array[0])
        both = np.array([True, True])
        assert hypervolume(array, reference=np.array([3, 3]), minimize=both) == 3.0
        assert nondominated_fronts(dict(enumerate(array)), MIN2) == [[0, 1], [2]]
        assert pareto_order(dict(enumerate(array)), [np.True_, np.True_]) == [0, 1, 2]
        assert front_ranks(dict(enumerate(array)), MIN2) == {0: 0, 1: 0, 2: 1}
        assert reference_point(array, MIN2) == (3.2, 3.2)
        assert dominates(array[0], array[2], np.array([True, True]))
    assert not is_finite_point(np.array([1.0, np.nan])) and not is_finite_point((np.inf, 0))


def test_is_finite_point() -> None:
    assert is_finite_point((0.0, -3, 1e300))
    assert not is_finite_point((0.0, NAN))
    assert not is_finite_point((INF, 0.0))
    assert not is_finite_point((-INF,))


# -- dominance -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a", "b", "minimize", "expected"),
    [
        ((1, 2), (1, 3), MIN2, True),  # equal in one, better in the other
        ((1, 3), (1, 2), MIN2, False),
        ((1, 2), (2, 1), MIN2, False),  # incomparable, both ways
        ((2, 1), (1, 2), MIN2, False),
        ((1, 2), (1, 2), MIN2, False),  # equal points dominate neither way
        ((0.5, 0.5), (0.5, 0.5), MAX2, False),
        ((2, 2), (1, 1), MAX2, True),
        ((1, 1), (2, 2), MAX2, False),
        ((1, 3), (2, 2), MIXED, True),  # lower error, higher accuracy
        ((1, 1), (2, 2), MIXED, False),  # lower error, lower accuracy
        ((2, 3), (2, 2), MIXED, True),
        ((2, 2), (2, 3), MIXED, False),
        ((1,), (2,), (True,), True),  # one objective: strictly better
        ((2,), (2,), (True,), False),
        ((3,), (2,), (False,), True),
        ((0, 0, 0), (0, 0, 1), (True, True, True), True),
        ((0, 0, 2), (0, 1, 1), (True, True, True), False),
        ((-INF, 0), (0, 0), MIN2, True),
        ((0, 0), (INF, 0), MIN2, True),
    ],
)
def test_dominates_hand_cases(a: tuple, b: tuple, minimize: tuple, expected: bool) -> None:
    assert dominates(a, b, minimize) is expected


def test_dominates_equals_the_definition_on_random_pairs() -> None:
    rng = random.Random(11)
    for _ in range(3000):
        k = rng.randint(1, 4)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        a = tuple(rng.choice([0, 1, 2]) for _ in range(k))
        b = tuple(rng.choice([0, 1, 2]) for _ in range(k))
        got = dominates(a, b, minimize)
        assert got == _brute_dominates(a, b, minimize), (a, b, minimize)
        assert not (got and dominates(b, a, minimize))  # antisymmetric
        # a maximised objective is a minimised one with its sign flipped
        flipped = [tuple(v if low else -v for v, low in zip(p, minimize, strict=True))
                   for p in (a, b)]
        assert got == dominates(*flipped, (True,) * k)
    for point in [(0,), (1, 2), (0.5, 0.5, 0.5)]:  # irreflexive
        assert not dominates(point, point, (True,) * len(point))
        assert not dominates(point, point, (False,) * len(point))


def test_a_nan_value_never_makes_a_point_dominate() -> None:
    for minimize in [(True,), (False,)]:
        assert not dominates((NAN,), (0.0,), minimize), minimize
    assert not dominates((NAN, NAN), (1.0, 1.0), MAX2)
    # and the sign-flip equivalence holds for NaN too
    assert dominates((NAN, 2.0), (0.0, 1.0), MAX2) == dominates((NAN, -2.0), (0.0, -1.0), MIN2)


# -- non-dominated fronts --------------------------------------------------------------------


def test_fronts_hand_cases() -> None:
    assert nondominated_fronts({0: (1, 4), 1: (2, 2), 2: (4, 1), 3: (3, 3)}, MIN2) == [
        [0, 1, 2], [3]]
    # equal points share a front; each front by trial number, whatever the dict order
    assert nondominated_fronts({7: (1, 1), 2: (2, 2), 5: (1, 1), 3: (2, 2), 4: (3, 0)}, MIN2) == [
        [4, 5, 7], [2, 3]]
    # a chain: one point per front
    assert nondominated_fronts({0: (3, 3), 1: (2, 2), 2: (1, 1)}, MIN2) == [[2], [1], [0]]
    assert nondominated_fronts({0: (3, 3), 1: (2, 2), 2: (1, 1)}, MAX2) == [[0], [1], [2]]
    # mixed: lower first objective, higher second
    assert nondominated_fronts({0: (1, 5), 1: (2, 6), 2: (2, 4), 3: (1, 4)}, MIXED) == [
        [0, 1], [3], [2]]
    # one objective: fronts are the distinct values, best first, ties together
    assert nondominated_fronts({0: (0.3,), 1: (0.1,), 2: (0.3,), 3: (0.2,)}, (True,)) == [
        [1], [3], [0, 2]]
    assert nondominated_fronts({}, MIN2) == []


def test_fronts_exclude_nan_and_infinite_points() -> None:
    points = {0: (1, 1), 1: (NAN, 0), 2: (0, INF), 3: (-INF, 5), 4: (2, 2), 5: (NAN, NAN)}
    assert nondominated_fronts(points, MIN2) == [[0], [4]]
    assert front_ranks(points, MIN2) == {0: 0, 1: None, 2: None, 3: None, 4: 1, 5: None}
    assert nondominated_fronts({0: (NAN, 1)}, MIN2) == []


def test_with_infinite_true_only_nan_keeps_a_point_out() -> None:
    points = {0: (1, 1), 1: (NAN, 0), 2: (0, INF), 3: (-INF, 5), 4: (2, 2), 5: (NAN, NAN)}
    assert nondominated_fronts(points, MIN2, infinite=True) == [[0, 3], [2, 4]]
    assert front_ranks(points, MIN2, infinite=True) == {0: 0, 1: None, 2: 1, 3: 0, 4: 1,
                                                        5: None}
    assert nondominated_fronts({0: (1, 1), 1: (0, INF)}, MIXED, infinite=True) == [[1], [0]]


@pytest.mark.parametrize("objectives", [2, 3])
def test_fronts_with_infinite_values_equal_the_brute_force_definition(objectives: int) -> None:
    """Infinite values sorted as numbers, as dominates compares them (the report's fronts)."""
    rng = random.Random(300 + objectives)
    for _ in range(400):
        points = {k: tuple(rng.choice([0.0, 1.0, 2.0, rng.random(), INF, -INF, NAN])
                           for _ in range(objectives)) for k in range(rng.randint(0, 9))}
        minimize = tuple(rng.random() < 0.5 for _ in range(objectives))
        left, expected = {n for n, p in points.items() if not any(map(math.isnan, p))}, []
        while left:
            front = sorted(n for n in left if not any(
                _brute_dominates(points[m], points[n], minimize) for m in left))
            expected.append(front)
            left -= set(front)
        assert nondominated_fronts(points, minimize, infinite=True) == expected, points


@pytest.mark.parametrize("objectives", [1, 2, 3, 4])
def test_fronts_equal_the_brute_force_definition(objectives: int) -> None:
    rng = random.Random(100 + objectives)
    for _ in range(400):
        points = _random_points(rng, objectives, rng.randint(0, 9), grid=rng.choice(GRIDS),
                                odd=rng.choice([0.0, 0.1]))
        minimize = tuple(rng.random() < 0.5 for _ in range(objectives))
        fronts = nondominated_fronts(points, minimize)
        assert fronts == _brute_fronts(points, minimize), (points, minimize)
        ranks = front_ranks(points, minimize)
        assert list(ranks) == list(points)
        for rank, front in enumerate(fronts):
            assert all(ranks[n] == rank for n in front)
        assert {n for n, r in ranks.items() if r is None} == {
            n for n, p in points.items() if not _finite(p)}
        assert fronts == nondominated_fronts(_flip(points, minimize), (True,) * objectives)


# -- the rung order --------------------------------------------------------------------------


def test_a_point_dominating_every_other_is_first_the_syne_tune_counter_example() -> None:
    # Syne Tune 0.16's MOASHA read the index order of its sort as each point's rank: the new,
    # dominating point 3 got rank 3 and was stopped. Here the order is the rank.
    points = {0: (0.5, 0.5), 1: (0.6, 0.6), 2: (0.7, 0.7), 3: (0.1, 0.1)}
    assert pareto_order(points, MIN2) == [3, 0, 1, 2]
    assert pareto_order({n: (-a, -b) for n, (a, b) in points.items()}, MAX2) == [3, 0, 1, 2]


def test_a_dominating_point_is_first_in_random_sets() -> None:
    rng = random.Random(5)
    for _ in range(300):
        k = rng.randint(1, 3)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        points = _random_points(rng, k, rng.randint(0, 8), grid=[0, 1, 2, 3], odd=0.1)
        best = tuple(-1 if low else 4 for low in minimize)
        number = rng.randint(0, 40)
        points.pop(number, None)
        points[number] = best
        assert pareto_order(points, minimize)[0] == number


def test_the_order_is_fronts_then_nan_and_a_permutation() -> None:
    rng = random.Random(6)
    for _ in range(300):
        k = rng.randint(1, 3)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        points = _random_points(rng, k, rng.randint(0, 10), grid=rng.choice(GRIDS), odd=0.15)
        order = pareto_order(points, minimize)
        assert sorted(order) == sorted(points)
        start = 0
        for front in _brute_fronts(points, minimize):  # each front a block, in front order
            assert sorted(order[start:start + len(front)]) == front
            start += len(front)
        assert order[start:] == sorted(n for n, p in points.items() if not _finite(p))


def test_ties_go_to_the_lower_trial_number() -> None:
    # equal points: by number, whatever the dict order
    assert pareto_order({9: (1, 1), 4: (1, 1), 6: (1, 1)}, MIN2) == [4, 6, 9]
    # the seed: the best first objective, the lower number among equal ones
    assert pareto_order({5: (0, 2), 3: (0, 2), 8: (2, 0)}, MIN2) == [3, 8, 5]
    # equal distances: five points on a line, the two quarter points tie after the middle
    line = {4: (0.0, 1.0), 3: (0.25, 0.75), 0: (0.5, 0.5), 1: (0.75, 0.25), 2: (1.0, 0.0)}
    assert pareto_order(line, MIN2) == [4, 2, 0, 1, 3]
    assert pareto_order({n: line[n] for n in (4, 1, 0, 3, 2)}, MIN2) == [4, 2, 0, 1, 3]
    # one objective: by value, ties by number
    assert pareto_order({3: (0.2,), 1: (0.2,), 2: (0.1,), 0: (0.3,)}, (True,)) == [2, 1, 3, 0]


def test_nan_and_infinite_points_go_last_by_number() -> None:
    points = {0: (NAN, 0.0), 1: (0.5, 0.5), 2: (INF, 1.0), 3: (9.0, 9.0), 4: (0.0, -INF),
              5: (NAN, NAN)}
    assert pareto_order(points, MIN2) == [1, 3, 0, 2, 4, 5]
    assert pareto_order({2: (NAN, 1.0), 1: (NAN, 0.0)}, MIN2) == [1, 2]
    assert pareto_order({}, MIN2) == []
    # the docstring's example: +inf is infinite whatever the direction
    assert pareto_order({0: (0.2, 5.0), 1: (INF, 1.0), 2: (0.1, 9.0)}, MIXED) == [2, 0, 1]


def test_the_epsilon_net_spreads_over_a_front() -> None:
    # a front (minimise both): the extremes first, then the point filling the largest gap
    front = {0: (0.0, 1.0), 1: (1.0, 0.0), 2: (0.45, 0.55), 3: (0.1, 0.9), 4: (0.9, 0.1)}
    assert pareto_order(front, MIN2) == [0, 1, 2, 3, 4]
    # the docstring's example
    assert pareto_order({0: (0.0, 1.0), 1: (1.0, 0.0), 2: (0.5, 0.5), 3: (0.9, 0.9)}, MIN2) == [
        0, 1, 2, 3]


def test_distances_are_range_scaled_so_a_large_objective_does_not_outweigh() -> None:
    # The second objective spans 1000, the first 1. Range-scaled, point 2 (0.5, 0.9) is far
    # from both ends and point 3 (0.9, 0.1) next to point 1: 2 before 3. Raw Euclidean distances
    # would follow the second objective alone and put 3 first.
    points = {0: (0.0, 1000.0), 1: (1.0, 0.0), 2: (0.5, 900.0), 3: (0.9, 100.0)}
    assert pareto_order(points, MIN2) == [0, 1, 2, 3]


def test_scaling_uses_every_finite_point_given_not_only_the_front() -> None:
    # Point 0 (7, 0) is dominated by point 1 (6, 0) but widens the first objective's range to
    # 2..7: the front [1, 2, 3, 4] is ordered in that scale ([3, 1, 4, 2]; in the front's own
    # 2..6 scale point 2 would come before 4). A NaN point changes nothing.
    points = {0: (7, 0), 1: (6, 0), 2: (4, 1), 3: (2, 4), 4: (3, 2)}
    assert pareto_order(points, MIN2) == [3, 1, 4, 2, 0]
    assert pareto_order({**points, 5: (NAN, -100.0)}, MIN2) == [3, 1, 4, 2, 0, 5]


def test_an_objective_with_one_value_counts_zero() -> None:
    assert pareto_order({0: (0.3, 5), 1: (0.1, 5), 2: (0.2, 5)}, MIN2) == [1, 2, 0]
    assert pareto_order({0: (1, 1), 1: (1, 1)}, MAX2) == [0, 1]


@pytest.mark.parametrize("objectives", [1, 2, 3])
def test_mixed_directions_equal_flipping_signs(objectives: int) -> None:
    rng = random.Random(20 + objectives)
    for _ in range(300):
        minimize = tuple(rng.random() < 0.5 for _ in range(objectives))
        points = _random_points(rng, objectives, rng.randint(0, 9), grid=rng.choice(GRIDS),
                                odd=0.1)
        assert pareto_order(points, minimize) == pareto_order(
            _flip(points, minimize), (True,) * objectives), (points, minimize)


HAND_FRONTS = [
    {4: (0.0, 1.0), 3: (0.25, 0.75), 0: (0.5, 0.5), 1: (0.75, 0.25), 2: (1.0, 0.0)},
    {0: (0.0, 1000.0), 1: (1.0, 0.0), 2: (0.5, 900.0), 3: (0.9, 100.0)},
    {0: (7, 0), 1: (6, 0), 2: (4, 1), 3: (2, 4), 4: (3, 2), 5: (NAN, 1)},
    {0: (0.5, 0.5), 1: (0.6, 0.6), 2: (0.7, 0.7), 3: (0.1, 0.1)},
    {0: (0.1, 0.35, 0.9), 1: (0.8, 0.1, 0.3), 2: (0.3, 0.95, 0.1), 3: (0.5, 0.45, 0.55),
     4: (0.6, 0.6, 0.6), 5: (0.1, 0.35, 0.9)},
]


@pytest.mark.parametrize("points", HAND_FRONTS)
@pytest.mark.parametrize("factor", [1e5, 1e-5, 3.0])
def test_scaling_one_objective_does_not_change_the_order_hand_fronts(
    points: dict[int, tuple[float, ...]], factor: float
) -> None:
    expected = pareto_order(points, (True,) * len(points[0]))
    for k in range(len(points[0])):
        scaled = {n: tuple(v * factor if i == k else v for i, v in enumerate(p))
                  for n, p in points.items()}
        assert pareto_order(scaled, (True,) * len(points[0])) == expected, k


def test_scaling_one_objective_does_not_change_the_order_random_sets() -> None:
    rng = random.Random(7)
    for _ in range(300):
        k = rng.randint(1, 3)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        points = _continuous_points(rng, k, rng.randint(1, 9))
        expected = pareto_order(points, minimize)
        which = rng.randrange(k)
        scaled = {n: tuple(v * 1e5 if i == which else v for i, v in enumerate(p))
                  for n, p in points.items()}
        assert pareto_order(scaled, minimize) == expected, (points, minimize, which)


def test_the_order_of_the_dict_does_not_matter() -> None:
    rng = random.Random(8)
    for _ in range(300):
        k = rng.randint(1, 3)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        points = _random_points(rng, k, rng.randint(0, 9), grid=rng.choice(GRIDS), odd=0.1)
        items = list(points.items())
        rng.shuffle(items)
        assert pareto_order(dict(items), minimize) == pareto_order(points, minimize)
        assert pareto_order(dict(reversed(items)), minimize) == pareto_order(points, minimize)


def test_equal_distances_in_exact_arithmetic_go_to_the_lower_number() -> None:
    # scaled: 0 (0.8, 0.25), 1 (0, 1), 2 (0.2, 0.75), 3 (1, 0); after 1 and 3, points 0 and 2
    # are both at exactly sqrt(0.2**2 + 0.25**2) from the nearest point taken
    points = {0: (4, 1), 1: (0, 4), 2: (1, 3), 3: (5, 0)}
    assert pareto_order(points, MIN2) == [1, 3, 0, 2]


def test_scaling_one_objective_does_not_change_the_order_where_distances_tie() -> None:
    line = {4: (0.0, 1.0), 3: (0.25, 0.75), 0: (0.5, 0.5), 1: (0.75, 0.25), 2: (1.0, 0.0)}
    tenth = {n: (a * 0.1, b) for n, (a, b) in line.items()}
    assert pareto_order(tenth, MIN2) == pareto_order(line, MIN2) == [4, 2, 0, 1, 3]
    rotated = {0: (0.1, 0.3, 0.9), 1: (0.9, 0.1, 0.3), 2: (0.3, 0.9, 0.1)}
    tripled = {n: (a, b * 3.0, c) for n, (a, b, c) in rotated.items()}
    assert pareto_order(tripled, (True,) * 3) == pareto_order(rotated, (True,) * 3) == [0, 1, 2]


# -- reference point -------------------------------------------------------------------------


def test_reference_point() -> None:
    assert reference_point([(0.1, 100.0), (0.3, 50.0)], MIXED) == (0.32, 45.0)
    assert reference_point([(1, 2), (3, 0)], MIN2) == (3.2, 2.2)
    assert reference_point([(1, 2), (3, 0)], MAX2) == (0.8, -0.2)
    # all equal: one more (or less) than the value, so the point still counts
    assert reference_point([(2.0, 2.0)], MIXED) == (3.0, 1.0)
    # NaN and infinite points are ignored
    assert reference_point([(1, 1), (NAN, 50), (0, INF), (2, 3)], MIN2) == (2.1, 3.2)
    assert reference_point(iter([(0.1, 0.2, 0.3)]), (True, True, True)) == (1.1, 1.2, 1.3)


def test_every_finite_point_is_inside_its_reference() -> None:
    rng = random.Random(9)
    for _ in range(200):
        k = rng.randint(1, 3)
        minimize = tuple(rng.random() < 0.5 for _ in range(k))
        points = list(_continuous_points(rng, k, rng.randint(1, 6)).values())
        reference = reference_point(points, minimize)
        for point in points:
            assert all((v < r) if low else (v > r)
                       for v, r, low in zip(point, reference, minimize, strict=True))
        assert hypervolume(points, reference, minimize) > 0


# -- hypervolume -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("points", "reference", "minimize", "expected"),
    [
        ([(1, 1)], (2, 3), MIN2, 2.0),
        ([(1, 2), (2, 1)], (3, 3), MIN2, 3.0),  # 2 + 2 - 1 overlap
        ([(1, 2), (2, 1), (1.5, 1.5)], (3, 3), MIN2, 3.25),
        ([(1, 2), (2, 1), (2, 2), (1, 2)], (3, 3), MIN2, 3.0),  # dominated, repeated: nothing
        ([(0, 3), (1, 2), (2, 1), (3, 0)], (4, 4), MIN2, 10.0),  # staircase 4+3+2+1
        ([(3, 3)], (1, 1), MAX2, 4.0),
        ([(1, 3)], (2, 1), MIXED, 2.0),  # error 1 below 2, accuracy 3 above 1
        ([(1, 5), (3, 4)], (4, 0), MIXED, 3 * 5 + 1 * 4 - 1 * 4),
        ([(1,), (3,)], (5,), (True,), 4.0),
        ([(1, 1, 1)], (2, 3, 4), (True, True, True), 6.0),
        ([(0, 0, 1), (1, 1, 0)], (2, 2, 2), (True, True, True), 4 + 2 - 1),
        # inclusion-exclusion: 3 boxes of 4, 3 pairwise overlaps of 2, a triple overlap of 1
        ([(1, 0, 0), (0, 1, 0), (0, 0, 1)], (2, 2, 2), (True, True, True), 12 - 6 + 1),
        ([(1, 1, 1, 1)], (2, 2, 2, 3), (True,) * 4, 2.0),
    ],
)
def test_hypervolume_hand_cases(points: list, reference: tuple, minimize: tuple,
                                expected: float) -> None:
    assert hypervolume(points, reference, minimize) == pytest.approx(expected, abs=1e-12)


def test_points_outside_the_reference_add_nothing() -> None:
    assert hypervolume([(3, 1)], (3, 3), MIN2) == 0.0  # on the reference in one objective
    assert hypervolume([(4, 0)], (3, 3), MIN2) == 0.0  # past it
    assert hypervolume([(1, 1), (4, 0), (0, 3)], (3, 3), MIN2) == 4.0
    assert hypervolume([(1, 1)], (3, 3), MAX2) == 0.0  # worse than the reference when maximised
    assert hypervolume([(NAN, 0), (0, INF), (-INF, -INF)], (3, 3), MIN2) == 0.0
    assert hypervolume([(1, 1), (NAN, 0)], (3, 3), MIN2) == 4.0
    assert hypervolume([], (3, 3), MIN2) == 0.0
    assert isinstance(hypervolume([], (3, 3), MIN2), float)


@pytest.mark.parametrize("objectives", [1, 2, 3, 4])
def test_hypervolume_equals_an_exact_grid_computation(objectives: int) -> None:
    rng = random.Random(40 + objectives)
    cases = 150 if objectives < 4 else 40
    for _ in range(cases):
        minimize = tuple(rng.random() < 0.5 for _ in range(objectives))
        grid = rng.choice([[0, 1, 2, 3, 4], [0.1, 0.35, 0.5, 0.9], [-2.5, 0.0, 1.25, 7.0]])
        n = rng.randint(0, 6 if objectives < 4 else 4)
        points = list(_random_points(rng, objectives, n, grid=grid, odd=0.05).values())
        # a reference sometimes inside the cloud: some points are outside it
        reference = tuple(rng.choice(grid) + (0.5 if low else -0.5) * rng.random()
                          for low in minimize)
        expected = _grid_volume(points, reference, minimize)
        got = hypervolume(points, reference, minimize)
        assert got == pytest.approx(float(expected), rel=1e-9, abs=1e-12), (points, reference)
        # the order of the points does not matter, nor does a repeated point
        shuffled = points + points[:1]
        rng.shuffle(shuffled)
        assert hypervolume(shuffled, reference, minimize) == pytest.approx(got, rel=1e-12,
                                                                           abs=1e-12)


def test_hypervolume_grows_with_a_non_dominated_point_and_not_with_a_dominated_one() -> None:
    rng = random.Random(12)
    for _ in range(100):
        cloud = _continuous_points(rng, 3, rng.randint(1, 6))
        points = list(cloud.values())
        reference = (2.0, 2.0, 2.0)
        base = hypervolume(points, reference, (True,) * 3)
        worse = tuple(v + 0.01 for v in points[0])  # dominated by points[0]
        assert hypervolume([*points, worse], reference, (True,) * 3) == pytest.approx(base)
        # better than a point of the Pareto front: no point dominates it
        best = cloud[_brute_fronts(cloud, (True,) * 3)[0][0]]
        better = tuple(v - 0.01 for v in best)
        assert hypervolume([*points, better], reference, (True,) * 3) > base


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "words"),
    [
        (lambda: directions_minimize(["minimise"]),
         "The value of `directions[0]` is 'minimise', but must be 'minimize' or 'maximize'."),
        (lambda: pareto_order({0: (1, 2)}, ()), "The value of `minimize` is empty"),
        (lambda: nondominated_fronts({0: (1, 2)}, []), "The value of `minimize` is empty"),
        (lambda: hypervolume([(1, 2)], (NAN, 3), MIN2),
         "The value of `reference` is (nan, 3), but must be finite."),
        (lambda: hypervolume([(1, 2)], (1, INF), MIN2), "The value of `reference` is (1, inf)"),
        (lambda: reference_point([(NAN, 1)], MIN2),
         "The value of `points` has no point with finite values"),
        (lambda: reference_point([], MIN2), "The value of `points` has no point"),
    ],
    ids=["direction", "order-minimize", "fronts-minimize", "reference-nan", "reference-inf",
         "reference-point-nan", "reference-point-empty"],
)
def test_bad_input_is_a_one_line_value_error_naming_the_argument(call, words: str) -> None:
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert words in message and "\n" not in message


_WRONG_LENGTH = [
    pytest.param(lambda: pareto_order({0: (1, 2), 1: (1,)}, MIN2), "`points`", id="order"),
    pytest.param(lambda: nondominated_fronts({0: (1, 2, 3)}, MIN2), "`points`", id="fronts"),
    pytest.param(lambda: front_ranks({0: (1,)}, MIN2), "`points`", id="ranks"),
    pytest.param(lambda: dominates((1, 2), (1,), MIN2), "`b`", id="dominates"),
    pytest.param(lambda: hypervolume([(1, 2)], (3,), MIN2), "`reference`", id="hv-reference"),
    pytest.param(lambda: hypervolume([(1,)], (3, 3), MIN2), "`points`", id="hv-points"),
    pytest.param(lambda: reference_point([(1, 2, 3)], MIN2), "`points`", id="reference-point"),
]


@pytest.mark.parametrize(("call", "argument"), _WRONG_LENGTH)
def test_a_point_of_the_wrong_length_is_a_one_line_value_error(call, argument: str) -> None:
    with pytest.raises(ValueError) as info:
        call()
    message = str(info.value)
    assert "must have one value per objective (2)" in message and "\n" not in message


@pytest.mark.parametrize(("call", "argument"), _WRONG_LENGTH)
def test_a_point_of_the_wrong_length_names_the_argument(call, argument: str) -> None:
    with pytest.raises(ValueError, match=f"The value of {argument}"):
        call()


@pytest.mark.parametrize("seed", range(4))
def test_two_objectives_sort_as_the_all_pairs_sort(seed: int) -> None:
    """Two objectives take a sort-and-bisect path (O(n log n)); it gives the fronts of the
    all-pairs sort (three objectives, one constant), ties, duplicates, NaN and infinities
    included, in both directions."""
    rng = random.Random(seed)
    for _ in range(500):
        points = {k: (rng.choice([0, 1, 2, 3, rng.random(), math.inf, -math.inf, math.nan]),
                      rng.choice([0, 1, 2, rng.random(), math.inf, math.nan]))
                  for k in range(rng.randint(0, 40))}
        minimize = (rng.random() < 0.5, rng.random() < 0.5)
        flat = {k: (*p, 0.0) for k, p in points.items()}
        assert nondominated_fronts(points, minimize) == nondominated_fronts(
            flat, (*minimize, True)), (points, minimize)
