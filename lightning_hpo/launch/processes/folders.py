"""The run folder and the storage's folder: checked, made and probed before a study is touched.

A folder that cannot be made (``/proc/x``), is not writable, or sits on a full disk fails here
with one line naming the field, before the study is created or changed.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import Config
from lightning_hpo.storage import StorageSpec

__all__ = ["PROBE_BYTES", "check_storage_apart", "prepare_folders", "remove_folders"]


#: Bytes of the test file written in each folder before a run: a full disk fails here, not
#: mid-run. Small, so a tight file-size limit (``ulimit -f 128``) is left to the trials to meet.
PROBE_BYTES = 64 << 10


def prepare_folders(cfg: Config, *, write: bool = True) -> list[Path]:
    """Check that the run folder (and a journal's or SQLite file's folder) can be made and written.

    The folders are ``run_dir/<study>`` (field ``run_dir``) and, for a journal file or an SQLite
    database, the folder that holds it (field ``storage``). Without ``write`` (``--check``) it
    only looks: each folder, or its nearest existing parent, must be a folder this process may
    write in, on a file system with at least :data:`PROBE_BYTES` free. With ``write`` it makes
    the missing folders and writes and deletes a :data:`PROBE_BYTES` test file in each, so a
    folder that cannot be made (``/proc/x``) or a full disk fails here, before the study is
    created; on failure it removes what it made.

    Returns:
        The folders it made, deepest first, for :func:`remove_folders` if a later step fails.

    Raises:
        ConfigError: ``run_dir: cannot create ...`` or ``storage: cannot write in ...``
            (a storage file where the run folder goes: :func:`check_storage_apart`, first).

    Example::

        >>> made = prepare_folders(cfg)  # doctest: +SKIP
        >>> [str(p) for p in made]       # doctest: +SKIP
        ['runs/quickstart', 'runs']
    """
    storage_file = StorageSpec(cfg.storage).path
    folders = [(cfg.study_dir, "run_dir")]
    if storage_file is not None:
        folders.append((storage_file.parent, "storage"))
    made: list[Path] = []
    try:
        for folder, field in folders:
            made[:0] = _prepare_folder(folder, field, write)
    except ConfigError:
        remove_folders(made)
        raise
    return made


def check_storage_apart(cfg: Config) -> None:
    """A journal or SQLite file must not be the run folder ``run_dir/<study>`` or a folder
    above it: the run makes those folders first, then cannot open its storage (``--set
    storage=runs`` beside ``run_dir: runs`` passed ``--check``, then failed).

    Raises:
        ConfigError: ``storage: runs is the run folder runs/quickstart or a folder above it
            ...``, naming a file name that would do.
    """
    storage_file = StorageSpec(cfg.storage).path
    if storage_file is None:
        return
    file, study_dir = storage_file.resolve(), cfg.study_dir.resolve()
    if file == study_dir or file in study_dir.parents:
        raise ConfigError(
            "storage", f"{storage_file} is the run folder {cfg.study_dir}"
            f"{'' if file == study_dir else ' or a folder above it'} (run_dir: {cfg.run_dir}); "
            f"give the storage file a name of its own, e.g. {Path(cfg.run_dir) / cfg.study}"
            f".journal")


def remove_folders(made: list[Path]) -> None:
    """Remove the folders :func:`prepare_folders` made, those still empty, deepest first."""
    for folder in made:
        try:
            folder.rmdir()
        except OSError:  # not empty (another launcher uses it) or already gone
            continue


def _prepare_folder(folder: Path, field: str, write: bool) -> list[Path]:
    missing: list[Path] = []
    nearest = folder
    while nearest != nearest.parent and not nearest.exists():
        missing.append(nearest)
        nearest = nearest.parent
    verb = "create" if missing else "write in"
    if not nearest.is_dir():
        where = f"cannot create {folder}: {nearest}" if missing else str(folder)
        raise ConfigError(field, f"{where} is a file, not a folder")
    if not os.access(nearest, os.W_OK | os.X_OK):
        raise ConfigError(field, f"cannot {verb} {folder}: no permission to write in {nearest}")
    if not write:  # look only: free space stands in for the test file (0 on /proc and the like)
        stats = os.statvfs(nearest)
        free = stats.f_bavail * stats.f_frsize
        if free < PROBE_BYTES:
            raise ConfigError(
                field, f"cannot {verb} {folder}: {free >> 10} KiB free on the file system of "
                f"{nearest}; {PROBE_BYTES >> 10} KiB or more needed"
            )
        return []
    made: list[Path] = []
    try:
        for path in reversed(missing):
            try:
                path.mkdir()
            except FileExistsError:  # another launcher made it meanwhile: not ours to remove
                if not path.is_dir():
                    raise
                continue
            made.insert(0, path)
    except OSError as error:
        remove_folders(made)
        raise ConfigError(field, f"cannot create {folder}: {error.strerror or error}") from None
    try:
        _write_probe(folder)
    except OSError as error:
        remove_folders(made)
        raise ConfigError(
            field, f"cannot write in {folder}: {error.strerror or error} "
            f"(a {PROBE_BYTES >> 10} KiB test file)"
        ) from None
    return made


def _write_probe(folder: Path) -> None:
    """Write and delete a :data:`PROBE_BYTES` file in ``folder``; raises the OSError on failure."""
    handle, name = tempfile.mkstemp(dir=folder, prefix=".lightning_hpo-probe-")
    try:
        block = memoryview(bytes(PROBE_BYTES))
        while block:
            block = block[os.write(handle, block):]
    finally:
        os.close(handle)
        os.unlink(name)
