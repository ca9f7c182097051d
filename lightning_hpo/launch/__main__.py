"""``python -m lightning_hpo.launch [CONFIG] [--set key=value ...]``: run a study on all devices.

Examples::

    python -m lightning_hpo.launch                                  # the quickstart, offline, CPU
    python -m lightning_hpo.launch configs/lenet_ddp.yaml --set stop.n_trials=8
    python -m lightning_hpo.launch random_search --quiet            # a shipped config, by name
    python -m lightning_hpo.launch --list-configs                   # the shipped configs

CONFIG is a YAML file or the name of a config shipped with the package
(:func:`~lightning_hpo.config.resolve_config`), so the commands work from any folder.

Running the same command again resumes the study. Bad input prints one line naming the field
and exits with code 2, before anything is written to the storage: the config, the devices, the
storage (:meth:`~lightning_hpo.storage.StorageSpec.check`) and the folders (:func:`prepare_folders`)
are all checked before the study is created or changed.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Literal

from rich.console import Console

from lightning_hpo.config import (
    Config,
    check_against_registry,
    load_config,
    resolve_config,
    shipped_configs,
)
from lightning_hpo.errors import EXIT_BAD_INPUT, ConfigError
from lightning_hpo.storage import StorageSpec, mask, mask_text

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
        ConfigError: ``run_dir: cannot create ...`` or ``storage: cannot write in ...``.

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


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lightning_hpo.launch",
        description="Run an asynchronous multi-fidelity HPO study on every device of this "
        "machine: a new trial starts the moment a slot is free. Several machines join one study "
        "through one PostgreSQL storage URL. Running the same command again resumes.",
        epilog="example: python -m lightning_hpo.launch quickstart "
        "--set stop.n_trials=20 --set pruner.max_resource=9",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", nargs="?", type=Path,
                        help="config YAML file, or the name of a shipped config: "
                        f"{', '.join(shipped_configs())} (default: quickstart)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a field, e.g. stop.n_trials=20")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no live table or per-trial lines: the summary only")
    parser.add_argument("--check", action="store_true",
                        help="validate the config and devices, print the plan, write nothing")
    parser.add_argument("--list-configs", action="store_true",
                        help="print the shipped configs (name and file, to copy and edit)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; returns the process exit code."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False, markup=False, soft_wrap=True)
    if args.list_configs:
        for name, path in shipped_configs().items():
            console.print(f"{name:<28} {path}")
        return 0
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage_spec = ""
    try:
        config_file = resolve_config(args.config)
        cfg = load_config(config_file, args.overrides)
        storage_spec = cfg.storage
        check_against_registry(cfg)
        from lightning_hpo.launch.devices import detect_devices, plan_slots

        kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
        slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device)
        plan = (f"{len(slots)} slot(s) on {n_devices} {kind} device(s), "
                f"{cfg.devices.per_trial} device(s) per trial")
        spec = StorageSpec(cfg.storage)
        if spec.kind == "sqlite-memory":
            raise ConfigError("storage", "in-memory SQLite is not shared with the worker "
                              "processes; use a journal file path or sqlite:///FILE.db")
        # Reads only, never creates the file or the study; a run replays a journal once, later.
        found = spec.check(replay=args.check)
        made = prepare_folders(cfg, write=not args.check)
        if args.check:
            console.print(f"config OK: study '{cfg.study}' on {mask(cfg.storage)} ({found}); "
                          f"run folder {cfg.study_dir}; {plan}; config file {config_file}")
            return 0
        from lightning_hpo.launch.study import fail_stale_trials, open_study

        try:
            storage = spec.open()
            study, created = open_study(cfg, storage)
        except ConfigError:
            remove_folders(made)
            raise
    except ConfigError as error:
        message = mask_text(str(error), storage_spec) if storage_spec else str(error)
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    from lightning_hpo.launch.status import Display, summary
    from lightning_hpo.launch.supervisor import Supervisor

    stale = fail_stale_trials(study)
    done = len(study.get_trials(deepcopy=False)) - len(
        [t for t in study.get_trials(deepcopy=False) if t.state.name == "WAITING"]
    )
    mode: Literal["live", "lines", "quiet"] = (
        "quiet" if args.quiet else ("live" if console.is_terminal else "lines")
    )
    if mode != "quiet":
        console.print(
            f"{'Created' if created else 'Resuming'} study '{cfg.study}' on {mask(cfg.storage)}"
            f" ({done} trials so far{f', {len(stale)} stale ended' if stale else ''}); {plan}"
        )
    display = Display(cfg, mode, console)
    sup = Supervisor(cfg, study, slots, kind, n_cores=len(os.sched_getaffinity(0)),
                     on_change=display.update)
    with display:
        why = sup.run()
    display.update(sup)
    for line in summary(cfg, study, sup, why):
        console.print(line)
    if why.startswith("stopped by"):
        return 128 + int(signal.Signals[why.split()[-1]])
    return 0


if __name__ == "__main__":
    sys.exit(main())
