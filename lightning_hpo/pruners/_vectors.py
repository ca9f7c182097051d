"""The rung records of a study with several objectives: one list of values per trial and rung.

A study with one objective keeps a single number per record and asks its store for two counts
(:mod:`lightning_hpo.pruners._store`). With several, a trial's place at a rung depends on every
point there (:func:`lightning_hpo.pareto.pareto_order`), so a decision reads the rung's records
whole: here the study system attributes
``lightning_hpo:rungs:{bracket}:{rung}:{trial_number} -> [v1, v2, ...]``
(:data:`~lightning_hpo.schema.RUNG_VECTOR_ATTR_PREFIX`), on every storage, the gRPC proxy
included. Records are insert-only and idempotent per ``(bracket, rung, trial)``, as with one
objective: two processes reaching a rung together never lose one, a repeated report never counts
twice. Reading is lenient: an attribute under the prefix that is not a list of numbers (another
tool's, or damaged) is left out, never an exception.

Example::

    >>> import optuna
    >>> optuna.logging.set_verbosity(optuna.logging.WARNING)
    >>> study = optuna.create_study(directions=["minimize", "minimize"])
    >>> store = open_vector_store(study)
    >>> store.add_and_read(0, [1], trial_number=0, values=(0.5, 10.0))
    {0: (0.5, 10.0)}
    >>> store.add_and_read(0, [1, 3], trial_number=1, values=(0.4, 20.0))  # rung 3: alone
    {1: (0.4, 20.0)}
    >>> store.add_and_read(0, [1], trial_number=2, values=(0.6, 5.0))
    {0: (0.5, 10.0), 1: (0.4, 20.0), 2: (0.6, 5.0)}
    >>> store.records()[-1]
    (0, 3, 1, (0.4, 20.0))
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import optuna
from optuna.storages import BaseStorage

from lightning_hpo._optuna import storage_of, study_id_of
from lightning_hpo.schema import RUNG_VECTOR_ATTR_PREFIX as _PREFIX

__all__ = ["VectorRecord", "VectorRungStore", "open_vector_store"]

#: ``(bracket, rung, trial_number, values)``.
VectorRecord = tuple[int, int, int, tuple[float, ...]]


def open_vector_store(study: optuna.Study) -> VectorRungStore:
    """The multi-objective rung store of ``study`` (its storage as the study sees it)."""
    return VectorRungStore(storage_of(study), study_id_of(study))


class VectorRungStore:
    """Multi-objective rung records as study system attributes of one study."""

    def __init__(self, storage: BaseStorage, study_id: int) -> None:
        self._storage = storage
        self._study_id = study_id

    def add_and_read(
        self, bracket: int, rungs: Sequence[int], trial_number: int, values: Sequence[float]
    ) -> dict[int, tuple[float, ...]]:
        """Record ``values`` at every rung of ``rungs`` (ascending) where the trial has none yet,
        then return every record at the last of them, ``{trial_number: values}``, this trial's
        included (its first record there, if it had one already)."""
        attrs = self._storage.get_study_system_attrs(self._study_id)
        for rung in rungs:
            key = f"{_PREFIX}{bracket}:{rung}:{trial_number}"
            if key not in attrs:  # insert-only: a record, once there, never changes
                self._storage.set_study_system_attr(self._study_id, key, [float(v)
                                                                         for v in values])
        # One read: the records read, and this trial's own (its first, when it had one).
        prefix = f"{_PREFIX}{bracket}:{rungs[-1]}:"
        found = _parsed((key[len(prefix):], value) for key, value in list(attrs.items())
                        if key.startswith(prefix))
        found.setdefault(trial_number, tuple(float(v) for v in values))
        return found

    def records(self) -> list[VectorRecord]:
        """Every record of the study, sorted by bracket, rung and trial number."""
        attrs = self._storage.get_study_system_attrs(self._study_id)
        out = []
        for key, value in list(attrs.items()):
            if not key.startswith(_PREFIX):
                continue
            parts = _numbers(key[len(_PREFIX):].split(":"), int)
            vector = _vector(value)
            if parts is not None and len(parts) == 3 and vector is not None:
                out.append((parts[0], parts[1], parts[2], vector))
        return sorted(out)


def _parsed(items: Iterable[tuple[str, Any]]) -> dict[int, tuple[float, ...]]:
    """``{trial_number: values}`` of the records whose key ends in a number and whose value is
    a list of numbers; anything else (another tool's attribute) is left out."""
    found = {}
    for number, value in items:
        vector = _vector(value)
        if number.isdigit() and vector is not None:
            found[int(number)] = vector
    return found


def _vector(value: Any) -> tuple[float, ...] | None:
    """A record's values, or None when it is not a non-empty list of numbers."""
    if not isinstance(value, list) or not value:
        return None
    return _numbers(value, float)


def _numbers(values: Iterable[Any], kind: type) -> tuple[Any, ...] | None:
    try:
        return tuple(kind(v) for v in values)
    except (TypeError, ValueError):
        return None
