"""Several objectives in the report: each trial's Pareto front and the hypervolume so far.

Pure (:mod:`lightning_hpo.pareto` does the dominance, sorting and volumes). A *point* is one
report of a trial, one value per objective. The rules the tables, summary, plots and CLI follow:

* **front**: :func:`lightning_hpo.pareto.front_ranks` of the COMPLETE trials' final values (0 is
  Optuna's ``study.best_trials``); a trial with no final values, or a NaN among them, has none.
* **best front** (at any epoch): each trial offers its Pareto-optimal points among all it
  reported; these are sorted into fronts together, and a trial's best front is the lowest of its
  points', its best step the earliest epoch with a point there. Points with a NaN are left out.
* **reference point**: unless given, :func:`lightning_hpo.pareto.reference_point` of every
  finite point reported (each objective's worst value plus a tenth of its range); a comparison
  uses one computed from every study compared.
* **hypervolume so far** (:class:`HypervolumeTrace`): the volume the points reported up to a
  moment dominate, bounded by the reference point; it never decreases. Example::

    >>> minimize = (True, True)
    >>> fronts = trial_fronts(
    ...     finals={0: (1.0, 4.0), 1: (2.0, 2.0), 2: (3.0, 3.0)},
    ...     reported={0: [(1, (2.0, 5.0)), (2, (1.0, 4.0))], 1: [(2, (2.0, 2.0))],
    ...               2: [(1, (1.5, 1.5)), (2, (3.0, 3.0))], 3: [(1, (9.0, 9.0))]},
    ...     minimize=minimize)
    >>> dict(fronts.front), dict(fronts.best_front), fronts.best_step[2]
    ({0: 0, 1: 0, 2: 1}, {0: 0, 1: 1, 2: 0, 3: 2}, 1)
    >>> trace = HypervolumeTrace(reference=(4.0, 4.0), minimize=minimize)
    >>> trace.add((2.0, 2.0)), trace.add((3.0, 3.0)), trace.add((1.0, 3.0)), trace.value
    (True, False, True, 5.0)
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from lightning_hpo.pareto import (
    dominates,
    front_ranks,
    hypervolume,
    is_finite_point,
    nondominated_fronts,
)

__all__ = ["HypervolumeTrace", "TrialFronts", "trial_fronts"]

Point = tuple[float, ...]


@dataclass(frozen=True)
class TrialFronts:
    """Each trial's fronts in a study with several objectives (the module docstring's rules).

    Attributes:
        front: trial -> its final values' front (COMPLETE trials without a NaN only).
        best_front: trial -> the lowest front of any point it reported (trials with a point
            without NaN only).
        best_step: trial -> the earliest epoch of a point on its best front (``None`` for a
            final value of a trial that reported no epoch).
        best_point: trial -> that point's values.
    """

    front: Mapping[int, int] = field(default_factory=dict)
    best_front: Mapping[int, int] = field(default_factory=dict)
    best_step: Mapping[int, int | None] = field(default_factory=dict)
    best_point: Mapping[int, Point] = field(default_factory=dict)

    @property
    def pareto(self) -> list[int]:
        """The COMPLETE trials on the Pareto front of final values, by number."""
        return sorted(n for n, rank in self.front.items() if rank == 0)

    @property
    def pareto_any_epoch(self) -> list[int]:
        """The trials with a point on the Pareto front of every value reported, by number."""
        return sorted(n for n, rank in self.best_front.items() if rank == 0)


def trial_fronts(
    finals: Mapping[int, Sequence[float]],
    reported: Mapping[int, Sequence[tuple[int | None, Sequence[float]]]],
    minimize: Sequence[bool],
) -> TrialFronts:
    """Each trial's front (final values) and best front (any epoch), by the module's rules.

    Args:
        finals: COMPLETE trial -> its final values.
        reported: trial -> every ``(epoch, values)`` it reported, in epoch order, its final
            values last when it has them (their epoch: its last one, ``None`` without).
        minimize: per objective, whether lower is better.
    """
    front = {n: r for n, r in front_ranks(finals, minimize, infinite=True).items()
             if r is not None}
    offered: dict[int, Point] = {}  # key -> point, over every trial
    owner: dict[int, tuple[int, int | None]] = {}  # key -> (trial, epoch)
    for number, points in reported.items():
        own: dict[int, Point] = {}  # the trial's distinct points without NaN, earliest kept
        steps: dict[int, int | None] = {}
        for step, values in points:
            point = tuple(float(v) for v in values)
            if not any(math.isnan(v) for v in point) and point not in own.values():
                steps[len(own)] = step
                own[len(own)] = point
        for k in (nondominated_fronts(own, minimize, infinite=True)[0] if own else []):
            key = len(offered)
            offered[key], owner[key] = own[k], (number, steps[k])
    best_front: dict[int, int] = {}
    best_step: dict[int, int | None] = {}
    best_point: dict[int, Point] = {}
    for key, rank in sorted(front_ranks(offered, minimize, infinite=True).items()):
        number, step = owner[key]
        if rank is not None and rank < best_front.get(number, rank + 1):
            best_front[number], best_step[number], best_point[number] = rank, step, offered[key]
    return TrialFronts(front, best_front, best_step, best_point)


class HypervolumeTrace:
    """The hypervolume of the points added so far, added one at a time (in time order).

    Only the points no other dominates are kept, so each addition costs one hypervolume of the
    current front, not of every point so far.

    Args:
        reference: the reference point (see the module docstring).
        minimize: per objective, whether lower is better.

    Example::

        >>> trace = HypervolumeTrace((3.0, 3.0), (True, True))
        >>> trace.add((1.0, 2.0)), trace.add((2.0, 1.0)), trace.value, trace.size
        (True, True, 3.0, 2)
    """

    def __init__(self, reference: Sequence[float], minimize: Sequence[bool]) -> None:
        self.reference = tuple(reference)
        self.minimize = tuple(minimize)
        self.value = 0.0
        self._front: list[Point] = []

    @property
    def size(self) -> int:
        """How many points no other point added so far dominates (equal points once)."""
        return len(self._front)

    def add(self, point: Sequence[float]) -> bool:
        """Add a point; whether the hypervolume grew (a NaN or infinite point adds nothing)."""
        values = tuple(float(v) for v in point)
        if not is_finite_point(values) or any(
            q == values or dominates(q, values, self.minimize) for q in self._front
        ):
            return False
        self._front = [q for q in self._front if not dominates(values, q, self.minimize)]
        self._front.append(values)
        grown = hypervolume(self._front, self.reference, self.minimize)
        improved = grown > self.value
        self.value = max(grown, self.value)
        return improved
