"""What a storage spec is: :class:`StorageSpec`, its checks and its opening (the package
docstring, :mod:`lightning_hpo.storage`, explains specs). A journal file's own checks are in
``_journal``, the password mask in ``_mask``."""

from __future__ import annotations

import os
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import optuna
from optuna.storages import BaseStorage

from lightning_hpo.errors import ConfigError
from lightning_hpo.storage._journal import check_first_record, open_journal
from lightning_hpo.storage._mask import mask, mask_text
from lightning_hpo.storage._proxy_client import (
    PROXY_OPTIONS,
    TOKEN_ENV,
    ProxyAuth,
    ProxyClient,
    ProxyStorage,
)

__all__ = ["StorageSpec", "check_storage", "open_storage", "storage_outage"]

Kind = Literal["journal", "sqlite", "sqlite-memory", "server", "grpc"]

_WANTED = "must be grpc://HOST:PORT[?token_file=PATH&tls_ca=PATH] (e.g. grpc://localhost:13000)"

GRPC_SCHEME = "grpc://"
DEFAULT_PROXY_PORT = 13000  # Optuna's default for run_grpc_proxy_server and GrpcStorageProxy
_PROXY_WAIT = 10.0  # seconds to wait for a proxy to answer before saying it cannot be reached


@dataclass(frozen=True)
class StorageSpec:
    """One storage spec, parsed once: what it is, where it lives, how to print and open it.

    Attributes:
        text: the spec as given (may hold a password: print :attr:`masked` instead).

    Example::

        >>> spec = StorageSpec("sqlite:///runs/a.db")
        >>> spec.kind, spec.path, spec.lock_path("claim")
        ('sqlite', PosixPath('runs/a.db'), PosixPath('runs/a.db.claim-lock'))
        >>> StorageSpec("postgresql://hpo:secret@db/studies").masked
        'postgresql://hpo:***@db/studies'
        >>> StorageSpec("runs/quickstart.journal").is_rdb
        False
    """

    text: str

    @property
    def is_rdb(self) -> bool:
        """True for an SQLAlchemy URL (Optuna ``RDBStorage``); False for a journal file path and
        for a gRPC proxy (whatever database is behind it)."""
        return "://" in self.text and not self.is_proxy

    @property
    def is_proxy(self) -> bool:
        """True for ``grpc://host:port``: Optuna's gRPC storage proxy."""
        return self.text.startswith(GRPC_SCHEME)

    @property
    def address(self) -> tuple[str, int]:
        """``(host, port)`` of a ``grpc://host[:port][?options]`` spec (port 13000 when left out).

        Raises:
            ConfigError: not a ``grpc://`` spec, not of the form ``grpc://host:port``, or with
                options other than :attr:`proxy_auth`'s.

        Example::

            >>> StorageSpec("grpc://10.0.0.5:13001").address
            ('10.0.0.5', 13001)
        """
        from urllib.parse import urlsplit

        if not self.is_proxy:
            raise ConfigError("storage", f"{self.masked} is not a gRPC proxy: it {_WANTED}")
        try:
            url = urlsplit(self.text)
            host, port = url.hostname, url.port
        except ValueError as error:  # a port that is not a number in 0-65535
            raise ConfigError("storage", f"{self.masked} {_WANTED} ({error})") from None
        extra = url.path not in ("", "/") or url.fragment or url.username
        if not host or extra or port == 0:
            raise ConfigError("storage", f"{self.masked} {_WANTED}")
        _ = self.proxy_auth  # its options are part of the form
        return host, DEFAULT_PROXY_PORT if port is None else port

    @property
    def proxy_auth(self) -> ProxyAuth:
        """The token file and TLS certificate a ``grpc://`` spec names in its query:
        ``grpc://HOST:PORT?token_file=PATH&tls_ca=PATH`` (each optional; the environment
        supplies what the URL leaves out, see :class:`~lightning_hpo.storage._proxy_client.
        ProxyAuth`). A token itself never goes in the URL: URLs are printed and recorded.

        Raises:
            ConfigError: an option other than ``token_file`` and ``tls_ca``, one given twice or
                empty, or a ``token=`` (which is masked in the message).

        Example::

            >>> StorageSpec("grpc://proxy:13000?token_file=~/.hpo-token").proxy_auth
            ProxyAuth(token_file='~/.hpo-token', tls_ca=None)
        """
        from urllib.parse import parse_qsl, urlsplit

        query = urlsplit(self.text).query if self.is_proxy else ""
        try:
            pairs = parse_qsl(query, keep_blank_values=True, strict_parsing=bool(query))
        except ValueError:
            raise ConfigError("storage", f"{self.masked} {_WANTED}") from None
        options: dict[str, str] = {}
        for key, value in pairs:
            if key == "token":
                raise ConfigError(
                    "storage", f"{self.masked}: a token does not go in the URL (URLs are printed "
                    "and recorded): put it in a file only you can read and add "
                    f"?token_file=PATH, or set {TOKEN_ENV}",
                )
            if key not in PROXY_OPTIONS or key in options or not value:
                why = ("given twice" if key in options else "empty" if key in PROXY_OPTIONS
                       else "unknown")
                raise ConfigError("storage", f"{self.masked} {_WANTED} (option {key!r}: {why})")
            options[key] = value
        return ProxyAuth(**options)

    @property
    def kind(self) -> Kind:
        """``journal``, ``sqlite`` (a file), ``sqlite-memory``, ``server`` (PostgreSQL, MySQL) or
        ``grpc`` (a gRPC storage proxy)."""
        if self.is_proxy:
            return "grpc"
        if not self.is_rdb:
            return "journal"
        if not self.text.startswith("sqlite:"):
            return "server"
        return "sqlite" if self.path is not None else "sqlite-memory"

    @property
    def path(self) -> Path | None:
        """The file on this machine that holds the storage: a journal file or an SQLite database.

        None for a database server (PostgreSQL, MySQL), a gRPC proxy and in-memory SQLite.
        """
        if self.is_proxy:
            return None
        if not self.is_rdb:
            return Path(self.text)
        if not self.text.startswith("sqlite:"):
            return None
        import sqlalchemy as sa

        try:
            database = sa.engine.make_url(self.text).database
        except sa.exc.ArgumentError:
            return None  # not a URL: opening it reports why
        return Path(database) if database and database != ":memory:" else None

    @property
    def masked(self) -> str:
        """The spec with any password replaced by ``***``; safe to print or log."""
        return mask(self.text)

    def lock_path(self, purpose: str) -> Path | None:
        """``<file>.<purpose>-lock`` beside a journal file or SQLite database; None elsewhere.

        The launcher serialises study set-up (``setup``) and SQLite claims (``claim``) on one
        machine with ``flock`` on these files.
        """
        path = self.path
        return None if path is None else path.with_name(f"{path.name}.{purpose}-lock")

    def check(self, *, replay: bool = True) -> str:
        """Check that the storage can be opened, without writing anything.

        A journal file or SQLite database that exists must be one: a journal's first record is
        read (and with ``replay`` every record, Optuna's replay, whose time grows with the
        study; the launcher leaves that to :meth:`open`, which does it before writing), an SQLite
        file is opened read-only and its table list read. One that does not exist yet must be
        creatable: its nearest existing folder is a folder this process may write in. A database
        server is connected to and asked ``SELECT 1``. Nothing is created: not the file, not
        its folder, not Optuna's tables, not the study.

        Returns:
            What is there, for the launcher's plan: ``"new journal file"``, ``"journal file, 1
            study"``, ``"new SQLite database"``, ``"SQLite database"``, ``"in-memory SQLite"``,
            ``"server reachable"``, ``"gRPC proxy reachable (PostgreSQL behind it)"``.

        Raises:
            ConfigError: ``storage: ...`` naming the masked spec and what is wrong.

        Example::

            >>> StorageSpec("runs/never-made.journal").check()
            'new journal file'
        """
        spec = self.text
        _check_not_empty(spec)
        try:
            path, kind = self.path, self.kind
            if kind == "sqlite-memory":
                return "in-memory SQLite"
            if kind == "grpc":
                return _check_proxy(self)
            if path is None:
                _ping(spec)
                return "server reachable"
            what = "SQLite database" if kind == "sqlite" else "journal file"
            if not _check_local(path, self):
                return f"new {what}"
            if kind == "sqlite":
                return what
            check_first_record(path, spec)  # a run's advice (it may name a new file)
            if not replay:
                return what
            studies = len(open_journal(path, spec).get_all_studies())
            return f"{what}, {studies} stud{'y' if studies == 1 else 'ies'}"
        except ConfigError:
            raise
        except Exception as error:  # driver errors vary: report them in one masked line
            raise _cannot_open(spec, error) from None

    def open(
        self, *, create: bool = True, heartbeat: tuple[int, int] | None = None
    ) -> BaseStorage:
        """Open the storage; with ``create``, make a missing journal file or SQLite database.

        RDB URLs open with a 60 s SQLite lock wait (several processes write at once), a
        PostgreSQL connect timeout, and a retry when two processes race to create Optuna's
        tables in a new database. A ``grpc://`` spec opens Optuna's ``GrpcStorageProxy`` once
        the proxy answers (10 s at most).

        Args:
            create: make a missing journal file or SQLite database (and its parent folder).
                Without it a missing file is an error, and so is a database without Optuna's
                tables (Optuna's ``RDBStorage`` would create them): a reader never leaves an
                empty file at a mistyped path, nor Optuna's tables in a database of something
                else.
            heartbeat: ``(interval, grace_period)`` in seconds for Optuna's RDB heartbeat
                (``RDBStorage(heartbeat_interval=, grace_period=)``); RDB storages only.

        Raises:
            ConfigError: ``storage: cannot open <masked spec>: <reason>`` when it cannot be
                reached or (without ``create``) its file does not exist, or ``storage: <path>
                is not an Optuna journal file`` (or an SQLite database) for a file of something
                else, before anything is written to it.
        """
        spec = self.text
        _check_not_empty(spec)
        try:
            path = self.path
            if path is not None:
                if not create and not path.exists():
                    what = "SQLite database" if self.is_rdb else "journal file"
                    hint = (f" (an SQLite database is named sqlite:///{path})"
                            if _journal_named_as_sqlite(path, self) else "")
                    raise FileNotFoundError(f"no {what} at {path}{hint}")
                _check_local(path, self)
                if create:
                    path.parent.mkdir(parents=True, exist_ok=True)
            if self.is_proxy:
                return _open_proxy(self)
            if self.is_rdb:
                if not create and self.kind != "sqlite-memory":
                    _check_optuna_tables(self)  # RDBStorage would make them in any database
                return _open_rdb(spec, heartbeat)
            return open_journal(Path(spec), spec, writer=create)
        except ConfigError:
            raise
        except Exception as error:  # driver errors vary: report them in one masked line
            raise _cannot_open(spec, error) from None


def check_storage(spec: str, *, replay: bool = True) -> str:
    """``StorageSpec(spec).check(replay=replay)``: see :meth:`StorageSpec.check`."""
    return StorageSpec(spec).check(replay=replay)


def open_storage(
    spec: str, *, create: bool = True, heartbeat: tuple[int, int] | None = None
) -> BaseStorage:
    """``StorageSpec(spec).open(create=create)``: see :meth:`StorageSpec.open`.

    Example::

        >>> storage = open_storage("sqlite:///:memory:")
    """
    return StorageSpec(spec).open(create=create, heartbeat=heartbeat)


#: File name endings of SQLite databases: a plain path ending so is a journal file by mistake.
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3", ".db3")


def _journal_named_as_sqlite(path: Path, storage: StorageSpec) -> bool:
    """A plain path (a journal file) whose name is an SQLite database's (``runs/x.db``)."""
    return not storage.is_rdb and path.suffix.lower() in SQLITE_SUFFIXES


def _check_local(path: Path, storage: StorageSpec) -> bool:
    """Refuse a folder or a non-SQLite file; a missing file must be creatable, and a missing
    journal file not be named as an SQLite database (``runs/x.db``). True: it exists.

    A journal file's content is checked when it is opened
    (:func:`~lightning_hpo.storage._journal.open_journal`).
    """
    spec = storage.text
    if not path.exists():
        if _journal_named_as_sqlite(path, storage):
            raise ConfigError("storage", f"{mask(spec)} would be a new journal file (a plain "
                              "path names one), but its name is an SQLite database's: give "
                              f"sqlite:///{path} for SQLite, or name the journal "
                              f"{path.with_suffix('.journal')}")
        _check_creatable(path, spec)
        return False
    what = "an SQLite database" if storage.is_rdb else "a journal file"
    if path.is_dir():
        raise ConfigError("storage", f"{mask(spec)} is a folder, not {what}")
    if not path.is_file():  # /dev/null read as an empty journal, then refused every write
        raise ConfigError("storage", f"{mask(spec)} is not a regular file (a device or a "
                          f"pipe), so not {what}")
    if storage.is_rdb:
        _check_sqlite(path, spec)
    return True


def _check_not_empty(spec: str) -> None:
    """An empty spec (``--storage ""``) is not the current folder: say what one looks like."""
    if not spec.strip():
        raise ConfigError("storage", f"is {spec!r}: give a journal file path "
                          "(runs/study.journal) or an RDB URL (sqlite:///study.db)")


def _cannot_open(spec: str, error: BaseException) -> ConfigError:
    """``storage: cannot open <masked spec>: <reason>``, the driver's reason on one line."""
    cause = getattr(error, "orig", None) or error  # SQLAlchemy wraps the driver's error
    reason = " ".join(str(cause).split())[:300] or type(cause).__name__
    # SQLAlchemy 2.1 takes psycopg 3 for postgresql://; Optuna's RDBStorage re-raises the
    # driver's ModuleNotFoundError as ImportError("Failed to import DB access module ...")
    if isinstance(cause, ImportError):
        example = " (postgresql+psycopg2://...)" if spec.startswith("postgresql://") else ""
        reason += f"; install the driver, or name an installed one in the URL{example}"
    return ConfigError("storage", f"cannot open {mask(spec)}: {mask_text(reason, spec)}")


# grpc status codes of a proxy gone (UNAUTHENTICATED: restarted with another token)
_OUTAGE_CODES = ("UNAVAILABLE", "DEADLINE_EXCEEDED", "UNAUTHENTICATED")


def storage_outage(error: BaseException, spec: str) -> str | None:
    """One masked line when ``error`` (or an exception it was raised from or while handling)
    says the storage went away mid-run: a gRPC proxy that no longer answers, or a database
    server that dropped the connection. None for any other error.

    Example::

        >>> storage_outage(ValueError("x"), "sqlite:///a.db") is None
        True
    """
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        code = getattr(current, "code", None)
        if callable(code) and type(current).__module__.startswith("grpc"):
            name = getattr(code(), "name", "")
            if name in _OUTAGE_CODES:
                details = getattr(current, "details", lambda: "")() or name
                return mask_text(f"{name}: {' '.join(str(details).split())[:200]}", spec)
        if type(current).__name__ in ("OperationalError", "InterfaceError") and type(
            current
        ).__module__.startswith("sqlalchemy"):
            cause = getattr(current, "orig", None) or current
            return mask_text(" ".join(str(cause).split())[:200], spec)
        current = current.__cause__ or current.__context__
    return None


def _check_creatable(path: Path, spec: str) -> None:
    """A missing file can be made: its nearest existing folder is a folder we may write in."""
    folder = path.parent
    while folder != folder.parent and not folder.exists():
        folder = folder.parent
    if not folder.is_dir():
        problem = f"{folder} is a file, not a folder"
    elif not os.access(folder, os.W_OK | os.X_OK):
        problem = f"no permission to write in {folder}"
    else:
        return
    raise ConfigError("storage", f"cannot create {mask(spec)}: {problem}")


def _check_sqlite(path: Path, spec: str) -> None:
    """Open an SQLite file read-only and read its table list: fails on a file of something else."""
    try:
        _sqlite_tables(path)
    except sqlite3.OperationalError:  # locked, unreadable: reported as "cannot open"
        raise
    except sqlite3.DatabaseError as error:
        raise ConfigError("storage", f"{mask(spec)} is not an SQLite database ({error})") from None


def _sqlite_tables(path: Path) -> list[str]:
    """The table names of an SQLite file, sorted, read through a read-only connection."""
    connection = sqlite3.connect(f"{path.absolute().as_uri()}?mode=ro", uri=True, timeout=60)
    try:
        return [row[0] for row in connection.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")]
    finally:
        connection.close()


#: The table every Optuna RDB storage has (with ``alembic_version`` and the trial tables).
_OPTUNA_TABLE = "studies"


def _check_optuna_tables(storage: StorageSpec) -> None:
    """Refuse, before Optuna's ``RDBStorage`` creates its schema there, a database that holds no
    Optuna tables: read-only for an SQLite file, an inspection query on a server.

    Raises:
        ConfigError: ``storage: <masked spec> holds no Optuna study: ...``, naming the tables
            it has (at most 5).
    """
    path = storage.path
    if path is not None:
        tables = _sqlite_tables(path)
    else:
        import sqlalchemy as sa

        engine = sa.create_engine(storage.text, **_engine_kwargs(storage.text))
        try:
            tables = sorted(sa.inspect(engine).get_table_names())
        finally:
            engine.dispose()
    if _OPTUNA_TABLE in tables:
        return
    shown = ", ".join(tables[:5]) + (f" and {len(tables) - 5} more" if len(tables) > 5 else "")
    raise ConfigError("storage", f"{storage.masked} holds no Optuna study: the database has "
                      f"{'no tables' if not tables else 'no Optuna tables (it has ' + shown + ')'}"
                      "; nothing was written to it")


def _ping(spec: str) -> None:
    """Connect to a database server and run ``SELECT 1`` (no table is read or made)."""
    import sqlalchemy as sa

    engine = sa.create_engine(spec, **_engine_kwargs(spec))
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("SELECT 1"))
    finally:
        engine.dispose()


def _open_proxy(spec: StorageSpec) -> BaseStorage:
    """Optuna's ``GrpcStorageProxy`` at the spec's address, with the spec's token and TLS
    (:class:`~lightning_hpo.storage._proxy_client.ProxyStorage`), once the server answers.

    Raises:
        ConfigError: grpc is not installed; a token or certificate file cannot be used; the
            proxy refuses the token or TLS does not match; nothing answers within 10 s.
    """
    host, port = spec.address
    try:
        import grpc  # noqa: F401  (the grpc extra)
    except ImportError:
        raise ConfigError(
            "storage", f"{spec.masked} needs grpcio: pip install 'lightning-async-hpo[grpc]'"
        ) from None
    storage = ProxyStorage(host=host, port=port, auth=spec.proxy_auth)
    try:
        storage.wait_until_serving(_PROXY_WAIT, spec.masked)
    except ConfigError:
        storage.close()
        raise
    except ConnectionError:
        storage.close()
        raise ConfigError(
            "storage",
            f"cannot open {spec.masked}: no gRPC proxy answers at {host}:{port} within "
            f"{_PROXY_WAIT:.0f} s (start one: python -m lightning_hpo.proxy STORAGE --port {port})",
        ) from None
    return storage


def _check_proxy(spec: StorageSpec) -> str:
    """Reach the proxy and lightning_hpo's service on it; what is behind it, in words."""
    storage = _open_proxy(spec)
    try:
        backend = ProxyClient(storage).hello().get("backend", "?")
    finally:
        storage.close()  # type: ignore[attr-defined]
    behind = {"sqlite": "an SQLite database", "server": "a database server"}.get(backend, backend)
    return f"gRPC proxy reachable ({behind} behind it)"


_CREATE_ATTEMPTS = 5
_CREATE_RACES = ("already exists", "unique", "duplicate", "locked")


def _open_rdb(
    spec: str, heartbeat: tuple[int, int] | None = None
) -> optuna.storages.RDBStorage:
    """``RDBStorage(spec)``, again when it lost a race to create Optuna's tables.

    Two launchers opening a new database at the same moment both create Optuna's schema; the
    slower one fails on a unique key ("alembic_version", PostgreSQL's catalog) or SQLite's lock.
    By then the schema is there (or nearly): open it again. Other errors (an unreachable
    server, bad credentials) are raised at once.
    """
    import sqlalchemy as sa

    beat: dict[str, int] = {}
    if heartbeat is not None:
        beat = {"heartbeat_interval": heartbeat[0], "grace_period": heartbeat[1]}
    for attempt in range(1, _CREATE_ATTEMPTS + 1):
        try:
            with warnings.catch_warnings():  # heartbeat_interval is "experimental" in Optuna
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                return optuna.storages.RDBStorage(
                    spec, engine_kwargs=_engine_kwargs(spec), skip_compatibility_check=False,
                    **beat,  # type: ignore[arg-type]
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
