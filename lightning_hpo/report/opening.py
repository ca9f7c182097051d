"""Opening a study for reading: by storage spec and name, or as ``NAME@STORAGE``.

A storage is named by a spec (:class:`lightning_hpo.storage.StorageSpec`: an SQLAlchemy URL or a
journal file path) or given opened; the report never creates one: a mistyped path is an error,
not an empty new file. Errors are :class:`~lightning_hpo.errors.ConfigError` naming the field
(``storage`` or ``study``), with any password masked.

Example::

    >>> study = load("runs/quickstart.journal")  # doctest: +SKIP
    >>> asha = load_ref("asha@runs/asha.journal")  # doctest: +SKIP
"""

from __future__ import annotations

import optuna
from optuna.storages import BaseStorage

from lightning_hpo.errors import ConfigError
from lightning_hpo.storage import StorageSpec, mask_text

__all__ = ["load", "load_ref"]


def _open(storage: str | BaseStorage) -> BaseStorage:
    if not isinstance(storage, str):
        return storage
    return StorageSpec(storage).open(create=False)  # never an empty file at a mistyped path


def load(storage: str | BaseStorage, study_name: str | None = None) -> optuna.Study:
    """Open a study for reading.

    Args:
        storage: a storage spec (SQLAlchemy URL or journal file path, see
            :mod:`lightning_hpo.storage`) or an opened Optuna storage.
        study_name: the study; may be left out when the storage holds exactly one.

    Raises:
        ConfigError: ``storage`` when it cannot be opened (password masked) or holds no study;
            ``study`` when the name is not in it (the message lists the names there) or is
            needed because there are several.

    Example::

        >>> study = load("sqlite:///runs/lenet-asha.db", "lenet-asha")  # doctest: +SKIP
    """
    where = StorageSpec(storage).masked if isinstance(storage, str) else type(storage).__name__
    opened = _open(storage)
    try:
        names = sorted(optuna.get_all_study_names(opened))
    except Exception as error:  # driver errors vary: one masked line
        reason = " ".join(str(error).split())[:300]
        if isinstance(storage, str):
            reason = mask_text(reason, storage)
        raise ConfigError("storage", f"cannot read {where}: {reason}") from None
    if not names:
        raise ConfigError("storage", f"{where} holds no study")
    if study_name is None:
        if len(names) > 1:
            raise ConfigError(
                "study",
                f"{where} holds {len(names)} studies; name one of: {', '.join(names)}",
            )
        study_name = names[0]
    elif study_name not in names:
        raise ConfigError(
            "study", f"no study named '{study_name}' in {where}; it holds: {', '.join(names)}"
        )
    return optuna.load_study(
        study_name=study_name, storage=opened, sampler=optuna.samplers.RandomSampler()
    )


def load_ref(ref: str, storage: str | BaseStorage | None = None) -> optuna.Study:
    """Open a study named ``NAME`` (in ``storage``) or ``NAME@STORAGE`` (anywhere).

    A name that exists as such in ``storage`` wins over splitting at ``@``; otherwise the name
    is everything before the first ``@`` and the storage spec everything after it (a
    PostgreSQL URL's own ``user:password@host`` stays whole).

    Raises:
        ConfigError: as :func:`load`; ``storage`` when a bare name comes without a storage.

    Example::

        >>> asha = load_ref("asha@runs/asha.journal")  # doctest: +SKIP
        >>> rs = load_ref("random", "sqlite:///runs/all.db")  # doctest: +SKIP
    """
    name, sep, spec = ref.partition("@")
    if storage is not None and (not sep or _has_study(storage, ref)):
        return load(storage, ref)
    if not sep or not name or not spec:
        raise ConfigError(
            "storage", f"no storage for study '{ref}': give --storage or write NAME@STORAGE"
        )
    return load(spec, name)


def _has_study(storage: str | BaseStorage, name: str) -> bool:
    try:
        return name in optuna.get_all_study_names(_open(storage))
    except ConfigError:
        return False
