"""``lightning_hpo.storage._journal_lock``: Optuna's journal lock with its holder written down.

A process killed while it held Optuna's journal lock used to stall every other writer for the
30-s grace period (then three warnings): a launcher whose worker was killed mid-append, and the
next run after a crash. Here, with real processes killed by SIGKILL while they hold it: the
owner file, which locks may be broken (a dead holder's, named by pid or found dead) and which
never (a live holder's, an unknown holder's, an earlier lock's owner file); then the launcher,
which releases a killed worker's lock when it reaps it and an abandoned one when it opens the
journal.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
from pathlib import Path

import optuna
import pytest
from helpers.support import config_file, launch
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend, JournalFileSymlinkLock
from optuna.trial import TrialState

from lightning_hpo.storage import open_storage
from lightning_hpo.storage._journal_lock import (
    OWNER_SUFFIX,
    OwnedJournalLock,
    break_abandoned_lock,
    break_lock_of,
)

_HOLD = """
import os, signal, sys
from optuna.storages.journal import JournalFileSymlinkLock
from lightning_hpo.storage._journal_lock import OwnedJournalLock
lock = (OwnedJournalLock if sys.argv[2] == "owned" else JournalFileSymlinkLock)(sys.argv[1])
lock.acquire()
print("held", flush=True)
if sys.argv[3] == "die":
    os.kill(os.getpid(), signal.SIGKILL)
sys.stdin.read()  # "live": holds it until the test closes stdin, then lets go
lock.release()
"""


def _journal(tmp_path: Path) -> Path:
    path = tmp_path / "s.journal"
    optuna.create_study(study_name="s", storage=JournalStorage(JournalFileBackend(str(path))))
    return path


def _hold(journal: Path, kind: str, then: str) -> subprocess.Popen[str]:
    """A process that takes ``journal``'s lock (``owned`` or Optuna's ``plain``), then is
    killed by SIGKILL (``die``) or holds it until its stdin closes (``live``)."""
    process = subprocess.Popen([sys.executable, "-c", _HOLD, str(journal), kind, then],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stdout.readline() == "held\n"
    if then == "die":
        assert process.wait(timeout=30) == -signal.SIGKILL
    return process


def _locked(journal: Path) -> bool:
    return os.path.lexists(f"{journal}.lock")


def test_the_holder_writes_who_it_is_and_removes_it_when_it_lets_go(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    lock = OwnedJournalLock(str(journal))
    lock.acquire()
    where, pid, identity = Path(f"{journal}.lock{OWNER_SUFFIX}").read_text().split()
    status = os.lstat(f"{journal}.lock")
    assert (where, int(pid)) == (f"{socket.gethostname()}/{os.readlink('/proc/self/ns/pid')}",
                                 os.getpid())
    assert identity == f"{status.st_ino}:{status.st_ctime_ns}"
    lock.release()
    assert not _locked(journal) and not Path(f"{journal}.lock{OWNER_SUFFIX}").exists()


def test_a_killed_holders_lock_is_broken_by_its_pid_and_then_free(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    dead = _hold(journal, "owned", "die")
    assert _locked(journal)
    assert not break_lock_of(journal, dead.pid + 1)  # not the holder
    assert break_lock_of(journal, dead.pid)
    assert not _locked(journal) and not Path(f"{journal}.lock{OWNER_SUFFIX}").exists()
    assert not break_lock_of(journal, dead.pid)  # nothing left to break
    lock = JournalFileSymlinkLock(str(journal), grace_period=None)  # would wait forever
    lock.acquire()
    lock.release()


def test_an_abandoned_lock_is_found_dead_and_broken(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    dead = _hold(journal, "owned", "die")
    assert break_abandoned_lock(journal) == dead.pid
    assert not _locked(journal)
    assert break_abandoned_lock(journal) is None


def test_a_live_holders_lock_is_never_broken(tmp_path: Path) -> None:
    journal = _journal(tmp_path)
    live = _hold(journal, "owned", "live")
    try:
        assert break_abandoned_lock(journal) is None
        assert _locked(journal)
    finally:
        assert live.stdin is not None
        live.stdin.close()
        live.wait(timeout=30)
    assert not _locked(journal)  # it let go itself


def test_a_lock_whose_holder_wrote_no_owner_is_left_to_optunas_grace_period(
    tmp_path: Path,
) -> None:
    """Plain Optuna (optuna-dashboard, a user's script) holds the same lock without an owner
    file: it cannot be told dead, so it is never broken here."""
    journal = _journal(tmp_path)
    dead = _hold(journal, "plain", "die")
    assert break_abandoned_lock(journal) is None and not break_lock_of(journal, dead.pid)
    assert _locked(journal)


def test_an_earlier_locks_owner_file_does_not_break_a_later_lock(tmp_path: Path) -> None:
    """A dead holder's owner file left beside a lock taken since (Optuna's grace period broke
    the dead one, and a plain process holds the new one): the identity differs."""
    journal = _journal(tmp_path)
    dead = _hold(journal, "owned", "die")
    owner = Path(f"{journal}.lock{OWNER_SUFFIX}").read_text()
    JournalFileSymlinkLock(str(journal)).release()  # what the grace period does
    Path(f"{journal}.lock{OWNER_SUFFIX}").write_text(owner)
    lock = JournalFileSymlinkLock(str(journal))
    lock.acquire()
    try:
        assert not break_lock_of(journal, dead.pid) and break_abandoned_lock(journal) is None
        assert _locked(journal)
    finally:
        lock.release()


def test_a_lock_held_in_another_pid_namespace_is_never_broken(tmp_path: Path) -> None:
    """Two containers on one host may share a hostname and a mounted journal, not their pids:
    a holder's pid that does not run here may run there."""
    journal = _journal(tmp_path)
    dead = _hold(journal, "owned", "die")
    owner = Path(f"{journal}.lock{OWNER_SUFFIX}")
    where, pid, identity = owner.read_text().split()
    owner.write_text(f"{socket.gethostname()}/pid:[1] {pid} {identity}\n")
    assert not break_lock_of(journal, dead.pid) and break_abandoned_lock(journal) is None
    owner.write_text(f"{where} {pid} {identity}\n")  # this namespace's after all: broken
    assert break_abandoned_lock(journal) == dead.pid


@pytest.mark.parametrize("text", ["", "host 12", "host twelve 1:2\n", "h 1 1:2"])
def test_an_owner_file_that_does_not_read_as_one_breaks_nothing(
    tmp_path: Path, text: str,
) -> None:
    journal = _journal(tmp_path)
    dead = _hold(journal, "owned", "die")
    where = Path(f"{journal}.lock{OWNER_SUFFIX}").read_text().split()[0]
    Path(f"{journal}.lock{OWNER_SUFFIX}").write_text(text.replace("h ", f"{where} ")
                                                     .replace(" 1 ", f" {dead.pid} "))
    assert not break_lock_of(journal, dead.pid) and break_abandoned_lock(journal) is None
    assert _locked(journal)


def test_opening_the_journal_to_write_releases_an_abandoned_lock(
    tmp_path: Path, caplog: pytest.LogCaptureFixture,
) -> None:
    journal = _journal(tmp_path)
    dead = _hold(journal, "owned", "die")
    storage = open_storage(str(journal))  # a writer: it appends next
    assert not _locked(journal)
    assert f"locked by process {dead.pid} of this machine, which no longer runs" in caplog.text
    study = optuna.load_study(study_name="s", storage=storage)
    study.set_user_attr("written", True)  # no 30-s wait for the lock


# -- the launcher -------------------------------------------------------------------------------

_DIE_HOLDING = """
import atexit, os, shutil, signal, sys, tempfile
if "lightning_hpo.launch.worker" in " ".join(getattr(sys, "orig_argv", [])):
    from lightning_hpo._scratch import scratch_prefix
    from lightning_hpo.storage import _journal_lock

    # a temporary folder, as a worker makes to check a config or for its DDP ranks' mailbox
    folder = tempfile.mkdtemp(prefix=scratch_prefix("mailbox"))
    atexit.register(shutil.rmtree, folder, True)

    taken, acquire = [0], _journal_lock.OwnedJournalLock.acquire

    def dying(self):
        held = acquire(self)
        taken[0] += 1
        if taken[0] == int(os.environ["DIE_AT_ACQUIRE"]):
            try:  # the first worker to get here, once
                os.close(os.open(os.environ["DIE_MARKER"], os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                return held
            os.kill(os.getpid(), signal.SIGKILL)
        return held

    _journal_lock.OwnedJournalLock.acquire = dying
"""


@pytest.mark.slow
def test_a_worker_killed_while_it_holds_the_lock_does_not_stall_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A worker SIGKILLed just after taking the journal's lock, mid-trial: the launcher
    releases the lock as it reaps it, hands its trial back and the run ends without Optuna's
    grace period (no "Forcibly releasing" anywhere); the temporary folder the killed worker
    made is removed too (the others' remove their own as they exit)."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "sitecustomize.py").write_text(textwrap.dedent(_DIE_HOLDING))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("DIE_AT_ACQUIRE", "4")
    monkeypatch.setenv("DIE_MARKER", str(tmp_path / "died"))
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    config = config_file(tmp_path, stop={"n_trials": 3})
    result = launch(str(config), "--quiet", cwd=tmp_path, timeout=300)
    assert [p.name for p in scratch.iterdir() if p.name.startswith("lightning-hpo-")] == []
    logs = "".join(p.read_text() for p in (tmp_path / "runs" / "t" / "workers").glob("*.log"))
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    assert (tmp_path / "died").exists()
    assert "was killed by SIGKILL while it held the journal's lock; released it" in result.stderr
    assert "Forcibly releasing" not in result.stderr + logs
    trials = optuna.load_study(study_name="t", storage=open_storage(
        str(tmp_path / "t.journal"))).get_trials()
    assert [t.state for t in trials] == [TrialState.COMPLETE] * 3
