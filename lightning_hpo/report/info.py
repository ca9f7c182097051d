"""What a study is, beyond its trials: metric(s), direction(s), the pruner's rungs and brackets.

Everything comes from what the study itself stores (:mod:`lightning_hpo.schema`), with no
defaults of the launcher's: the metric and ``trainer.max_epochs`` from the launcher's config
(:data:`~lightning_hpo.schema.CONFIG_ATTR`, where the launcher fills in the resolved values),
the rung ladders and Hyperband's bracket budgets from what our pruners write the first time
they decide for the study (:data:`~lightning_hpo.schema.PRUNER_ATTR`: a study without them, a
plain Optuna study or one whose trials never reached a rung yet, has no known rungs), and
whether the trials' steps count epochs or optimizer steps from what the callback writes
(:data:`~lightning_hpo.schema.RESOURCE_ATTR`; epochs without it).

A study names its objective(s), in this order of preference: Optuna's ``study.metric_names``,
the launcher config's ``metric`` (a list with several objectives, Optuna's
``directions=[...]``), else ``value`` (``value_0``, ``value_1``... with several);
:attr:`StudyInfo.metrics` and :attr:`StudyInfo.directions` hold them all,
:attr:`StudyInfo.metric` and :attr:`StudyInfo.direction` the first objective's.

Example::

    >>> info = StudyInfo("demo", "minimize", pruner="asha", rungs=(1, 3, 9),
    ...                  brackets=((1, 3, 9),))
    >>> info.better(0.1, 0.2), info.bracket_of(7), info.several
    (True, 0, False)
    >>> two = StudyInfo("mo", "minimize", metrics=("error", "latency_ms"),
    ...                 directions=("minimize", "minimize"))
    >>> two.several, two.metric, two.minimize
    (True, 'error', (True, True))
"""

from __future__ import annotations

import dataclasses
import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

import optuna

from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.pareto import directions_minimize
from lightning_hpo.pruners.rungs import bracket_of, rung_levels
from lightning_hpo.schema import CONFIG_ATTR, PRUNER_ATTR, RESOURCE_ATTR

__all__ = ["Direction", "StudyInfo", "study_info"]

_logger = logging.getLogger(__name__)

#: An objective's direction.
Direction = Literal["minimize", "maximize"]


@dataclass(frozen=True)
class StudyInfo:
    """What the report needs to know about a study beyond its trials.

    Attributes:
        name: the study name.
        direction: ``"minimize"`` or ``"maximize"`` (with several objectives, the first's).
        metric: the metric name from the launcher config, else ``"value"`` (with several
            objectives, the first's).
        pruner: ``"asha"`` or ``"hyperband"`` (as the pruner stored itself; a pausing
            schedule's name, e.g. ``"sync_sh"``, where the launcher stored its ladder the same
            way), ``"none"`` (the launcher config says so), or ``None`` when unknown.
        rungs: rung levels in epochs, or steps by ``resource`` (empty when there is no pruner
            or it is unknown); for Hyperband, those of bracket 0 (the most aggressive).
        max_epochs: epochs a trial may train (``None`` when unknown).
        config: the launcher config (storage masked), ``{}`` for a plain Optuna study.
        brackets: rung levels of each bracket, bracket 0 first: ``(rungs,)`` for ASHA, one
            ladder per Hyperband bracket, ``()`` without a pruner.
        budgets: Hyperband's per-bracket trial allocation (what assigns a trial to a bracket);
            ``()`` for other pruners.
        metrics: every objective's name, in the study's order (``(metric,)`` with one);
            ``metric`` is its first, or it is ``(metric,)`` when not given.
        directions: every objective's direction, in that order (``(direction,)`` with one);
            ``direction`` is its first, or it is ``(direction,)`` when not given.
        resource: what the trials' reported steps count: ``"epoch"`` (epochs completed: the
            launcher's studies, a plain Optuna study) or ``"step"`` (optimizer steps, a study
            of ``PruningCallback(..., resource="step")``); the rungs count the same.

    Example::

        >>> StudyInfo("demo", "maximize").better(0.9, 0.8)
        True
        >>> StudyInfo("demo", "maximize", metric="accuracy").metrics
        ('accuracy',)
    """

    name: str
    direction: Direction
    metric: str = "value"
    pruner: str | None = None
    rungs: tuple[int, ...] = ()
    max_epochs: int | None = None
    config: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    brackets: tuple[tuple[int, ...], ...] = ()
    budgets: tuple[int, ...] = ()
    metrics: tuple[str, ...] = ()
    directions: tuple[Direction, ...] = ()
    resource: Literal["epoch", "step"] = "epoch"

    def __post_init__(self) -> None:  # one objective's fields and all objectives' agree
        for one, every in (("metric", "metrics"), ("direction", "directions")):
            if getattr(self, every):
                object.__setattr__(self, one, getattr(self, every)[0])
            else:
                object.__setattr__(self, every, (getattr(self, one),))
        if len(self.metrics) != len(self.directions):
            raise ValueError(f"The value of `metrics` is {self.metrics}, but must name each of "
                             f"the {len(self.directions)} `directions`.")

    @property
    def several(self) -> bool:
        """Whether the study has several objectives."""
        return len(self.directions) > 1

    @property
    def minimize(self) -> tuple[bool, ...]:
        """Per objective, whether lower is better (:mod:`lightning_hpo.pareto`'s argument)."""
        return directions_minimize(self.directions)

    @property
    def objectives(self) -> str:
        """The objectives in words: ``minimize validation_error, maximize accuracy``."""
        return ", ".join(f"{d} {m}" for m, d in zip(self.metrics, self.directions, strict=True))

    def objective(self, index: int) -> StudyInfo:
        """This study seen through one of its objectives (a study with one objective: itself),
        e.g. to draw that objective's learning curves.

        Example::

            >>> two = StudyInfo("mo", "minimize", metrics=("error", "accuracy"),
            ...                 directions=("minimize", "maximize"))
            >>> one = two.objective(1)
            >>> one.metric, one.direction, one.several
            ('accuracy', 'maximize', False)
        """
        metric, direction = self.metrics[index], self.directions[index]
        return dataclasses.replace(self, metric=metric, direction=direction, metrics=(metric,),
                                   directions=(direction,))

    @property
    def units(self) -> str:
        """The reported steps' unit, plural: ``"epochs"`` or ``"steps"``.

        Example::

            >>> StudyInfo("d", "minimize").units, StudyInfo("d", "minimize", resource="step").units
            ('epochs', 'steps')
        """
        return f"{self.resource}s"

    @property
    def from_launcher(self) -> bool:
        """Whether the launcher created the study (its config is stored with it)."""
        return bool(self.config)

    @property
    def schedule(self) -> str | None:
        """The schedule in words: the pruner's name, with ``promotion`` for promotion-type
        ASHA or Hyperband (the launcher config's ``pruner.mode``); ``None`` when unknown.

        Example::

            >>> StudyInfo("d", "minimize", pruner="asha",
            ...           config={"pruner": {"name": "asha", "mode": "promotion"}}).schedule
            'asha promotion'
        """
        spec = self.config.get("pruner")
        name = self.pruner or (spec.get("name") if isinstance(spec, Mapping) else None)
        if not isinstance(name, str):
            return None
        mode = spec.get("mode") if isinstance(spec, Mapping) else None
        return f"{name} promotion" if mode == "promotion" else name

    @property
    def pauses(self) -> bool:
        """Whether its trials pause at rungs (``sync_sh``, ``sync_hyperband``, ``mode:
        promotion``): a schedule decides there, and leaves no rung records of a pruner."""
        schedule = self.schedule or ""
        return schedule.startswith("sync_") or schedule.endswith(" promotion")

    def better(self, a: float, b: float) -> bool:
        """Whether value ``a`` is at least as good as ``b`` in this study's direction (with
        several objectives, in the first objective's)."""
        return a <= b if self.direction == "minimize" else a >= b

    def bracket_of(self, trial_number: int, round_index: int | None = None) -> int | None:
        """The pruner's bracket for a trial that has not stored one (``None`` without pruner).

        Hyperband assigns brackets by a hash of the study name and trial number, so the report
        finds the bracket of a trial that stopped before its first rung (where the pruner
        stores it) exactly as the pruner would. Synchronous Hyperband runs its brackets in
        turn, one per round, and stores its ladders in round order: round ``j``'s trials
        (``round_index``, :data:`ATTR.ROUND <lightning_hpo.schema.ATTR>`) are in bracket
        ``j % len(brackets)``.

        Example::

            >>> StudyInfo("demo", "minimize").bracket_of(3) is None
            True
            >>> StudyInfo("d", "minimize", pruner="sync_hyperband",
            ...           brackets=((1, 3, 9), (3, 9), (9,))).bracket_of(7, round_index=4)
            1
        """
        if self.budgets:
            return bracket_of(self.name, trial_number, self.budgets)
        if self.pruner == "sync_hyperband" and self.brackets and round_index is not None:
            return round_index % len(self.brackets)
        return 0 if self.brackets else None


def study_info(study: optuna.Study) -> StudyInfo:
    """Metric(s), direction(s) and rung levels of a study, from what it stores.

    Example::

        >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
        >>> info = study_info(optuna.create_study(study_name="plain"))
        >>> info.name, info.direction, info.metric, info.rungs, info.pruner
        ('plain', 'minimize', 'value', (), None)
        >>> two = optuna.create_study(directions=["minimize", "maximize"])
        >>> study_info(two).objectives
        'minimize value_0, maximize value_1'
    """
    directions: tuple[Direction, ...] = tuple(
        "minimize" if d == optuna.study.StudyDirection.MINIMIZE else "maximize"
        for d in study.directions
    )
    config = _json_dict(study.user_attrs.get(CONFIG_ATTR))
    metrics = _metric_names(study, config, len(directions))
    trainer = config.get("trainer")
    max_epochs = trainer.get("max_epochs") if isinstance(trainer, Mapping) else None
    if isinstance(max_epochs, bool) or not isinstance(max_epochs, int) or max_epochs < 1:
        max_epochs = None
    system = storage_of(study).get_study_system_attrs(study_id_of(study))
    ladders = _ladders(system.get(PRUNER_ATTR), max_epochs, study.study_name)
    if ladders is None:
        spec = config.get("pruner")
        name = spec.get("name") if isinstance(spec, Mapping) else spec
        pruner = "none" if name == "none" else None
        brackets: tuple[tuple[int, ...], ...] = ()
        budgets: tuple[int, ...] = ()
    else:
        pruner, brackets, budgets = ladders
    return StudyInfo(
        study.study_name, directions[0], metrics[0], pruner, brackets[0] if brackets else (),
        max_epochs, config, brackets=brackets, budgets=budgets, metrics=metrics,
        directions=directions,
        resource="step" if system.get(RESOURCE_ATTR) == "step" else "epoch",
    )


def _metric_names(study: optuna.Study, config: Mapping[str, Any], n: int) -> tuple[str, ...]:
    """The objectives' names: Optuna's ``metric_names`` (``study.set_metric_names``), else the
    launcher config's ``metric`` (a list with several), else ``value`` (one objective) or
    ``value_0``, ``value_1``... (several)."""
    stored = study.metric_names
    optuna_names = tuple(stored) if stored is not None and len(stored) == n else None
    metric = config.get("metric")
    if isinstance(metric, str):
        metric = [metric]
    config_names = (tuple(metric) if isinstance(metric, list) and len(metric) == n
                    and all(isinstance(m, str) and m for m in metric) else None)
    if n == 1:
        return optuna_names or config_names or ("value",)
    return optuna_names or config_names or tuple(f"value_{k}" for k in range(n))


def _json_dict(text: object) -> dict[str, Any]:
    try:
        value = json.loads(text) if isinstance(text, str) else text
    except ValueError:
        return {}
    return dict(value) if isinstance(value, Mapping) else {}


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _ladders(
    stored: object, max_epochs: int | None, study_name: str
) -> tuple[str, tuple[tuple[int, ...], ...], tuple[int, ...]] | None:
    """(pruner name, brackets, budgets) from the pruner's stored settings; None when absent.

    ASHA without ``max_resource`` stores ``"brackets": None`` (its ladder has no top): its rungs
    are then listed up to ``max_epochs`` when that is known, else left unknown.
    """
    pruner = _json_dict(stored)
    name = pruner.get("name")
    if not pruner or not isinstance(name, str):
        if stored is not None:
            _logger.warning("study %s: unreadable %s %r", study_name, PRUNER_ATTR, stored)
        return None
    raw, budgets = pruner.get("brackets"), pruner.get("budgets") or []
    if not isinstance(budgets, list) or not all(_is_int(b) and b >= 0 for b in budgets):
        _logger.warning("study %s: unreadable bracket budgets %r", study_name, budgets)
        budgets = []
    if raw is None:
        minimum, factor = pruner.get("min_resource"), pruner.get("reduction_factor")
        if max_epochs is None or not (isinstance(minimum, int) and isinstance(factor, int)):
            return name, (), ()
        try:
            levels = rung_levels(minimum, reduction_factor=factor, up_to=max_epochs)
            return name, (tuple(levels),), ()
        except ValueError as error:
            _logger.warning("study %s: cannot compute rungs: %s", study_name, error)
            return name, (), ()
    if not isinstance(raw, list) or not all(
        isinstance(levels, list) and levels and all(_is_int(x) and x >= 1 for x in levels)
        for levels in raw
    ):
        _logger.warning("study %s: unreadable rung ladders %r", study_name, raw)
        return name, (), ()
    brackets = tuple(tuple(levels) for levels in raw)
    hyperband = len(budgets) == len(brackets) and sum(budgets) > 0
    return name, brackets, tuple(budgets) if hyperband else ()
