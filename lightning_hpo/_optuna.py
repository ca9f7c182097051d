"""The one place lightning_hpo relies on Optuna's private names and unwritten behaviour, and why.

Optuna offers a pruner no public accessor for the study's storage or a frozen trial's storage
id (Optuna's own pruners read ``study._storage`` and ``trial._trial_id``). Each such reliance is
one named function, class or constant here, whose docstring says what it assumes;
``tests/unit/test_optuna_contract.py`` checks every assumption against the installed Optuna
(``optuna>=4.0,<6``). When one no longer holds, the code raises :class:`OptunaContractError`
naming the Optuna version and what changed, instead of silently deciding differently.

* :func:`storage_of`, :func:`study_id_of`, :func:`trial_id_of`, :func:`backend_of`: the
  storage, the ids, and the RDB storage under Optuna's cache.
* :data:`STUDIES_TABLE`, :data:`STUDY_ID_COLUMN`, :func:`check_studies_table`: Optuna's RDB
  schema, which our rung records hang off.
* :func:`appends_study_system_attrs`, :class:`HyperbandBase`: attribute order, and the bracket
  study Optuna filters for a sampler under Hyperband.
* :func:`claim_waiting_trial`, :func:`set_trial_user_attrs`, :func:`set_user_attrs`,
  :func:`enqueue_trials`: claiming a WAITING trial once, and several writes in one. Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study()
    >>> study.enqueue_trial({"x": 0.5})
    >>> trial = claim_waiting_trial(study)
    >>> trial.number, trial.suggest_float("x", 0.0, 1.0), claim_waiting_trial(study)
    (0, 0.5, None)
    >>> backend_of(study) is storage_of(study)   # no cache around an in-memory storage
    True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

import optuna
from optuna.storages import BaseStorage, InMemoryStorage, JournalStorage, RDBStorage
from optuna.trial import TrialState

if TYPE_CHECKING:  # SQLAlchemy adds to the launcher's start-up; imported where used
    import sqlalchemy as sa

__all__ = [
    "BRACKET_HOOK",
    "STUDIES_TABLE",
    "STUDY_ID_COLUMN",
    "HyperbandBase",
    "OptunaContractError",
    "appends_study_system_attrs",
    "backend_of",
    "check_studies_table",
    "claim_waiting_trial",
    "claim_waiting_trial_id",
    "enqueue_trials",
    "live_trial",
    "set_trial_user_attrs",
    "set_user_attrs",
    "stale_trial_ids",
    "storage_of",
    "study_id_of",
    "trial_id_of",
]

#: Optuna's RDB table of studies (``optuna.storages._rdb.models.StudyModel``).
STUDIES_TABLE = "studies"
#: Its primary key: the study id that :func:`study_id_of` returns.
STUDY_ID_COLUMN = "study_id"
#: The ``optuna.pruners.HyperbandPruner`` method Optuna calls to put a trial in a bracket.
BRACKET_HOOK = "_get_bracket_id"

_SUPPORTED = "optuna>=4.0,<6"


class OptunaContractError(RuntimeError):
    """An assumption lightning_hpo makes about Optuna's internals no longer holds.

    The message names the installed Optuna version and what changed. It means this version of
    lightning_hpo does not support the installed Optuna: install one it supports
    (``optuna>=4.0,<6``), or a newer lightning_hpo.

    Example::

        >>> str(OptunaContractError("`Study._storage` is gone"))  # doctest: +ELLIPSIS
        'lightning_hpo does not support optuna ...: `Study._storage` is gone (supported: ...)'
    """

    def __init__(self, what: str) -> None:
        super().__init__(
            f"lightning_hpo does not support optuna {optuna.__version__}: {what} "
            f"(supported: {_SUPPORTED}; tests/unit/test_optuna_contract.py checks each assumption)"
        )


def _private(obj: object, name: str, owner: str) -> Any:
    """``obj.<name>``, an Optuna private attribute; OptunaContractError when it is gone."""
    try:
        return getattr(obj, name)
    except AttributeError:
        raise OptunaContractError(
            f"`{owner}.{name}` is gone ({type(obj).__name__} has no attribute {name!r})"
        ) from None


def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage a study reads and writes (for RDB URLs, Optuna's caching wrapper).

    Assumes ``Study._storage``, also on the bracket study Optuna hands a Hyperband pruner.

    Raises:
        OptunaContractError: the attribute is gone.
    """
    storage: BaseStorage = _private(study, "_storage", "Study")
    return storage


def study_id_of(study: optuna.Study) -> int:
    """The storage's id of a study. Assumes ``Study._study_id`` (bracket studies too).

    Raises:
        OptunaContractError: the attribute is gone.
    """
    study_id: int = _private(study, "_study_id", "Study")
    return study_id


def trial_id_of(trial: optuna.trial.FrozenTrial | optuna.trial.Trial) -> int:
    """The storage's id of a trial, frozen or live. Assumes ``_trial_id`` on both.

    Raises:
        OptunaContractError: the attribute is gone.
    """
    trial_id: int = _private(trial, "_trial_id", type(trial).__name__)
    return trial_id


def backend_of(study: optuna.Study) -> BaseStorage:
    """The storage under Optuna's cache: an :class:`RDBStorage` for RDB URLs, else as is.

    Assumes that Optuna wraps an ``RDBStorage`` in
    ``optuna.storages._cached_storage._CachedStorage``, which holds it as ``_backend``.

    Raises:
        OptunaContractError: the study's storage is that wrapper but holds no ``RDBStorage``
            as ``_backend``, or the wrapper class is gone.
    """
    return unwrap_storage(storage_of(study))


def unwrap_storage(storage: BaseStorage) -> BaseStorage:
    """``storage`` without Optuna's cache: the :class:`RDBStorage` inside the wrapper that
    ``optuna.create_study`` puts around an RDB storage, else ``storage`` itself.

    Raises:
        OptunaContractError: as :func:`backend_of`.
    """
    if isinstance(storage, RDBStorage):
        return storage
    try:
        from optuna.storages._cached_storage import _CachedStorage
    except ImportError:
        raise OptunaContractError(
            "`optuna.storages._cached_storage._CachedStorage`, the cache around RDBStorage, "
            "is gone"
        ) from None
    if not isinstance(storage, _CachedStorage):
        return storage
    backend = getattr(storage, "_backend", None)
    if not isinstance(backend, RDBStorage):
        raise OptunaContractError(
            f"`_CachedStorage._backend` is {type(backend).__name__}, not the RDBStorage it wraps"
        )
    return backend


def check_studies_table(engine: sa.Engine) -> None:
    """Check that Optuna's RDB schema has :data:`STUDIES_TABLE` keyed by :data:`STUDY_ID_COLUMN`.

    The rung records' table names it in a foreign key (``ON DELETE CASCADE``) and, on SQLite, in
    a delete trigger, so that deleting a study deletes its records. Assumes Optuna's table
    ``studies`` with primary key ``study_id``, the id :func:`study_id_of` returns, and that
    ``optuna.delete_study`` deletes the study's row.

    Raises:
        OptunaContractError: the table or its key column is not there (a database that Optuna
            has set up, that is: call this after opening the storage).
    """
    import sqlalchemy as sa

    inspector = sa.inspect(engine)
    if not inspector.has_table(STUDIES_TABLE):
        raise OptunaContractError(f"Optuna's RDB schema has no table {STUDIES_TABLE!r}")
    key = inspector.get_pk_constraint(STUDIES_TABLE).get("constrained_columns") or []
    if key != [STUDY_ID_COLUMN]:
        raise OptunaContractError(
            f"Optuna's table {STUDIES_TABLE!r} is keyed by {key}, not [{STUDY_ID_COLUMN!r}]"
        )


def appends_study_system_attrs(storage: BaseStorage) -> bool:
    """Whether ``get_study_system_attrs`` lists keys in insertion order, new keys last.

    True for Optuna's ``InMemoryStorage`` and ``JournalStorage`` (and their subclasses): each
    write replaces the study's dict with an updated copy (a key keeps its place, a new key goes
    last) and a read returns that dict. The rung store then reads only the items added since it
    last looked. False for any other storage, whose order is unknown: read it all each time.

    Example::

        >>> appends_study_system_attrs(optuna.storages.InMemoryStorage())
        True
    """
    return isinstance(storage, (InMemoryStorage, JournalStorage))


def claim_waiting_trial(study: optuna.Study) -> optuna.Trial | None:
    """Claim the study's oldest WAITING trial for this process and return it live; else None.

    What ``Study.ask`` does for an enqueued trial, without making a new trial when none waits
    (``ask`` would). A claim moves the trial from WAITING to RUNNING, which the storage allows
    once: assumes ``set_trial_state_values(trial_id, RUNNING)`` returns False for a trial
    already RUNNING and raises ``UpdateFinishedTrialError`` for a finished one (Optuna's own
    ``Study._pop_waiting_trial_id`` relies on the same), and that ``optuna.Trial(study,
    trial_id)`` is the live trial ``ask`` returns (its enqueued parameters are suggested as
    fixed values). On SQLite, whose reads take no lock, serialise calls across processes.

    Raises:
        OptunaContractError: a private attribute it reads is gone.
    """
    trial_id = claim_waiting_trial_id(storage_of(study), study_id_of(study))
    return None if trial_id is None else optuna.Trial(study, trial_id)


def claim_waiting_trial_id(storage: BaseStorage, study_id: int) -> int | None:
    """:func:`claim_waiting_trial` on a storage: the claimed trial's id, or None.

    What the gRPC proxy runs for the launchers behind it (:mod:`lightning_hpo.proxy`).
    """
    for ticket in storage.get_all_trials(study_id, deepcopy=False, states=(TrialState.WAITING,)):
        try:
            claimed = storage.set_trial_state_values(trial_id_of(ticket), state=TrialState.RUNNING)
        except optuna.exceptions.UpdateFinishedTrialError:  # finished by another process
            continue
        if claimed:
            return trial_id_of(ticket)
    return None


def set_trial_user_attrs(storage: BaseStorage, trial_id: int, attrs: Mapping[str, Any]) -> None:
    """Set several user attributes of one trial, in order, in one storage write where the
    storage allows it: ``storage.set_trial_user_attr(trial_id, key, value)`` for each item,
    as one append (and one ``fsync``) of a journal file and one transaction on an RDB
    database, else one call per item (in-memory, the gRPC proxy).

    A launcher's worker writes about ten attributes when a trial starts and ends; separately,
    each would be a commit (an ``fsync`` on SQLite, a round trip and a WAL flush on
    PostgreSQL). What readers see is the same as from the calls one by one, except that on RDB
    none of the items is written if one fails.

    Example::

        >>> study = optuna.create_study()
        >>> trial = study.ask()
        >>> set_trial_user_attrs(storage_of(study), trial_id_of(trial), {"slot": 0, "pid": 7})
        >>> study.trials[0].user_attrs
        {'slot': 0, 'pid': 7}

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial has finished.
        OptunaContractError: a private name it relies on is gone.
    """
    if not attrs:
        return
    backend = unwrap_storage(storage)
    if isinstance(backend, JournalStorage):
        _journal_user_attrs(backend, trial_id, attrs)
    elif isinstance(backend, RDBStorage):
        _rdb_user_attrs(backend, trial_id, attrs)
    else:
        for key, value in attrs.items():
            storage.set_trial_user_attr(trial_id, key, value)


def set_user_attrs(trial: Any, attrs: Mapping[str, Any]) -> None:
    """``trial.set_user_attr(key, value)`` for each item of ``attrs``, in one storage write for
    a live :class:`optuna.Trial` (:func:`set_trial_user_attrs`), whose ``user_attrs`` then hold
    them as after ``set_user_attr``; one call each for any other trial-like object (a DDP
    rank's stand-in).

    Example::

        >>> trial = optuna.create_study().ask()
        >>> set_user_attrs(trial, {"seed": 3, "log_dir": "runs/s/trial_00000"})
        >>> trial.user_attrs
        {'seed': 3, 'log_dir': 'runs/s/trial_00000'}

    Raises:
        optuna.exceptions.UpdateFinishedTrialError: the trial has finished.
        OptunaContractError: a private name it relies on is gone.
    """
    if not isinstance(trial, optuna.Trial):
        for key, value in attrs.items():
            trial.set_user_attr(key, value)
        return
    cached = _private(trial, "_cached_frozen_trial", "optuna.Trial")
    set_trial_user_attrs(trial.storage, trial_id_of(trial), attrs)
    cached.user_attrs.update(attrs)  # what Trial.set_user_attr does, key by key


def _journal_user_attrs(storage: JournalStorage, trial_id: int, attrs: Mapping[str, Any]) -> None:
    """The journal lines ``JournalStorage.set_trial_user_attr`` writes, one per item, appended
    at once; then this process's replay catches up (and raises for a finished trial, as
    ``set_trial_user_attr`` does)."""
    try:
        from optuna.storages.journal._storage import JournalOperation
    except ImportError:
        raise OptunaContractError("`optuna.storages.journal._storage.JournalOperation` is gone") \
            from None
    owner = "optuna.storages.JournalStorage"
    with _private(storage, "_thread_lock", owner):
        worker = _private(_private(storage, "_replay_result", owner), "worker_id",
                          "JournalStorage._replay_result")
        logs = [{"op_code": JournalOperation.SET_TRIAL_USER_ATTR, "worker_id": worker,
                 "trial_id": trial_id, "user_attr": {key: value}} for key, value in attrs.items()]
        _private(storage, "_backend", owner).append_logs(logs)
        _private(storage, "_sync_with_backend", owner)()


def _rdb_user_attrs(storage: RDBStorage, trial_id: int, attrs: Mapping[str, Any]) -> None:
    """The upserts ``RDBStorage.set_trial_user_attr`` makes, one per item, in one transaction."""
    try:
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session
    except ImportError:
        raise OptunaContractError("`optuna.storages._rdb.storage._create_scoped_session` or "
                                  "`optuna.storages._rdb.models` is gone") from None
    owner = "optuna.storages.RDBStorage"
    upsert = _private(storage, "_set_trial_attr_without_commit", owner)
    with _create_scoped_session(_private(storage, "scoped_session", owner), True) as session:
        for key, value in attrs.items():
            upsert(session, models.TrialUserAttributeModel, trial_id, key, value)


def enqueue_trials(
    storage: BaseStorage, study_id: int, params: Sequence[Mapping[str, Any]]
) -> None:
    """``study.enqueue_trial(p)`` for each of ``params``, in order, written all or none: one
    append (and one ``fsync``) of a journal file, one transaction on an RDB database; else one
    ``create_new_trial`` each (in-memory, the gRPC proxy: not atomic, see below).

    What the launcher queues a study's budget with (``launch.study``). One trial at a time, an
    interruption (Ctrl-C) would leave the trials written so far queued, and Optuna deletes no
    trial; on SQLite each would also be a commit whose cost grows with the study (see
    ``launch.config.MAX_N_TRIALS``).
    The trials are the ones ``enqueue_trial`` makes: WAITING, with the parameters as the
    ``fixed_params`` system attribute that ``ask`` suggests them from, numbered in order.

    A ``KeyboardInterrupt`` during the journal write comes before or after the one
    ``write`` call (a signal's handler runs between bytecodes); on RDB it rolls the
    transaction back (``session.close()`` without a commit). A gRPC proxy's storage would be
    one call per trial here: :mod:`lightning_hpo.proxy` does this on its database instead.

    Example::

        >>> study = optuna.create_study()
        >>> enqueue_trials(storage_of(study), study_id_of(study), [{"x": 0.5}, {}, {}])
        >>> [(t.number, t.state.name, t.system_attrs) for t in study.trials][:2]
        [(0, 'WAITING', {'fixed_params': {'x': 0.5}}), (1, 'WAITING', {'fixed_params': {}})]

    Raises:
        TypeError: an item of ``params`` is not a mapping (as ``enqueue_trial``).
        KeyError: no study ``study_id``.
        OptunaContractError: a private name it relies on is gone.
    """
    fixed = [_fixed_params(p) for p in params]
    if not fixed:
        return
    backend = unwrap_storage(storage)
    if isinstance(backend, JournalStorage):
        _journal_enqueue(backend, study_id, fixed)
    elif isinstance(backend, RDBStorage):
        _rdb_enqueue(backend, study_id, fixed)
    else:
        for item in fixed:
            storage.create_new_trial(study_id, template_trial=_waiting(item))


def _fixed_params(params: Any) -> dict[str, Any]:
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping, got {type(params).__name__}")
    return dict(params)


def _waiting(params: dict[str, Any]) -> optuna.trial.FrozenTrial:
    """The template trial ``Study.enqueue_trial(params)`` adds."""
    return optuna.trial.create_trial(state=TrialState.WAITING,
                                     system_attrs={"fixed_params": params})


def _journal_enqueue(
    storage: JournalStorage, study_id: int, fixed: Sequence[dict[str, Any]]
) -> None:
    """The ``CREATE_TRIAL`` lines ``JournalStorage.create_new_trial`` writes for
    :func:`_waiting` templates, appended at once; then this process's replay catches up."""
    try:
        from optuna.storages.journal._storage import JournalOperation
    except ImportError:
        raise OptunaContractError("`optuna.storages.journal._storage.JournalOperation` is gone") \
            from None
    owner = "optuna.storages.JournalStorage"
    storage.get_study_name_from_id(study_id)  # KeyError before writing, for no such study
    with _private(storage, "_thread_lock", owner):
        worker = _private(_private(storage, "_replay_result", owner), "worker_id",
                          "JournalStorage._replay_result")
        logs = [{
            "op_code": JournalOperation.CREATE_TRIAL, "worker_id": worker, "study_id": study_id,
            "datetime_start": None, "state": TrialState.WAITING, "value": None, "values": None,
            "distributions": {}, "params": {}, "user_attrs": {},
            "system_attrs": {"fixed_params": params}, "intermediate_values": {},
        } for params in fixed]
        _private(storage, "_backend", owner).append_logs(logs)
        _private(storage, "_sync_with_backend", owner)()


def _rdb_enqueue(storage: RDBStorage, study_id: int, fixed: Sequence[dict[str, Any]]) -> None:
    """What ``RDBStorage._create_new_trial`` does for one template trial, for each, in one
    transaction (the study's row locked first, as it locks it, so that numbers are in order)."""
    try:
        from optuna.storages._rdb import models
        from optuna.storages._rdb.storage import _create_scoped_session
    except ImportError:
        raise OptunaContractError("`optuna.storages._rdb.storage._create_scoped_session` or "
                                  "`optuna.storages._rdb.models` is gone") from None
    owner = "optuna.storages.RDBStorage"
    prepare = _private(storage, "_get_prepared_new_trial", owner)
    with _create_scoped_session(_private(storage, "scoped_session", owner)) as session:
        models.StudyModel.find_or_raise_by_id(study_id, session, for_update=True)
        for params in fixed:
            prepare(study_id, _waiting(params), session)


def live_trial(study: optuna.Study, number: int) -> optuna.Trial:
    """The live :class:`optuna.Trial` of trial ``number``, which must be RUNNING: what a worker
    resuming a paused trial reports to and suggests from (its parameters come back as they were).

    Assumes, as :func:`claim_waiting_trial` does, that ``optuna.Trial(study, trial_id)`` is the
    live trial ``ask`` returns for a RUNNING trial.

    Raises:
        ValueError: the trial is not RUNNING.
    """
    frozen = study.get_trials(deepcopy=False)[number]
    if frozen.state != TrialState.RUNNING:
        raise ValueError(f"trial {number} is {frozen.state.name}, not RUNNING: it cannot resume")
    return optuna.Trial(study, trial_id_of(frozen))


def stale_trial_ids(study: optuna.Study) -> list[int]:
    """The ids of the study's RUNNING trials whose heartbeat is older than the storage's grace
    period (Optuna's RDB heartbeat); [] when the storage records no heartbeat.

    Assumes the heartbeat mixin's ``_get_stale_trial_ids(study_id)`` (what Optuna's own
    ``fail_stale_trials`` calls) on the storage's backend.

    Raises:
        OptunaContractError: the storage has a heartbeat but not that method.
    """
    backend = backend_of(study)
    if not isinstance(backend, optuna.storages.RDBStorage):
        return []
    if backend.get_heartbeat_interval() is None:
        return []
    method = _private(backend, "_get_stale_trial_ids", "optuna.storages.RDBStorage")
    return list(method(study_id_of(study)))


class HyperbandBase(optuna.pruners.HyperbandPruner):
    """Optuna's ``HyperbandPruner`` as a base class, for the one thing Optuna gives it alone.

    Optuna shows a sampler only the trials of the current trial's bracket when ``study.pruner``
    is an ``optuna.pruners.HyperbandPruner`` (``optuna.pruners._filter_study``), and asks the
    pruner for each trial's bracket through :data:`BRACKET_HOOK`, ``_get_bracket_id(study,
    trial)``, where ``study`` may be Optuna's bracket study (which has ``study_name``). This
    class answers that hook with :meth:`bracket_of`, which a subclass defines, and overrides
    ``prune`` in the subclass: nothing of the parent's own algorithm or bookkeeping runs.

    Raises:
        OptunaContractError: at construction, when ``optuna.pruners.HyperbandPruner`` has no
            :data:`BRACKET_HOOK` any more (the filter would then ignore :meth:`bracket_of`).
    """

    def __init__(self, min_resource: int, max_resource: int, reduction_factor: int) -> None:
        hook = getattr(optuna.pruners.HyperbandPruner, BRACKET_HOOK, None)
        if not callable(hook):
            raise OptunaContractError(
                f"`optuna.pruners.HyperbandPruner.{BRACKET_HOOK}`, through which samplers are "
                "shown the trials of one bracket, is gone"
            )
        super().__init__(
            min_resource=min_resource, max_resource=max_resource, reduction_factor=reduction_factor
        )

    def bracket_of(self, study_name: str, trial_number: int) -> int:
        """The bracket of trial ``trial_number`` of study ``study_name``: defined by subclasses."""
        raise NotImplementedError

    def _get_bracket_id(self, study: optuna.Study, trial: optuna.trial.FrozenTrial) -> int:
        return self.bracket_of(study.study_name, trial.number)
