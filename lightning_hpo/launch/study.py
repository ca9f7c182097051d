"""The launcher's side of the Optuna study: create once, queue the trial budget, claim, fail.

No torch here: the supervisor process uses it too.

**An exact ``n_trials`` across workers and machines.** When the study is created, the launcher that
wins the creation (Optuna's unique study name decides) enqueues the ``initial`` configurations and
then one empty *ticket* per remaining trial: WAITING trials whose unset hyperparameters the sampler
fills in when a worker claims them. Creating or loading the study and topping up its queue happen
under one lock per study (:func:`study_lock`: an advisory lock on PostgreSQL and MySQL, a file
lock beside an SQLite database or journal file, the same lock taken by a gRPC proxy), so two
launchers starting together never both count the queue short and enqueue twice. A worker claims
a ticket by moving it from WAITING to RUNNING, which the storage allows once (for SQLite, whose
reads are not locked, a file lock beside the database serialises claims on the machine; through
a gRPC proxy the proxy claims, in one call). When no ticket is left the budget is spent,
whatever the number of launchers. Resuming with a larger ``n_trials`` tops the queue up;
``initial`` configurations are never enqueued again. A run stopped by its wall-clock budget leaves
its unclaimed tickets WAITING: they are the queue the next run takes.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from collections.abc import Iterator
from typing import Any

import optuna
from optuna.trial import TrialState

from lightning_hpo._optuna import (
    OptunaContractError,
    claim_waiting_trial,
    storage_of,
    study_id_of,
    trial_id_of,
    unwrap_storage,
)
from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import Config, sampler_class, sampler_kwargs
from lightning_hpo.schema import ATTR, CONFIG_ATTR, PRUNER_ATTR
from lightning_hpo.storage import StorageSpec, mask
from lightning_hpo.storage._locks import LOCKING_DIALECTS, file_lock, lock_key, sql_lock
from lightning_hpo.storage._proxy_client import proxy_client

__all__ = [
    "build_pruner",
    "build_sampler",
    "claim_trial",
    "end_trial",
    "recover_stale_trials",
    "open_study",
    "stored_config",
    "study_lock",
]

_logger = logging.getLogger(__name__)


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
    at rungs instead (:mod:`lightning_hpo.launch.scheduler`)."""
    p = cfg.pruner
    if p.name == "none" or p.pauses:
        return optuna.pruners.NopPruner()
    from lightning_hpo.pruners import ASHAPruner, HyperbandPruner

    if p.name == "asha":
        return ASHAPruner(p.min_resource, max_resource=p.max_resource,
                          reduction_factor=p.reduction_factor)
    return HyperbandPruner(p.min_resource, p.max_resource or cfg.max_epochs, p.reduction_factor)


def open_study(
    cfg: Config, storage: optuna.storages.BaseStorage, *, queue: bool = True, worker_offset: int = 0
) -> tuple[optuna.Study, bool]:
    """Create the study, or load it when it exists; returns ``(study, created)``.

    With ``queue`` the creator enqueues the initial configurations and the ticket budget, and a
    loader tops the budget up to ``stop.n_trials``.

    Raises:
        ConfigError: ``direction`` when an existing study was made with the other direction.
    """
    sampler, pruner = build_sampler(cfg, worker_offset), build_pruner(cfg)
    if not queue:
        return _create_or_load(cfg, storage, sampler, pruner)
    _load(cfg, storage, sampler, pruner)  # refuse a wrong direction before making the lock file
    with study_lock(cfg, storage, "setup"):
        study, created = _create_or_load(cfg, storage, sampler, pruner)
        if created:
            study.set_user_attr(CONFIG_ATTR, json.dumps(stored_config(cfg), default=str))
            for params in cfg.initial:
                study.enqueue_trial(params)
        if cfg.pruner.pauses:
            _note_schedule(study, cfg)
        _top_up(study, cfg)
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
        "metric": cfg.metric,
        "direction": cfg.direction,
        "trainer": {**(trainer if isinstance(trainer, dict) else {}), "max_epochs": cfg.max_epochs},
    }


def _load(
    cfg: Config,
    storage: optuna.storages.BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
) -> optuna.Study | None:
    """The existing study, checked against the config (reads only); None when there is none.

    Raises:
        ConfigError: ``direction`` (or ``study`` for a multi-objective study) when it does not
            match the config.
    """
    try:
        study = optuna.load_study(
            study_name=cfg.study, storage=storage, sampler=sampler, pruner=pruner
        )
    except KeyError:  # no such study yet
        return None
    if len(study.directions) != 1:
        message = f"'{cfg.study}' is a multi-objective study; the launcher runs one objective"
        raise ConfigError("study", message)
    existing = study.direction.name.lower()
    if existing != cfg.direction:
        message = f"is {cfg.direction}, but study '{cfg.study}' was created to {existing}"
        raise ConfigError("direction", message)
    return study


def _create_or_load(
    cfg: Config,
    storage: optuna.storages.BaseStorage,
    sampler: optuna.samplers.BaseSampler,
    pruner: optuna.pruners.BasePruner,
) -> tuple[optuna.Study, bool]:
    """Load the study, or create it when it is missing; ``(study, created)``.

    Loading comes first: on a journal file a ``create_study`` of an existing name appends a
    record before it fails, so resuming (or refusing a wrong ``direction``) would write.
    """
    study = _load(cfg, storage, sampler, pruner)
    if study is not None:
        return study, False
    try:
        study = optuna.create_study(
            study_name=cfg.study, storage=storage, sampler=sampler, pruner=pruner,
            direction=cfg.direction,
        )
    except optuna.exceptions.DuplicatedStudyError:  # made meanwhile (a storage without lock)
        return _create_or_load(cfg, storage, sampler, pruner)
    return study, True


def _note_schedule(study: optuna.Study, cfg: Config) -> None:
    """Store a pausing schedule's settings and rung ladders as the study's
    :data:`~lightning_hpo.schema.PRUNER_ATTR`, as the pruners do for theirs (for reports)."""
    from lightning_hpo.launch.scheduler import build_schedule

    p = cfg.pruner
    settings = {
        "name": p.name, "mode": "promotion" if p.name in ("asha", "hyperband") else "sync",
        "min_resource": p.min_resource, "reduction_factor": p.reduction_factor,
        "max_resource": p.max_resource, "brackets": build_schedule(cfg).ladders(), "budgets": [],
    }
    storage, study_id = storage_of(study), study_id_of(study)
    if storage.get_study_system_attrs(study_id).get(PRUNER_ATTR) != settings:
        storage.set_study_system_attr(study_id, PRUNER_ATTR, settings)


def _top_up(study: optuna.Study, cfg: Config) -> None:
    if cfg.stop.n_trials is None:
        return
    missing = cfg.stop.n_trials - len(study.get_trials(deepcopy=False))
    for _ in range(missing):
        study.enqueue_trial({})


@contextlib.contextmanager
def study_lock(
    cfg: Config, storage: optuna.storages.BaseStorage, purpose: str = "setup"
) -> Iterator[None]:
    """Serialise one kind of work on one study across processes and machines.

    ``purpose`` names the lock: ``setup`` (creating, loading and queueing the study) or
    ``schedule`` (a pausing scheduler's decision, :mod:`lightning_hpo.launch.scheduler`).
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


def _claim_lock(spec: StorageSpec) -> contextlib.AbstractContextManager[bool]:
    """Serialise claims on one SQLite database (its reads take no lock); no-op elsewhere."""
    lock_path = spec.lock_path("claim")
    if spec.kind != "sqlite" or lock_path is None:
        return contextlib.nullcontext(True)
    return file_lock(lock_path)


def claim_trial(study: optuna.Study, cfg: Config) -> optuna.Trial | None:
    """The next trial for a worker, or None when the ``n_trials`` budget is spent.

    Without ``n_trials`` (a wall-clock budget only) every call asks a new trial.
    """
    if cfg.stop.n_trials is None:
        return study.ask()
    spec = StorageSpec(cfg.storage)
    if spec.is_proxy:  # one call: the proxy claims on its database, serialised there
        trial_id = proxy_client(unwrap_storage(storage_of(study))).claim(study_id_of(study))
        return None if trial_id is None else optuna.Trial(study, trial_id)
    with _claim_lock(spec):
        return claim_waiting_trial(study)


def end_trial(
    study: optuna.Study,
    number: int,
    state: TrialState,
    value: float | None = None,
    reason: str | None = None,
) -> bool:
    """Finish trial ``number`` (COMPLETE with a value, PRUNED, or FAIL with a reason).

    ``reason`` is stored as ``fail_reason`` for FAIL and as ``stop_reason`` for PRUNED (a trial
    the study's budget stopped; Optuna keeps its intermediate values, and its last one as its
    value). Returns False when the trial had already finished (another process ended it first).

    Example::

        end_trial(study, 13, TrialState.PRUNED,
                  reason="wall-clock budget reached (stop.max_wallclock_time=200 s); "
                  "stopped after epoch 7")
    """
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state.is_finished():
        return False
    storage = storage_of(study)
    try:
        if reason is not None:
            name = ATTR.STOP_REASON if state == TrialState.PRUNED else ATTR.FAIL_REASON
            storage.set_trial_user_attr(trial_id_of(frozen), name, reason)
            storage.set_trial_user_attr(trial_id_of(frozen), ATTR.END, time.time())
        study.tell(number, value if state == TrialState.COMPLETE else None, state=state)
    except (optuna.exceptions.UpdateFinishedTrialError, ValueError, RuntimeError) as error:
        _logger.debug("trial %d already ended: %s", number, error)
        return False
    return True


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def recover_stale_trials(study: optuna.Study, cfg: Config) -> dict[int, str]:
    """Hand back the RUNNING trials whose worker on this host is gone.

    A trial's worker is known by its owner token (:func:`~lightning_hpo.launch.scheduler.
    owner_of`, written right after the claim), in a study without tokens by its launcher's pid.
    Each is resumed from its last checkpoint by the scheduler while ``stop.max_retries`` allows,
    else ends FAIL with every attempt's reason (:func:`~lightning_hpo.launch.scheduler.crashed`).
    Paused trials are left as they are (the scheduler resumes them); trials of other hosts too:
    their launchers may be alive. Returns ``{number: "resumable" | "failed"}``.
    """
    from lightning_hpo.launch.scheduler import crashed, is_paused, owner_of

    host = socket.gethostname()
    outcome: dict[int, str] = {}
    for trial in study.get_trials(deepcopy=False, states=(TrialState.RUNNING,)):
        if is_paused(trial):
            continue
        attrs: dict[str, Any] = trial.user_attrs
        owner = owner_of(trial)
        launcher = attrs.get(ATTR.LAUNCHER_PID) if attrs.get(ATTR.HOST) == host else None
        launcher_gone = isinstance(launcher, int) and not _pid_alive(launcher)
        if owner is None:  # a study from before owner tokens: its launcher tells
            if not launcher_gone:
                continue
        elif owner[0] != host or _pid_alive(owner[1]):
            continue
        reason = (f"launcher (pid {launcher}) on {host} stopped while the trial ran"
                  if launcher_gone or owner is None else
                  f"its worker (pid {owner[1]}) on {host} stopped before its launcher learnt "
                  "of the trial")
        result = crashed(study, trial.number, reason, cfg, owner=attrs.get(ATTR.OWNER))
        if result != "ended":
            outcome[trial.number] = result
    return outcome
