"""A journal file's checks: it is one (its first line is a journal record), the line Optuna's
replay refused, and a last record cut short by a killed process moved out before anyone
appends; :func:`open_journal` opens one after these checks.

Example::

    storage = open_journal(Path("runs/quickstart.journal"), "runs/quickstart.journal")
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path
from typing import BinaryIO

from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from lightning_hpo.errors import ConfigError
from lightning_hpo.storage._journal_lock import OwnedJournalLock, break_abandoned_lock
from lightning_hpo.storage._mask import mask

__all__ = ["check_first_record", "open_journal"]

_logger = logging.getLogger(__name__)

_MAX_RECORD_BYTES = 1 << 24  # a first line longer than 16 MiB is not a journal record


def _is_journal_record(line: bytes) -> bool:
    try:
        record = json.loads(line)
    except ValueError:  # not JSON, or not UTF-8
        return False
    return isinstance(record, dict) and "op_code" in record


def check_first_record(path: Path, spec: str, *, writer: bool = True) -> None:
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


def open_journal(path: Path, spec: str, *, writer: bool = False) -> JournalStorage:
    """Open a journal file (created when missing), refusing a file that is not a journal.

    Optuna skips a last line that does not parse (a write cut short) and appends after it, so
    a one-line text file would be taken for an empty journal and written to: the first line
    must be a journal record. Optuna's replay then reads every line (read-only).

    A ``writer`` (the launcher, before its first write) first moves a last record cut short
    out of the journal (:func:`_cut_partial_tail`): appended after, the next record would
    share its line, and the file would no longer be a journal anyone can read.
    """
    if path.exists():
        check_first_record(path, spec, writer=writer)
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
