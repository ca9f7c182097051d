"""The storage package (:mod:`lightning_hpo.storage`) itself: what a spec names, and the look
at a storage (``check_storage``) and its opening (``open_storage``), which read only, say what is
there, refuse what is not a storage untouched, and mask the password.

The launcher and the proxy refusing a storage end to end are tested with them
(``test_bad_input.py``, ``test_proxy.py``); the ``storage`` fixture is ``conftest.py``'s.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import optuna
import pytest
from helpers.support import SECRET, _journal_with_garbage_inside

from lightning_hpo.errors import ConfigError
from lightning_hpo.storage import StorageSpec, check_storage, mask, open_storage

# ------------------------------------------------------------------------------------------
# The spec: pure.


@pytest.mark.parametrize(("text", "address"), [
    ("grpc://localhost:13001", ("localhost", 13001)),
    ("grpc://10.0.0.5", ("10.0.0.5", 13000)),
    ("grpc://proxy.example.com:80/", ("proxy.example.com", 80)),
])
def test_a_grpc_spec_is_a_proxy_with_an_address(text: str, address: tuple[str, int]) -> None:
    spec = StorageSpec(text)
    assert (spec.kind, spec.is_proxy, spec.is_rdb, spec.path) == ("grpc", True, False, None)
    assert spec.address == address and spec.lock_path("claim") is None


@pytest.mark.parametrize("text", [
    "grpc://", "grpc://:13000", "grpc://host:port", "grpc://host:70000", "grpc://host:0",
    "grpc://host:1/db", "grpc://user:pw@host:1", "grpc://host:1?x=1",
])
def test_a_malformed_grpc_spec_is_a_storage_error(text: str) -> None:
    with pytest.raises(ConfigError, match=r"^storage: .*must be grpc://HOST:PORT") as caught:
        _ = StorageSpec(text).address
    assert "pw" not in str(caught.value)


# ------------------------------------------------------------------------------------------
# check_storage: reads only, says what is there, refuses what is not a storage.


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def _tables(url: str) -> list[str]:
    import sqlalchemy as sa

    engine = sa.create_engine(url)
    try:
        return sorted(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def test_check_storage_reads_what_is_there_and_writes_nothing(storage, tmp_path: Path) -> None:
    if storage.kind == "inmemory":
        pytest.skip("nothing to open: the launcher refuses in-memory storage")
    new, existing = {"journal": ("new journal file", "journal file, 1 study"),
                     "sqlite": ("new SQLite database", "SQLite database"),
                     "postgres": ("server reachable", "server reachable")}[storage.kind]
    before = _snapshot(tmp_path)
    assert check_storage(storage.url) == new
    assert _snapshot(tmp_path) == before  # no file, no folder
    if storage.kind == "postgres":
        assert _tables(storage.url) == []  # not even Optuna's tables
    optuna.create_study(study_name="t", storage=storage.make())
    storage.close()
    before = _snapshot(tmp_path)
    tables = _tables(storage.url) if storage.kind == "postgres" else []
    assert check_storage(storage.url) == existing
    assert _snapshot(tmp_path) == before
    if storage.kind == "postgres":
        assert _tables(storage.url) == tables


REFUSED: list[tuple[str, object, str]] = [
    ("text-file", lambda d: (d / "notes.txt").write_text("hello world\n") and "notes.txt",
     "notes.txt is not an Optuna journal file (its first line is not a journal record)"),
    ("one-blank-line", lambda d: (d / "blank").write_text("\n") and "blank",
     "blank is not an Optuna journal file"),
    ("binary-file", lambda d: (d / "b.bin").write_bytes(bytes(range(256))) and "b.bin",
     "b.bin is not an Optuna journal file"),
    ("sqlite-named-as-a-journal",
     lambda d: sqlite3.connect(d / "a.db").execute("CREATE TABLE t (x)") and "a.db",
     "; an SQLite database is named sqlite:///a.db"),
    ("json-but-not-a-journal", lambda d: (d / "j.jsonl").write_text('{"a": 1}\n') and "j.jsonl",
     "j.jsonl is not an Optuna journal file"),
    ("garbage-inside-a-journal", _journal_with_garbage_inside,
     "t.journal is not a valid Optuna journal file: Expecting value"),
    ("journal-is-a-folder", lambda d: (d / "x").mkdir() or "x",
     "x is a folder, not a journal file"),
    ("journal-under-a-file", lambda d: (d / "f").write_text("x") and "f/t.journal",
     "cannot create f/t.journal: f is a file, not a folder"),
    ("sqlite-text-file", lambda d: (d / "t.db").write_text("hello\n") and "sqlite:///t.db",
     "sqlite:///t.db is not an SQLite database (file is not a database)"),
    ("sqlite-is-a-folder", lambda d: (d / "x.db").mkdir() or "sqlite:///x.db",
     "sqlite:///x.db is a folder, not an SQLite database"),
    ("sqlite-under-a-file", lambda d: (d / "f").write_text("x") and "sqlite:///f/t.db",
     "cannot create sqlite:///f/t.db: f is a file, not a folder"),
    # a plain path is a journal file: a new one named as a database is a missing sqlite:///
    ("new-journal-named-as-sqlite", lambda d: "runs/t.db",
     "runs/t.db would be a new journal file (a plain path names one), but its name is an "
     "SQLite database's: give sqlite:///runs/t.db for SQLite, or name the journal "
     "runs/t.journal"),
    ("new-journal-named-sqlite3", lambda d: "t.SQLITE3", "give sqlite:///t.SQLITE3 for SQLite"),
]


@pytest.mark.parametrize(("make", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_what_is_not_a_storage_is_refused_untouched(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, make, words: str
) -> None:
    monkeypatch.chdir(tmp_path)
    spec = make(tmp_path)
    before = _snapshot(tmp_path)
    for opener in (check_storage, open_storage):
        with pytest.raises(ConfigError) as info:
            opener(spec)
        assert info.value.field == "storage" and words in info.value.message, info.value
        assert _snapshot(tmp_path) == before  # Optuna never appended to it


def test_check_storage_masks_the_password_of_an_unreachable_server() -> None:
    url = f"postgresql+psycopg2://hpo:{SECRET}@127.0.0.1:1/db"
    with pytest.raises(ConfigError) as info:
        check_storage(url)
    assert str(info.value).startswith("storage: cannot open postgresql+psycopg2://hpo:***@")
    assert SECRET not in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize(("url", "masked"), [
    ("postgresql://hpo:Sup3r@db:5432/s", "postgresql://hpo:***@db:5432/s"),
    # libpq takes the password in the query too (and a client key's in sslpassword)
    ("postgresql+psycopg2://hpo@db:5432/s?password=Sup3r", "postgresql+psycopg2://hpo@db:5432/s?password=***"),
    ("postgresql://hpo@db/s?sslmode=require&sslpassword=Sup3r", "postgresql://hpo@db/s?sslmode=require&sslpassword=***"),
    ("postgresql://hpo:Sup3r@db/s?PASSWORD=Sup3r2", "postgresql://hpo:***@db/s?PASSWORD=***"),
    # a password written unencoded, with an @ or a space in it: the last @ ends it
    ("postgresql://hpo:Su@p3r@db/s", "postgresql://hpo:***@db/s"),
    ("postgresql://hpo:Su p3r@db/s", "postgresql://hpo:***@db/s"),
    ("postgresql://hpo@db/s", "postgresql://hpo@db/s"),
    ("postgresql://db:5432/s", "postgresql://db:5432/s"),
    ("grpc://proxy:13000?token=abc", "grpc://proxy:13000?token=***"),
])
def test_a_password_anywhere_in_a_url_is_masked(url: str, masked: str) -> None:
    from lightning_hpo.storage import mask, mask_text

    assert mask(url) == masked
    assert "Sup3r" not in mask_text(f"could not connect to {url}: refused", url)


@pytest.mark.parametrize(("spec", "text", "masked"), [
    # the launcher masks a ConfigError's whole text again: the ": " after the spec stays
    (f"sqlite:///runs/x.db?password={SECRET}",
     f"storage: cannot open sqlite:///runs/x.db?password={SECRET}: no SQLite database at runs/x.db",
     "storage: cannot open sqlite:///runs/x.db?password=***: no SQLite database at runs/x.db"),
    (f"postgresql+psycopg2://hpo@db/s?password={SECRET}",
     f"cannot open postgresql+psycopg2://hpo@db/s?password={SECRET}: refused, try again",
     "cannot open postgresql+psycopg2://hpo@db/s?password=***: refused, try again"),
    (f"postgresql://hpo@db/s?sslpassword={SECRET}&sslmode=require",
     f"({SECRET}) at postgresql://hpo@db/s?sslpassword={SECRET}&sslmode=require; gone",
     "(***) at postgresql://hpo@db/s?sslpassword=***&sslmode=require; gone"),
    # two secrets in the query, each masked; a secret that ends in punctuation is masked whole
    (f"postgresql://hpo@db/s?password={SECRET}&sslpassword=k3y",
     f"at postgresql://hpo@db/s?password={SECRET}&sslpassword=k3y: no",
     "at postgresql://hpo@db/s?password=***&sslpassword=***: no"),
    (f"postgresql://hpo@db/s?password={SECRET}:",
     f"open postgresql://hpo@db/s?password={SECRET}:: no",
     "open postgresql://hpo@db/s?password=***: no"),
    # a secret of another URL in the text (not the spec's): masked up to the punctuation
    ("runs/a.journal", "proxy grpc://h:1?token=abc, then postgresql://u:pw@db/s: down.",
     "proxy grpc://h:1?token=***, then postgresql://u:***@db/s: down."),
])
def test_mask_text_masks_the_secret_and_keeps_the_words_around_it(spec: str, text: str,
                                                                  masked: str) -> None:
    from lightning_hpo.storage import mask_text

    assert mask_text(text, spec) == masked
    assert SECRET not in masked and "k3y" not in masked


@pytest.mark.parametrize(("spec", "start"), [
    (f"sqlite:///never/made/x.db?password={SECRET}",
     "storage: cannot open sqlite:///never/made/x.db?password=***: no SQLite database at "),
    (f"postgresql+psycopg2://hpo@127.0.0.1:1/db?password={SECRET}",
     "storage: cannot open postgresql+psycopg2://hpo@127.0.0.1:1/db?password=***: connection "),
])
def test_a_password_in_the_query_is_masked_with_the_separator_kept(spec: str,
                                                                   start: str) -> None:
    """The launcher prints ``mask_text(str(error), spec)``: masking twice keeps the ``": "``."""
    from lightning_hpo.storage import mask_text

    with pytest.raises(ConfigError) as caught:
        open_storage(spec, create=False)
    for message in (str(caught.value), mask_text(str(caught.value), spec)):
        assert message.startswith(start), message
        assert SECRET not in message


def test_a_journal_whose_last_record_was_cut_short_is_mended_before_a_writer_appends(
    tmp_path: Path,
) -> None:
    """A process killed while it appended leaves a last line without its end: Optuna skips it
    when reading, but a record appended after it would share its line, and the journal would
    no longer be readable. The launcher's open (a writer) moves it aside first; a reader's
    leaves the file as it is."""
    path = tmp_path / "t.journal"
    study = optuna.create_study(study_name="t", storage=open_storage(str(path)))
    for value in (1.0, 2.0):
        study.tell(study.ask(), value)
    whole = path.read_bytes()
    path.write_bytes(whole[:-20])  # the last record (the second trial's end) cut short
    open_storage(str(path), create=False)
    assert path.read_bytes() == whole[:-20]  # a reader changes nothing
    storage = open_storage(str(path))  # the launcher's
    kept = whole[: whole[:-1].rfind(b"\n") + 1]
    assert path.read_bytes() == kept
    (cut,) = tmp_path.glob("t.journal.cut-*")
    assert cut.read_bytes() == whole[len(kept):-20]
    again = optuna.load_study(study_name="t", storage=storage)
    again.tell(again.ask(), 3.0)
    reread = optuna.load_study(study_name="t", storage=open_storage(str(path), create=False))
    assert [t.state.name for t in reread.trials] == ["COMPLETE", "RUNNING", "COMPLETE"]
    assert [t.value for t in reread.trials] == [1.0, None, 3.0]


def test_sqlite_check_is_read_only(tmp_path: Path) -> None:
    path = tmp_path / "t.db"
    optuna.create_study(study_name="t", storage=open_storage(f"sqlite:///{path}"))
    path.chmod(0o444)  # a read-only open must still read it (as root the mode is not enforced)
    before = path.read_bytes()
    assert check_storage(f"sqlite:///{path}") == "SQLite database"
    assert path.read_bytes() == before
    assert sqlite3.connect(path).execute("SELECT count(*) FROM studies").fetchone() == (1,)


def test_reading_a_missing_journal_named_as_a_database_names_the_sqlite_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The report and load_study open without creating: the missing file's message says how
    an SQLite database is named, for a path that looks like one."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError) as info:
        StorageSpec("runs/t.db").open(create=False)
    assert str(info.value) == ("storage: cannot open runs/t.db: no journal file at runs/t.db "
                               "(an SQLite database is named sqlite:///runs/t.db)")
    with pytest.raises(ConfigError) as info:
        StorageSpec("runs/t.journal").open(create=False)
    assert str(info.value).endswith("no journal file at runs/t.journal")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("where", ["sqlite", "postgresql"])
@pytest.mark.parametrize("tables", [[], ["mydata"]])
def test_a_reader_refuses_a_database_without_optunas_tables_and_writes_none(
    where: str, tables: list[str], tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Optuna's RDBStorage creates its schema in whatever database it opens: a report (or
    ``load_study``) pointed at a database of something else left 13 tables in it."""
    import sqlalchemy as sa

    if where == "sqlite":
        storage = f"sqlite:///{tmp_path / 'mine.db'}"
        (tmp_path / "mine.db").touch()  # an empty file is an empty SQLite database
    else:
        storage = request.getfixturevalue("postgres_server").new_database("not_optuna")
    engine = sa.create_engine(storage)
    with engine.begin() as connection:
        for table in tables:
            connection.exec_driver_sql(f"CREATE TABLE {table} (x integer)")
    engine.dispose()
    with pytest.raises(ConfigError) as caught:
        open_storage(storage, create=False)
    has = "no tables" if not tables else "no Optuna tables (it has mydata)"
    assert str(caught.value) == (f"storage: {mask(storage)} holds no Optuna study: the "
                                 f"database has {has}; nothing was written to it")
    assert _tables(storage) == tables
    open_storage(storage)  # a writer (the launcher) makes them
    assert "studies" in _tables(storage)
    open_storage(storage, create=False)  # and then a reader opens it


@pytest.mark.parametrize("url", [
    "postgresql+psycopg2://hpo:p@sswordy@127.0.0.1:1/db",  # the driver: host "sswordy@127..."
    "postgresql+psycopg2://hpo:sec@ret:more@127.0.0.1:1/db",  # port 'more@127.0.0.1:1'
])
def test_a_password_with_an_unencoded_at_is_masked_in_the_drivers_words(url: str) -> None:
    """The URL's parser cuts such a password at its first @ and takes the rest for the host,
    which the driver then prints in its error."""
    with pytest.raises(ConfigError) as caught:
        open_storage(url)
    message = str(caught.value)
    assert message.startswith("storage: cannot open postgresql+psycopg2://hpo:***@127.0.0.1:1/db")
    for piece in ("sswordy", "ret:more", "more"):
        assert piece not in message, message
