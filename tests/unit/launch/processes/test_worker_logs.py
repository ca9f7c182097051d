"""``launch.processes._worker_logs``: each running launcher writes its workers' logs in a folder
no other running launcher writes in (a SLURM array or two machines on one shared run folder)."""

from __future__ import annotations

import errno
import fcntl
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.processes import _worker_logs
from lightning_hpo.launch.processes._worker_logs import LOCK_NAME, claim_log_dir, release_log_dir

_HOLDER = """
import sys, time
from pathlib import Path
from lightning_hpo.launch.processes._worker_logs import claim_log_dir
folder, _ = claim_log_dir(Path(sys.argv[1]))
print(folder, flush=True)
time.sleep(300)
"""


@pytest.fixture
def study_dir(tmp_path: Path) -> Iterator[Path]:
    folder = tmp_path / "runs" / "s"
    yield folder
    release_log_dir(folder)


@pytest.fixture
def other_launcher(study_dir: Path) -> Iterator[tuple[subprocess.Popen[str], Path]]:
    """Another process that has claimed the study's log folder and holds it until killed."""
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(study_dir)],
                              stdout=subprocess.PIPE, text=True)
    assert holder.stdout is not None
    folder = Path(holder.stdout.readline().strip())
    try:
        yield holder, folder
    finally:
        holder.kill()
        holder.wait()


def _own(study_dir: Path) -> Path:
    return study_dir / "workers" / f"{socket.gethostname().split('.')[0]}-{os.getpid()}"


def test_the_first_launcher_gets_workers_and_says_what_it_made(study_dir: Path) -> None:
    folder, made = claim_log_dir(study_dir)
    assert folder == study_dir / "workers" and folder.is_dir()
    assert made == study_dir.parent  # runs/ did not exist: the top folder made
    assert (folder / LOCK_NAME).is_file()


def test_an_existing_folder_is_not_reported_as_made(study_dir: Path) -> None:
    (study_dir / "workers").mkdir(parents=True)
    assert claim_log_dir(study_dir) == (study_dir / "workers", None)


def test_one_process_keeps_its_folder_until_it_releases_it(study_dir: Path) -> None:
    first = claim_log_dir(study_dir)
    assert claim_log_dir(study_dir) == (first[0], None)  # the early start, then the supervisor
    release_log_dir(study_dir)
    release_log_dir(study_dir)  # twice: a no-op
    assert claim_log_dir(study_dir) == (study_dir / "workers", None)  # free again: claimed


def test_a_folder_removed_after_a_refusal_is_claimed_anew(study_dir: Path) -> None:
    folder, _ = claim_log_dir(study_dir)
    (folder / LOCK_NAME).unlink()
    folder.rmdir()
    assert claim_log_dir(study_dir) == (folder, folder)  # made again; runs/s was there
    assert (folder / LOCK_NAME).is_file()


def test_a_second_launcher_writes_in_a_folder_of_its_own(
    study_dir: Path, other_launcher: tuple[subprocess.Popen[str], Path]
) -> None:
    _, theirs = other_launcher
    assert theirs == study_dir / "workers"
    folder, made = claim_log_dir(study_dir)
    assert folder == _own(study_dir) and folder.is_dir()
    assert made == folder  # workers/ was there: only its own folder is ours to remove


def test_the_folder_is_free_again_once_its_launcher_has_ended(
    study_dir: Path, other_launcher: tuple[subprocess.Popen[str], Path]
) -> None:
    holder, _ = other_launcher
    holder.kill()  # killed, not stopped: the kernel releases the lock all the same
    holder.wait()
    assert claim_log_dir(study_dir) == (study_dir / "workers", None)


@pytest.mark.parametrize("code", [errno.ENOLCK, errno.EOPNOTSUPP], ids=["no-locks", "unsupported"])
def test_without_locks_every_launcher_takes_a_folder_of_its_own(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch, code: int
) -> None:
    """A file system without locks (some NFS and Lustre mounts): it cannot know it is alone."""
    def refuse(fd: int, operation: int) -> None:
        raise OSError(code, os.strerror(code))

    monkeypatch.setattr(_worker_logs.fcntl, "flock", refuse)
    folder, made = claim_log_dir(study_dir)
    assert folder == _own(study_dir) and made == study_dir.parent


def test_another_lock_error_is_not_taken_for_another_launcher(
    study_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def broken(fd: int, operation: int) -> None:
        raise OSError(errno.EBADF, "bad file descriptor")

    monkeypatch.setattr(_worker_logs.fcntl, "flock", broken)
    with pytest.raises(OSError, match="bad file descriptor"):
        claim_log_dir(study_dir)


def test_the_lock_is_not_inherited_by_the_workers(study_dir: Path) -> None:
    """The workers a launcher starts must not keep its claim after it has ended."""
    folder, _ = claim_log_dir(study_dir)
    probe = ("import fcntl, os, sys\n"
             "fds = [int(f) for f in os.listdir('/proc/self/fd')]\n"
             "held = [f for f in fds if os.path.basename(os.path.realpath(f'/proc/self/fd/{f}'))"
             f" == {LOCK_NAME!r}]\n"
             "print(held)\n")
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                         check=True, close_fds=False)
    assert out.stdout.strip() == "[]"
    # and another open of it is refused the lock
    with open(folder / LOCK_NAME) as other, pytest.raises(BlockingIOError):
        fcntl.flock(other, fcntl.LOCK_EX | fcntl.LOCK_NB)


def test_a_file_where_the_folder_goes_is_one_config_error(study_dir: Path) -> None:
    """``workers`` is a file: the launcher printed a FileExistsError traceback."""
    study_dir.mkdir(parents=True)
    (study_dir / "workers").write_text("x")
    with pytest.raises(ConfigError) as info:
        claim_log_dir(study_dir)
    assert info.value.field == "run_dir"
    assert info.value.message == (f"cannot create {study_dir / 'workers'}: File exists "
                                  "(a file of that name is there)")
