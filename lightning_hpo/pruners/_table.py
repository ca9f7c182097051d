"""The rung store of SQL storages: a table of our own, ``lightning_hpo_rung_records``, in the
study's database (:func:`lightning_hpo.pruners._store.rung_store_of` picks it for an
``RDBStorage``).

A decision is one transaction: insert the trial's value at its rungs, then two index range
counts (the rung's records, those strictly better). Its own module so that SQLAlchemy is
imported only where a study lives in an SQL database.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

import sqlalchemy as sa

from lightning_hpo._optuna import STUDIES_TABLE, STUDY_ID_COLUMN, check_studies_table
from lightning_hpo.pruners._records import RungRecord, RungStore
from lightning_hpo.schema import RUNG_RECORD_TABLE as RECORD_TABLE

__all__ = ["TableRungStore"]

_logger = logging.getLogger(__name__)

_CREATE_ATTEMPTS = 5

_metadata = sa.MetaData()
# Optuna's table, declared only so that the foreign key below can name it; never created here
# (check_studies_table checks that Optuna made it, before ours is created).
sa.Table(STUDIES_TABLE, _metadata, sa.Column(STUDY_ID_COLUMN, sa.Integer, primary_key=True))
_records = sa.Table(
    RECORD_TABLE,
    _metadata,
    sa.Column("id", sa.Integer, primary_key=True, autoincrement=True),
    # Records are keyed by Optuna's study_id. Deleting a study deletes its records: on
    # PostgreSQL and MySQL through this foreign key's ON DELETE CASCADE, on SQLite (where Optuna
    # leaves foreign keys unenforced) through the trigger below. Without that, SQLite could hand
    # a deleted study's id to the next new study (its ids are rowids, reused from the top), and
    # the new study would inherit the old one's rung values.
    sa.Column(
        "study_id",
        sa.Integer,
        sa.ForeignKey(f"{STUDIES_TABLE}.{STUDY_ID_COLUMN}", ondelete="CASCADE"),
        nullable=False,
    ),
    sa.Column("bracket", sa.Integer, nullable=False),
    sa.Column("rung", sa.Integer, nullable=False),
    sa.Column("trial_number", sa.Integer, nullable=False),
    sa.Column("value", sa.Double, nullable=False),
    sa.UniqueConstraint(
        "study_id", "bracket", "rung", "trial_number", name=f"{RECORD_TABLE}_key"
    ),
    # Covers the decision query: the rung's records are one contiguous slice of this index.
    sa.Index(f"{RECORD_TABLE}_rank", "study_id", "bracket", "rung", "value"),
)
_SQLITE_DELETE_TRIGGER = (
    f"CREATE TRIGGER IF NOT EXISTS {RECORD_TABLE}_on_study_delete "
    f"AFTER DELETE ON {STUDIES_TABLE} FOR EACH ROW BEGIN "
    f"DELETE FROM {RECORD_TABLE} WHERE study_id = OLD.{STUDY_ID_COLUMN}; END"
)


def _count(*conditions: Any) -> Any:
    return sa.select(sa.func.count()).select_from(_records).where(*conditions).scalar_subquery()


def _rank_statement(maximize: bool) -> sa.Select[Any]:
    # One statement, two index range counts: the rung's records, and those strictly better. It
    # reads only the rung's slice of the (study_id, bracket, rung, value) index, and the second
    # count stops at the value; a single count with sum(CASE ...) would decode every value of
    # the rung.
    value = sa.bindparam("value", type_=sa.Double)
    rung = (
        _records.c.study_id == sa.bindparam("study_id"),
        _records.c.bracket == sa.bindparam("bracket"),
        _records.c.rung == sa.bindparam("rung"),
    )
    better = _records.c.value > value if maximize else _records.c.value < value
    return sa.select(_count(*rung), _count(*rung, better))


_RANK = {False: _rank_statement(False), True: _rank_statement(True)}
_INSERT = _records.insert()
_SELECT_ALL = (
    sa.select(_records.c.bracket, _records.c.rung, _records.c.trial_number, _records.c.value)
    .where(_records.c.study_id == sa.bindparam("study_id"))
    .order_by(_records.c.bracket, _records.c.rung, _records.c.trial_number)
)

# Engines whose database this process has seen the table in: create it once per engine.
_ready_engines: weakref.WeakSet[sa.Engine] = weakref.WeakSet()
_ready_lock = threading.Lock()


class TableRungStore(RungStore):
    """Records as rows of ``lightning_hpo_rung_records`` in the study's own database."""

    def __init__(self, engine: sa.Engine, study_id: int) -> None:
        self._engine = engine
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
        _ensure_table(self._engine)
        rows = [
            {
                "study_id": self._study_id,
                "bracket": bracket,
                "rung": rung,
                "trial_number": trial_number,
                "value": value,
            }
            for rung in rungs
        ]
        rank_params = {
            "study_id": self._study_id,
            "bracket": bracket,
            "rung": rungs[-1],
            "value": value,
        }
        try:
            # The common case in one transaction: insert, then count with our row included.
            with self._engine.begin() as conn:
                conn.execute(_INSERT, rows)
                return _rank(conn, maximize, rank_params)
        except sa.exc.IntegrityError:
            # Some record is already there (a repeated report): insert the others one by one.
            pass
        for row in rows:
            try:
                with self._engine.begin() as conn:
                    conn.execute(_INSERT, [row])
            except sa.exc.IntegrityError:
                _logger.debug("rung record already there: %s", row)
        with self._engine.connect() as conn:
            return _rank(conn, maximize, rank_params)

    def records(self) -> list[RungRecord]:
        if self._engine not in _ready_engines and not sa.inspect(self._engine).has_table(
            RECORD_TABLE
        ):
            return []
        with self._engine.connect() as conn:
            rows = conn.execute(_SELECT_ALL, {"study_id": self._study_id}).all()
        return [RungRecord(int(b), int(r), int(t), float(v)) for b, r, t, v in rows]


def _rank(conn: sa.Connection, maximize: bool, params: Mapping[str, Any]) -> tuple[int, int]:
    n, n_better = conn.execute(_RANK[maximize], params).one()
    return int(n), int(n_better)  # MySQL sums to Decimal


def _ensure_table(engine: sa.Engine) -> None:
    """Create the records table (and SQLite's delete trigger) once per engine per process.

    Several processes may race to create it: the loser's ``CREATE`` fails with "already exists"
    (or PostgreSQL's duplicate catalog key, or SQLite's "database is locked"); it then checks
    again and finds the table.

    Raises:
        OptunaContractError: Optuna's studies table, which ours refers to, is not as assumed.
    """
    if engine in _ready_engines:
        return
    with _ready_lock:
        if engine in _ready_engines:
            return
        check_studies_table(engine)
        for attempt in range(1, _CREATE_ATTEMPTS + 1):
            try:
                _metadata.create_all(engine, tables=[_records], checkfirst=True)
                if engine.dialect.name == "sqlite":
                    with engine.begin() as conn:
                        conn.exec_driver_sql(_SQLITE_DELETE_TRIGGER)
                break
            except sa.exc.DatabaseError as error:
                if attempt == _CREATE_ATTEMPTS:
                    raise
                _logger.debug("creating %s raced another process (%s); checking again",
                              RECORD_TABLE, type(error).__name__)
        _ready_engines.add(engine)
