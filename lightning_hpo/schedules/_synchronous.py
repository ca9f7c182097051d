"""Synchronous successive halving and Hyperband in rounds, the textbook scheduler.

Jamieson and Talwalkar, AISTATS 2016; brackets as in Li et al., "Hyperband", JMLR 2018. Each
round's plan is :func:`lightning_hpo.pruners.rungs.successive_halving_plan` (Hyperband's rounds:
:func:`lightning_hpo.pruners.rungs.hyperband_rounds`); the schedule walks a round's rungs and
decides who
goes on once a rung is full. With ``finish_best`` (the default) a last round cut short by the
tickets still trains its best to ``max_resource`` when no trial of the study has reached it.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field

from lightning_hpo.errors import argument_bool, argument_int
from lightning_hpo.pruners import rungs
from lightning_hpo.schedules._base import (
    FINISHED,
    Decision,
    Job,
    Minimize,
    Schedule,
    TrialView,
    check_call,
    check_minimize,
    decision_of,
    first_interrupted,
    has_tickets,
    ladder_of,
    ranked,
    reached_top,
)

__all__ = ["SyncHyperband", "SyncSuccessiveHalving"]


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
        minimize: Minimize,
        finish_best: bool,
    ) -> None:
        self._levels = ladder_of(min_resource, max_resource, reduction_factor)
        argument_int("prefact", prefact, 1)
        argument_bool("resume", resume)
        minimize = check_minimize(minimize)
        argument_bool("finish_best", finish_best)
        self.min_resource = min_resource
        self.max_resource = max_resource
        self.reduction_factor = reduction_factor
        self.prefact = prefact
        self.resume = resume
        self.minimize = minimize
        self.finish_best = finish_best

    @abstractmethod
    def round_plan(self, round_index: int) -> tuple[list[int], int]:
        """Round ``round_index``'s rungs (epochs) and its configurations at the first rung."""

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(min_resource={self.min_resource}, max_resource="
                f"{self.max_resource}, reduction_factor={self.reduction_factor}, prefact="
                f"{self.prefact}, resume={self.resume}, minimize={self.minimize}, "
                f"finish_best={self.finish_best})")

    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """Interrupted first; then the rounds in order (see the class docstring)."""
        check_call(trials, tickets, next_number)
        rounds: dict[int, list[TrialView]] = {}
        for trial in trials:
            if trial.group is not None:
                rounds.setdefault(trial.group, []).append(trial)
        current = max(rounds, default=-1)
        # finish_best: the last round, once tickets are spent, while no trial reached the top
        finishing = (self.finish_best and not has_tickets(tickets)
                     and not reached_top(trials, self.max_resource))
        states = {
            index: self._round_state(index, sorted(members, key=lambda t: t.number),
                                     closed=index < current or not has_tickets(tickets),
                                     finishing=finishing and index == current)
            for index, members in sorted(rounds.items())
        }
        prune: dict[int, str] = {}
        for state in states.values():
            prune.update(state.prune)

        job = first_interrupted(trials)
        if job is None:
            job = next((s.resume for s in states.values() if s.resume is not None), None)
        if job is None and current >= 0 and states[current].fill:
            job = Job("start", to_epoch=self.round_plan(current)[0][0], group=current)
        if job is None and any(s.waiting or s.fill for s in states.values()):
            job = Job("wait")
        if job is None and has_tickets(tickets):
            job = Job("start", to_epoch=self.round_plan(current + 1)[0][0], group=current + 1)
        if job is None:
            job = Job("done")
            for trial in trials:  # strays outside any round (a changed config): study finished
                if trial.at_rung and trial.number not in prune and trial.epoch < self.max_resource:
                    prune[trial.number] = (f"paused at epoch {trial.epoch} outside any round when "
                                           "the study finished")
        return decision_of(job, prune)

    def _round_state(
        self, index: int, members: list[TrialView], closed: bool, finishing: bool
    ) -> _RoundState:
        """Walk round ``index``'s rungs up to the first one that is not decided yet.

        ``closed``: the first rung takes no more members (a later round exists, or no tickets).
        ``finishing``: the last round, tickets spent, ``finish_best`` and no trial of the study
        at ``max_resource``: cut short (fewer members than planned), the round then keeps at
        least its best at each rung (:func:`_kept`).
        """
        levels, configs = self.round_plan(index)
        eta = self.reduction_factor
        cut_short = finishing and len(members) < configs
        closed = closed or len(members) >= configs
        state = _RoundState()
        admitted = members
        for k, level in enumerate(levels):
            # trials promoted to this rung and paused below it: resume the best first
            resumable = [t for t in admitted if t.at_rung and t.epoch < level]
            if resumable:
                previous = levels[k - 1] if k else None
                best = ranked({t.number: None if previous is None else t.values.get(previous)
                               for t in resumable}, self.minimize)[0]
                state.resume = Job("resume", trial=best, to_epoch=level,
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
            keep = _kept(len(admitted), eta, finish=cut_short)
            by_number = {t.number: t for t in admitted}
            order = [by_number[n] for n in ranked(
                {t.number: t.values.get(level) for t in admitted}, self.minimize)]
            for trial in order[keep:]:
                if trial.at_rung:
                    state.prune[trial.number] = (
                        f"not promoted at rung {level} (round {index}: {keep} of "
                        f"{len(admitted)} go on)")
            if keep == 0:
                return state
            admitted = order[:keep]
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
    what it holds at each rung, which may be 0 before the top rung (2 configurations of 27 on
    rungs 1, 3, 9, 27 with ``eta = 3``: none goes on). With ``finish_best`` (the default), while
    no trial of the study has reached ``max_resource`` (a value there, or COMPLETE), such a
    round keeps at least its best at each rung, so that it reaches ``max_resource``; full rounds
    are unchanged (each reaches the top rung anyway). Jamieson and Talwalkar, AISTATS 2016; Li
    et al., JMLR 2018.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``).
        reduction_factor: keep one in ``reduction_factor`` at each rung (``>= 2``).
        prefact: configurations per round, as a multiple of ``reduction_factor**K`` (``>= 1``).
        resume: continue promoted trials from their checkpoint; ``False`` retrains them from
            epoch 0, as the textbook code does (58 instead of 34 epochs for rungs 2, 4, 8, 10).
        minimize: lower values are better; ``False``: higher are; a tuple of them for several
            objectives (values are then tuples, ranked by Pareto fronts).
        finish_best: a last round cut short by the tickets keeps at least its best at each rung
            while no trial has reached ``max_resource`` (see above); ``False``: ``floor(held /
            eta)``, the textbook rule.

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
        >>> alone = [TrialView(0, "paused", 4, {2: 0.1, 4: 0.1}, group=0)]   # 1 ticket of 8
        >>> schedule.decide(alone, tickets=0, next_number=1).job   # floor(1 / 2) = 0, yet 1
        Job(kind='resume', trial=0, to_epoch=8, group=None, from_scratch=False)
    """

    name = "sync_sh"

    def __init__(
        self,
        min_resource: int,
        max_resource: int,
        reduction_factor: int,
        prefact: int = 1,
        resume: bool = True,
        minimize: Minimize = True,
        finish_best: bool = True,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, prefact, resume, minimize,
                         finish_best)
        self._configs = rungs.successive_halving_plan(
            min_resource, max_resource=max_resource, reduction_factor=reduction_factor,
            prefact=prefact,
        )[0][1]

    def ladders(self) -> list[list[int]]:
        """The one ladder every round climbs."""
        return [list(self._levels)]

    def round_plan(self, round_index: int) -> tuple[list[int], int]:
        """Every round: the full ladder and ``prefact * reduction_factor**K`` configurations."""
        argument_int("round_index", round_index, 0)
        return list(self._levels), self._configs


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
        minimize: lower values are better; ``False``: higher are; a tuple of them for several
            objectives (values are then tuples, ranked by Pareto fronts).
        finish_best: as :class:`SyncSuccessiveHalving`'s, for the last round's bracket.

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
        minimize: Minimize = True,
        finish_best: bool = True,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, prefact, resume, minimize,
                         finish_best)
        self._rounds = rungs.hyperband_rounds(min_resource, max_resource, reduction_factor, prefact)

    def ladders(self) -> list[list[int]]:
        """Each bracket's rungs, in round order: round ``j`` uses ``[j % len(...)]``."""
        return [list(levels) for levels, _ in self._rounds]

    def round_plan(self, round_index: int) -> tuple[list[int], int]:
        """Round ``round_index``'s bracket: its rungs and configurations."""
        argument_int("round_index", round_index, 0)
        levels, configs = self._rounds[round_index % len(self._rounds)]
        return list(levels), configs


def _kept(held: int, reduction_factor: int, finish: bool) -> int:
    """How many of the ``held`` trials at a rung go on: ``floor(held / reduction_factor)``, and
    at least 1 when ``finish`` (a round cut short, finishing its best).

    Example::

        >>> _kept(2, 3, finish=False), _kept(2, 3, finish=True), _kept(7, 3, finish=True)
        (0, 1, 2)
    """
    kept = held // reduction_factor
    return max(kept, 1) if finish and held else kept


def _reached(trial: TrialView, level: int) -> bool:
    """Whether a trial is done with rung ``level``: a value there, finished, or paused past it."""
    return (level in trial.values or trial.state in FINISHED
            or (trial.at_rung and trial.epoch >= level))
