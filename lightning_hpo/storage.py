"""Storage specs: one string names any Optuna storage, and its password never gets printed.

A spec with ``://`` is an SQLAlchemy URL for Optuna's ``RDBStorage`` (``sqlite:///runs/a.db``,
``postgresql://user:secret@host/db``); any other string is the path of a journal file, Optuna's
fastest storage for one machine (``runs/lenet.journal``), which ``optuna-dashboard`` opens too.

Example::

    >>> mask("postgresql://hpo:secret@db.example.com:5432/studies")
    'postgresql://hpo:***@db.example.com:5432/studies'
    >>> is_rdb("runs/quickstart.journal")
    False
"""

from __future__ import annotations

import re
import time
from pathlib import Path

import optuna
from optuna.storages import BaseStorage
from optuna.storages.journal import JournalFileBackend

from lightning_hpo.errors import ConfigError

__all__ = ["is_rdb", "mask", "mask_text", "open_storage"]

_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)(?P<secret>[^@\s]*)(?=@)")


def is_rdb(spec: str) -> bool:
    """True for an SQLAlchemy URL (Optuna ``RDBStorage``), False for a journal file path."""
    return "://" in spec


def mask(spec: str) -> str:
    """The spec with any password replaced by ``***``; safe to print or log."""
    return _PASSWORD.sub(r"\g<head>***", spec)


def mask_text(text: str, spec: str) -> str:
    """Mask ``spec``'s password wherever it appears in ``text`` (e.g. a driver's error message)."""
    match = _PASSWORD.search(spec)
    text = _PASSWORD.sub(r"\g<head>***", text)
    if match and match.group("secret"):
        text = text.replace(match.group("secret"), "***")
    return text


def open_storage(spec: str, *, create: bool = True) -> BaseStorage:
    """Open (and for a new SQLite or journal file, create) the storage a spec names.

    Args:
        spec: an SQLAlchemy URL or a journal file path (see the module docstring).
        create: make a missing journal file's or SQLite database's parent folder.

    Raises:
        ConfigError: ``storage: cannot open <masked spec>: <reason>`` when it cannot be reached.
    """
    try:
        if is_rdb(spec):
            if create and spec.startswith("sqlite:///") and spec != "sqlite:///:memory:":
                Path(spec.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
            return _open_rdb(spec)
        path = Path(spec)
        if create:
            path.parent.mkdir(parents=True, exist_ok=True)
        elif not path.exists():
            raise FileNotFoundError(f"no journal file at {spec}")
        return optuna.storages.JournalStorage(JournalFileBackend(str(path)))
    except ConfigError:
        raise
    except Exception as error:  # driver errors vary: report them in one masked line
        reason = " ".join(str(error).split())[:300]
        message = f"cannot open {mask(spec)}: {mask_text(reason, spec)}"
        raise ConfigError("storage", message) from None


_CREATE_ATTEMPTS = 5
_CREATE_RACES = ("already exists", "unique", "duplicate", "locked")


def _open_rdb(spec: str) -> optuna.storages.RDBStorage:
    """``RDBStorage(spec)``, again when it lost a race to create Optuna's tables.

    Two launchers opening a new database at the same moment both create Optuna's schema; the
    slower one fails on a unique key ("alembic_version", PostgreSQL's catalog) or SQLite's lock.
    By then the schema is there (or nearly): open it again. Other errors (an unreachable
    server, bad credentials) are raised at once.
    """
    import sqlalchemy as sa

    for attempt in range(1, _CREATE_ATTEMPTS + 1):
        try:
            return optuna.storages.RDBStorage(
                spec, engine_kwargs=_engine_kwargs(spec), skip_compatibility_check=False
            )
        except (sa.exc.IntegrityError, sa.exc.ProgrammingError, sa.exc.OperationalError) as error:
            text = str(error).lower()
            if attempt == _CREATE_ATTEMPTS or not any(word in text for word in _CREATE_RACES):
                raise
            time.sleep(0.2 * attempt)
    raise AssertionError("unreachable")  # the loop returns or raises


def _engine_kwargs(spec: str) -> dict[str, object]:
    if spec.startswith("postgresql"):
        return {"connect_args": {"connect_timeout": 10}, "pool_pre_ping": True}
    if spec.startswith("sqlite"):
        # Several worker processes write at once: wait for the lock instead of failing.
        return {"connect_args": {"timeout": 60}}
    return {}
