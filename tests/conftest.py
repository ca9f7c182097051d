"""Shared fixtures: a ``storage`` over every kind of Optuna storage, ``direction``, and a throwaway
PostgreSQL server (``postgres_server``, ``postgres_url``).

``storage`` yields a :class:`StorageSpec`: ``spec.make()`` gives something to pass to
``optuna.create_study(storage=...)`` / ``optuna.load_study``, and ``(spec.kind, spec.url)`` is
what a subprocess needs to open the same storage (``helpers.pruner_worker.make_storage``)::

    def test_shared(storage: StorageSpec) -> None:
        study = optuna.create_study(storage=storage.make(), study_name="s")
        again = optuna.load_study(study_name="s", storage=storage.make())

PostgreSQL tests start one server per session as the ``postgres`` user (``initdb`` refuses
root), on 127.0.0.1 and a free port, with one fresh database per test, and stop it at the end.
Without server binaries they are skipped with the reason, unless
``LIGHTNING_HPO_REQUIRE_POSTGRES=1``, where they fail.
"""

from __future__ import annotations

import glob
import itertools
import os
import pwd
import shutil
import struct
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest
from helpers.pruner_worker import make_storage
from helpers.support import as_user, free_port
from optuna.storages import BaseStorage, RDBStorage

_REQUIRE_POSTGRES = "LIGHTNING_HPO_REQUIRE_POSTGRES"
_PG_START_TIMEOUT_S = 60


@dataclass
class StorageSpec:
    """One storage of the parametrised ``storage`` fixture.

    Attributes:
        kind: ``inmemory``, ``sqlite``, ``journal`` or ``postgres``.
        url: the SQLAlchemy URL or journal file path (``None`` for in-memory).
    """

    kind: str
    url: str | None
    _opened: list[BaseStorage] = field(default_factory=list, repr=False)

    @property
    def shareable(self) -> bool:
        """Whether another process can open this storage."""
        return self.kind != "inmemory"

    @property
    def is_rdb(self) -> bool:
        """Whether this is an Optuna ``RDBStorage`` (SQLite, PostgreSQL)."""
        return self.kind in ("sqlite", "postgres")

    def make(self) -> BaseStorage:
        """Open the storage: a new handle each call (the same object for in-memory)."""
        if self.kind == "inmemory" and self._opened:
            return self._opened[0]
        storage = make_storage(self.kind, self.url)
        self._opened.append(storage)
        return storage

    def close(self) -> None:
        """Release the connections of every handle this spec opened."""
        for storage in self._opened:
            if isinstance(storage, RDBStorage):
                storage.engine.dispose()
        self._opened.clear()


@pytest.fixture(
    params=[
        pytest.param("inmemory", id="inmemory"),
        pytest.param("sqlite", id="sqlite"),
        pytest.param("journal", id="journal"),
        pytest.param("postgres", id="postgres", marks=pytest.mark.postgres),
    ]
)
def storage(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StorageSpec]:
    """Every kind of Optuna storage, fresh for each test (PostgreSQL: a new database)."""
    kind = request.param
    if kind == "inmemory":
        spec = StorageSpec(kind, None)
    elif kind == "sqlite":
        spec = StorageSpec(kind, f"sqlite:///{tmp_path / 'study.db'}")
    elif kind == "journal":
        spec = StorageSpec(kind, str(tmp_path / "study.journal"))
    else:
        server: PostgresServer = request.getfixturevalue("postgres_server")
        spec = StorageSpec(kind, server.new_database())
    try:
        yield spec
    finally:
        spec.close()


@pytest.fixture(params=["minimize", "maximize"])
def direction(request: pytest.FixtureRequest) -> str:
    """Both study directions."""
    return request.param


# ------------------------------------------------------------------------------------------
# A throwaway PostgreSQL server.


@dataclass
class PostgresServer:
    """A running throwaway server: ``new_database()`` gives the URL of a fresh database."""

    port: int
    _counter: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def url(self, database: str) -> str:
        """The SQLAlchemy URL of ``database`` on this server."""
        return f"postgresql+psycopg2://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self, prefix: str = "test") -> str:
        """Create an empty database and return its URL."""
        import sqlalchemy as sa

        name = f"{prefix}_{next(self._counter)}"
        engine = sa.create_engine(self.url("postgres"), isolation_level="AUTOCOMMIT")
        try:
            with engine.connect() as conn:
                conn.exec_driver_sql(f'CREATE DATABASE "{name}"')
        finally:
            engine.dispose()
        return self.url(name)


def _unavailable(reason: str) -> None:
    if os.environ.get(_REQUIRE_POSTGRES) == "1":
        pytest.fail(f"PostgreSQL required ({_REQUIRE_POSTGRES}=1) but {reason}", pytrace=False)
    pytest.skip(f"PostgreSQL tests skipped: {reason}")


def _postgres_bindir() -> Path | None:
    initdb = shutil.which("initdb")
    if initdb is not None and shutil.which("pg_ctl") is not None:
        return Path(initdb).resolve().parent
    for candidate in sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True):
        return Path(candidate).parent
    return None


def _run(cmd: list[str | Path], run_as: pwd.struct_passwd | None, check: bool = True) -> None:
    args = [str(part) for part in cmd]
    result = subprocess.run(
        args if run_as is None else as_user(args, run_as.pw_uid, run_as.pw_gid),
        capture_output=True, text=True, check=False, timeout=_PG_START_TIMEOUT_S + 30,
        env={**os.environ, "LC_ALL": "C"},
    )
    if check and result.returncode != 0:
        raise RuntimeError(
            f"{Path(str(cmd[0])).name} failed ({result.returncode}): "
            f"{(result.stderr or result.stdout).strip()[-2000:]}"
        )


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    """Start PostgreSQL for this session (as the ``postgres`` user when run as root); stop it."""
    bindir = _postgres_bindir()
    if bindir is None:
        _unavailable("initdb/pg_ctl are not on PATH nor in /usr/lib/postgresql/*/bin")
    try:
        import psycopg2  # noqa: F401
    except ImportError:
        _unavailable("psycopg2 is not installed (pip install psycopg2-binary)")
    assert bindir is not None
    run_as: pwd.struct_passwd | None = None
    root = Path(tempfile.mkdtemp(prefix="lightning-hpo-pg-"))
    data = root / "data"
    initialized = False
    try:
        if os.geteuid() == 0:  # initdb refuses root: run the server as `postgres`
            try:
                user = pwd.getpwnam("postgres")
            except KeyError:
                _unavailable("running as root and there is no `postgres` user to run the server")
            os.chown(root, user.pw_uid, user.pw_gid)
            run_as = user
        try:
            _run([bindir / "initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8",
                  "--no-sync"], run_as)
            initialized = True
            port = free_port()
            options = (
                f"-h 127.0.0.1 -p {port} -k {root} -c fsync=off -c synchronous_commit=off "
                "-c full_page_writes=off -c max_connections=300"
            )
            _run([bindir / "pg_ctl", "-D", data, "-l", root / "server.log", "-w",
                  "-t", str(_PG_START_TIMEOUT_S), "-o", options, "start"], run_as)
        except (RuntimeError, subprocess.TimeoutExpired) as error:
            log = root / "server.log"
            tail = log.read_text()[-1500:] if log.exists() else ""
            _unavailable(f"the throwaway server did not start: {error}\n{tail}")
        yield PostgresServer(port)
    finally:
        if initialized:
            _run([bindir / "pg_ctl", "-D", data, "-m", "fast", "-w", "stop"], run_as, check=False)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_url(postgres_server: PostgresServer) -> str:
    """The URL of a database on the session's throwaway server, shared by the session."""
    return postgres_server.new_database("lightning_hpo")


# ------------------------------------------------------------------------------------------
# Fashion-MNIST: tiny real IDX files in torchvision's layout (the data cannot be downloaded here).

_FASHION_FILES = {
    True: ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
    False: ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"),
}


def _write_idx(raw: Path, train: bool, images: np.ndarray, labels: np.ndarray) -> None:
    image_file, label_file = _FASHION_FILES[train]
    n, rows, cols = images.shape
    # IDX: big-endian magic (2051 images, 2049 labels), dimensions, then uint8 data.
    (raw / image_file).write_bytes(struct.pack(">IIII", 2051, n, rows, cols) + images.tobytes())
    (raw / label_file).write_bytes(struct.pack(">II", 2049, n) + labels.tobytes())


@pytest.fixture
def fashion_root(tmp_path: Path) -> tuple[Path, dict[bool, tuple[np.ndarray, np.ndarray]]]:
    """A root holding 20 train / 10 test random images in torchvision's layout."""
    raw = tmp_path / "FashionMNIST" / "raw"
    raw.mkdir(parents=True)
    rng = np.random.default_rng(0)
    data = {}
    for train, n in ((True, 20), (False, 10)):
        images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
        labels = rng.integers(0, 10, size=n, dtype=np.uint8)
        _write_idx(raw, train, images, labels)
        data[train] = (images, labels)
    return tmp_path, data
