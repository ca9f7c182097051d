"""The launcher's pausing schedules: which job a free slot takes next. Pure logic, no I/O.

A *schedule* looks at every trial of the study (:class:`TrialView`: its state, the epochs it has
done, its intermediate values, its round or bracket) and answers one :class:`Decision`: a
:class:`Job` for the free slot (start a new configuration, resume a paused trial to some epoch,
wait, or nothing more to do) and the paused trials that can never be promoted, which the caller
ends PRUNED (deleting their checkpoints). The caller keeps every piece of state in the Optuna
storage, so any launcher, after any crash, computes the same decision from the same trials.

* :class:`StopSchedule`: today's behaviour; trials run to ``max_epochs`` and a pruner stops them.
* :class:`SyncSuccessiveHalving` and :class:`SyncHyperband`: synchronous successive halving in
  rounds, the textbook scheduler (Jamieson and Talwalkar, AISTATS 2016; brackets as in Li et al.,
  "Hyperband", JMLR 2018).
* :class:`PromotionASHA` and :class:`PromotionHyperband`: promotion-type ASHA (Li et al., "A
  System for Massively Parallel Hyperparameter Tuning", MLSys 2020, Algorithm 2).

Every schedule resumes *interrupted* trials first (paused with a ``target``: cut short by the
wall-clock budget, Ctrl-C or a crash), lowest trial number first, to that target. Rankings at a
rung put NaN and infinite values last and break ties by the lower trial number. Epochs are counted
from 1, as the intermediate values' steps; rungs come from :mod:`lightning_hpo.rungs`.

Example::

    >>> sync_plan(2, 10, 2)   # (rung in epochs, configurations) of one round
    [(2, 8), (4, 4), (8, 2), (10, 1)]
    >>> round_epochs(sync_plan(2, 10, 2), resume=True), round_epochs(sync_plan(2, 10, 2), False)
    (34, 58)
    >>> schedule = SyncSuccessiveHalving(2, 10, 2)
    >>> schedule.decide([], tickets=8, next_number=0).job
    Job(kind='start', trial=None, to_epoch=2, group=0, from_scratch=False)
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from bisect import bisect_right
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, get_args

from lightning_hpo import rungs

__all__ = [
    "Decision",
    "Job",
    "PromotionASHA",
    "PromotionHyperband",
    "Schedule",
    "State",
    "StopSchedule",
    "SyncHyperband",
    "SyncSuccessiveHalving",
    "TrialView",
    "hyperband_rounds",
    "promotable",
    "round_epochs",
    "sync_plan",
]

#: A trial's state as a schedule sees it: Optuna's, plus ``"paused"`` (RUNNING in Optuna with
#: :data:`ATTR.PAUSED <lightning_hpo.schema.ATTR>` set).
State = Literal["waiting", "running", "paused", "complete", "pruned", "fail"]
_STATES: tuple[str, ...] = get_args(State)
_FINISHED = frozenset({"complete", "pruned", "fail"})
JobKind = Literal["start", "resume", "wait", "done"]
_JOB_KINDS: tuple[str, ...] = get_args(JobKind)


@dataclass(frozen=True)
class TrialView:
    """One trial as a schedule sees it.

    Attributes:
        number: the Optuna trial number (``>= 0``).
        state: see :data:`State`.
        epoch: epochs done: for a paused trial, the epochs in its checkpoint; for a running one,
            its last report (0 before the first).
        values: intermediate values by epoch (steps from 1); may hold epochs that are no rung.
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
    values: Mapping[int, float] = field(default_factory=dict)
    group: int | None = None
    target: int | None = None

    def __post_init__(self) -> None:
        _check_int("number", self.number, 0)
        if self.state not in _STATES:
            raise ValueError(
                f"The value of `state` is {self.state!r}, but must be one of {list(_STATES)}."
            )
        _check_int("epoch", self.epoch, 0)
        if self.group is not None:
            _check_int("group", self.group, 0)
        if self.target is not None:
            _check_int("target", self.target, 1)

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
            _check_int("to_epoch", self.to_epoch, 1)
        if self.kind == "resume":
            if self.trial is None:
                raise ValueError("The value of `trial` is None, but a 'resume' job needs the "
                                 "trial number.")
            _check_int("trial", self.trial, 0)


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


# --------------------------------------------------------------------------------------------
# Pure helpers


def sync_plan(
    min_resource: int,
    max_resource: int,
    reduction_factor: int,
    prefact: int = 1,
    *,
    configs: int | None = None,
) -> list[tuple[int, int]]:
    """One synchronous successive-halving round: ``(rung in epochs, configurations)`` pairs.

    Rungs are ``min_resource * reduction_factor**k`` up to ``max_resource``, which is appended
    when it is not one of them (:func:`lightning_hpo.rungs.rung_levels`, exact integers). The
    round starts ``prefact * reduction_factor**K`` configurations (``K`` = rungs - 1), and each
    rung keeps ``floor(held / reduction_factor)`` of the ``held`` ones.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``).
        reduction_factor: keep one in ``reduction_factor`` at each rung (``>= 2``).
        prefact: configurations per round, as a multiple of ``reduction_factor**K`` (``>= 1``).
        configs: start this many instead (a round cut short by ``n_trials``; ``>= 0``).

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> sync_plan(2, 10, 2)
        [(2, 8), (4, 4), (8, 2), (10, 1)]
        >>> sync_plan(1, 10, 3)
        [(1, 27), (3, 9), (9, 3), (10, 1)]
        >>> sync_plan(1, 1000, 10, prefact=2)
        [(1, 2000), (10, 200), (100, 20), (1000, 2)]
        >>> sync_plan(2, 10, 2, configs=5)   # a cut-short round
        [(2, 5), (4, 2), (8, 1), (10, 0)]
    """
    levels = _ladder(min_resource, max_resource, reduction_factor)
    _check_int("prefact", prefact, 1)
    held = prefact * reduction_factor ** (len(levels) - 1)
    if configs is not None:
        _check_int("configs", configs, 0)
        held = configs
    plan = []
    for level in levels:
        plan.append((level, held))
        held //= reduction_factor
    return plan


def round_epochs(plan: Sequence[tuple[int, int]], resume: bool) -> int:
    """Epochs one synchronous round trains, for a :func:`sync_plan`.

    With ``resume``, a promoted configuration continues from its checkpoint and trains only the
    epochs between its rungs; without, it retrains from epoch 0 up to the next rung, as the
    textbook code does.

    Example::

        >>> plan = sync_plan(2, 10, 2)
        >>> round_epochs(plan, resume=True), round_epochs(plan, resume=False)
        (34, 58)
    """
    total, previous = 0, 0
    for level, configs in plan:
        total += configs * (level - previous if resume else level)
        previous = level
    return total


def hyperband_rounds(
    min_resource: int, max_resource: int, reduction_factor: int, prefact: int = 1
) -> list[tuple[list[int], int]]:
    """Synchronous Hyperband's brackets, ``(rungs in epochs, configurations)``, in round order.

    With the full ladder's ``s_max + 1`` rungs (:func:`sync_plan`), round ``j`` runs bracket
    ``s = s_max - (j mod (s_max + 1))``: the ladder without its first ``s_max - s`` rungs,
    started with ``prefact * ceil((s_max + 1) / (s + 1) * reduction_factor**s)`` configurations
    (Li et al., JMLR 2018, Algorithm 1, in exact integers). The list holds one full cycle,
    the most aggressive bracket first.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> for ladder, configs in hyperband_rounds(1, 27, 3):
        ...     print(ladder, configs)
        [1, 3, 9, 27] 27
        [3, 9, 27] 12
        [9, 27] 6
        [27] 4
    """
    levels = _ladder(min_resource, max_resource, reduction_factor)
    _check_int("prefact", prefact, 1)
    s_max = len(levels) - 1
    rounds = []
    for s in range(s_max, -1, -1):
        configs = -(-((s_max + 1) * reduction_factor**s) // (s + 1))  # exact ceil
        rounds.append((levels[s_max - s :], prefact * configs))
    return rounds


def promotable(
    values_at_rung: Mapping[int, float],
    paused: Collection[int],
    reduction_factor: int,
    minimize: bool,
) -> list[int]:
    """Promotion-type ASHA's choice on one rung: the paused trials in its top ``floor(n / eta)``.

    Li et al., MLSys 2020, Algorithm 2: of the ``n`` trials with a value at the rung, the best
    ``floor(n / reduction_factor)`` are candidates, and those not yet promoted (here: ``paused``
    at this rung) may be promoted. Ranked best first; ties go to the lower trial number; NaN and
    infinite values rank last.

    Args:
        values_at_rung: each trial's value at the rung, by trial number.
        paused: trial numbers paused at this rung, not yet promoted; others are ignored.
        reduction_factor: ``eta`` (``>= 2``).
        minimize: lower values are better; ``False``: higher are.

    Example::

        >>> rung = {0: 0.5, 1: 0.2, 2: 0.9, 3: 0.2, 4: 0.7, 5: 0.1}
        >>> promotable(rung, paused={1, 2, 3, 4}, reduction_factor=2, minimize=True)
        [1, 3]
        >>> promotable(rung, paused={1, 2, 3, 4}, reduction_factor=2, minimize=False)
        [2, 4]
    """
    _check_int("reduction_factor", reduction_factor, 2)
    top = _ranked(values_at_rung, minimize)[: len(values_at_rung) // reduction_factor]
    paused_set = set(paused)
    return [number for number in top if number in paused_set]


def _ranked(values: Mapping[int, float], minimize: bool) -> list[int]:
    """Trial numbers best first; NaN and infinite values last; ties by lower number."""
    return sorted(values, key=lambda number: _rank_key(number, values[number], minimize))


def _rank_key(number: int, value: float | None, minimize: bool) -> tuple[int, float, int]:
    if value is None or not math.isfinite(value):
        return (1, 0.0, number)
    return (0, value if minimize else -value, number)


# --------------------------------------------------------------------------------------------
# Stop


class StopSchedule(Schedule):
    """Today's behaviour: every trial trains to ``max_epochs`` unless a pruner stops it.

    Interrupted trials are resumed first (lowest number first) to their target; a trial paused
    at a rung (only left by a pausing schedule the study ran before) continues to
    ``max_epochs``; otherwise a new configuration starts while tickets last; then ``"done"``.

    Args:
        max_epochs: the epochs a trial trains (``>= 1``).

    Example::

        >>> schedule = StopSchedule(9)
        >>> schedule.decide([], tickets=None, next_number=0).job
        Job(kind='start', trial=None, to_epoch=9, group=None, from_scratch=False)
        >>> schedule.decide([TrialView(0, "paused", epoch=3, target=9)], tickets=0,
        ...                 next_number=1).job
        Job(kind='resume', trial=0, to_epoch=9, group=None, from_scratch=False)
        >>> schedule.decide([TrialView(0, "running", epoch=3)], tickets=0, next_number=1).job
        Job(kind='done', trial=None, to_epoch=None, group=None, from_scratch=False)
    """

    name = "stop"

    def __init__(self, max_epochs: int) -> None:
        _check_int("max_epochs", max_epochs, 1)
        self.max_epochs = max_epochs

    def ladders(self) -> list[list[int]]:
        """One ladder, ``[max_epochs]``: the pruner's rungs are its own."""
        return [[self.max_epochs]]

    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """Resume interrupted, then rung-paused trials; else start; else ``"done"``."""
        _check_call(trials, tickets, next_number)
        resume = _first_interrupted(trials)
        if resume is not None:
            return Decision(resume)
        for trial in sorted(trials, key=lambda t: t.number):
            if trial.at_rung and trial.epoch < self.max_epochs:
                return Decision(Job("resume", trial=trial.number, to_epoch=self.max_epochs))
        if _has_tickets(tickets):
            return Decision(Job("start", to_epoch=self.max_epochs))
        return Decision(Job("done"))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(max_epochs={self.max_epochs})"


# --------------------------------------------------------------------------------------------
# Synchronous successive halving and Hyperband


@dataclass
class _RoundState:
    """What one synchronous round needs: a resume, more members, a wait, or nothing."""

    resume: Job | None = None
    fill: bool = False
    waiting: bool = False
    prune: dict[int, str] = field(default_factory=dict)


class _Synchronous(Schedule):
    """Rounds of synchronous successive halving; subclasses say each round's ladder and size."""

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int,
        prefact: int,
        resume: bool,
        minimize: bool,
    ) -> None:
        self._levels = _ladder(min_resource, max_resource, reduction_factor)
        _check_int("prefact", prefact, 1)
        _check_bool("resume", resume)
        _check_bool("minimize", minimize)
        self.min_resource = min_resource
        self.max_resource = max_resource
        self.reduction_factor = reduction_factor
        self.prefact = prefact
        self.resume = resume
        self.minimize = minimize

    @abstractmethod
    def round_plan(self, round_index: int) -> tuple[list[int], int]:
        """Round ``round_index``'s rungs (epochs) and its configurations at the first rung."""

    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """Interrupted first; then the rounds in order (see the class docstring)."""
        _check_call(trials, tickets, next_number)
        rounds: dict[int, list[TrialView]] = {}
        for trial in trials:
            if trial.group is not None:
                rounds.setdefault(trial.group, []).append(trial)
        current = max(rounds, default=-1)
        states = {
            index: self._round_state(index, sorted(members, key=lambda t: t.number),
                                     closed=index < current or not _has_tickets(tickets))
            for index, members in sorted(rounds.items())
        }
        prune: dict[int, str] = {}
        for state in states.values():
            prune.update(state.prune)

        job = _first_interrupted(trials)
        if job is None:
            job = next((s.resume for s in states.values() if s.resume is not None), None)
        if job is None and current >= 0 and states[current].fill:
            job = Job("start", to_epoch=self.round_plan(current)[0][0], group=current)
        if job is None and any(s.waiting or s.fill for s in states.values()):
            job = Job("wait")
        if job is None and _has_tickets(tickets):
            job = Job("start", to_epoch=self.round_plan(current + 1)[0][0], group=current + 1)
        if job is None:
            job = Job("done")
            for trial in trials:  # strays outside any round (a changed config): study finished
                if trial.at_rung and trial.number not in prune and trial.epoch < self.max_resource:
                    prune[trial.number] = (f"paused at epoch {trial.epoch} outside any round when "
                                           "the study finished")
        return _decision(job, prune)

    def _round_state(self, index: int, members: list[TrialView], closed: bool) -> _RoundState:
        """Walk round ``index``'s rungs up to the first one that is not decided yet.

        ``closed``: the first rung takes no more members (a later round exists, or no tickets).
        """
        levels, configs = self.round_plan(index)
        eta = self.reduction_factor
        closed = closed or len(members) >= configs
        state = _RoundState()
        admitted = members
        for k, level in enumerate(levels):
            # trials promoted to this rung and paused below it: resume the best first
            resumable = [t for t in admitted if t.at_rung and t.epoch < level]
            if resumable:
                previous = levels[k - 1] if k else None
                best = min(resumable, key=lambda t: _rank_key(
                    t.number, None if previous is None else t.values.get(previous), self.minimize))
                state.resume = Job("resume", trial=best.number, to_epoch=level,
                                   from_scratch=k > 0 and not self.resume)
                return state
            if k == 0 and not closed:
                state.fill = True
                return state
            if not all(_reached(t, level) for t in admitted):
                state.waiting = True
                return state
            if k == len(levels) - 1:
                return state
            keep = len(admitted) // eta
            ranked = sorted(admitted, key=lambda t: _rank_key(
                t.number, t.values.get(level), self.minimize))
            for trial in ranked[keep:]:
                if trial.at_rung:
                    state.prune[trial.number] = (
                        f"not promoted at rung {level} (round {index}: {keep} of "
                        f"{len(admitted)} go on)")
            if keep == 0:
                return state
            admitted = ranked[:keep]
        return state


class SyncSuccessiveHalving(_Synchronous):
    """Synchronous successive halving in rounds, the textbook scheduler.

    Rungs are ``min_resource * reduction_factor**k`` epochs, ``max_resource`` appended when it is
    not one (``K + 1`` rungs, ``K`` computed in integers). Round ``j`` (a trial's ``group``)
    starts ``n0 = prefact * reduction_factor**K`` configurations at the first rung; once every
    trial at rung ``k`` has its value there (or has finished), the best
    ``floor(held / reduction_factor)`` go on to rung ``k + 1``, best first, resumed from their
    checkpoint (or retrained from epoch 0 with ``resume=False``), and the others, paused, are
    pruned. The round ends at its top rung, or at a rung that promotes no one; then round
    ``j + 1`` starts. Strictly synchronous: a slot waits while a rung waits on running trials.
    When tickets run out before ``n0`` configurations, the round keeps ``floor(held / eta)`` of
    what it holds at each rung. Jamieson and Talwalkar, AISTATS 2016; Li et al., JMLR 2018.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``).
        reduction_factor: keep one in ``reduction_factor`` at each rung (``>= 2``).
        prefact: configurations per round, as a multiple of ``reduction_factor**K`` (``>= 1``).
        resume: continue promoted trials from their checkpoint; ``False`` retrains them from
            epoch 0, as the textbook code does (58 instead of 34 epochs for rungs 2, 4, 8, 10).
        minimize: lower values are better; ``False``: higher are.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> schedule = SyncSuccessiveHalving(2, 10, 2)
        >>> schedule.ladders(), schedule.round_plan(0)
        ([[2, 4, 8, 10]], ([2, 4, 8, 10], 8))
        >>> values = {n: {1: 1.0, 2: float(n)} for n in range(8)}   # trial 0 best
        >>> round0 = [TrialView(n, "paused", 2, values[n], group=0) for n in range(8)]
        >>> decision = schedule.decide(round0, tickets=0, next_number=8)
        >>> decision.job, decision.prune
        (Job(kind='resume', trial=0, to_epoch=4, group=None, from_scratch=False), (4, 5, 6, 7))
    """

    name = "sync_sh"

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int,
        prefact: int = 1,
        resume: bool = True,
        minimize: bool = True,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, prefact, resume, minimize)
        self._configs = sync_plan(min_resource, max_resource, reduction_factor, prefact)[0][1]

    def ladders(self) -> list[list[int]]:
        """The one ladder every round climbs."""
        return [list(self._levels)]

    def round_plan(self, round_index: int) -> tuple[list[int], int]:
        """Every round: the full ladder and ``prefact * reduction_factor**K`` configurations."""
        _check_int("round_index", round_index, 0)
        return list(self._levels), self._configs

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(min_resource={self.min_resource}, max_resource="
                f"{self.max_resource}, reduction_factor={self.reduction_factor}, prefact="
                f"{self.prefact}, resume={self.resume}, minimize={self.minimize})")


class SyncHyperband(_Synchronous):
    """Synchronous Hyperband: rounds of :class:`SyncSuccessiveHalving`, one bracket each.

    Round ``j`` runs bracket ``s = s_max - (j mod (s_max + 1))`` (``s_max + 1`` rungs in the full
    ladder): its rungs are the full ladder without the first ``s_max - s``, and it starts
    ``prefact * ceil((s_max + 1) / (s + 1) * reduction_factor**s)`` configurations
    (:func:`hyperband_rounds`). Li et al., "Hyperband", JMLR 2018.

    Args:
        min_resource: the first rung of the most aggressive bracket, in epochs (``>= 1``).
        max_resource: every bracket's last rung, in epochs (``>= min_resource``).
        reduction_factor: keep one in ``reduction_factor`` at each rung (``>= 2``).
        prefact: multiplies every bracket's configurations (``>= 1``).
        resume: continue promoted trials from their checkpoint (``False``: retrain).
        minimize: lower values are better; ``False``: higher are.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> schedule = SyncHyperband(1, 27, 3)
        >>> [schedule.round_plan(j)[1] for j in range(5)]
        [27, 12, 6, 4, 27]
        >>> schedule.round_plan(2)
        ([9, 27], 6)
    """

    name = "sync_hyperband"

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int,
        prefact: int = 1,
        resume: bool = True,
        minimize: bool = True,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, prefact, resume, minimize)
        self._rounds = hyperband_rounds(min_resource, max_resource, reduction_factor, prefact)

    def ladders(self) -> list[list[int]]:
        """Each bracket's rungs, in round order: round ``j`` uses ``[j % len(...)]``."""
        return [list(levels) for levels, _ in self._rounds]

    def round_plan(self, round_index: int) -> tuple[list[int], int]:
        """Round ``round_index``'s bracket: its rungs and configurations."""
        _check_int("round_index", round_index, 0)
        levels, configs = self._rounds[round_index % len(self._rounds)]
        return list(levels), configs

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(min_resource={self.min_resource}, max_resource="
                f"{self.max_resource}, reduction_factor={self.reduction_factor}, prefact="
                f"{self.prefact}, resume={self.resume}, minimize={self.minimize})")


# --------------------------------------------------------------------------------------------
# Promotion-type ASHA and Hyperband


class _Promotion(Schedule):
    """Promotion-type ASHA over one or more brackets (Li et al., MLSys 2020, Algorithm 2)."""

    _grouped = False  # whether a start job carries the new trial's bracket

    def __init__(
        self, min_resource: int, max_resource: int, reduction_factor: int, minimize: bool,
        max_paused: int | None = None,
    ) -> None:
        self._levels = _ladder(min_resource, max_resource, reduction_factor)
        _check_bool("minimize", minimize)
        if max_paused is not None:
            _check_int("max_paused", max_paused, 1)
        self.min_resource = min_resource
        self.max_resource = max_resource
        self.reduction_factor = reduction_factor
        self.minimize = minimize
        self.max_paused = max_paused

    @abstractmethod
    def _bracket(self, trial_number: int, group: int | None) -> int:
        """The bracket of a trial (its ``group`` when it has one)."""

    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """Interrupted first; then a promotion from the top rung down; else start; else wait.

        With ``tickets`` bounded, paused trials that can no longer enter their rung's top
        ``floor(n / eta)`` (however the remaining trials fare) are pruned at once; at ``"done"``
        every paused trial is. With ``max_paused``, the paused trials beyond it are pruned, least
        promotable first (:meth:`_beyond_limit`).
        """
        _check_call(trials, tickets, next_number)
        ladders = self.ladders()
        eta = self.reduction_factor
        brackets: list[list[TrialView]] = [[] for _ in ladders]
        for trial in trials:
            brackets[self._bracket(trial.number, trial.group)].append(trial)
        prune = self._unpromotable(brackets, tickets) if tickets is not None else {}

        job = _first_interrupted(trials)
        if job is None:  # paused at a rung below its first rung: it has to get there first
            for trial in sorted(trials, key=lambda t: t.number):
                first = ladders[self._bracket(trial.number, trial.group)][0]
                if trial.at_rung and trial.epoch < first:
                    job = Job("resume", trial=trial.number, to_epoch=first)
                    break
        if job is None:
            for level, b, k in sorted(
                ((level, b, k) for b, levels in enumerate(ladders)
                 for k, level in enumerate(levels[:-1])),
                key=lambda item: (-item[0], item[1]),
            ):
                levels = ladders[b]
                values = {t.number: t.values[level] for t in brackets[b] if level in t.values}
                paused = [t.number for t in brackets[b] if _paused_at(t, levels, k)]
                choice = promotable(values, paused, eta, self.minimize)
                if choice:
                    job = Job("resume", trial=choice[0], to_epoch=levels[k + 1])
                    break
        if job is None and _has_tickets(tickets):
            bracket = self._bracket(next_number, None)
            job = Job("start", to_epoch=ladders[bracket][0],
                      group=bracket if self._grouped else None)
        if job is None and any(t.state in ("running", "waiting") for t in trials):
            job = Job("wait")
        if job is None:
            job = Job("done")
            for b, members in enumerate(brackets):
                for trial in members:
                    if trial.at_rung and trial.number not in prune:
                        k = bisect_right(ladders[b], trial.epoch) - 1
                        if trial.epoch < ladders[b][-1]:
                            prune[trial.number] = (f"not promoted at rung {ladders[b][k]} when "
                                                   "the study finished")
        elif self.max_paused is not None:
            prune.update(self._beyond_limit(brackets, prune, job.trial))
        return _decision(job, prune)

    def _beyond_limit(
        self, brackets: list[list[TrialView]], prune: Mapping[int, str], resumed: int | None
    ) -> dict[int, str]:
        """The paused trials to prune so that at most ``max_paused`` wait at a rung.

        Without a bound on the trials to come, any paused trial may still be promoted one day
        (``floor(n / eta)`` grows with ``n``), so its checkpoint would be kept for ever. A trial
        with ``above`` trials ranked above it among the ``n`` values at its rung becomes
        promotable only once ``eta * (above + 1) - n`` more trials reach the rung below it: the
        ones needing the most are pruned first (then the lower rung, then the newer trial).
        Trials already pruned and the one resumed now do not count.
        """
        assert self.max_paused is not None
        ladders = self.ladders()
        eta = self.reduction_factor
        waiting: list[tuple[int, int, int, str]] = []  # (needed, level, number, reason)
        for b, members in enumerate(brackets):
            levels = ladders[b]
            for k, level in enumerate(levels[:-1]):
                here = [t for t in members if _paused_at(t, levels, k)
                        and t.number not in prune and t.number != resumed]
                if not here:
                    continue
                values = {t.number: t.values[level] for t in members if level in t.values}
                position = {number: i for i, number in enumerate(_ranked(values, self.minimize))}
                for trial in here:
                    above = position.get(trial.number, len(values))
                    needed = max(0, eta * (above + 1) - len(values))
                    waiting.append((needed, level, trial.number, (
                        f"not promoted at rung {level}: {above} of {len(values)} rank above it, "
                        f"{needed} more trials must reach the rung below it first; at most "
                        f"{self.max_paused} paused trials are kept (max_paused)")))
        excess = len(waiting) - self.max_paused
        if excess <= 0:
            return {}
        waiting.sort(key=lambda w: (-w[0], w[1], -w[2]))
        return {number: reason for _, _, number, reason in waiting[:excess]}

    def _unpromotable(
        self, brackets: list[list[TrialView]], tickets: int
    ) -> dict[int, str]:
        """Paused trials that can never enter the top ``floor(n_max / eta)`` of their rung.

        ``n_max`` = the values at the rung now, plus every trial of the bracket that may still
        reach it (running, waiting or paused below it), plus every ticket. Values at a rung are
        never removed, so the trials ranked above one (strictly better, or tied and earlier)
        only grow: once they are ``>= n_max // eta``, it can never be promoted.
        """
        ladders = self.ladders()
        eta = self.reduction_factor
        prune: dict[int, str] = {}
        for b, members in enumerate(brackets):
            levels = ladders[b]
            for k, level in enumerate(levels[:-1]):  # bottom up: the pruned reach no higher
                waiting_here = [t for t in members if _paused_at(t, levels, k)]
                if not waiting_here:
                    continue
                values = {t.number: t.values[level] for t in members if level in t.values}
                below = sum(1 for t in members if t.state in ("running", "waiting", "paused")
                            and t.epoch < level and level not in t.values
                            and t.number not in prune)
                n_max = len(values) + below + tickets
                # rank keys are unique (the trial number breaks ties): position = trials above
                position = {number: i for i, number in enumerate(_ranked(values, self.minimize))}
                for trial in waiting_here:
                    above = position.get(trial.number, len(values))  # no value: never ranks
                    if above >= n_max // eta:
                        prune[trial.number] = (
                            f"cannot be promoted at rung {level}: {above} rank above it, and at "
                            f"most {n_max} trials reach the rung ({n_max // eta} go on)")
        return prune


class PromotionASHA(_Promotion):
    """Promotion-type ASHA: trials pause at each rung; a free slot promotes before it starts.

    Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020, Algorithm 2.
    A trial trains to its next rung and pauses there. A free slot looks from the top rung down
    for a paused trial among the best ``floor(n / reduction_factor)`` of the ``n`` values at that
    rung (:func:`promotable`; promoted or not, every trial that reached the rung counts) and
    resumes the best such one to the next rung; only when there is none does it start a new
    configuration at the first rung. With no ticket left it waits while anything runs; then it
    is ``"done"`` and every paused trial is pruned. With a bounded number of tickets, a paused
    trial that can never be promoted is pruned as soon as that is certain (bounded disk).

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``); a trial reaching it is
            complete.
        reduction_factor: promote one in ``reduction_factor`` at each rung (``>= 2``).
        minimize: lower values are better; ``False``: higher are.
        max_paused: keep at most this many trials paused at a rung (``>= 1``; their
            checkpoints are on disk): beyond it the least promotable are pruned. ``None``: no
            bound (the paper's algorithm; with only a wall-clock budget, every trial ever
            paused keeps its checkpoint until the study ends).

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> schedule = PromotionASHA(1, 9, 3)
        >>> rung1 = [TrialView(n, "paused", 1, {1: v}) for n, v in enumerate([0.5, 0.2, 0.9])]
        >>> schedule.decide(rung1, tickets=5, next_number=3).job   # trial 1 is the best of 3
        Job(kind='resume', trial=1, to_epoch=3, group=None, from_scratch=False)
        >>> schedule.decide(rung1[:2], tickets=5, next_number=2).job   # floor(2 / 3) = 0
        Job(kind='start', trial=None, to_epoch=1, group=None, from_scratch=False)
    """

    name = "promotion_asha"

    def __init__(
        self, min_resource: int, max_resource: int, reduction_factor: int, minimize: bool = True,
        max_paused: int | None = None,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, minimize, max_paused)

    def ladders(self) -> list[list[int]]:
        """The one ladder."""
        return [list(self._levels)]

    def _bracket(self, trial_number: int, group: int | None) -> int:
        return 0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(min_resource={self.min_resource}, max_resource="
                f"{self.max_resource}, reduction_factor={self.reduction_factor}, "
                f"minimize={self.minimize}, max_paused={self.max_paused})")


class PromotionHyperband(_Promotion):
    """Promotion-type Hyperband: :class:`PromotionASHA` in brackets, as the Hyperband pruner.

    Bracket ``b`` (``0 <= b < floor(log_eta(max_resource / min_resource)) + 1``) starts at
    ``min_resource * reduction_factor**b`` epochs; a new trial's bracket is
    :func:`lightning_hpo.rungs.bracket_of` of the study name and its number with
    :func:`~lightning_hpo.rungs.trial_allocation_budgets`, exactly as
    :class:`~lightning_hpo.pruners.HyperbandPruner` assigns it, and comes back as the start job's
    ``group``. A trial's ``group`` is its bracket (computed the same way when ``None``). A free
    slot looks for a promotion across brackets, highest rung level first (the lower bracket
    first on equal levels), each bracket ranking its own trials. Li et al., JMLR 2018 and MLSys
    2020.

    Args:
        min_resource: the first rung of bracket 0, in epochs (``>= 1``).
        max_resource: every bracket's last rung, in epochs (``>= min_resource``).
        reduction_factor: promote one in ``reduction_factor`` at each rung (``>= 2``).
        minimize: lower values are better; ``False``: higher are.
        study_name: the Optuna study's name (brackets hash it with the trial number).
        max_paused: as :class:`PromotionASHA`'s, over all brackets.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> schedule = PromotionHyperband(1, 9, 3, study_name="demo")
        >>> schedule.ladders()
        [[1, 3, 9], [3, 9], [9]]
        >>> job = schedule.decide([], tickets=1, next_number=0).job
        >>> job.to_epoch == schedule.ladders()[job.group][0]
        True
    """

    name = "promotion_hyperband"
    _grouped = True

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int,
        minimize: bool = True,
        study_name: str = "",
        max_paused: int | None = None,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, minimize, max_paused)
        if not isinstance(study_name, str):
            raise ValueError(f"The value of `study_name` is {study_name!r}, but must be a str.")
        self.study_name = study_name
        self._budgets = rungs.trial_allocation_budgets(min_resource, max_resource,
                                                       reduction_factor)
        self._ladders = [self._levels[b:] for b in range(len(self._budgets))]

    def ladders(self) -> list[list[int]]:
        """Bracket ``b``'s rungs at ``[b]``, as ``HyperbandPruner.bracket_levels(b)``."""
        return [list(levels) for levels in self._ladders]

    @property
    def budgets(self) -> list[int]:
        """Each bracket's share of new trials (Optuna's allocation)."""
        return list(self._budgets)

    def _bracket(self, trial_number: int, group: int | None) -> int:
        if group is not None and group < len(self._ladders):
            return group
        return rungs.bracket_of(self.study_name, trial_number, self._budgets)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(min_resource={self.min_resource}, max_resource="
                f"{self.max_resource}, reduction_factor={self.reduction_factor}, "
                f"minimize={self.minimize}, study_name={self.study_name!r}, "
                f"max_paused={self.max_paused})")


# --------------------------------------------------------------------------------------------
# Shared private helpers


def _reached(trial: TrialView, level: int) -> bool:
    """Whether a trial is done with rung ``level``: a value there, finished, or paused past it."""
    return (level in trial.values or trial.state in _FINISHED
            or (trial.at_rung and trial.epoch >= level))


def _paused_at(trial: TrialView, levels: Sequence[int], k: int) -> bool:
    """Paused at rung ``k`` (``levels[k] <= epoch < levels[k + 1]``), waiting for a promotion."""
    return (trial.at_rung and levels[k] <= trial.epoch
            and (k + 1 == len(levels) or trial.epoch < levels[k + 1]))


def _first_interrupted(trials: Iterable[TrialView]) -> Job | None:
    """Resume the interrupted trial with the lowest number to its target, if any."""
    interrupted = [t for t in trials if t.interrupted]
    if not interrupted:
        return None
    first = min(interrupted, key=lambda t: t.number)
    return Job("resume", trial=first.number, to_epoch=first.target)


def _decision(job: Job, prune: Mapping[int, str]) -> Decision:
    numbers = tuple(sorted(prune))
    return Decision(job, numbers, {number: prune[number] for number in numbers})


def _has_tickets(tickets: int | None) -> bool:
    return tickets is None or tickets > 0


def _ladder(min_resource: int, max_resource: int, reduction_factor: int) -> list[int]:
    _check_int("min_resource", min_resource, 1)
    _check_int("max_resource", max_resource, 1)
    _check_int("reduction_factor", reduction_factor, 2)
    return rungs.rung_levels(min_resource, reduction_factor, max_resource)


def _check_call(trials: Sequence[TrialView], tickets: int | None, next_number: int) -> None:
    if tickets is not None:
        _check_int("tickets", tickets, 0)
    _check_int("next_number", next_number, 0)
    numbers = [t.number for t in trials]
    if len(set(numbers)) != len(numbers):
        duplicates = sorted({n for n in numbers if numbers.count(n) > 1})
        raise ValueError(
            f"The value of `trials` repeats trial numbers {duplicates}, but each trial must "
            "appear once."
        )


def _check_int(name: str, value: object, minimum: int) -> None:
    # bool is an int in Python; an epoch count of True is a bug, not a 1.
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ValueError(
            f"The value of `{name}` is {value!r}, but must be an integer `{name} >= {minimum}`."
        )


def _check_bool(name: str, value: object) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"The value of `{name}` is {value!r}, but must be True or False.")
