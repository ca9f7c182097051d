"""Each launcher's folder for its workers' logs, never shared with another running launcher.

A slot's log is ``run_dir/<study>/workers/slotN.log``. Several launchers may run one study at
once with ``run_dir`` on a file system they all see (a SLURM array, two machines, two terminals
on one machine); each has a slot 0, and their lines would interleave in one file (on NFS,
appends from two machines may even overwrite each other). So a launcher claims ``workers/``
by holding an exclusive ``flock`` on ``workers/.launcher.lock`` for as long as it runs (the
kernel releases it when the process ends, however it ends: nothing stale is left), and a
launcher that finds it held writes its logs to ``workers/<host>-<pid>/`` instead. Where the
file system has no locks, every launcher takes a folder of its own, as it cannot know whether
it is alone.

The claim is the process's: the early start and the supervisor of one launcher, or a notebook
that runs the same study twice, get the same folder (:func:`claim_log_dir`), until
:func:`release_log_dir`.

Example::

    >>> import tempfile
    >>> study_dir = Path(tempfile.mkdtemp()) / "study"
    >>> folder, made = claim_log_dir(study_dir)
    >>> folder == study_dir / "workers", made == study_dir
    (True, True)
    >>> claim_log_dir(study_dir) == (folder, None)  # the same process: the same folder
    True
    >>> release_log_dir(study_dir)
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import socket
from pathlib import Path

from lightning_hpo.errors import ConfigError

__all__ = ["LOCK_NAME", "claim_log_dir", "release_log_dir"]

#: The file a launcher holds locked while ``workers/`` is its log folder.
LOCK_NAME = ".launcher.lock"

# study folder (absolute) -> (this process's log folder, the locked file's descriptor or -1)
_claimed: dict[Path, tuple[Path, int]] = {}


def claim_log_dir(study_dir: Path) -> tuple[Path, Path | None]:
    """This process's folder for its workers' logs in ``study_dir``, made where missing:
    ``study_dir/workers`` when no other running launcher holds it, else
    ``study_dir/workers/<host>-<pid>``. Returns the folder and the top folder this call made
    (None: it existed), for the caller to remove if the run is refused.

    Raises:
        ConfigError: ``run_dir: cannot create <folder>: ...``, a folder that cannot be made
            (a file of that name is there, no permission).
    """
    key = study_dir.absolute()
    held = _claimed.get(key)
    if held is not None and held[0].is_dir():
        return held[0], None
    release_log_dir(study_dir)  # a claimed folder removed meanwhile: claimed anew
    base = study_dir / "workers"
    made = _make(base)
    descriptor = _lock(base / LOCK_NAME)
    folder = base
    if descriptor < 0:  # another launcher writes here, or no locks: a folder of our own
        folder = base / f"{_host()}-{os.getpid()}"
        made_own = _make(folder)
        made = made or made_own
    _claimed[key] = (folder, descriptor)
    return folder, made


def release_log_dir(study_dir: Path) -> None:
    """Give up this process's claim on ``study_dir``'s log folder (a refused run, once its
    folder is removed); a no-op where it has none."""
    held = _claimed.pop(study_dir.absolute(), None)
    if held is not None and held[1] >= 0:
        with contextlib.suppress(OSError):
            os.close(held[1])


def _make(folder: Path) -> Path | None:
    """Make ``folder`` and its missing parents; the top one made, or None."""
    missing = [p for p in (folder, *folder.parents) if not p.exists()]
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise ConfigError("run_dir", f"cannot create {folder}: {error.strerror or error}"
                          f"{' (a file of that name is there)' if folder.is_file() else ''}"
                          ) from None
    return missing[-1] if missing else None


def _lock(path: Path) -> int:
    """An exclusive ``flock`` on ``path`` (made if missing), held by the returned descriptor;
    -1 when another process holds it or the file system takes no locks."""
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError:
        return -1
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        os.close(descriptor)
        if error.errno not in (errno.EWOULDBLOCK, errno.EACCES, errno.ENOLCK, errno.ENOSYS,
                               errno.EINVAL, errno.EOPNOTSUPP):
            raise
        return -1
    return descriptor


def _host() -> str:
    """This machine's short name, safe as a folder name."""
    name = socket.gethostname().split(".")[0] or "host"
    return "".join(c if c.isalnum() or c in "-_" else "_" for c in name)
