"""Cross-process locks on one study: a file lock beside a file storage, an advisory lock on a
database server. The launcher takes them directly; the gRPC proxy takes the very same locks on
behalf of the launchers behind it, so that launchers going through a proxy and launchers opening
the database directly exclude each other.

* :func:`file_lock`: ``flock`` on ``<file>.<purpose>-lock`` beside a journal file or SQLite
  database (one machine). ``flock`` locks belong to an open file, so two threads of one process
  (the proxy's) that open the file separately exclude each other too.
* :func:`sql_lock`: a session advisory lock on PostgreSQL (``pg_advisory_lock``) or MySQL
  (``GET_LOCK``), keyed by :func:`lock_key`, held on one connection of the engine (every machine
  on the database sees it).

Each can wait for the lock or, with ``wait=False``, give up at once (it then yields False).

Example::

    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "a.db.setup-lock"
    >>> with file_lock(path) as held:
    ...     with file_lock(path, wait=False) as again:
    ...         (held, again)
    (True, False)
    >>> lock_key("setup", "lenet-asha")
    729454459
"""

from __future__ import annotations

import contextlib
import fcntl
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["LOCKING_DIALECTS", "file_lock", "lock_key", "sql_lock"]

LOCKING_DIALECTS = ("postgresql", "mysql")  # the database servers that have advisory locks


def lock_key(purpose: str, study: str) -> int:
    """The stable 32-bit key of lock ``purpose`` (``setup``, ``schedule``) on study ``study``."""
    return zlib.crc32(f"lightning_hpo:{purpose}:{study}".encode())


@contextlib.contextmanager
def file_lock(path: Path, *, wait: bool = True) -> Iterator[bool]:
    """An exclusive ``flock`` on ``path`` (created when missing) for the ``with`` block.

    Yields True when the lock is held; False (without ``wait``) when another holder has it.
    """
    with open(path, "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX if wait else fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@contextlib.contextmanager
def sql_lock(engine: Any, key: int, *, wait: bool = True) -> Iterator[bool]:
    """A session advisory lock ``key`` on a PostgreSQL or MySQL ``engine`` for the ``with`` block.

    Yields True when the lock is held; False (without ``wait``) when another session has it.

    Raises:
        ValueError: the engine's dialect has no advisory locks (see :data:`LOCKING_DIALECTS`).
    """
    import sqlalchemy as sa

    dialect = engine.dialect.name
    if dialect == "postgresql":
        take = "SELECT pg_advisory_lock(:key)" if wait else "SELECT pg_try_advisory_lock(:key)"
        unlock = "SELECT pg_advisory_unlock(:key)"
    elif dialect == "mysql":
        take = f"SELECT GET_LOCK(CAST(:key AS CHAR), {-1 if wait else 0})"
        unlock = "SELECT RELEASE_LOCK(CAST(:key AS CHAR))"
    else:
        raise ValueError(f"a {dialect} database has no advisory locks")
    with engine.connect() as conn:
        got = conn.execute(sa.text(take), {"key": key}).scalar()
        conn.commit()
        if wait or got in (True, 1):
            try:
                yield True
            finally:
                conn.execute(sa.text(unlock), {"key": key})
                conn.commit()
        else:
            yield False
