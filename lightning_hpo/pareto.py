"""Several objectives: dominance, Pareto fronts, one documented order, hypervolume. Pure, no I/O.

A *point* is one trial's values, one per objective, keyed by trial number; ``minimize`` says per
objective whether lower is better (:func:`directions_minimize` turns Optuna's
``study.directions`` into it).

**The order at a rung** (:func:`pareto_order`), whose top ``1/eta`` multi-objective ASHA keeps,
as MOASHA does (Schmucker et al., 2021): (1) non-dominated sorting of the finite points, equal
points in one front; (2) within a front, the epsilon-net order: the point best in the first
objective, then each time the point farthest from those taken, with each objective scaled to
``[0, 1]`` by its range over the finite points (ties to the lower trial number); (3) points
with a NaN or infinite value last, by trial number. The order returned *is* the rank (Syne
Tune's MOASHA reads this sort's index order as ranks; that is not followed here).

**Hypervolume** (:func:`hypervolume`): the exact volume a set of points dominates, bounded by a
reference point (higher is better); :func:`reference_point` is the default reference: each
objective's worst finite value plus a tenth of its range.

Example::

    >>> points = {0: (0.5, 0.5), 1: (0.6, 0.6), 2: (0.7, 0.7), 3: (0.1, 0.1)}
    >>> pareto_order(points, minimize=(True, True))
    [3, 0, 1, 2]
    >>> nondominated_fronts({0: (1, 4), 1: (2, 2), 2: (4, 1), 3: (3, 3)}, (True, True))
    [[0, 1, 2], [3]]
    >>> hypervolume([(1, 2), (2, 1)], reference=(3, 3), minimize=(True, True))
    3.0
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real
from typing import Any

__all__ = [
    "directions_minimize",
    "dominates",
    "dominates_unchecked",
    "front_ranks",
    "hypervolume",
    "is_finite_point",
    "nondominated_fronts",
    "pareto_order",
    "reference_point",
]

Point = Sequence[float]


def directions_minimize(directions: Sequence[Any]) -> tuple[bool, ...]:
    """``("minimize", "maximize")``, or Optuna's ``study.directions``, as ``(True, False)``: the
    ``minimize`` argument of this module.

    Raises:
        ValueError: ``directions`` is one string, or a direction is neither ``"minimize"`` nor
            ``"maximize"`` (nor Optuna's ``StudyDirection.MINIMIZE`` or ``MAXIMIZE``).

    Example::

        >>> directions_minimize(["minimize", "maximize"])
        (True, False)
        >>> import optuna
        >>> directions_minimize(optuna.create_study(directions=["maximize", "minimize"]).directions)
        (False, True)
    """
    if isinstance(directions, str):
        raise ValueError(f"The value of `directions` is {directions!r}, but must be a list of "
                         "directions, one per objective (['minimize', 'maximize']).")
    out = []
    for index, direction in enumerate(directions):
        # Optuna's StudyDirection (an enum, NOT_SET too) by its name; anything else as given
        name = getattr(direction, "name", None) if not isinstance(direction, str) else None
        word = name.lower() if isinstance(name, str) else direction
        if word not in ("minimize", "maximize"):
            raise ValueError(f"The value of `directions[{index}]` is {direction!r}, but must be "
                             "'minimize' or 'maximize'.")
        out.append(word == "minimize")
    return tuple(out)


def is_finite_point(point: Point) -> bool:
    """Whether every value of ``point`` is a finite real number (not NaN, not infinite), NumPy's
    included (``numpy.float32(0.5)``, ``numpy.int64(3)``).

    Example::

        >>> import numpy as np
        >>> is_finite_point(np.array([0.5, 3], dtype=np.float32)), is_finite_point((1.0, np.nan))
        (True, False)
    """
    return all(isinstance(v, Real) and math.isfinite(v) for v in point)


def _numbers_not_nan(point: Point) -> bool:
    """Whether every value of ``point`` is a real number other than NaN (infinite ones too)."""
    return all(isinstance(v, Real) and not math.isnan(v) for v in point)


def dominates(a: Point, b: Point, minimize: Sequence[bool]) -> bool:
    """Whether ``a`` dominates ``b``: no worse in every objective, better in at least one.

    A point with a NaN value neither dominates nor is dominated (infinite values compare as
    numbers).

    Example::

        >>> dominates((1, 2), (1, 3), (True, True)), dominates((1, 2), (2, 1), (True, True))
        (True, False)
        >>> dominates((1, 2), (1, 2), (True, True)), dominates((2, 2), (1, 1), (False, False))
        (False, True)
    """
    minimize = _minimize(minimize)
    _check(minimize, [a], "a")
    _check(minimize, [b], "b")
    return dominates_unchecked(a, b, minimize)


def dominates_unchecked(a: Point, b: Point, minimize: tuple[bool, ...]) -> bool:
    """:func:`dominates` without its checks, for loops whose caller checked ``minimize`` and
    the points' lengths once (a promotion decision compares every pair of paused trials)."""
    if any(math.isnan(v) for v in (*a, *b)):  # NaN is neither better nor worse than anything
        return False
    strictly = False
    for x, y, low in zip(a, b, minimize, strict=True):
        if x == y:
            continue
        if (x < y) != low:
            return False
        strictly = True
    return strictly


def nondominated_fronts(
    points: Mapping[int, Point], minimize: Sequence[bool], *, infinite: bool = False
) -> list[list[int]]:
    """The finite points in Pareto fronts, the non-dominated first; each front by trial number.

    Points with a NaN or infinite value are in no front (:func:`pareto_order` puts them last).
    With ``infinite=True``, only a NaN keeps a point out: infinite values are sorted as numbers,
    as :func:`dominates` compares them and as Optuna's ``study.best_trials`` does (the report's
    fronts of final values; the rung order keeps them out).

    Example::

        >>> from lightning_hpo import nondominated_fronts
        >>> nondominated_fronts({0: (1, 1), 1: (1, 1), 2: (2, 2), 3: (float("nan"), 0)},
        ...                     (True, True))
        [[0, 1], [2]]
        >>> nondominated_fronts({0: (1, 1), 1: (0, float("inf"))}, (True, False), infinite=True)
        [[1], [0]]
    """
    minimize = _minimize(minimize)
    _check(minimize, points.values())
    kept = _numbers_not_nan if infinite else is_finite_point  # a finite point is not NaN
    numbers = sorted(n for n, p in points.items() if kept(p))
    # Oriented so that lower is better in every objective (two: a sort; more: all pairs).
    oriented = {n: tuple(float(v) if low else -float(v)
                         for v, low in zip(points[n], minimize, strict=True))
                for n in numbers}
    if len(minimize) == 2:
        return _fronts_2d(oriented)
    # Deb's fast non-dominated sort: who each point dominates, and by how many it is dominated.
    beats: dict[int, list[int]] = {n: [] for n in numbers}
    beaten_by = dict.fromkeys(numbers, 0)
    for i, n in enumerate(numbers):
        p = oriented[n]
        for m in numbers[i + 1:]:
            q = oriented[m]
            if _below(p, q):
                beats[n].append(m)
                beaten_by[m] += 1
            elif _below(q, p):
                beats[m].append(n)
                beaten_by[n] += 1
    fronts: list[list[int]] = []
    front = [n for n in numbers if beaten_by[n] == 0]
    while front:
        fronts.append(front)
        following = []
        for n in front:
            for m in beats[n]:
                beaten_by[m] -= 1
                if beaten_by[m] == 0:
                    following.append(m)
        front = sorted(following)
    return fronts


def pareto_order(points: Mapping[int, Point], minimize: Sequence[bool]) -> list[int]:
    """Every trial number, best first, in the order described in the module docstring.

    Args:
        points: each trial's values, one per objective.
        minimize: per objective, whether lower is better.

    Raises:
        ValueError: points of different lengths than ``minimize``.

    Example::

        >>> from lightning_hpo import pareto_order
        >>> pareto_order({0: (0.0, 1.0), 1: (1.0, 0.0), 2: (0.5, 0.5), 3: (0.9, 0.9)},
        ...              (True, True))
        [0, 1, 2, 3]
        >>> pareto_order({0: (0.2, 5.0), 1: (float("inf"), 1.0), 2: (0.1, 9.0)}, (True, False))
        [2, 0, 1]
    """
    minimize = _minimize(minimize)
    fronts = nondominated_fronts(points, minimize)
    finite = [n for front in fronts for n in front]
    scaled = _scaled({n: points[n] for n in finite}, minimize)
    order: list[int] = []
    for front in fronts:
        order += _epsilon_net(front, scaled)
    order += sorted(n for n in points if n not in scaled)
    return order


def front_ranks(
    points: Mapping[int, Point], minimize: Sequence[bool], *, infinite: bool = False
) -> dict[int, int | None]:
    """Each trial's front: 0 for the Pareto front, 1 for the next...; ``None`` for a point with a
    NaN or infinite value (with ``infinite=True``, a NaN only: see :func:`nondominated_fronts`).

    Example::

        >>> front_ranks({0: (1, 2), 1: (2, 1), 2: (3, 3), 3: (math.nan, 1)}, (True, True))
        {0: 0, 1: 0, 2: 1, 3: None}
    """
    ranks: dict[int, int | None] = dict.fromkeys(points)
    for rank, front in enumerate(nondominated_fronts(points, minimize, infinite=infinite)):
        for number in front:
            ranks[number] = rank
    return ranks


def reference_point(points: Iterable[Point], minimize: Sequence[bool]) -> tuple[float, ...]:
    """The hypervolume reference this package uses: per objective, the worst finite value plus a
    tenth of the finite values' range (plus 1 when they are all equal: the point still counts).

    Raises:
        ValueError: no finite point.

    Example::

        >>> reference_point([(0.1, 100.0), (0.3, 50.0)], (True, False))
        (0.32, 45.0)
    """
    minimize = _minimize(minimize)
    finite = [tuple(float(v) for v in p) for p in points if is_finite_point(p)]
    if not finite:
        raise ValueError("The value of `points` has no point with finite values, but a reference "
                         "point needs one.")
    _check(minimize, finite)
    reference = []
    for k, low in enumerate(minimize):
        values = [p[k] for p in finite]
        span = (max(values) - min(values)) / 10 or 1.0
        reference.append(round(max(values) + span, 12) if low else round(min(values) - span, 12))
    return tuple(reference)


def hypervolume(
    points: Iterable[Point], reference: Point, minimize: Sequence[bool]
) -> float:
    """The volume dominated by ``points`` and bounded by ``reference`` (higher is better).

    Points not strictly better than the reference in every objective, and points with a NaN or
    infinite value, add nothing. Exact, for any number of objectives (a sweep for two, slicing
    for more: quick for the few hundred points of a study).

    Example::

        >>> from lightning_hpo import hypervolume
        >>> hypervolume([(1, 1)], reference=(2, 3), minimize=(True, True))
        2.0
        >>> hypervolume([(1, 2), (2, 1), (1.5, 1.5)], reference=(3, 3), minimize=(True, True))
        3.25
        >>> hypervolume([(3, 3)], reference=(1, 1), minimize=(False, False))
        4.0
    """
    minimize = _minimize(minimize)
    _check(minimize, [reference], "reference")
    if not is_finite_point(reference):
        raise ValueError(f"The value of `reference` is {tuple(reference)}, but must be finite.")
    flip = [1.0 if low else -1.0 for low in minimize]
    ref = tuple(float(r) * f for r, f in zip(reference, flip, strict=True))
    kept = []
    for point in points:
        _check(minimize, [point])
        if not is_finite_point(point):
            continue
        oriented = tuple(float(v) * f for v, f in zip(point, flip, strict=True))
        if all(v < r for v, r in zip(oriented, ref, strict=True)):
            kept.append(oriented)
    return float(_volume(kept, ref))


def _volume(points: list[tuple[float, ...]], ref: tuple[float, ...]) -> float:
    """Hypervolume of minimised points, all strictly inside ``ref``."""
    if not points:
        return 0.0
    if len(ref) == 1:
        return ref[0] - min(p[0] for p in points)
    if len(ref) == 2:
        total, best_y = 0.0, ref[1]
        for x, y in sorted(points):
            if y < best_y:
                total += (ref[0] - x) * (best_y - y)
                best_y = y
        return total
    # Slice along the last objective: between consecutive levels, the points at or below the
    # slab's bottom dominate a (d-1)-dimensional volume.
    ordered = sorted(points, key=lambda p: p[-1])
    total = 0.0
    for i, point in enumerate(ordered):
        top = ordered[i + 1][-1] if i + 1 < len(ordered) else ref[-1]
        if top > point[-1]:
            total += _volume([p[:-1] for p in ordered[: i + 1]], ref[:-1]) * (top - point[-1])
    return total


def _fronts_2d(oriented: Mapping[int, tuple[float, ...]]) -> list[list[int]]:
    """Two objectives (oriented: lower is better): the fronts in ``O(n log n)``.

    Points in ascending ``(first, second)`` order; each joins the first front whose lowest
    second value so far is above its own (only a member with a lower or equal first value, seen
    before, can dominate it, and the front's lowest second value is that of its latest member),
    or the front of an equal point just before it. Those lowest values do not decrease from one
    front to the next, so the front is found by bisection, instead of the all-pairs sort's
    ``O(n²)`` comparisons.
    """
    fronts: list[list[int]] = []
    lowest: list[float] = []  # per front, its latest member's second value (its lowest)
    latest: list[tuple[float, ...]] = []
    for point, number in sorted((p, n) for n, p in oriented.items()):
        k = bisect_right(lowest, point[1])
        if k > 0 and latest[k - 1] == point:  # an equal point shares its front
            k -= 1
        if k == len(fronts):
            fronts.append([])
            lowest.append(point[1])
            latest.append(point)
        fronts[k].append(number)
        lowest[k], latest[k] = point[1], point
    return [sorted(front) for front in fronts]


def _below(p: tuple[float, ...], q: tuple[float, ...]) -> bool:
    """Oriented dominance: ``p`` no higher anywhere and lower somewhere."""
    strictly = False
    for x, y in zip(p, q, strict=True):
        if x > y:
            return False
        if x < y:
            strictly = True
    return strictly


def _scaled(points: Mapping[int, Point], minimize: Sequence[bool]) -> dict[int, tuple[float, ...]]:
    """Finite points oriented (lower is better) and scaled to ``[0, 1]`` per objective."""
    if not points:
        return {}
    oriented = {n: [float(v) if low else -float(v) for v, low in zip(p, minimize, strict=True)]
                for n, p in points.items()}
    lows = [min(p[k] for p in oriented.values()) for k in range(len(minimize))]
    spans = [max(p[k] for p in oriented.values()) - lows[k] for k in range(len(minimize))]
    return {n: tuple((v - low) / span if span > 0 else 0.0
                     for v, low, span in zip(p, lows, spans, strict=True))
            for n, p in oriented.items()}


def _epsilon_net(front: list[int], scaled: Mapping[int, tuple[float, ...]]) -> list[int]:
    """A front's points: the best first objective first (lower number on ties), then each time
    the one farthest from those taken (lower number on ties).

    Distances are compared as squared distances rounded to :data:`_DIGITS` decimals: two
    distances equal in exact arithmetic may differ in their last bits (reached by different
    subtractions, or after scaling an objective), and must still tie."""
    remaining = sorted(front)
    first = min(remaining, key=lambda n: (scaled[n][0], n))
    order = [first]
    remaining.remove(first)
    nearest = {n: _gap(scaled[n], scaled[first]) for n in remaining}
    while remaining:
        pick = max(remaining, key=lambda n: (nearest[n], -n))
        order.append(pick)
        remaining.remove(pick)
        for n in remaining:
            nearest[n] = min(nearest[n], _gap(scaled[n], scaled[pick]))
    return order


#: Decimals a squared distance between scaled points (each in ``[0, 1]``) is rounded to.
_DIGITS = 9


def _gap(p: tuple[float, ...], q: tuple[float, ...]) -> float:
    """The squared Euclidean distance of two scaled points, rounded to :data:`_DIGITS`."""
    return round(sum((x - y) ** 2 for x, y in zip(p, q, strict=True)), _DIGITS)


def _minimize(minimize: Sequence[bool]) -> tuple[bool, ...]:
    """``minimize`` as a tuple of bools (NumPy's included).

    Raises:
        ValueError: one line, when ``minimize`` is empty or holds anything but ``True`` and
            ``False``: a direction's name or Optuna's ``StudyDirection`` (both would read as
            true, every objective minimised) names :func:`directions_minimize`.
    """
    if isinstance(minimize, str) or not isinstance(minimize, Iterable):
        raise ValueError(f"The value of `minimize` is {minimize!r}, but must be a list of True or "
                         "False, per objective, whether lower is better.")
    out = tuple(minimize)
    if not out:
        raise ValueError("The value of `minimize` is empty, but must say, per objective, whether "
                         "lower is better.")
    for index, low in enumerate(out):
        if not (isinstance(low, bool) or getattr(getattr(low, "dtype", None), "kind", "") == "b"):
            raise ValueError(
                f"The value of `minimize[{index}]` is {low!r}, but must be True or False (whether "
                "lower is better); for directions, give directions_minimize(study.directions)."
            )
    return tuple(bool(low) for low in out)


def _check(minimize: tuple[bool, ...], points: Iterable[Point], name: str = "points") -> None:
    """Raise a one-line ValueError naming ``name`` when a point has not one value per
    objective."""
    for point in points:
        if len(point) != len(minimize):
            raise ValueError(f"The value of `{name}` holds {tuple(point)}, but must have one "
                             f"value per objective ({len(minimize)}).")
