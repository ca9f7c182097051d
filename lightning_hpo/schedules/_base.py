"""What every schedule shares: the trials it sees, the job it answers, and small pure helpers.

A schedule (:class:`Schedule`) looks at every trial of the study (:class:`TrialView`) and answers
one :class:`Decision`: the free slot's :class:`Job` and the paused trials to end PRUNED. The
helpers below (interrupted trials first, rankings with NaN last and ties to the lower number,
argument checks) are the package's own; the families are in ``_stop``, ``_synchronous`` and
``_promotion``.

Example::

    >>> TrialView(3, "paused", epoch=4, values={4: 0.3}).at_rung
    True
    >>> ranked({0: 0.5, 1: float("nan"), 2: 0.2}, minimize=True)
    [2, 0, 1]
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

from lightning_hpo.errors import argument_int
from lightning_hpo.pareto import dominates_unchecked, is_finite_point, pareto_order
from lightning_hpo.pruners import rungs

__all__ = [
    "FINISHED",
    "Decision",
    "Job",
    "JobKind",
    "Minimize",
    "Schedule",
    "State",
    "TrialView",
    "Value",
    "above_for_ever",
    "check_call",
    "check_minimize",
    "decision_of",
    "first_interrupted",
    "has_tickets",
    "ladder_of",
    "rank_key",
    "ranked",
    "reached_top",
]

#: A trial's state as a schedule sees it: Optuna's, plus ``"paused"`` (RUNNING in Optuna with
#: :data:`ATTR.PAUSED <lightning_hpo.schema.ATTR>` set).
State = Literal["waiting", "running", "paused", "complete", "pruned", "fail"]
_STATES: tuple[str, ...] = get_args(State)
FINISHED = frozenset({"complete", "pruned", "fail"})
JobKind = Literal["start", "resume", "wait", "done"]
_JOB_KINDS: tuple[str, ...] = get_args(JobKind)
#: Per objective, whether lower is better: a bool for one objective, a tuple for several.
Minimize = bool | tuple[bool, ...]
#: A trial's value at an epoch: a number, or one number per objective.
Value = float | tuple[float, ...]


@dataclass(frozen=True)
class TrialView:
    """One trial as a schedule sees it.

    Attributes:
        number: the Optuna trial number (``>= 0``).
        state: see :data:`State`.
        epoch: epochs done: for a paused trial, the epochs in its checkpoint; for a running one,
            its last report (0 before the first).
        values: intermediate values by epoch (steps from 1); may hold epochs that are no rung.
            In a study with several objectives, a tuple of values per epoch.
        group: synchronous schedules: the trial's round; promotion Hyperband: its bracket;
            otherwise ``None``.
        target: a running trial: the epoch its segment trains to; a paused one: the epoch it
            must still reach after an interruption, or ``None`` when it paused at a rung and
            waits for the schedule to promote or prune it.

    Example::

        >>> trial = TrialView(3, "paused", epoch=4, values={1: 0.9, 2: 0.5, 4: 0.3}, group=0)
        >>> trial.at_rung, trial.interrupted
        (True, False)
    """

    number: int
    state: State
    epoch: int = 0
    values: Mapping[int, Value] = field(default_factory=dict)
    group: int | None = None
    target: int | None = None

    def __post_init__(self) -> None:
        argument_int("number", self.number, 0)
        if self.state not in _STATES:
            raise ValueError(
                f"The value of `state` is {self.state!r}, but must be one of {list(_STATES)}."
            )
        argument_int("epoch", self.epoch, 0)
        if self.group is not None:
            argument_int("group", self.group, 0)
        if self.target is not None:
            argument_int("target", self.target, 1)

    @property
    def interrupted(self) -> bool:
        """Paused before reaching its ``target``: resumed to it before anything else."""
        return self.state == "paused" and self.target is not None

    @property
    def at_rung(self) -> bool:
        """Paused at a rung, waiting for the schedule (``target`` is ``None``)."""
        return self.state == "paused" and self.target is None


@dataclass(frozen=True)
class Job:
    """What a free slot does next.

    Attributes:
        kind: ``"start"`` a new configuration; ``"resume"`` a paused trial; ``"wait"`` until a
            running trial reports (nothing to do now, something may come); ``"done"``: the
            schedule has no more work (the study is finished once nothing runs).
        trial: ``resume``: the trial number.
        to_epoch: ``start``/``resume``: train until this many epochs are done.
        group: ``start``: the new trial's round (synchronous schedules) or bracket (promotion
            Hyperband), to be stored on it; ``None`` otherwise.
        from_scratch: ``resume``: retrain from epoch 0 instead of continuing from the checkpoint
            (synchronous schedules with ``resume=False``).

    Example::

        >>> Job("resume", trial=5, to_epoch=8)
        Job(kind='resume', trial=5, to_epoch=8, group=None, from_scratch=False)
    """

    kind: JobKind
    trial: int | None = None
    to_epoch: int | None = None
    group: int | None = None
    from_scratch: bool = False

    def __post_init__(self) -> None:
        if self.kind not in _JOB_KINDS:
            raise ValueError(
                f"The value of `kind` is {self.kind!r}, but must be one of {list(_JOB_KINDS)}."
            )
        if self.kind in ("start", "resume"):
            if self.to_epoch is None:
                raise ValueError(f"The value of `to_epoch` is None, but a {self.kind!r} job needs "
                                 "an integer `to_epoch >= 1`.")
            argument_int("to_epoch", self.to_epoch, 1)
        if self.kind == "resume":
            if self.trial is None:
                raise ValueError("The value of `trial` is None, but a 'resume' job needs the "
                                 "trial number.")
            argument_int("trial", self.trial, 0)


@dataclass(frozen=True)
class Decision:
    """A schedule's answer: the slot's :class:`Job`, and the paused trials to end PRUNED.

    Attributes:
        job: what the free slot does.
        prune: paused trials that can never be promoted; the caller ends them PRUNED and deletes
            their checkpoints. Given with any job, ascending.
        reasons: why, per pruned trial (``"not promoted at rung 4 (round 0: 2 of 4 go on)"``).
    """

    job: Job
    prune: tuple[int, ...] = ()
    reasons: Mapping[int, str] = field(default_factory=dict)


class Schedule(ABC):
    """Decides the next job of a free slot from the trials of the study alone.

    Subclasses are pure: :meth:`decide` reads nothing but its arguments, so two launchers on one
    storage (or one launcher restarted after ``kill -9``) reach the same decision.
    """

    #: The schedule's name in reports (``"stop"``, ``"sync_sh"``, ...).
    name: str

    @abstractmethod
    def ladders(self) -> list[list[int]]:
        """The rung levels (epochs) of each bracket, for reports.

        For the synchronous schedules, round ``j`` uses ``ladders()[j % len(ladders())]``; for
        promotion Hyperband, bracket ``b`` (a trial's ``group``) uses ``ladders()[b]``.
        """

    @abstractmethod
    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """The next job of a free slot.

        Args:
            trials: every trial of the study (any order).
            tickets: configurations not yet started; ``None`` when only a wall-clock budget
                bounds the study.
            next_number: the trial number a ``"start"`` job will get (Hyperband's bracket).

        Raises:
            ValueError: ``tickets`` or ``next_number`` is out of range, or two trials share a
                number.
        """


def first_interrupted(trials: Iterable[TrialView]) -> Job | None:
    """Resume the interrupted trial with the lowest number to its target, if any."""
    interrupted = [t for t in trials if t.interrupted]
    if not interrupted:
        return None
    first = min(interrupted, key=lambda t: t.number)
    return Job("resume", trial=first.number, to_epoch=first.target)


def decision_of(job: Job, prune: Mapping[int, str]) -> Decision:
    numbers = tuple(sorted(prune))
    return Decision(job, numbers, {number: prune[number] for number in numbers})


def has_tickets(tickets: int | None) -> bool:
    return tickets is None or tickets > 0


def ladder_of(min_resource: int, max_resource: int, reduction_factor: int) -> list[int]:
    argument_int("min_resource", min_resource, 1)
    argument_int("max_resource", max_resource, 1)
    argument_int("reduction_factor", reduction_factor, 2)
    return rungs.rung_levels(min_resource, max_resource=max_resource,
                             reduction_factor=reduction_factor)


def check_call(trials: Sequence[TrialView], tickets: int | None, next_number: int) -> None:
    if tickets is not None:
        argument_int("tickets", tickets, 0)
    argument_int("next_number", next_number, 0)
    numbers = [t.number for t in trials]
    if len(set(numbers)) != len(numbers):
        duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
        raise ValueError(
            f"The value of `trials` repeats trial numbers {duplicates}, but each trial must "
            "appear once."
        )


def reached_top(trials: Iterable[TrialView], max_resource: int) -> bool:
    """Whether some trial has reached ``max_resource``: a value there, or COMPLETE.

    ``finish_best`` (promotion and synchronous schedules) keeps training the best trial until
    this is true.

    Example::

        >>> reached_top([TrialView(0, "paused", 9, {9: 0.1})], 27)
        False
        >>> reached_top([TrialView(0, "running", 27, {27: 0.1}, target=27)], 27)
        True
    """
    return any(t.state == "complete" or max_resource in t.values for t in trials)


def check_minimize(minimize: Any) -> Minimize:
    """``minimize`` validated: ``True``/``False``, or a tuple of them for several objectives (a
    tuple of one is its bool).

    Raises:
        ValueError: anything else, naming ``minimize``.

    Example::

        >>> check_minimize(False), check_minimize([True, False]), check_minimize((True,))
        (False, (True, False), True)
    """
    if isinstance(minimize, bool):
        return minimize
    if (isinstance(minimize, (tuple, list)) and minimize
            and all(isinstance(m, bool) for m in minimize)):
        return minimize[0] if len(minimize) == 1 else tuple(minimize)
    raise ValueError(f"The value of `minimize` is {minimize!r}, but must be True or False, or a "
                     "tuple of them (one per objective).")


def ranked(values: Mapping[int, Value | None], minimize: Minimize) -> list[int]:
    """Trial numbers best first; NaN, infinite and missing values last; ties by lower number.

    With several objectives (``minimize`` a tuple) the order is
    :func:`lightning_hpo.pareto.pareto_order`: Pareto fronts, an epsilon-net within each.

    Example::

        >>> ranked({0: (0.5, 0.5), 1: (0.7, 0.7), 2: (0.1, 0.9), 3: None}, (True, True))
        [2, 0, 1, 3]
    """
    if isinstance(minimize, tuple):
        return pareto_order(_points(values, len(minimize)), minimize)
    return sorted(values, key=lambda number: rank_key(
        number, values[number], minimize))  # type: ignore[arg-type]


def above_for_ever(values: Mapping[int, Value | None], number: int, minimize: Minimize) -> int:
    """How many trials rank above ``number`` at a rung however many more values come.

    One objective: those ranked above it now (a value never leaves a rung, and a new one above
    it pushes it down, never up). Several: those that dominate it (their order within a front
    can change as values arrive, dominance cannot). A trial with no finite value: all others.

    Example::

        >>> above_for_ever({0: 0.1, 1: 0.2, 2: 0.3}, 2, True)
        2
        >>> above_for_ever({0: (0.1, 0.9), 1: (0.2, 0.2), 2: (0.3, 0.3)}, 2, (True, True))
        1
    """
    if not isinstance(minimize, tuple):
        return ranked(values, minimize).index(number)
    points = _points(values, len(minimize))
    if not is_finite_point(points[number]):
        return len(points) - 1
    return sum(1 for other, point in points.items()
               if other != number and is_finite_point(point)
               and dominates_unchecked(point, points[number], minimize))


def _points(values: Mapping[int, Value | None], size: int) -> dict[int, tuple[float, ...]]:
    nan = (math.nan,) * size
    return {n: nan if v is None or isinstance(v, (int, float)) else tuple(v)
            for n, v in values.items()}


def rank_key(number: int, value: float | None, minimize: bool) -> tuple[int, float, int]:
    if value is None or not math.isfinite(value):
        return (1, 0.0, number)
    return (0, value if minimize else -value, number)
