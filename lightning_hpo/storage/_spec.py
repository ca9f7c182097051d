"""What a storage spec is: :class:`StorageSpec`, its checks and its opening, and the password
mask (the package docstring, :mod:`lightning_hpo.storage`, explains specs)."""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

import optuna
from optuna.storages import BaseStorage, JournalStorage
from optuna.storages.journal import JournalFileBackend

from lightning_hpo.errors import ConfigError
from lightning_hpo.storage._journal_lock import OwnedJournalLock, break_abandoned_lock
from lightning_hpo.storage._proxy_client import (
    PROXY_OPTIONS,
    TOKEN_ENV,
    ProxyAuth,
    ProxyClient,
    ProxyStorage,
)

__all__ = [
    "StorageSpec", "check_storage", "mask", "mask_text", "open_storage", "storage_outage",
]

_logger = logging.getLogger(__name__)

# A URL's password: everything between ``user:`` and the last ``@`` before the host (a password
# written unencoded may hold ``@`` or a space).
_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^:/@\s]*:)"
                       r"(?P<secret>[^/?#]*?)(?=@[^@/?#\s]*(?:[/?#\s]|$))")
# A secret in a URL's query: a proxy's token (refused in a grpc:// spec), a database driver's
# password options (libpq's password and sslpassword); masked wherever one is printed.
_TOKEN = re.compile(r"(?P<head>[?&](?:token|password|sslpassword|passwd|pwd)=)"
                    r"(?P<secret>[^&#\s]*)", re.IGNORECASE)
# The same in free text (an error message), where the URL is followed by more words: the secret
# ends at a space, and punctuation that closes a clause before one (``...?password=***: no
# SQLite database at ...``) is the text's, not the secret's.
_TOKEN_IN_TEXT = re.compile(r"(?P<head>[?&](?:token|password|sslpassword|passwd|pwd)=)"
                            r"(?P<secret>[^&#\s]*?)(?=[:;,.!?)\]}'\"]*(?:[&#\s]|$))",
                            re.IGNORECASE)


def mask(spec: str) -> str:
    """The spec with any password (or ``token=`` in its query) replaced by ``***``; safe to
    print or log."""
    return _TOKEN.sub(r"\g<head>***", _PASSWORD.sub(r"\g<head>***", spec))


def mask_text(text: str, spec: str) -> str:
    """Mask ``spec``'s password wherever it appears in ``text`` (e.g. a driver's error message),
    and any other URL password or ``token=`` in it; the words around each are kept.

    Example::

        >>> spec = "sqlite:///runs/x.db?password=s3cretpw"
        >>> mask_text(f"cannot open {spec}: no SQLite database at runs/x.db", spec)
        'cannot open sqlite:///runs/x.db?password=***: no SQLite database at runs/x.db'
    """
    found = [*_PASSWORD.finditer(spec), *_TOKEN.finditer(spec)]
    secrets = sorted({match.group("secret") for match in found if match.group("secret")},
                     key=len, reverse=True)
    for secret in secrets:  # the spec's own first, whole: it may end in punctuation
        text = text.replace(secret, "***")
        # A password with an unencoded @ is cut there by the URL's parser, which takes the rest
        # for the host: a driver's "could not translate host name "sswordy@127.0.0.1"".
        for piece in re.split(r"[@:]", secret)[1:]:
            if piece:
                text = re.sub(rf"{re.escape(piece)}(?=@)", "***", text)
    return _TOKEN_IN_TEXT.sub(r"\g<head>***", _PASSWORD.sub(r"\g<head>***", text))


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
        read (and with ``replay`` every record, Optuna's replay: about 0.3 s per 1,000 trials;
        the launcher leaves that to :meth:`open`, which does it before writing), an SQLite
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
            _check_first_record(path, spec)  # a run's advice (it may name a new file)
            if not replay:
                return what
            studies = len(_open_journal(path, spec).get_all_studies())
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
            return _open_journal(Path(spec), spec, writer=create)
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

    A journal file's content is checked when it is opened (:func:`_open_journal`).
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


_MAX_RECORD_BYTES = 1 << 24  # a first line longer than 16 MiB is not a journal record


def _is_journal_record(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return False
    return isinstance(record, dict) and "op_code" in record


def _check_first_record(path: Path, spec: str, *, writer: bool = True) -> None:
    """An existing journal file is empty or starts with a journal record. ``writer``: the
    advice may be a new file (the launcher makes one); a reader needs an existing journal."""
    with path.open("rb") as handle:
        first = handle.readline(_MAX_RECORD_BYTES)
    if first and not _is_journal_record(first):
        hint = (f"; an SQLite database is named sqlite:///{path}"
                if first.startswith(b"SQLite format 3\x00") else "")
        raise ConfigError(
            "storage",
            f"{mask(spec)} is not an Optuna journal file (its first line is not a journal "
            f"record); name {'a new file or ' if writer else ''}an existing journal{hint}",
        )


def _open_journal(path: Path, spec: str, *, writer: bool = False) -> JournalStorage:
    """Open a journal file (created when missing), refusing a file that is not a journal.

    Optuna skips a last line that does not parse (a write cut short) and appends after it, so
    a one-line text file would be taken for an empty journal and written to: the first line
    must be a journal record. Optuna's replay then reads every line (read-only).

    A ``writer`` (the launcher, before its first write) first moves a last record cut short
    out of the journal (:func:`_cut_partial_tail`): appended after, the next record would
    share its line, and the file would no longer be a journal anyone can read.
    """
    if path.exists():
        _check_first_record(path, spec, writer=writer)
        if writer:
            dead = break_abandoned_lock(path)
            if dead is not None:
                _logger.warning("%s was locked by process %d of this machine, which no longer "
                                "runs (killed while it appended); released the lock",
                                mask(spec), dead)
            _cut_partial_tail(path, spec)
    try:
        return JournalStorage(JournalFileBackend(str(path), lock_obj=OwnedJournalLock(str(path))))
    except (ValueError, KeyError, TypeError, IndexError) as error:  # a line replay refused
        raise ConfigError("storage", f"{mask(spec)} is not a valid Optuna journal file: "
                          f"{_replay_refusal(path, error)}") from None


def _replay_refusal(path: Path, error: BaseException) -> str:
    """Why Optuna's replay refused a journal, naming the line: the JSON parser's own position
    (``line 1 column 1``) is within that line, and a line that is JSON but not a record fails
    replay with a bare ``KeyError: 'op_code'``.

    Example::

        >>> import tempfile
        >>> journal = Path(tempfile.mkdtemp()) / "t.journal"
        >>> _ = journal.write_text('{"op_code": 0}\\ngarbage\\n{"op_code": 0}\\n')
        >>> _replay_refusal(journal, json.JSONDecodeError("Expecting value", "garbage", 0))
        'Expecting value on line 2 (a record cut short by a process killed while it wrote, ...)'
    """
    with path.open("rb") as handle:
        bad = next((number for number, line in enumerate(handle, start=1)
                    if line.endswith(b"\n") and not _is_journal_record(line)), None)
    if bad is None:
        return " ".join(str(error).split())[:200]
    why = "a record cut short by a process killed while it wrote, or the file edited"
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} on line {bad} ({why})"
    return f"line {bad} is not a journal record ({why})"


def _cut_partial_tail(path: Path, spec: str) -> Path | None:
    """Move a journal's last record that was cut short (no newline: a process killed while it
    appended) into ``<journal>.cut-<unix time>``, and truncate the journal to its last complete
    line; the file it wrote, or None when the journal ends with a newline.

    Optuna never reads such a record (it skips a last line that does not parse), so nothing
    the study holds changes. Done under Optuna's own journal lock, which every appending
    process holds while it writes: a record being appended right now is not taken for one cut
    short.
    """
    if not _ends_cut_short(path):
        return None
    lock = OwnedJournalLock(str(path))
    lock.acquire()
    try:
        if not _ends_cut_short(path):
            return None
        with path.open("rb+") as handle:
            size = handle.seek(0, os.SEEK_END)
            keep = _after_last_newline(handle, size)
            handle.seek(keep)
            cut = path.with_name(f"{path.name}.cut-{int(time.time())}")
            cut.write_bytes(handle.read())
            handle.truncate(keep)
            handle.flush()
            os.fsync(handle.fileno())
    finally:
        lock.release()
    _logger.warning("%s ended in a record cut short (%d bytes that a killed process never "
                    "finished, which Optuna does not read); moved to %s so that new records "
                    "start on a line of their own", mask(spec), size - keep, cut)
    return cut


def _after_last_newline(handle: BinaryIO, size: int, chunk: int = 1 << 16) -> int:
    """The offset just after the last newline of the file's first ``size`` bytes (0 when it has
    none), read backwards from the end a chunk at a time: a journal's last record is short."""
    end = size
    while end > 0:
        start = max(0, end - chunk)
        handle.seek(start)
        found = handle.read(end - start).rfind(b"\n")
        if found >= 0:
            return start + found + 1
        end = start
    return 0


def _ends_cut_short(path: Path) -> bool:
    """Whether the file's last byte is not a newline (an empty file is not cut short)."""
    with path.open("rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if size == 0:
            return False
        handle.seek(size - 1)
        return handle.read(1) != b"\n"


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
