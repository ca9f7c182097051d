"""What decides in a study: the config's sampler, pruner and schedule, built side by side.

The sampler proposes configurations; at the rungs either the pruner stops trials (``asha`` and
``hyperband`` with ``mode: stop``: an Optuna pruner in every worker) or the schedule pauses and
promotes them (``sync_*`` and ``mode: promotion``: :mod:`lightning_hpo.schedules`, applied by
:mod:`lightning_hpo.launch.study.scheduler`). No torch here.

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

__all__ = ["build_pruner", "build_sampler", "build_schedule", "sampler_for_trial"]


def build_sampler(cfg: Config, offset: int = 0) -> optuna.samplers.BaseSampler:
    """The config's sampler, seeded for one trial.

    ``sampler.name`` is ``random``, ``tpe`` or ``gp``, or ``sampler.class`` a
    ``"package.module:Class"`` path, built with the config's other ``sampler.*`` arguments;
    the seed, ``cfg.seed + 7919 * offset`` (None when the config has none), is passed
    when the class takes ``seed``.
    A launcher's worker builds one for each new trial it claims, with the trial's number as
    ``offset`` (:func:`sampler_for_trial`), and samples from the study as the storage holds it.

    Raises:
        ConfigError: ``sampler.*`` for a class path that cannot be built
            (:func:`~lightning_hpo.launch.config.sampler_kwargs`).

    Example::

        >>> from lightning_hpo.launch.config import parse_config
        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"}, "seed": 1,
        ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": "none",
        ...                     "trainer": {"max_epochs": 3}, "stop": {"n_trials": 4},
        ...                     "sampler": "tpe"})
        >>> type(build_sampler(cfg, offset=2)).__name__
        'TPESampler'
    """
    seed = None if cfg.seed is None else cfg.seed + 7919 * offset
    return sampler_class(cfg.sampler)(**sampler_kwargs(cfg, seed))


def sampler_for_trial(study: optuna.Study, cfg: Config, number: int) -> None:
    """Give ``study`` the sampler that draws trial ``number``'s values: seeded from the trial's
    number, so that trial ``k`` draws the same values whichever worker, machine or run claims
    it, and no two trials draw from one seed (a worker seeded once would draw again, in a
    resumed study or on another machine, what it drew before). Unseeded, the sampler is kept.

    Example::

        >>> from lightning_hpo.launch.config import parse_config
        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"}, "seed": 1,
        ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}}, "pruner": "none",
        ...                     "trainer": {"max_epochs": 3}, "stop": {"n_trials": 4}})
        >>> study = optuna.create_study()
        >>> sampler_for_trial(study, cfg, 3)
        >>> study.sampler._rng.rng.randint(1000) == build_sampler(cfg, 3)._rng.rng.randint(1000)
        True
    """
    if cfg.seed is not None:
        study.sampler = build_sampler(cfg, number)


def build_pruner(cfg: Config) -> optuna.pruners.BasePruner:
    """The config's pruner: ours for asha and hyperband, Optuna's NopPruner for none and for the
    pausing schedules (``sync_*``, ``mode: promotion``), where the launcher's scheduler decides
    at rungs instead (:func:`build_schedule`, :mod:`lightning_hpo.launch.study.scheduler`)."""
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
