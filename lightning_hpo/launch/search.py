"""What decides in a study: the config's sampler, pruner and schedule, built side by side.

The sampler proposes configurations; at the rungs either the pruner stops trials (``asha`` and
``hyperband`` with ``mode: stop``: an Optuna pruner in every worker) or the schedule pauses and
promotes them (``sync_*`` and ``mode: promotion``: :mod:`lightning_hpo.schedules`, applied by
:mod:`lightning_hpo.launch.scheduler`). No torch here.

Example::

    >>> from lightning_hpo.launch.config import parse_config
    >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"},
    ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}},
    ...                     "pruner": {"name": "asha", "mode": "promotion", "max_resource": 9},
    ...                     "stop": {"n_trials": 20}})
    >>> type(build_pruner(cfg)).__name__, build_schedule(cfg).ladders()
    ('NopPruner', [[1, 3, 9]])
"""

from __future__ import annotations

import optuna

from lightning_hpo import schedules
from lightning_hpo.launch.config import Config, sampler_class, sampler_kwargs
from lightning_hpo.pruners import ASHAPruner, HyperbandPruner

__all__ = ["build_pruner", "build_sampler", "build_schedule"]


def build_sampler(cfg: Config, worker_offset: int = 0) -> optuna.samplers.BaseSampler:
    """The config's sampler; each worker gets its own seed so workers do not sample alike.

    ``sampler.name`` is ``random``, ``tpe`` or ``gp``, or ``sampler.class`` a
    ``"package.module:Class"`` path, built with the config's other ``sampler.*`` arguments;
    the seed, ``cfg.seed + 7919 * worker_offset`` (None when the config has none), is passed
    when the class takes ``seed``.
    Each worker process builds its own and samples when it claims a trial, reading the study
    from the storage.

    Raises:
        ConfigError: ``sampler.*`` for a class path that cannot be built
            (:func:`~lightning_hpo.launch.config.sampler_kwargs`).

    Example::

        >>> from lightning_hpo.launch.config import parse_config
        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"}, "seed": 1,
        ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": "none",
        ...                     "trainer": {"max_epochs": 3}, "stop": {"n_trials": 4},
        ...                     "sampler": "tpe"})
        >>> type(build_sampler(cfg, worker_offset=2)).__name__
        'TPESampler'
    """
    seed = None if cfg.seed is None else cfg.seed + 7919 * worker_offset
    return sampler_class(cfg.sampler)(**sampler_kwargs(cfg, seed))


def build_pruner(cfg: Config) -> optuna.pruners.BasePruner:
    """The config's pruner: ours for asha and hyperband, Optuna's NopPruner for none and for the
    pausing schedules (``sync_*``, ``mode: promotion``), where the launcher's scheduler decides
    at rungs instead (:func:`build_schedule`, :mod:`lightning_hpo.launch.scheduler`)."""
    p = cfg.pruner
    if p.name == "none" or p.pauses:
        return optuna.pruners.NopPruner()
    if p.name == "asha":
        return ASHAPruner(p.min_resource, max_resource=p.max_resource,
                          reduction_factor=p.reduction_factor)
    return HyperbandPruner(p.min_resource, p.max_resource or cfg.max_epochs, p.reduction_factor)


def build_schedule(cfg: Config) -> schedules.Schedule:
    """The config's schedule: a pausing one for ``sync_*`` and ``mode: promotion``, else
    :class:`~lightning_hpo.schedules.StopSchedule` (the pruner stops trials; only interrupted
    trials are resumed)."""
    p = cfg.pruner
    per_objective = tuple(d == "minimize" for _, d in cfg.objectives)
    minimize: schedules.Minimize = per_objective if cfg.several else per_objective[0]
    top = p.max_resource or cfg.max_epochs
    if p.name == "sync_sh":
        return schedules.SyncSuccessiveHalving(
            p.min_resource, top, p.reduction_factor, p.prefact, p.resume, minimize=minimize,
            finish_best=p.finish_best,
        )
    if p.name == "sync_hyperband":
        return schedules.SyncHyperband(
            p.min_resource, top, p.reduction_factor, p.prefact, p.resume, minimize=minimize,
            finish_best=p.finish_best,
        )
    if p.mode == "promotion" and p.name == "asha":
        return schedules.PromotionASHA(p.min_resource, top, p.reduction_factor, minimize=minimize,
                                       max_paused=cfg.checkpoint.max_paused,
                                       finish_best=p.finish_best)
    if p.mode == "promotion" and p.name == "hyperband":
        return schedules.PromotionHyperband(
            p.min_resource, top, p.reduction_factor, minimize=minimize, study_name=cfg.study,
            max_paused=cfg.checkpoint.max_paused, finish_best=p.finish_best,
        )
    return schedules.StopSchedule(cfg.max_epochs)
