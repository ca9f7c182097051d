"""The launcher's side of the Optuna study: create it once, queue the trial budget, lock it.

No torch here: the supervisor process uses it too. A trial's own records are
:mod:`lightning_hpo.launch.study.trials`'; what decides (sampler, pruner, schedule) is
:mod:`lightning_hpo.launch.study.search`.

**An exact ``n_trials`` across workers and machines.** The launcher that creates the study
enqueues the ``initial`` configurations and then one empty *ticket* per remaining trial: WAITING
trials whose hyperparameters the sampler fills in when a worker claims them, moving them to
RUNNING, which the storage allows once. When no ticket is left the budget is spent, whatever the
number of launchers. Creating, loading and topping up the queue happen under one lock per study
(:func:`study_lock`), so two launchers starting together never both enqueue. The queue is
written in one storage write (:func:`~lightning_hpo._optuna.enqueue_trials`), so Ctrl-C leaves
all of it or none (Optuna deletes no trial; ``stop.n_trials`` is bounded by
:data:`~lightning_hpo.launch.config.MAX_N_TRIALS`). A study left without trials is set up again
by the next launcher; unclaimed tickets stay WAITING for the next run.

**An edited config.** :func:`open_study` compares the config the study was created with (its
:data:`~lightning_hpo.schema.CONFIG_ATTR`) with the new one
(:mod:`lightning_hpo.launch.config.changes`) and refuses, before anything is written, a change
of how trials are trained, sampled or compared; a change of the budget or the devices goes on
(:func:`config_changes` says which).
"""

from __future__ import annotations

import contextlib
import json
import logging
import warnings
from collections.abc import Iterator
from typing import Any

import optuna
from optuna.trial import TrialState

from lightning_hpo._optuna import (
    OptunaContractError,
    enqueue_trials,
    storage_of,
    study_id_of,
    unwrap_storage,
)
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import Config
from lightning_hpo.launch.config.changes import Changes, compare_configs
from lightning_hpo.launch.study.search import build_pruner, build_sampler, build_schedule
from lightning_hpo.schema import ATTR, CONFIG_ATTR, PRUNER_ATTR
from lightning_hpo.storage import (
    LOCKING_DIALECTS,
    StorageSpec,
    file_lock,
    is_proxy,
    lock_key,
    mask,
    proxy_client,
    sql_lock,
)

__all__ = [
    "config_changes", "existing_changes", "open_study", "queue_of", "stored_config", "study_lock",
]

_logger = logging.getLogger(__name__)


def open_study(
    cfg: Config, storage: optuna.storages.BaseStorage, *, queue: bool = True
) -> tuple[optuna.Study, bool]:
    """Create the study, or load it when it exists; returns ``(study, created)``.

    With ``queue`` the creator enqueues the initial configurations and the ticket budget, and a
    loader tops the budget up to ``stop.n_trials``. A loaded study without trials, whose
    creator was stopped before it wrote the queue, is queued as a new one (``initial``
    included, its config stored when it has none); ``created`` is still False for it.

    Raises:
        ConfigError: when an existing study was created with a config that this one changes in
            a way that mixes two studies in one
            (:meth:`~lightning_hpo.launch.config.changes.Changes.
            refusal`: the pruner, metric, direction, space...), or with the other direction;
            nothing is written then. (With ``queue=False``, a worker's, the config is the
            launcher's, already compared: only the direction is checked.)
    """
    sampler, pruner = build_sampler(cfg), build_pruner(cfg)
    if not queue:
        return _create_or_load(cfg, storage, sampler, pruner)
    # Refuse an edited config or a wrong direction before making the lock file.
    _load(cfg, storage, sampler, pruner, compare=True)
    with study_lock(cfg, storage, "setup"):
        # Compared again: a study another launcher created meanwhile, with its own config.
        study, created = _create_or_load(cfg, storage, sampler, pruner, compare=True)
        # A study without trials was never queued: the one who created it was stopped (Ctrl-C)
        # before its queue was written, which is written all or none. Set up as a new one.
        fresh = created or not study.get_trials(deepcopy=False)
        if fresh and CONFIG_ATTR not in study.user_attrs:
            study.set_user_attr(CONFIG_ATTR, json.dumps(stored_config(cfg), default=str))
        if cfg.pruner.pauses:
            _note_schedule(study, cfg)
        _enqueue(study, storage, queue_of(cfg, study, fresh))
    return study, created


def stored_config(cfg: Config) -> dict[str, Any]:
    """What the study keeps of its config (:data:`~lightning_hpo.schema.CONFIG_ATTR`).

    The config as the user wrote it (after ``--set`` overrides), its storage masked, with the
    resolved values filled in so that readers need no defaults: ``metric``, ``direction`` and
    ``trainer.max_epochs``. (The pruner's resolved settings are the study's
    :data:`~lightning_hpo.schema.PRUNER_ATTR`, written by the pruner.)

    Example::

        >>> from lightning_hpo.launch.config import parse_config
        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"},
        ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}},
        ...                     "pruner": {"name": "asha", "max_resource": 9},
        ...                     "stop": {"n_trials": 20},
        ...                     "storage": "postgresql://hpo:secret@db/studies"})
        >>> stored = stored_config(cfg)
        >>> stored["storage"], stored["metric"], stored["direction"], stored["trainer"]
        ('postgresql://hpo:***@db/studies', 'validation_error', 'minimize', {'max_epochs': 9})
    """
    trainer = cfg.raw.get("trainer")
    return {
        **cfg.raw,
        "storage": StorageSpec(cfg.storage).masked,
        "metric": [m for m, _ in cfg.objectives] if cfg.several else cfg.metric,
        "direction": [d for _, d in cfg.objectives] if cfg.several else cfg.direction,
        "trainer": {**(trainer if isinstance(trainer, dict) else {}), "max_epochs": cfg.max_epochs},
    }


def config_changes(study: optuna.Study, cfg: Config) -> Changes:
    """What ``cfg`` changes in the config ``study`` was created with (reads only).

    No change for a study without a stored config (made by Optuna itself, or by a launcher
    version that stored none) or whose stored config is not a JSON mapping.

    Example::

        changes = config_changes(study, cfg)
        if (error := changes.refusal(cfg.study)) is not None:
            raise error
        print(changes.line())  # Changed since the study was created: stop.n_trials 20 -> 40
    """
    try:
        stored = json.loads(study.user_attrs.get(CONFIG_ATTR) or "null")
    except ValueError:
        stored = None
    if not isinstance(stored, dict):
        return Changes()
    return compare_configs(stored, stored_config(cfg))


def existing_changes(cfg: Config, storage: optuna.storages.BaseStorage) -> Changes | None:
    """What ``cfg`` changes in its study's stored config; None when there is no such study.

    Reads only (for ``--check``): the checks :func:`open_study` makes of an existing study.

    Raises:
        ConfigError: as :func:`open_study` refuses the config.
    """
    study = _load(cfg, storage, optuna.samplers.RandomSampler(), optuna.pruners.NopPruner(),
                  compare=True)
    return None if study is None else config_changes(study, cfg)


def _load(
    cfg: Config,
    storage: optuna.storages.BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
    *,
    compare: bool = False,
) -> optuna.Study | None:
    """The existing study, checked against the config (reads only); None when there is none.

    Raises:
        ConfigError: with ``compare`` the refused changes of the stored config
            (:func:`config_changes`); ``direction`` when the study was made with other
            directions, or another number of objectives.
    """
    try:
        study = optuna.load_study(
            study_name=cfg.study, storage=storage, sampler=sampler, pruner=pruner
        )
    except KeyError:  # no such study yet
        return None
    refusal = config_changes(study, cfg).refusal(cfg.study) if compare else None
    if refusal is not None:
        raise refusal
    if compare:
        _check_made_by_a_launcher(study, cfg)
    existing = [d.name.lower() for d in study.directions]
    wanted = [d for _, d in cfg.objectives]
    if len(existing) != len(wanted):
        raise ConfigError("direction", f"lists {len(wanted)} objective(s), but study "
                          f"'{cfg.study}' was created with {len(existing)} "
                          f"({', '.join(existing)})")
    if existing != wanted:
        shown = cfg.direction if len(wanted) == 1 else wanted
        was = existing[0] if len(existing) == 1 else existing
        raise ConfigError("direction", f"is {shown}, but study '{cfg.study}' was created to {was}")
    if compare:
        _check_fewer_trials(study, cfg)
    return study


#: User attributes every launcher trial has, whatever the launcher's version: a study whose
#: trials have none of them was made by another program.
_LAUNCHER_MARKS = (ATTR.LAUNCHER_PID, ATTR.SEGMENTS, ATTR.OWNER)


def _check_made_by_a_launcher(study: optuna.Study, cfg: Config) -> None:
    """Refuse a study of the same name that another program made (no stored config, trials
    with none of the launcher's attributes): the launcher would add its trials to it and name
    its best trial, whatever that trial measured. An empty one, or one a launcher version
    that stored no config made, is taken."""
    if CONFIG_ATTR in study.user_attrs:
        return
    trials = study.get_trials(deepcopy=False)
    if not trials or any(mark in t.user_attrs for t in trials for mark in _LAUNCHER_MARKS):
        return
    raise ConfigError("study", f"'{cfg.study}' in {mask(cfg.storage)} holds {len(trials)} "
                      "trial(s) the launcher did not make (no stored config, no launcher "
                      "record on its trials): name another study (--set study=NEW) or storage")


def _check_fewer_trials(study: optuna.Study, cfg: Config) -> None:
    """A lower ``stop.n_trials`` cannot take back the trials the study has queued (Optuna
    deletes no trial): refused while any queued one lies beyond it, instead of running them."""
    n_trials = cfg.stop.n_trials
    if n_trials is None:
        return
    trials = study.get_trials(deepcopy=False)
    queued = sum(t.state == TrialState.WAITING and t.number >= n_trials for t in trials)
    if queued:
        raise ConfigError(
            "stop.n_trials", f"is {n_trials}, but study '{cfg.study}' holds {len(trials)} trials "
            f"already, {queued} of them queued and not started (a queued trial cannot be taken "
            f"back): give at least {len(trials)}, or name a new study (--set study=NEW)")


def _create_or_load(
    cfg: Config,
    storage: optuna.storages.BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
    *,
    compare: bool = False,
) -> tuple[optuna.Study, bool]:
    """Load the study, or create it when it is missing; ``(study, created)``.

    Loading comes first: on a journal file a ``create_study`` of an existing name appends a
    record before it fails, so resuming (or refusing a wrong ``direction``) would write.
    """
    study = _load(cfg, storage, sampler, pruner, compare=compare)
    if study is not None:
        return study, False
    try:
        study = optuna.create_study(
            study_name=cfg.study, storage=storage, sampler=sampler, pruner=pruner,
            directions=[d for _, d in cfg.objectives],
        )
    except optuna.exceptions.DuplicatedStudyError:  # made meanwhile (a storage without lock)
        return _create_or_load(cfg, storage, sampler, pruner, compare=compare)
    if cfg.several:  # optuna-dashboard and the report name the objectives by these
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
            study.set_metric_names([m for m, _ in cfg.objectives])
    return study, True


def _note_schedule(study: optuna.Study, cfg: Config) -> None:
    """Store a pausing schedule's settings and rung ladders as the study's
    :data:`~lightning_hpo.schema.PRUNER_ATTR`, as the pruners do for theirs (for reports)."""
    p = cfg.pruner
    settings = {
        "name": p.name, "mode": "promotion" if p.name in ("asha", "hyperband") else "sync",
        "min_resource": p.min_resource, "reduction_factor": p.reduction_factor,
        "max_resource": p.max_resource, "brackets": build_schedule(cfg).ladders(), "budgets": [],
    }
    storage, study_id = storage_of(study), study_id_of(study)
    if storage.get_study_system_attrs(study_id).get(PRUNER_ATTR) != settings:
        storage.set_study_system_attr(study_id, PRUNER_ATTR, settings)


def queue_of(cfg: Config, study: optuna.Study, created: bool) -> list[dict[str, Any]]:
    """What :func:`open_study` enqueues: the ``initial`` configurations when it has just created
    the study, then one empty ticket per trial that ``stop.n_trials`` has and the study lacks.

    Example::

        >>> from lightning_hpo.launch.config import parse_config
        >>> cfg = parse_config({"study": "s", "model": {"name": "lenet"},
        ...                     "space": {"lr": {"loguniform": [0.01, 1.0]}},
        ...                     "pruner": {"name": "asha", "max_resource": 3},
        ...                     "initial": [{"lr": 0.1}], "stop": {"n_trials": 3}})
        >>> queue_of(cfg, optuna.create_study(), created=True)
        [{'lr': 0.1}, {}, {}]
    """
    initial = [dict(params) for params in cfg.initial] if created else []
    if cfg.stop.n_trials is None:
        return initial
    held = len(study.get_trials(deepcopy=False)) + len(initial)
    return initial + [{} for _ in range(cfg.stop.n_trials - held)]


def _enqueue(
    study: optuna.Study, storage: optuna.storages.BaseStorage, queue: list[dict[str, Any]]
) -> None:
    """Enqueue ``queue`` in one write, so that an interruption (Ctrl-C) leaves all of it or
    none (:func:`~lightning_hpo._optuna.enqueue_trials`): a journal file, SQLite, PostgreSQL;
    through a gRPC proxy the proxy does it on its database in one call (a proxy of an older
    lightning_hpo that lacks the call: one trial at a time, not atomic).
    """
    if not queue:
        return
    if is_proxy(storage) and proxy_client(storage).enqueue(study_id_of(study), queue):
        return
    enqueue_trials(storage_of(study), study_id_of(study), queue)


@contextlib.contextmanager
def study_lock(
    cfg: Config, storage: optuna.storages.BaseStorage, purpose: str = "setup"
) -> Iterator[None]:
    """Serialise one kind of work on one study across processes and machines.

    ``purpose`` names the lock: ``setup`` (creating, loading and queueing the study) or
    ``schedule`` (a pausing scheduler's decision, :mod:`lightning_hpo.launch.study.scheduler`).
    PostgreSQL and MySQL: a session advisory lock keyed by the purpose and the study name, held
    on a connection of the storage's own engine (every machine on the database sees it). SQLite
    and journal files: a file lock beside the file (one machine). A gRPC proxy: the proxy takes
    the same lock on its database for this process, until the block ends or the process dies.
    Other storages: no lock.
    """
    spec = StorageSpec(cfg.storage)
    if spec.is_proxy:
        with proxy_client(unwrap_storage(storage)).lock(purpose, cfg.study):
            yield
        return
    lock_path = spec.lock_path(purpose)
    if lock_path is not None:  # a journal file or an SQLite database
        with file_lock(lock_path):
            yield
        return
    if spec.kind != "server":
        yield
        return
    # Optuna wraps an RDBStorage in a cache that has no engine: without unwrapping, no lock
    # would be taken at all (two launchers on PostgreSQL then resumed one trial twice).
    engine = getattr(unwrap_storage(storage), "engine", None)
    if engine is None:
        raise OptunaContractError(
            f"the storage of {mask(cfg.storage)} has no SQLAlchemy engine to take a lock on"
        )
    if engine.dialect.name not in LOCKING_DIALECTS:
        _logger.warning("no cross-process lock on a %s database: run one launcher per study",
                        engine.dialect.name)
        yield
        return
    with sql_lock(engine, lock_key(purpose, cfg.study)):
        yield


