"""ASHA and Hyperband as Optuna pruners, with their rung records in the study's storage.

Both pruners share one decision (:func:`_asha_prune`) on top of the pure rung arithmetic of
:mod:`lightning_hpo.rungs`; the records every process must agree on live in the Optuna storage
(:mod:`lightning_hpo._rung_store`), so trials of several processes and machines compete at the
same rungs. A decision reads only its rung's records, never the study's trials.

Steps are epochs completed, counted from 1 (``trial.report(value, step=epoch + 1)``), as
:class:`~lightning_hpo.callbacks.PruningCallback` reports them.

Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(pruner=ASHAPruner(min_resource=1, max_resource=9))
    >>> trial = study.ask()
    >>> trial.report(0.3, step=1)
    >>> trial.should_prune()   # the first trial at a rung always continues
    False
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.study import StudyDirection

from lightning_hpo import rungs
from lightning_hpo._optuna import storage_of, trial_id_of
from lightning_hpo._rung_store import RungRecord, open_rung_store, rung_records
from lightning_hpo.schema import BRACKET_ATTR

__all__ = [
    "ASHAPruner",
    "HyperbandPruner",
    "RungRecord",
    "rung_records",
]

_logger = logging.getLogger(__name__)

#: Trial system attribute: the trial's Hyperband bracket (int), written at its first rung.
#: (ASHA writes no trial attribute: a decision's only write is its rung record.)


@dataclass(frozen=True)
class _Ladder:
    """One bracket's rungs (epochs); unbounded when ``max_resource`` is None."""

    min_resource: int
    reduction_factor: int
    max_resource: int | None
    levels: list[int] | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # rung_levels validates all three arguments (its errors name the argument).
        bounded = self.max_resource is not None
        levels = rungs.rung_levels(
            self.min_resource, self.reduction_factor, self.max_resource,
            up_to=None if bounded else 0,
        )
        object.__setattr__(self, "levels", levels if bounded else None)

    def crossed(self, previous_step: int, step: int) -> list[int]:
        if self.levels is not None:
            return rungs.crossed_rungs(self.levels, previous_step, step)
        levels = rungs.rung_levels(self.min_resource, self.reduction_factor, up_to=step)
        return rungs.crossed_rungs(levels, previous_step, step)


def _asha_prune(
    study: optuna.Study,
    trial: optuna.trial.FrozenTrial,
    *,
    ladder: _Ladder,
    bracket: int,
    first_rung_attrs: Mapping[str, Any],
) -> bool:
    """ASHA's decision for the trial's latest report, on one bracket's ladder.

    A report that reaches no new rung decides nothing and touches no storage. A report that
    reaches rungs records its value at each (never a NaN or infinite value: that trial is pruned)
    and the trial continues when the value is among the best ``max(1, n // reduction_factor)``
    of the ``n`` values at the highest of them. At ``max_resource`` the trial is done: no record,
    no pruning.
    """
    if len(study.directions) > 1:
        raise NotImplementedError(
            f"ASHA pruning needs a single-objective study, but study '{study.study_name}' has "
            f"{len(study.directions)} objectives."
        )
    steps = trial.intermediate_values
    if not steps:
        return False
    step = max(steps)
    if ladder.max_resource is not None and step >= ladder.max_resource:
        return False
    previous = max((s for s in steps if s < step), default=0)
    crossed = ladder.crossed(previous, step)
    if not crossed:
        return False

    if first_rung_attrs and crossed[0] == ladder.min_resource:  # first rung: Hyperband bracket
        storage, trial_id = storage_of(study), trial_id_of(trial)
        for key, value in first_rung_attrs.items():
            storage.set_trial_system_attr(trial_id, key, value)

    value = steps[step]
    if not math.isfinite(value):
        _logger.debug("trial %d pruned at step %d: value %r", trial.number, step, value)
        return True
    maximize = study.direction == StudyDirection.MAXIMIZE
    n, n_better = open_rung_store(study).add_and_rank(
        bracket, crossed, trial.number, value, maximize=maximize
    )
    keep = rungs.is_promotable(n_better, n, ladder.reduction_factor)
    _logger.debug(
        "trial %d, bracket %d, rung %d: %d of %d better, %s",
        trial.number, bracket, crossed[-1], n_better, n, "continues" if keep else "pruned",
    )
    return not keep


class ASHAPruner(optuna.pruners.BasePruner):
    """Asynchronous successive halving (ASHA), with its rungs in the study's storage.

    Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020. Rungs are at
    ``min_resource * reduction_factor**k`` epochs (and at ``max_resource``). When a trial first
    reports at or past a rung, its value is recorded there (and at any rung it skipped) and it
    continues only if it is among the best ``max(1, n // reduction_factor)`` of the ``n`` values
    recorded at that rung so far, its own included; ties continue, and the first trial at a rung
    always continues. NaN or infinite values are pruned at the first rung and never recorded. A
    trial that reached ``max_resource`` is finished and never pruned.

    Unlike Optuna's ``SuccessiveHalvingPruner``, a decision reads only the rung's records (one
    indexed query on RDB storages), not every trial of the study, and steps between rungs cost
    nothing. Records are shared by every process on the storage.

    Args:
        min_resource: the first rung, in epochs completed (``>= 1``).
        reduction_factor: keep one in ``reduction_factor`` trials at each rung (``>= 2``).
        max_resource: the epochs a trial may train (``>= min_resource``), the last rung, where
            no decision is made; ``None`` for an unbounded ladder.

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> import optuna
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> def objective(trial: optuna.Trial) -> float:
        ...     lr = trial.suggest_float("lr", 1e-3, 1.0, log=True)
        ...     error = 1.0
        ...     for epoch in range(9):
        ...         error *= 1.0 - lr / 2
        ...         trial.report(error, step=epoch + 1)
        ...         if trial.should_prune():
        ...             raise optuna.TrialPruned()
        ...     return error
        >>> study = optuna.create_study(
        ...     pruner=ASHAPruner(min_resource=1, reduction_factor=3, max_resource=9))
        >>> study.optimize(objective, n_trials=10)
    """

    def __init__(
        self, min_resource: int = 1, reduction_factor: int = 3, max_resource: int | None = None
    ) -> None:
        self._ladder = _Ladder(min_resource, reduction_factor, max_resource)  # validates
        self._first_rung_attrs: dict[str, Any] = {}

    @property
    def min_resource(self) -> int:
        """The first rung, in epochs."""
        return self._ladder.min_resource

    @property
    def reduction_factor(self) -> int:
        """Keep one in this many trials at each rung."""
        return self._ladder.reduction_factor

    @property
    def max_resource(self) -> int | None:
        """The last rung (epochs a trial may train), or ``None`` when unbounded."""
        return self._ladder.max_resource

    @property
    def levels(self) -> list[int] | None:
        """The rung levels in epochs (``max_resource`` last), or ``None`` when unbounded."""
        return None if self._ladder.levels is None else list(self._ladder.levels)

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """Whether to stop ``trial`` after its latest report (see the class docstring)."""
        return _asha_prune(
            study, trial, ladder=self._ladder, bracket=0, first_rung_attrs=self._first_rung_attrs
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(min_resource={self.min_resource}, "
            f"reduction_factor={self.reduction_factor}, max_resource={self.max_resource})"
        )


class HyperbandPruner(optuna.pruners.HyperbandPruner):
    """Hyperband over ASHA brackets, every process agreeing on each trial's bracket.

    Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter Optimization", JMLR
    2018, run asynchronously as in Li et al., "A System for Massively Parallel Hyperparameter
    Tuning", MLSys 2020. Bracket ``s`` (``0 <= s < n_brackets``, with ``n_brackets =
    floor(log_eta(max_resource / min_resource)) + 1``) is an :class:`ASHAPruner` ladder starting
    at ``min_resource * reduction_factor**s`` epochs, with rungs and records of its own. A
    trial's bracket is a hash of the study name and trial number weighted by Optuna's
    per-bracket budgets, so every process computes the same one; it is stored on the trial
    (``lightning_hpo:bracket``) at its first rung.

    This subclasses Optuna's ``HyperbandPruner`` only so that samplers see the trials of the
    trial's own bracket: Optuna filters the study for a sampler when ``study.pruner`` is an
    ``optuna.pruners.HyperbandPruner``, through its ``_get_bracket_id``, which is overridden
    here; that is the only hook Optuna offers. Nothing else of the parent runs.

    Args:
        min_resource: the first rung of the most aggressive bracket, in epochs (``>= 1``).
        max_resource: the epochs a trial may train (``>= min_resource``); required, so that
            every process has the same brackets from the start.
        reduction_factor: keep one in ``reduction_factor`` trials at each rung (``>= 2``).

    Raises:
        ValueError: an argument is out of range or missing, naming it.

    Example::

        >>> import optuna
        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> pruner = HyperbandPruner(min_resource=1, max_resource=27, reduction_factor=3)
        >>> pruner.n_brackets, pruner.bracket_levels(0), pruner.bracket_levels(3)
        (4, [1, 3, 9, 27], [27])
        >>> study = optuna.create_study(study_name="demo", pruner=pruner)
        >>> trial = study.ask()
        >>> trial.report(0.5, step=27)
        >>> trial.should_prune()   # at max_resource a trial is done, in every bracket
        False
    """

    def __init__(
        self, min_resource: int = 1, max_resource: int | None = None, reduction_factor: int = 3
    ) -> None:
        if max_resource is None:
            raise ValueError(
                "The value of `max_resource` is None, but must be an integer "
                "`max_resource >= min_resource`: Hyperband's brackets depend on it."
            )
        n_brackets = rungs.hyperband_brackets(min_resource, max_resource, reduction_factor)
        super().__init__(
            min_resource=min_resource, max_resource=max_resource, reduction_factor=reduction_factor
        )
        # Fill the parent's bookkeeping with the exact values, for anyone who inspects it.
        self._n_brackets = n_brackets
        self._trial_allocation_budgets = rungs.trial_allocation_budgets(
            min_resource, max_resource, reduction_factor
        )
        self._total_trial_allocation_budget = sum(self._trial_allocation_budgets)
        self._ladders = [
            _Ladder(
                rungs.bracket_min_resource(min_resource, reduction_factor, bracket),
                reduction_factor,
                max_resource,
            )
            for bracket in range(n_brackets)
        ]
        self._first_rung_attrs = [{BRACKET_ATTR: bracket} for bracket in range(n_brackets)]

    @property
    def min_resource(self) -> int:
        """The first rung of bracket 0, in epochs."""
        return self._ladders[0].min_resource

    @property
    def max_resource(self) -> int:
        """The epochs a trial may train, every bracket's last rung."""
        return self._ladders[0].max_resource  # type: ignore[return-value]

    @property
    def reduction_factor(self) -> int:
        """Keep one in this many trials at each rung."""
        return self._ladders[0].reduction_factor

    @property
    def n_brackets(self) -> int:
        """The number of brackets."""
        return len(self._ladders)

    @property
    def trial_allocation_budgets(self) -> list[int]:
        """Each bracket's share of trials (Optuna's allocation, bracket 0 first)."""
        return list(self._trial_allocation_budgets)

    def bracket_levels(self, bracket: int) -> list[int]:
        """The rung levels of ``bracket``, in epochs, ``max_resource`` last.

        Raises:
            ValueError: ``bracket`` is not in ``range(n_brackets)``.
        """
        if isinstance(bracket, bool) or not isinstance(bracket, int) or not (
            0 <= bracket < self.n_brackets
        ):
            raise ValueError(
                f"The value of `bracket` is {bracket!r}, but must be "
                f"`0 <= bracket < {self.n_brackets}`."
            )
        return list(self._ladders[bracket].levels or [])

    def bracket_of(self, study_name: str, trial_number: int) -> int:
        """The bracket of trial ``trial_number`` of study ``study_name`` (any process agrees)."""
        return rungs.bracket_of(study_name, trial_number, self._trial_allocation_budgets)

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """Whether to stop ``trial`` after its latest report, by ASHA in the trial's bracket."""
        bracket = self.bracket_of(study.study_name, trial.number)
        return _asha_prune(
            study,
            trial,
            ladder=self._ladders[bracket],
            bracket=bracket,
            first_rung_attrs=self._first_rung_attrs[bracket],
        )

    def _get_bracket_id(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> int:
        # Optuna's hook: its inherited `_create_bracket_study` (used by `_filter_study` to give
        # samplers a study of one bracket) calls this for each trial. Only the study's name and
        # the trial's number are read, so it works on Optuna's bracket-study wrapper too.
        return self.bracket_of(study.study_name, trial.number)

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(min_resource={self.min_resource}, "
            f"max_resource={self.max_resource}, reduction_factor={self.reduction_factor})"
        )
