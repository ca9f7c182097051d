"""Optuna's journal lock with its holder written down, so that a lock a killed process left
behind is broken at once instead of after Optuna's 30-second grace period.

Every process appending to a journal file holds Optuna's lock while it writes: the symlink
``<journal>.lock`` (:class:`~optuna.storages.journal.JournalFileSymlinkLock`). The symlink says
nothing of its holder, so when one is killed while it holds it, every other process (a launcher
whose worker was killed, the next run after a crash) waits the grace period and then breaks it.

:class:`OwnedJournalLock` is the same lock, taken and released the same way (plain Optuna
processes on the same file exclude it and are excluded), whose holder also writes
``<journal>.lock.owner`` once it holds it: its host and PID namespace, its pid and the symlink's
identity (inode and change time), removed again before it lets go. :func:`break_lock_of` breaks
the lock when a process the caller knows is dead holds it (the supervisor, on reaping a killed
worker); :func:`break_abandoned_lock` when its holder is a process of this host that no longer
runs (a launcher's start). Both break it only when the owner file names the symlink that is
there now; with no owner file, Optuna's grace period applies. A pid that runs again (reused) is
taken as alive: never broken wrongly, only late.

Example::

    lock = OwnedJournalLock("runs/s.journal")
    lock.acquire()      # runs/s.journal.lock, and runs/s.journal.lock.owner naming this process
    lock.release()      # both removed
"""

from __future__ import annotations

import contextlib
import functools
import os
import socket
from pathlib import Path

from optuna.storages.journal import JournalFileSymlinkLock

__all__ = ["OWNER_SUFFIX", "OwnedJournalLock", "break_abandoned_lock", "break_lock_of"]

#: Appended to the lock file's name: the holder's owner file.
OWNER_SUFFIX = ".owner"


@functools.cache
def _where() -> str:
    """This host and PID namespace, as one word: two containers on one host may share a
    hostname (host networking) but not their pids."""
    try:
        namespace = os.readlink("/proc/self/ns/pid")  # "pid:[4026531836]" (Linux)
    except OSError:
        namespace = "-"
    return f"{socket.gethostname()}/{namespace}"


def _identity(lock_file: str) -> str | None:
    """The lock symlink's inode and change time (ns), or None when there is no lock."""
    try:
        status = os.lstat(lock_file)
    except OSError:
        return None
    return f"{status.st_ino}:{status.st_ctime_ns}"


class OwnedJournalLock(JournalFileSymlinkLock):
    """Optuna's symlink lock on ``filepath`` whose holder writes who it is beside it (see the
    module); ``grace_period`` as Optuna's (seconds before a waiter breaks a lock it cannot
    tell the holder of)."""

    def __init__(self, filepath: str, grace_period: int | None = 30) -> None:
        super().__init__(filepath, grace_period)
        self._owner_file = self._lock_file + OWNER_SUFFIX

    def acquire(self) -> bool:
        held = super().acquire()
        identity = _identity(self._lock_file)
        if identity is not None:
            # where it cannot be written, there is no owner: Optuna's grace period applies
            with contextlib.suppress(OSError), open(self._owner_file, "w",
                                                    encoding="utf-8") as owner:
                owner.write(f"{_where()} {os.getpid()} {identity}\n")
        return held

    def release(self) -> None:
        with contextlib.suppress(OSError):
            os.unlink(self._owner_file)
        super().release()


def _owner(journal: Path) -> tuple[str, int, str] | None:
    """(host and PID namespace, pid, lock identity) from the journal's owner file; None when
    there is none or it does not read as one (a holder killed while writing it)."""
    try:
        text = Path(f"{journal}.lock{OWNER_SUFFIX}").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None
    parts = text.split()
    if len(parts) != 3 or not text.endswith("\n") or not parts[1].isdigit():
        return None
    return parts[0], int(parts[1]), parts[2]


def break_lock_of(journal: str | Path, pid: int) -> bool:
    """Break ``journal``'s lock when process ``pid`` of this host holds it and is dead (the
    caller knows: it reaped it); True when it did. The lock is released as Optuna releases it
    (renamed, then removed), and the owner file removed."""
    journal = Path(journal)
    owner = _owner(journal)
    lock_file = f"{journal}.lock"
    if owner is None or owner[:2] != (_where(), pid):
        return False
    if _identity(lock_file) != owner[2]:  # released, or another holder's since
        return False
    with contextlib.suppress(OSError):
        os.unlink(lock_file + OWNER_SUFFIX)
    try:
        JournalFileSymlinkLock(str(journal)).release()
    except RuntimeError:  # gone meanwhile
        return False
    return True


def break_abandoned_lock(journal: str | Path) -> int | None:
    """Break ``journal``'s lock when its holder is a process of this host that no longer runs
    (a run killed while it appended); the dead holder's pid, or None (no lock, a live or unknown
    holder, another host's)."""
    owner = _owner(Path(journal))
    if owner is None or owner[0] != _where():  # another machine's, or another container's
        return None
    try:
        os.kill(owner[1], 0)
        return None  # it runs (or its pid does again): never broken wrongly
    except ProcessLookupError:
        pass
    except PermissionError:  # another user's live process
        return None
    return owner[1] if break_lock_of(journal, owner[1]) else None
