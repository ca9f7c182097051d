"""The one place lightning_hpo reaches for Optuna's private names, and why.

Optuna hands a pruner ``prune(study, trial)`` with a :class:`~optuna.Study` and a
:class:`~optuna.trial.FrozenTrial`, but offers no public accessor for the study's storage or a
frozen trial's storage id; every pruner in Optuna itself reads ``study._storage`` and
``trial._trial_id``. Keeping those reads here means a change in Optuna breaks one small file.
"""

from __future__ import annotations

import optuna
from optuna.storages import BaseStorage, RDBStorage

__all__ = ["backend_of", "storage_of", "study_id_of", "trial_id_of"]


def storage_of(study: optuna.Study) -> BaseStorage:
    """The storage a study reads and writes (for RDB URLs, Optuna's caching wrapper)."""
    return study._storage


def backend_of(study: optuna.Study) -> BaseStorage:
    """The storage under Optuna's cache: an :class:`RDBStorage` for RDB URLs, else as is."""
    storage = storage_of(study)
    backend = getattr(storage, "_backend", None)  # optuna.storages._CachedStorage
    return backend if isinstance(backend, RDBStorage) else storage


def study_id_of(study: optuna.Study) -> int:
    """The storage's id of a study."""
    return study._study_id


def trial_id_of(trial: optuna.trial.FrozenTrial | optuna.trial.Trial) -> int:
    """The storage's id of a trial (frozen or live)."""
    return trial._trial_id
