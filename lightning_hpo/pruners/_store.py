"""Where ASHA's rung records live: in the study's own Optuna storage, visible to every process.

A record is ``(bracket, rung, trial_number, value)``: the value a trial had when it first reached
a rung. Records are insert-only and idempotent per ``(study, bracket, rung, trial)``, so two
processes reaching a rung at once never lose one and a repeated report never counts twice. A
decision reads only its rung's records. The :class:`~lightning_hpo.pruners._records.RungStore`
chosen from the study's storage:

* :class:`~lightning_hpo.pruners._table.TableRungStore` for RDB storages: our own table,
  ``lightning_hpo_rung_records``, in the same database (only that module imports SQLAlchemy);
* :class:`_AttrRungStore` for every other storage: study system attributes
  ``lightning_hpo:rung:{bracket}:{rung}:{trial_number} -> value``, indexed per process;
* :class:`_ProxyRungStore` for the gRPC proxy: its service (:mod:`lightning_hpo.proxy`) uses that.

The store only counts; :func:`lightning_hpo.pruners._asha.asha_continues` decides. Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study()
    >>> store = open_rung_store(study)
    >>> store.add_and_rank(0, [1, 3], trial_number=0, value=0.5, maximize=False)
    (1, 0)
    >>> store.add_and_rank(0, [1], trial_number=1, value=0.25, maximize=False)
    (2, 0)
    >>> rung_records(study)
    [RungRecord(bracket=0, rung=1, trial_number=0, value=0.5), \
RungRecord(bracket=0, rung=1, trial_number=1, value=0.25), \
RungRecord(bracket=0, rung=3, trial_number=0, value=0.5)]
"""

from __future__ import annotations

import logging
import threading
import weakref
from bisect import bisect_left, bisect_right, insort
from collections.abc import Mapping, Sequence
from itertools import compress, islice, repeat
from typing import Any

import optuna
from optuna.storages import BaseStorage, RDBStorage

from lightning_hpo._optuna import (
    OptunaContractError,
    appends_study_system_attrs,
    backend_of,
    study_id_of,
)
from lightning_hpo.pruners._records import RungRecord, RungStore
from lightning_hpo.schema import RUNG_ATTR_PREFIX as _ATTR_PREFIX
from lightning_hpo.storage import ProxyClient, is_proxy, proxy_client

__all__ = ["RungRecord", "open_rung_store", "rung_records", "rung_store_of"]

_logger = logging.getLogger(__name__)


_SCAN_ATTEMPTS = 5
_BULK = 64  # more new values than this at one read: count them linearly once, sort later


def open_rung_store(study: optuna.Study) -> RungStore:
    """The rung store of a study: a table for RDB storages, the proxy's store through a gRPC
    proxy, study system attributes otherwise."""
    return rung_store_of(backend_of(study), study_id_of(study))


def rung_store_of(storage: BaseStorage, study_id: int) -> RungStore:
    """The rung store of study ``study_id`` of ``storage`` (unwrapped from Optuna's cache)."""
    if isinstance(storage, RDBStorage):
        # SQLAlchemy's import adds to every worker's start; only SQL storages need it
        from lightning_hpo.pruners._table import TableRungStore

        return TableRungStore(storage.engine, study_id)
    if is_proxy(storage):
        return _ProxyRungStore(proxy_client(storage), study_id)
    return _AttrRungStore(storage, study_id)


def rung_records(study: optuna.Study) -> list[RungRecord]:
    """Every rung record of a study, for reports: ``(bracket, rung, trial_number, value)``.

    Reads the whole study's records (not on any decision path) and writes nothing: a study whose
    storage has no records table yet has no records.

    Example::

        >>> import optuna
        >>> rung_records(optuna.create_study())
        []
    """
    return sorted(open_rung_store(study).records())


# --------------------------------------------------------------------------------------------
# Optuna's gRPC proxy: the proxy's own store does it (lightning_hpo.proxy).


class _ProxyRungStore(RungStore):
    """Records kept by the store of the database behind a gRPC proxy, one call per operation."""

    def __init__(self, client: ProxyClient, study_id: int) -> None:
        self._client = client
        self._study_id = study_id

    def add_and_rank(
        self,
        bracket: int,
        rungs: Sequence[int],
        trial_number: int,
        value: float,
        *,
        maximize: bool,
    ) -> tuple[int, int]:
        return self._client.add_and_rank(
            self._study_id, bracket, rungs, trial_number, value, maximize
        )

    def records(self) -> list[RungRecord]:
        return [RungRecord(*record) for record in self._client.records(self._study_id)]


# --------------------------------------------------------------------------------------------
# Every other storage: study system attributes, with a per-process incremental index.


class _Slot:
    """What this process has read of one rung's records.

    ``scanned`` counts the items of the study's system-attribute dict already looked at and
    ``last_key`` is the newest of them; the slot reads only the items added since (from the end,
    with ``reversed``) and keeps the values of its own rung (``prefix``): ``values`` sorted, plus
    ``bulk``, the many values of the last large read, counted linearly once and sorted in at the
    next read (so that a fresh process's first decision costs a scan, not a sort). That needs a
    storage that lists new keys last (:func:`~lightning_hpo._optuna.appends_study_system_attrs`):
    the key just before the new ones must be ``last_key``, else Optuna has changed and
    :class:`~lightning_hpo._optuna.OptunaContractError` is raised rather than a wrong count.
    """

    __slots__ = ("bulk", "last_key", "prefix", "scanned", "values")

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.reset()

    def reset(self) -> None:
        """Forget everything read: the next :meth:`catch_up` reads the whole dict."""
        self.scanned = 0
        self.last_key: str | None = None
        self.values: list[float] = []
        self.bulk: list[float] = []

    def catch_up(self, attrs: dict[str, Any]) -> bool:
        """Take in the records added to ``attrs``; False when ``attrs`` changed meanwhile.

        Raises:
            RuntimeError: ``attrs`` changed size during iteration (a storage that mutates it in
                place); nothing is taken in, read it again.
            OptunaContractError: the key read last is not just before the new ones: the storage
                no longer lists its keys in insertion order.
        """
        size = len(attrs)
        if size < self.scanned:  # the dict shrank: nothing read before can be trusted
            _logger.debug("rung records of %s shrank; reading them again", self.prefix)
            self.reset()
        new = size - self.scanned
        # The new keys, newest first, then (when something was read before) the last key read.
        keys = list(islice(reversed(attrs.keys()), new + 1 if self.scanned else new))
        values = list(islice(reversed(attrs.values()), new)) if new else []
        if len(attrs) != size:  # grew between len() and reversed(): read again
            return False
        if self.scanned and keys[new] != self.last_key:
            raise OptunaContractError(
                "study system attributes are no longer listed in insertion order (the newest "
                f"key read before, {self.last_key!r}, is not where it was)"
            )
        # C-level filtering: the values of the new items whose key is of this rung.
        found = list(compress(values, map(str.startswith, keys, repeat(self.prefix))))
        if self.bulk:
            self.values.extend(self.bulk)
            self.values.sort()
            self.bulk = []
        if len(found) > _BULK:
            self.bulk = found
        else:
            for value in found:
                insort(self.values, value)
        self.scanned = size
        if keys:
            self.last_key = keys[0]
        return True

    def rank(self, value: float, maximize: bool) -> tuple[int, int]:
        """``(n, n_better)`` of ``value`` among the values read so far."""
        values, bulk = self.values, self.bulk
        if maximize:
            n_better = len(values) - bisect_right(values, value)
            n_better += sum(1 for other in bulk if other > value)
        else:
            n_better = bisect_left(values, value)
            n_better += sum(1 for other in bulk if other < value)
        return len(values) + len(bulk), n_better


class _AttrIndex:
    """This process's slots of one study of one storage."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.slots: dict[tuple[int, int], _Slot] = {}

    def slot(self, bracket: int, rung: int) -> _Slot:
        slot = self.slots.get((bracket, rung))
        if slot is None:
            slot = self.slots[(bracket, rung)] = _Slot(f"{_ATTR_PREFIX}{bracket}:{rung}:")
        return slot


# One index per (storage object, study id) in this process; dropped with the storage.
_indexes: weakref.WeakKeyDictionary[BaseStorage, dict[int, _AttrIndex]] = (
    weakref.WeakKeyDictionary()
)
_indexes_lock = threading.Lock()


class _AttrRungStore(RungStore):
    """Records as study system attributes ``lightning_hpo:rung:{bracket}:{rung}:{trial}``.

    ``InMemoryStorage`` and ``JournalStorage`` return their insertion-ordered system-attribute
    dict itself from ``get_study_system_attrs`` (and replace it with an updated copy on every
    write), so new records are always its last items
    (:func:`~lightning_hpo._optuna.appends_study_system_attrs`): a decision reads only the items
    added since this process last looked, and answers with :mod:`bisect` on its rung's sorted
    values. Other storages, whose order is unknown, are read in full at every decision. A
    decision is one read and one write: the rank counts the records read plus the trial's own.
    """

    def __init__(self, storage: BaseStorage, study_id: int) -> None:
        self._storage = storage
        self._study_id = study_id
        self._incremental = appends_study_system_attrs(storage)
        with _indexes_lock:
            per_study = _indexes.setdefault(storage, {})
            self._index = per_study.setdefault(study_id, _AttrIndex())

    def add_and_rank(
        self,
        bracket: int,
        rungs: Sequence[int],
        trial_number: int,
        value: float,
        *,
        maximize: bool,
    ) -> tuple[int, int]:
        with self._index.lock:
            slot = self._index.slot(bracket, rungs[-1])
            attrs = self._catch_up(slot)
            already = _attr_key(bracket, rungs[-1], trial_number) in attrs  # a repeated report
            for rung in rungs:
                key = _attr_key(bracket, rung, trial_number)
                if key not in attrs:  # insert-only: a record, once there, never changes
                    self._storage.set_study_system_attr(self._study_id, key, value)
            n, n_better = slot.rank(value, maximize)
        # Our own record, written after the read, counts too; it is never better than itself.
        return (n if already else n + 1), n_better

    def records(self) -> list[RungRecord]:
        attrs = self._storage.get_study_system_attrs(self._study_id)
        return [
            RungRecord(*_parse_key(key), float(value))
            for key, value in list(attrs.items())
            if key.startswith(_ATTR_PREFIX)
        ]

    def _catch_up(self, slot: _Slot) -> Mapping[str, Any]:
        """Read the study's system attrs and bring ``slot`` up to date; the attrs read.

        Raises:
            OptunaContractError: the storage no longer lists new keys last.
        """
        for _ in range(_SCAN_ATTEMPTS):
            if not self._incremental:
                slot.reset()
            attrs = self._storage.get_study_system_attrs(self._study_id)
            try:
                if slot.catch_up(attrs):
                    return attrs
            except OptunaContractError:
                raise
            except RuntimeError:  # "dictionary changed size during iteration": read again
                pass
        # A storage that keeps mutating its dict in place: read a copy, from scratch.
        attrs = dict(self._storage.get_study_system_attrs(self._study_id))
        slot.reset()
        slot.catch_up(attrs)
        return attrs


def _attr_key(bracket: int, rung: int, trial_number: int) -> str:
    return f"{_ATTR_PREFIX}{bracket}:{rung}:{trial_number}"


def _parse_key(key: str) -> tuple[int, int, int]:
    bracket, rung, trial_number = key[len(_ATTR_PREFIX) :].split(":")
    return int(bracket), int(rung), int(trial_number)
