"""ASHA and Hyperband as Optuna pruners, with their rung records in the study's storage.

A trial is compared with the others at *rungs*, epochs ``min_resource * reduction_factor**k``
(:mod:`lightning_hpo.pruners.rungs`). When one of its reports first reaches a rung, its value
is recorded there, where every process sees it (:mod:`lightning_hpo.pruners._store`, which
returns the ``n`` values at the rung, its own included, and the ``n_better`` strictly better
ones), and the trial continues iff ``n_better < max(1, n // reduction_factor)``
(:func:`asha_continues`; :func:`_asha_prune` is the whole decision, Hyperband's in the trial's
own bracket). With several objectives, each epoch's values are the trial attribute
:data:`ATTR.OBJECTIVE_VALUES <lightning_hpo.schema.ATTR>` (Optuna's ``trial.report`` refuses
such a study), and the rank is the trial's place in :func:`lightning_hpo.pareto.pareto_order`.
Steps are epochs completed, counted from 1, as :class:`~lightning_hpo.callbacks.PruningCallback`
reports them. A pruner's first decision writes its settings as
:data:`~lightning_hpo.schema.PRUNER_ATTR`, for reports.

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

import json
import logging
import math
import numbers
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.storages import BaseStorage
from optuna.study import StudyDirection

from lightning_hpo._optuna import HyperbandBase, storage_of, study_id_of, trial_id_of
from lightning_hpo.pareto import is_finite_point, pareto_order
from lightning_hpo.pruners import rungs
from lightning_hpo.pruners._store import open_rung_store
from lightning_hpo.pruners._vectors import open_vector_store
from lightning_hpo.schema import BRACKET_ATTR, PRUNER_ATTR, objective_curve

__all__ = ["ASHAPruner", "HyperbandPruner", "asha_continues"]

_logger = logging.getLogger(__name__)


def asha_continues(n: int, n_better: int, reduction_factor: int) -> bool:
    """ASHA's rule: a trial continues past a rung iff fewer than ``max(1, n // reduction_factor)``
    of the ``n`` values recorded there (its own included) are strictly better than its own.

    So the best ``n // reduction_factor`` continue, and so does every value tied with the last
    of them; while the rung holds fewer than ``reduction_factor`` values only the best so far
    (ties included) continues, and the first trial at a rung always does: a pruner cannot pause
    a trial until competitors arrive, as promotion-type ASHA would.

    Args:
        n: how many values are recorded at the rung, this one included (``>= 1``).
        n_better: how many of them are strictly better than this one (``0 <= n_better < n``).
        reduction_factor: keep one in ``reduction_factor`` (``>= 2``).

    Raises:
        ValueError: an argument is out of range, naming it.

    Example::

        >>> [asha_continues(n, n_better=1, reduction_factor=2) for n in range(2, 6)]
        [False, False, True, True]
        >>> asha_continues(n=1, n_better=0, reduction_factor=100)
        True
    """
    for name, value, minimum in (("n", n, 1), ("reduction_factor", reduction_factor, 2),
                                 ("n_better", n_better, 0)):
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(
                f"The value of `{name}` is {value!r}, but must be an integer `{name} >= {minimum}`."
            )
    if n_better >= n:
        raise ValueError(
            f"The value of `n_better` is {n_better}, but must be `n_better < n` ({n}): "
            "`n` counts the value itself."
        )
    return n_better < max(1, n // reduction_factor)


def _asha_prune(
    study: optuna.Study,
    trial: optuna.trial.FrozenTrial,
    *,
    ladder: _Ladder,
    bracket: int,
    first_rung_attrs: Mapping[str, Any],
) -> bool:
    """ASHA's decision after the trial's latest report, on one bracket's ladder.

    1. A report that reaches no new rung, or that is at ``max_resource`` (the trial is done),
       decides nothing and touches no storage: not pruned.
    2. A report that reaches rungs with a NaN or infinite value is pruned, and not recorded.
    3. Otherwise its value is recorded at each rung reached (once: a repeated report changes
       nothing), the store counts ``n`` and ``n_better`` at the highest of them, and
       :func:`asha_continues` decides.
    """
    several = len(study.directions) > 1
    steps: Mapping[int, Any] = objective_curve(trial) if several else trial.intermediate_values
    if not steps:
        return False
    step = max(steps)
    if ladder.max_resource is not None and step >= ladder.max_resource:
        return False
    crossed = ladder.crossed(max((s for s in steps if s < step), default=0), step)
    if not crossed:
        return False

    if first_rung_attrs and crossed[0] == ladder.min_resource:  # first rung: Hyperband bracket
        storage, trial_id = storage_of(study), trial_id_of(trial)
        for key, value in first_rung_attrs.items():
            storage.set_trial_system_attr(trial_id, key, value)
    value = steps[step]
    if several:
        return not _pareto_continues(study, trial.number, ladder, bracket, crossed, value)
    if not math.isfinite(value):
        _logger.debug("trial %d pruned at step %d: value %r", trial.number, step, value)
        return True
    maximize = study.direction == StudyDirection.MAXIMIZE
    n, n_better = open_rung_store(study).add_and_rank(
        bracket, crossed, trial.number, value, maximize=maximize
    )
    keep = asha_continues(n, n_better, ladder.reduction_factor)
    _logger.debug(
        "trial %d, bracket %d, rung %d: %d of %d better, %s",
        trial.number, bracket, crossed[-1], n_better, n, "continues" if keep else "pruned",
    )
    return not keep


def _pareto_continues(
    study: optuna.Study, number: int, ladder: _Ladder, bracket: int, crossed: list[int],
    values: tuple[float, ...],
) -> bool:
    """Multi-objective ASHA: the trial continues iff it is among the first
    ``max(1, n // reduction_factor)`` of the ``n`` records at its rung (its own included) in
    :func:`lightning_hpo.pareto.pareto_order`. A NaN or infinite value stops it unrecorded."""
    if not is_finite_point(values):
        _logger.debug("trial %d pruned at step %d: values %r", number, crossed[-1], values)
        return False
    if len(values) != len(study.directions):
        raise ValueError(
            f"trial {number} reported {len(values)} values, but study '{study.study_name}' has "
            f"{len(study.directions)} objectives")
    minimize = tuple(d == StudyDirection.MINIMIZE for d in study.directions)
    records = open_vector_store(study).add_and_read(bracket, crossed, number, values)
    position = pareto_order(records, minimize).index(number)
    keep = asha_continues(len(records), position, ladder.reduction_factor)
    _logger.debug("trial %d, bracket %d, rung %d: %d of %d ranked above, %s", number, bracket,
                  crossed[-1], position, len(records), "continues" if keep else "pruned")
    return keep


#: Why Optuna's ``"auto"`` is refused, per argument: what to give instead.
_AUTO = {
    "min_resource": "give the first rung in epochs (1 is the usual choice)",
    "max_resource": "give the epochs a trial may train",
}


def _resource(name: str, value: Any, unbounded: bool = False) -> Any:
    """A pruner argument as the ladder checks it: a NumPy integer as an ``int`` (its settings
    are written as JSON); Optuna's ``"auto"`` refused, saying why (and, where ``unbounded``,
    that None is a ladder without a top)."""
    if isinstance(value, str) and value == "auto" and name in _AUTO:
        raise ValueError(
            f"The value of `{name}` is 'auto', but must be an integer: Optuna's 'auto' is read "
            "from the first trial to finish, which the processes of one study would read at "
            f"different times (and ASHA's rungs would move under recorded values); {_AUTO[name]}"
            + (" (or None: a ladder without a top)." if unbounded and name == "max_resource"
               else ".")
        )
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


@dataclass(frozen=True)
class _Ladder:
    """One bracket's rungs (epochs); unbounded when ``max_resource`` is None."""

    min_resource: int
    max_resource: int | None
    reduction_factor: int
    levels: list[int] | None = field(init=False, compare=False)

    def __post_init__(self) -> None:
        # rung_levels validates all three arguments (its errors name the argument).
        bounded = self.max_resource is not None
        levels = rungs.rung_levels(
            self.min_resource, max_resource=self.max_resource,
            reduction_factor=self.reduction_factor, up_to=None if bounded else 0,
        )
        object.__setattr__(self, "levels", levels if bounded else None)

    def crossed(self, previous_step: int, step: int) -> list[int]:
        """The rungs in ``(previous_step, step]``, ascending."""
        if self.levels is not None:
            return rungs.crossed_rungs(self.levels, previous_step, step)
        levels = rungs.rung_levels(self.min_resource, reduction_factor=self.reduction_factor,
                                   up_to=step)
        return rungs.crossed_rungs(levels, previous_step, step)


class _SettingsNote:
    """Writes a pruner's settings as a study's :data:`PRUNER_ATTR`, once per study.

    The first call for a study reads the attribute and writes it when it differs (another
    pruner's settings are replaced, with a warning); later calls for that study, on the same
    storage object, cost a dictionary lookup.
    """

    def __init__(self, settings: dict[str, Any]) -> None:
        self.settings: dict[str, Any] = json.loads(json.dumps(settings))  # JSON, as stored
        self._noted: weakref.WeakKeyDictionary[BaseStorage, set[int]] = (
            weakref.WeakKeyDictionary()
        )

    def __call__(self, study: optuna.Study) -> None:
        storage, study_id = storage_of(study), study_id_of(study)
        noted = self._noted.get(storage)
        if noted is not None and study_id in noted:
            return
        stored = storage.get_study_system_attrs(study_id).get(PRUNER_ATTR)
        if stored != self.settings:
            if stored is not None:
                _logger.warning(
                    "study '%s' was pruned with other settings (%s); now %s",
                    study.study_name, stored, self.settings,
                )
            storage.set_study_system_attr(study_id, PRUNER_ATTR, json.loads(json.dumps(
                self.settings)))
        self._noted.setdefault(storage, set()).add(study_id)

    def __getstate__(self) -> dict[str, Any]:  # storages are not pickled with the pruner
        return {"settings": self.settings}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["settings"])  # type: ignore[misc]


class ASHAPruner(optuna.pruners.BasePruner):
    """Asynchronous successive halving (ASHA), with its rungs in the study's storage.

    Li et al., "A System for Massively Parallel Hyperparameter Tuning", MLSys 2020. Rungs are at
    ``min_resource * reduction_factor**k`` epochs (and at ``max_resource``). When a trial first
    reports at or past a rung, its value is recorded there (and at any rung it skipped) and it
    continues only if it is among the best ``max(1, n // reduction_factor)`` of the ``n`` values
    recorded at that rung so far, its own included (:func:`asha_continues`); ties continue, and
    the first trial at a rung always continues. NaN or infinite values are pruned at the first
    rung and never recorded. In a study with several objectives the same rule ranks by
    :func:`lightning_hpo.pareto.pareto_order` (see the module docstring). A trial that reached
    ``max_resource`` is finished and never pruned.
    The first decision for a study writes the settings as the study system attribute
    ``lightning_hpo:pruner`` (:data:`~lightning_hpo.schema.PRUNER_ATTR`), for reports.

    Unlike Optuna's ``SuccessiveHalvingPruner``, a decision reads only the rung's records (one
    indexed query on RDB storages), not every trial of the study, and steps between rungs cost
    nothing. Records are shared by every process on the storage.

    Args:
        min_resource: the first rung, in epochs completed (``>= 1``; in optimizer steps with
            ``PruningCallback(..., resource="step")``, and so ``max_resource``).
        max_resource: the epochs a trial may train (``>= min_resource``), the last rung, where
            no decision is made; ``None`` for an unbounded ladder. Keyword-only, as
            ``reduction_factor``: Optuna's ``SuccessiveHalvingPruner`` takes
            ``(min_resource, reduction_factor)`` in that order, ours the package's one order
            (:mod:`lightning_hpo.pruners.rungs`), so a positional call fails instead of meaning
            another
            ladder.
        reduction_factor: keep one in ``reduction_factor`` trials at each rung (``>= 2``).

    Raises:
        ValueError: an argument is out of range, naming it (NumPy integers are integers;
            Optuna's ``"auto"`` is refused, saying why).

    Example::

        >>> import optuna
        >>> from lightning_hpo import ASHAPruner
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
        ...     pruner=ASHAPruner(min_resource=1, max_resource=9, reduction_factor=3))
        >>> study.optimize(objective, n_trials=10)
    """

    #: It ranks several objectives (Pareto fronts): the PruningCallback asks it in a study with
    #: several objectives, where Optuna's own pruners would see no values.
    supports_several_objectives = True

    def __init__(
        self, min_resource: int = 1, *, max_resource: int | None = None, reduction_factor: int = 3
    ) -> None:
        min_resource = _resource("min_resource", min_resource)
        max_resource = _resource("max_resource", max_resource, unbounded=True)
        reduction_factor = _resource("reduction_factor", reduction_factor)
        self._ladder = _Ladder(min_resource, max_resource, reduction_factor)  # validates
        self._note = _SettingsNote({
            "name": "asha",
            "min_resource": min_resource,
            "max_resource": max_resource,
            "reduction_factor": reduction_factor,
            "brackets": None if self._ladder.levels is None else [self._ladder.levels],
            "budgets": [],
        })

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
        self._note(study)
        return _asha_prune(study, trial, ladder=self._ladder, bracket=0, first_rung_attrs={})

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(min_resource={self.min_resource}, "
            f"max_resource={self.max_resource}, reduction_factor={self.reduction_factor})"
        )


class HyperbandPruner(HyperbandBase):
    """Hyperband over ASHA brackets, every process agreeing on each trial's bracket.

    Li et al., "Hyperband: A Novel Bandit-Based Approach to Hyperparameter Optimization", JMLR
    2018, run asynchronously as in Li et al., "A System for Massively Parallel Hyperparameter
    Tuning", MLSys 2020. Bracket ``s`` (``0 <= s < n_brackets``, with ``n_brackets =
    floor(log_eta(max_resource / min_resource)) + 1``) is an :class:`ASHAPruner` ladder starting
    at ``min_resource * reduction_factor**s`` epochs, with rungs and records of its own. A
    trial's bracket is a hash of the study name and trial number weighted by Optuna's
    per-bracket budgets, so every process computes the same one; it is stored on the trial
    (``lightning_hpo:bracket``) at its first rung. The first decision for a study writes the
    settings, every bracket's rungs and the budgets as the study system attribute
    ``lightning_hpo:pruner`` (:data:`~lightning_hpo.schema.PRUNER_ATTR`), for reports.

    This is an ``optuna.pruners.HyperbandPruner`` (through
    :class:`lightning_hpo._optuna.HyperbandBase`) only so that samplers see the trials of the
    trial's own bracket, the one hook Optuna offers; nothing of the parent's algorithm runs.

    Args:
        min_resource: the first rung of the most aggressive bracket, in epochs (``>= 1``; in
            optimizer steps with ``PruningCallback(..., resource="step")``, and so
            ``max_resource``).
        max_resource: the epochs a trial may train (``>= min_resource``); required, so that
            every process has the same brackets from the start.
        reduction_factor: keep one in ``reduction_factor`` trials at each rung (``>= 2``).

    Raises:
        ValueError: an argument is out of range or missing, naming it (NumPy integers are
            integers; Optuna's ``"auto"`` is refused, saying why).

    Example::

        >>> import optuna
        >>> from lightning_hpo import HyperbandPruner
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

    #: It ranks several objectives (Pareto fronts): the PruningCallback asks it in a study with
    #: several objectives, where Optuna's own pruners would see no values.
    supports_several_objectives = True

    def __init__(
        self, min_resource: int = 1, max_resource: int | None = None, reduction_factor: int = 3
    ) -> None:
        min_resource = _resource("min_resource", min_resource)
        max_resource = _resource("max_resource", max_resource)
        reduction_factor = _resource("reduction_factor", reduction_factor)
        if max_resource is None:
            raise ValueError(
                "The value of `max_resource` is None, but must be an integer "
                "`max_resource >= min_resource`: Hyperband's brackets depend on it."
            )
        n_brackets = rungs.hyperband_brackets(min_resource, max_resource, reduction_factor)
        super().__init__(min_resource, max_resource, reduction_factor)
        self._budgets = rungs.trial_allocation_budgets(min_resource, max_resource, reduction_factor)
        self._ladders = [
            _Ladder(
                rungs.bracket_min_resource(min_resource, reduction_factor, bracket),
                max_resource,
                reduction_factor,
            )
            for bracket in range(n_brackets)
        ]
        self._first_rung_attrs = [{BRACKET_ATTR: bracket} for bracket in range(n_brackets)]
        self._note = _SettingsNote({
            "name": "hyperband",
            "min_resource": min_resource,
            "max_resource": max_resource,
            "reduction_factor": reduction_factor,
            "brackets": [ladder.levels for ladder in self._ladders],
            "budgets": self._budgets,
        })

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
        return list(self._budgets)

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
        return rungs.bracket_of(study_name, trial_number, self._budgets)

    def prune(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> bool:
        """Whether to stop ``trial`` after its latest report, by ASHA in the trial's bracket."""
        self._note(study)
        bracket = self.bracket_of(study.study_name, trial.number)
        return _asha_prune(
            study,
            trial,
            ladder=self._ladders[bracket],
            bracket=bracket,
            first_rung_attrs=self._first_rung_attrs[bracket],
        )

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(min_resource={self.min_resource}, "
            f"max_resource={self.max_resource}, reduction_factor={self.reduction_factor})"
        )
