"""Temporary folders named after the process that made them, so that its parent can remove
them when it was killed before it could.

A worker makes short-lived temporary folders (checking a config, warming up a LightningCLI
project's data) and, on a DDP slot, one for its ranks' mailbox that lives as long as it does.
Each is removed when the worker is done with it, or by its exit handlers; a worker killed by
SIGKILL (out of memory, a test) runs neither, and the folder stayed in ``/tmp``. With the
worker's pid in the name, the launcher removes them when it reaps the worker
(:func:`remove_scratch_of`).

Example::

    >>> import tempfile
    >>> root = tempfile.mkdtemp()
    >>> folder = tempfile.mkdtemp(prefix=scratch_prefix("check"), dir=root)
    >>> [p == Path(folder) for p in remove_scratch_of(os.getpid(), root=root)]
    [True]
    >>> os.rmdir(root)
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

__all__ = ["scratch_prefix", "remove_scratch_of"]

_STEM = "lightning-hpo-"


def scratch_prefix(purpose: str) -> str:
    """The ``prefix`` of a temporary folder this process makes for ``purpose`` (a word):
    ``lightning-hpo-<purpose>-<pid>-``."""
    return f"{_STEM}{purpose}-{os.getpid()}-"


def remove_scratch_of(pid: int, root: str | Path | None = None) -> list[Path]:
    """Remove the temporary folders process ``pid`` made with :func:`scratch_prefix` under
    ``root`` (default: the temporary folder, as the process saw it with the same environment)
    that this user owns; the folders removed. For a process that has ended."""
    base = Path(tempfile.gettempdir() if root is None else root)
    removed = []
    for folder in base.glob(f"{_STEM}*-{pid}-*"):
        try:
            if folder.is_symlink() or not folder.is_dir() or folder.stat().st_uid != os.getuid():
                continue
        except OSError:
            continue
        if folder.name.rsplit("-", 2)[-2] != str(pid):
            continue
        shutil.rmtree(folder, ignore_errors=True)
        removed.append(folder)
    return removed
