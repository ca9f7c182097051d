"""Promotion-type ASHA and Hyperband: trials pause at every rung; a free slot promotes first.

Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020, Algorithm 2;
brackets as :class:`~lightning_hpo.pruners.HyperbandPruner` assigns them. With ``finish_best``
(the default) a study with a bounded number of trials also trains its best paused trial of the
highest rung on to ``max_resource`` once no new configuration can start and nothing is
promotable, which Algorithm 2 alone may never do (``floor(1 / eta) = 0``).
"""

from __future__ import annotations

from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from lightning_hpo.errors import argument_bool, argument_int
from lightning_hpo.pareto import is_finite_point
from lightning_hpo.pruners import rungs
from lightning_hpo.schedules._base import (
    Decision,
    Job,
    Minimize,
    Schedule,
    TrialView,
    Value,
    above_for_ever,
    check_call,
    check_minimize,
    decision_of,
    first_interrupted,
    has_tickets,
    ladder_of,
    ranked,
    reached_top,
)

__all__ = ["PromotionASHA", "PromotionHyperband", "promotable"]


def promotable(
    values_at_rung: Mapping[int, Value],
    paused: Collection[int],
    reduction_factor: int,
    minimize: Minimize,
) -> list[int]:
    """Promotion-type ASHA's choice on one rung: the paused trials in its top ``floor(n / eta)``.

    Li et al., MLSys 2020, Algorithm 2: of the ``n`` trials with a value at the rung, the best
    ``floor(n / reduction_factor)`` are candidates, and those not yet promoted (here: ``paused``
    at this rung) may be promoted. Ranked best first; ties go to the lower trial number; NaN and
    infinite values rank last. With several objectives (``minimize`` a tuple, values tuples)
    the order is :func:`lightning_hpo.pareto.pareto_order` (multi-objective ASHA).

    Args:
        values_at_rung: each trial's value at the rung, by trial number.
        paused: trial numbers paused at this rung, not yet promoted; others are ignored.
        reduction_factor: ``eta`` (``>= 2``).
        minimize: lower values are better; ``False``: higher are; a tuple, per objective.

    Example::

        >>> rung = {0: 0.5, 1: 0.2, 2: 0.9, 3: 0.2, 4: 0.7, 5: 0.1}
        >>> promotable(rung, paused={1, 2, 3, 4}, reduction_factor=2, minimize=True)
        [1, 3]
        >>> promotable(rung, paused={1, 2, 3, 4}, reduction_factor=2, minimize=False)
        [2, 4]
    """
    argument_int("reduction_factor", reduction_factor, 2)
    top = ranked(values_at_rung, minimize)[: len(values_at_rung) // reduction_factor]
    paused_set = set(paused)
    return [number for number in top if number in paused_set]


@dataclass(frozen=True)
class _Finisher:
    """The paused trial ``finish_best`` trains on: trial ``number``, paused at rung ``level``,
    resumed (when its turn comes) to ``to_epoch``, its bracket's next rung."""

    number: int
    level: int
    to_epoch: int


class _Promotion(Schedule):
    """Promotion-type ASHA over one or more brackets (Li et al., MLSys 2020, Algorithm 2)."""

    _grouped = False  # whether a start job carries the new trial's bracket

    def __init__(
        self, min_resource: int, max_resource: int, reduction_factor: int, minimize: Minimize,
        max_paused: int | None = None, finish_best: bool = True,
    ) -> None:
        self._levels = ladder_of(min_resource, max_resource, reduction_factor)
        minimize = check_minimize(minimize)
        if max_paused is not None:
            argument_int("max_paused", max_paused, 1)
        argument_bool("finish_best", finish_best)
        self.min_resource = min_resource
        self.max_resource = max_resource
        self.reduction_factor = reduction_factor
        self.minimize = minimize
        self.max_paused = max_paused
        self.finish_best = finish_best

    @abstractmethod
    def _bracket(self, trial_number: int, group: int | None) -> int:
        """The bracket of a trial (its ``group`` when it has one)."""

    def decide(
        self, trials: Sequence[TrialView], *, tickets: int | None, next_number: int
    ) -> Decision:
        """Interrupted first; then a promotion from the top rung down; else start; else finish
        the best (``finish_best``); else wait; else done.

        With ``tickets`` bounded, paused trials that can no longer enter their rung's top
        ``floor(n / eta)`` (however the remaining trials fare) are pruned at once; at ``"done"``
        every paused trial is. With ``max_paused``, the paused trials beyond it are pruned, least
        promotable first (:meth:`_beyond_limit`). None of these prunes the trial
        :meth:`_finisher` keeps for ``finish_best``.
        """
        check_call(trials, tickets, next_number)
        ladders = self.ladders()
        eta = self.reduction_factor
        brackets: list[list[TrialView]] = [[] for _ in ladders]
        for trial in trials:
            brackets[self._bracket(trial.number, trial.group)].append(trial)
        finisher = self._finisher(trials, brackets, tickets)
        keep = None if finisher is None else finisher.number
        prune = self._unpromotable(brackets, tickets, keep) if tickets is not None else {}

        job = first_interrupted(trials)
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
        if job is None and has_tickets(tickets):
            bracket = self._bracket(next_number, None)
            job = Job("start", to_epoch=ladders[bracket][0],
                      group=bracket if self._grouped else None)
        if job is None and finisher is not None and not _may_overtake(trials, finisher.level):
            job = Job("resume", trial=finisher.number, to_epoch=finisher.to_epoch)
        if job is None and any(t.state in ("running", "waiting") for t in trials):
            job = Job("wait")
        if job is None:
            job = Job("done")
            for b, members in enumerate(brackets):
                for trial in members:
                    if trial.at_rung and trial.number not in prune and trial.number != keep:
                        k = bisect_right(ladders[b], trial.epoch) - 1
                        if trial.epoch < ladders[b][-1]:
                            prune[trial.number] = (f"not promoted at rung {ladders[b][k]} when "
                                                   "the study finished")
        elif self.max_paused is not None:
            prune.update(self._beyond_limit(brackets, prune, job.trial, keep))
        return decision_of(job, prune)

    def _finisher(
        self, trials: Sequence[TrialView], brackets: list[list[TrialView]], tickets: int | None
    ) -> _Finisher | None:
        """The paused trial ``finish_best`` trains on to ``max_resource``, if any.

        Only with ``finish_best``, a bounded number of tickets (with a wall-clock budget alone
        there is always a next configuration) and while no trial of the study has reached
        ``max_resource`` (:func:`~lightning_hpo.schedules._base.reached_top`): of the trials
        paused at a rung below their bracket's top, the one at the highest rung level (across
        brackets), then the best value there (NaN and infinite last, ties to the lower number).
        It is kept from every pruning while tickets remain, so that it is still there once they
        are spent; it is resumed only then, rung by rung, when nothing is promotable.
        """
        if not self.finish_best or tickets is None or reached_top(trials, self.max_resource):
            return None
        ladders = self.ladders()
        candidates: list[tuple[Value | None, _Finisher]] = []  # (value at its rung, finisher)
        for b, members in enumerate(brackets):
            levels = ladders[b]
            for k, level in enumerate(levels[:-1]):
                candidates += [(t.values.get(level), _Finisher(t.number, level, levels[k + 1]))
                               for t in members if _paused_at(t, levels, k)]
        if not candidates:
            return None
        top = max(finisher.level for _, finisher in candidates)
        at_top = {f.number: (value, f) for value, f in candidates if f.level == top}
        best = ranked({n: value for n, (value, _) in at_top.items()}, self.minimize)[0]
        return at_top[best][1]

    def _beyond_limit(
        self, brackets: list[list[TrialView]], prune: Mapping[int, str], resumed: int | None,
        keep: int | None,
    ) -> dict[int, str]:
        """The paused trials to prune so that at most ``max_paused`` wait at a rung.

        Without a bound on the trials to come, any paused trial may still be promoted one day
        (``floor(n / eta)`` grows with ``n``), so its checkpoint would be kept for ever. A trial
        with ``above`` trials ranked above it among the ``n`` values at its rung becomes
        promotable only once ``eta * (above + 1) - n`` more trials reach the rung below it: the
        ones needing the most are pruned first (then the lower rung, then the newer trial).
        Trials already pruned and the one resumed now do not count; ``keep`` (the finisher)
        counts but is never pruned (``max_paused >= 1`` leaves it room).
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
                position = {number: i for i, number in enumerate(ranked(values, self.minimize))}
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
        prunable = [(number, reason) for _, _, number, reason in waiting if number != keep]
        return dict(prunable[:excess])

    def _unpromotable(
        self, brackets: list[list[TrialView]], tickets: int, keep: int | None
    ) -> dict[int, str]:
        """Paused trials that can never enter the top ``floor(n_max / eta)`` of their rung.

        ``n_max`` = the values at the rung now, plus every trial of the bracket that may still
        reach it (running, waiting or paused below it), plus every ticket. Values at a rung are
        never removed, so the trials ranked above one (strictly better, or tied and earlier)
        only grow: once they are ``>= n_max // eta``, it can never be promoted. With several
        objectives only the trials that dominate it count (:func:`above_for_ever`). ``keep`` (the
        finisher) is never pruned: ``finish_best`` will resume it.
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
                for trial in waiting_here:
                    above = (above_for_ever(values, trial.number, self.minimize)
                             if trial.number in values else len(values))  # no value: never ranks
                    if above >= n_max // eta and trial.number != keep:
                        prune[trial.number] = (
                            f"cannot be promoted at rung {level}: "
                            f"{_above_words(values.get(trial.number), above, self.minimize)}, "
                            f"and at most {n_max} trials reach the rung ({n_max // eta} go on)")
        return prune


def _above_words(value: Value | None, above: int, minimize: Minimize) -> str:
    """Why ``above`` trials rank above a paused one for ever, in words: with several objectives
    those that dominate it, unless its values are not all finite (then every other ranks above
    it, and none dominates it: NaN compares with nothing)."""
    if not isinstance(minimize, tuple):
        return f"{above} rank above it"
    if isinstance(value, tuple) and is_finite_point(value):
        return f"{above} dominate it"
    if value is None:
        return f"it has no values there, so all {above} others rank above it"
    shown = ", ".join(f"{v:.4g}" for v in value) if isinstance(value, tuple) else value
    return f"its values ({shown}) are not all finite, so all {above} others rank above it"


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

    Finishing the best (``finish_best=True``, the default): Algorithm 2 promotes only the top
    ``floor(n / eta)`` of a rung, so a finite study may end with no trial at ``max_resource``
    (16 trials on rungs 1, 3, 9, 27, one slot: 5 reach 3, 1 reaches 9, ``floor(1 / 3) = 0``
    go on to 27).
    With bounded tickets, once they are spent and nothing is interrupted or promotable, a free
    slot resumes the best paused trial of the highest rung (highest level, then best value,
    NaN last, ties to the lower number) to its next rung, and again at each rung, until some
    trial has reached ``max_resource`` (a value there, or COMPLETE); from then on the schedule is
    the paper's again. It starts as soon as a slot is free, but not while a running trial may
    still pause at that rung or above: that one may turn out the better one to finish (more
    evidence, or a better value), and starting early would train two trials to the end, or the
    weaker one. That trial is kept from every pruning (can never be promoted, ``max_paused``,
    done) while no trial has reached ``max_resource``; the others are pruned as before. It
    starts no new configuration, and a wall-clock budget still stops everything. With
    ``tickets=None`` (wall-clock budget only) nothing changes.

    Args:
        min_resource: the first rung, in epochs (``>= 1``).
        max_resource: the last rung, in epochs (``>= min_resource``); a trial reaching it is
            complete.
        reduction_factor: promote one in ``reduction_factor`` at each rung (``>= 2``).
        minimize: lower values are better; ``False``: higher are; a tuple of them for several
            objectives (values are then tuples, ranked by Pareto fronts).
        max_paused: keep at most this many trials paused at a rung (``>= 1``; their
            checkpoints are on disk): beyond it the least promotable are pruned. ``None``: no
            bound (the paper's algorithm; with only a wall-clock budget, every trial ever
            paused keeps its checkpoint until the study ends).
        finish_best: with bounded tickets, train the best paused trial of the highest rung on
            to ``max_resource`` once tickets are spent and nothing is promotable, until some
            trial has reached it (see above). ``False``: exactly Algorithm 2.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> schedule = PromotionASHA(1, 9, 3)
        >>> rung1 = [TrialView(n, "paused", 1, {1: v}) for n, v in enumerate([0.5, 0.2, 0.9])]
        >>> schedule.decide(rung1, tickets=5, next_number=3).job   # trial 1 is the best of 3
        Job(kind='resume', trial=1, to_epoch=3, group=None, from_scratch=False)
        >>> schedule.decide(rung1[:2], tickets=5, next_number=2).job   # floor(2 / 3) = 0
        Job(kind='start', trial=None, to_epoch=1, group=None, from_scratch=False)
        >>> schedule.decide(rung1[:2], tickets=0, next_number=2).job   # spent: finish trial 1
        Job(kind='resume', trial=1, to_epoch=3, group=None, from_scratch=False)
        >>> PromotionASHA(1, 9, 3, finish_best=False).decide(rung1[:2], tickets=0,
        ...                                                  next_number=2).job.kind
        'done'
    """

    name = "promotion_asha"

    def __init__(
        self, min_resource: int, max_resource: int, reduction_factor: int,
        minimize: Minimize = True, max_paused: int | None = None, finish_best: bool = True,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, minimize, max_paused,
                         finish_best)

    def ladders(self) -> list[list[int]]:
        """The one ladder."""
        return [list(self._levels)]

    def _bracket(self, trial_number: int, group: int | None) -> int:
        return 0

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(min_resource={self.min_resource}, max_resource="
                f"{self.max_resource}, reduction_factor={self.reduction_factor}, "
                f"minimize={self.minimize}, max_paused={self.max_paused}, "
                f"finish_best={self.finish_best})")


class PromotionHyperband(_Promotion):
    """Promotion-type Hyperband: :class:`PromotionASHA` in brackets, as the Hyperband pruner.

    Bracket ``b`` (``0 <= b < floor(log_eta(max_resource / min_resource)) + 1``) starts at
    ``min_resource * reduction_factor**b`` epochs; a new trial's bracket is
    :func:`lightning_hpo.pruners.rungs.bracket_of` of the study name and its number with
    :func:`~lightning_hpo.pruners.rungs.trial_allocation_budgets`, exactly as
    :class:`~lightning_hpo.pruners.HyperbandPruner` assigns it, and comes back as the start job's
    ``group``. A trial's ``group`` is its bracket (computed the same way when ``None``). A free
    slot looks for a promotion across brackets, highest rung level first (the lower bracket
    first on equal levels), each bracket ranking its own trials. With ``finish_best`` a study
    whose tickets are spent trains the best paused trial of the highest rung level across
    brackets on to ``max_resource``, as :class:`PromotionASHA` does. Li et al., JMLR 2018 and
    MLSys 2020.

    Args:
        min_resource: the first rung of bracket 0, in epochs (``>= 1``).
        max_resource: every bracket's last rung, in epochs (``>= min_resource``).
        reduction_factor: promote one in ``reduction_factor`` at each rung (``>= 2``).
        minimize: lower values are better; ``False``: higher are; a tuple of them for several
            objectives (values are then tuples, ranked by Pareto fronts).
        study_name: the Optuna study's name (brackets hash it with the trial number).
        max_paused: as :class:`PromotionASHA`'s, over all brackets.
        finish_best: as :class:`PromotionASHA`'s, over all brackets (``False``: Algorithm 2 in
            each bracket, nothing more).

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
        minimize: Minimize = True,
        study_name: str = "",
        max_paused: int | None = None,
        finish_best: bool = True,
    ) -> None:
        super().__init__(min_resource, max_resource, reduction_factor, minimize, max_paused,
                         finish_best)
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
                f"max_paused={self.max_paused}, finish_best={self.finish_best})")


def _may_overtake(trials: Sequence[TrialView], level: int) -> bool:
    """Whether a running (or waiting) trial may still pause at rung ``level`` or above.

    Such a trial may become the better one to finish (a higher rung, or a better value at the
    same rung), so the finishing resume waits for it rather than train two trials to the end or
    the weaker one. A trial running to a lower rung does not hold it up. No ``target``: it
    may reach any rung.
    """
    return any(t.state in ("running", "waiting") and (t.target is None or t.target >= level)
               for t in trials)


def _paused_at(trial: TrialView, levels: Sequence[int], k: int) -> bool:
    """Paused at rung ``k`` (``levels[k] <= epoch < levels[k + 1]``), waiting for a promotion."""
    return (trial.at_rung and levels[k] <= trial.epoch
            and (k + 1 == len(levels) or trial.epoch < levels[k + 1]))
