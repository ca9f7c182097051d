"""Promotion-type ASHA and Hyperband: trials pause at every rung; a free slot promotes first.

Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020, Algorithm 2;
brackets as :class:`~lightning_hpo.pruners.HyperbandPruner` assigns them.
"""

from __future__ import annotations

from abc import abstractmethod
from bisect import bisect_right
from collections.abc import Collection, Mapping, Sequence

from lightning_hpo import rungs
from lightning_hpo.errors import argument_bool, argument_int
from lightning_hpo.schedules._base import (
    Decision,
    Job,
    Schedule,
    TrialView,
    check_call,
    decision_of,
    first_interrupted,
    has_tickets,
    ladder_of,
    ranked,
)

__all__ = ["PromotionASHA", "PromotionHyperband", "promotable"]


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
    argument_int("reduction_factor", reduction_factor, 2)
    top = ranked(values_at_rung, minimize)[: len(values_at_rung) // reduction_factor]
    paused_set = set(paused)
    return [number for number in top if number in paused_set]


class _Promotion(Schedule):
    """Promotion-type ASHA over one or more brackets (Li et al., MLSys 2020, Algorithm 2)."""

    _grouped = False  # whether a start job carries the new trial's bracket

    def __init__(
        self, min_resource: int, max_resource: int, reduction_factor: int, minimize: bool,
        max_paused: int | None = None,
    ) -> None:
        self._levels = ladder_of(min_resource, max_resource, reduction_factor)
        argument_bool("minimize", minimize)
        if max_paused is not None:
            argument_int("max_paused", max_paused, 1)
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
        check_call(trials, tickets, next_number)
        ladders = self.ladders()
        eta = self.reduction_factor
        brackets: list[list[TrialView]] = [[] for _ in ladders]
        for trial in trials:
            brackets[self._bracket(trial.number, trial.group)].append(trial)
        prune = self._unpromotable(brackets, tickets) if tickets is not None else {}

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
        return decision_of(job, prune)

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
                position = {number: i for i, number in enumerate(ranked(values, self.minimize))}
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


def _paused_at(trial: TrialView, levels: Sequence[int], k: int) -> bool:
    """Paused at rung ``k`` (``levels[k] <= epoch < levels[k + 1]``), waiting for a promotion."""
    return (trial.at_rung and levels[k] <= trial.epoch
            and (k + 1 == len(levels) or trial.epoch < levels[k + 1]))
