"""``python -m lightning_hpo.launch [CONFIG] [--set key=value ...]``: run a study on all devices.

Examples::

    python -m lightning_hpo.launch                                  # the quickstart, offline, CPU
    python -m lightning_hpo.launch configs/lenet_ddp.yaml --set stop.n_trials=8
    python -m lightning_hpo.launch random_search --quiet            # a shipped config, by name
    python -m lightning_hpo.launch --list-configs                   # the shipped configs
    python -m lightning_hpo.launch quickstart --print-config        # every field, resolved
    python -m lightning_hpo.launch --list-fields                    # what each field means

CONFIG is a YAML file or the name of a config shipped with the package
(:func:`~lightning_hpo.launch.config.resolve_config`), so the commands work from any folder.

Running the same command again resumes the study. Bad input prints one line naming the field
and exits with code 2, before anything is written to the storage: the config, the devices, the
storage (:meth:`~lightning_hpo.storage.StorageSpec.check`) and the folders (:func:`prepare_folders`)
are all checked before the study is created or changed.

The command reads the file and starts the workers (:func:`~lightning_hpo.launch.processes.early.
start_early`) before it imports Optuna or validates anything: they import torch meanwhile. A
refusal stops them and removes the log folder they were given.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any, Literal

from lightning_hpo._cli import OneLineParser
from lightning_hpo.launch.processes.exits import fast_exit

# grpc (a grpc:// storage) logs a TLS handshake's failure on stderr from its C core before the
# one line the launcher prints for it; its level is read once, when grpc is first imported.
os.environ.setdefault("GRPC_VERBOSITY", "ERROR")

#: What Ctrl-C before the first trial says (exit 130), whenever it comes.
STOPPED_STARTING = "stopped by SIGINT while starting; no trial had started"

try:  # Ctrl-C in the command's first moments: the same line, not a traceback
    from lightning_hpo.errors import EXIT_BAD_INPUT, ConfigError, WorkerError
    from lightning_hpo.launch.config.files import read_config, resolve_config, shipped_configs
    from lightning_hpo.launch.processes.early import EarlyWorkers, start_early
    from lightning_hpo.launch.processes.protocol import INTERRUPTS
except KeyboardInterrupt:
    print(STOPPED_STARTING, file=sys.stderr)
    # os._exit, not SystemExit: CPython 3.11 remembers a KeyboardInterrupt raised inside exec()
    # (dataclasses build their methods so) even once caught, and would end by SIGINT, not 130.
    fast_exit(128 + int(signal.SIGINT))

# The rest (Optuna, rich, the supervisor) is imported in main(), after the workers have started
# (lightning_hpo.launch.processes.early), so that the workers import torch meanwhile.

EXIT_STORAGE_LOST = 1  # the storage stopped answering mid-run (a proxy or database server gone)
EXIT_WORKER = 1  # the worker checking the config died before it answered
EXIT_ALL_FAILED = 1  # every trial the run ran ended FAIL (the first reason is printed)


class _Interrupted(BaseException):
    """SIGTERM or SIGUSR1 before the supervisor runs (it takes them over then): like Ctrl-C's
    KeyboardInterrupt, it unwinds the start-up, which stops the workers and writes nothing."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _interrupt(signum: int, frame: Any) -> None:
    raise _Interrupted(signum)


def process_start_time() -> float:
    """When this process started (unix seconds; Linux ``/proc``, else now): the summary's time
    and the wall-clock budget count from the command's start, imports included.

    Example::

        >>> 0 <= time.time() - process_start_time() < 3600
        True
    """
    try:
        with open("/proc/self/stat") as stat:  # field 22: start, clock ticks after boot
            ticks = int(stat.read().rsplit(")", 1)[1].split()[19])
        age = time.clock_gettime(time.CLOCK_BOOTTIME) - ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, AttributeError):
        return time.time()
    return time.time() - max(age, 0.0)


def _parser() -> OneLineParser:
    parser = OneLineParser(
        prog="python -m lightning_hpo.launch",
        description="Run an asynchronous multi-fidelity HPO study on every device of this "
        "machine: a new trial starts the moment a slot is free. Several machines join one study "
        "through one PostgreSQL storage URL. Running the same command again resumes.",
        epilog="example: python -m lightning_hpo.launch quickstart "
        "--set stop.n_trials=20 --set pruner.max_resource=9\n"
        "a config with every field resolved: --print-config; every field's type, default and "
        "allowed values: --list-fields",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", nargs="?",  # as typed: Path("a://b") would read "a:/b"
                        help="config YAML file, or the name of a shipped config: "
                        f"{', '.join(shipped_configs())} (default: quickstart)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE",
                        help="override a field, e.g. stop.n_trials=20 (VALUE is YAML: null is "
                        "null, nothing after = the empty string); '~KEY' removes one, e.g. "
                        "--set pruner.name=sync_sh --set '~pruner.mode'")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no live table or per-trial lines: the summary only")
    parser.add_argument("--check", action="store_true",
                        help="validate the config and devices, print the plan, write nothing")
    parser.add_argument("--print-config", action="store_true",
                        help="print the resolved config as YAML (every field with its default, "
                        "--set applied, the storage's password masked) and exit")
    parser.add_argument("--list-configs", action="store_true",
                        help="print the shipped configs (name and file, to copy and edit)")
    parser.add_argument("--list-fields", action="store_true",
                        help="print every config field: its type, default, allowed values and "
                        "what it does (Markdown)")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; returns the process exit code."""
    args = _parser().parse_args(argv)
    if args.list_configs:
        for name, path in shipped_configs().items():
            print(f"{name:<28} {path}")
        return 0
    if args.list_fields:
        from lightning_hpo.launch.config import field_reference

        print(field_reference(), end="")
        return 0
    started = process_start_time()
    early: EarlyWorkers | None = None
    for sig in INTERRUPTS[1:]:  # SIGINT is KeyboardInterrupt already
        signal.signal(sig, _interrupt)
    try:
        config_file = resolve_config(args.config)
        raw = read_config(config_file, args.overrides)
        if args.print_config:
            return _print_config(raw)
        if not args.check:
            early = start_early(raw, started)
        return _run(args, raw, config_file, started, early)
    except ConfigError as error:  # the file itself (not YAML, a bad --set)
        from lightning_hpo.storage import mask_text  # only when refusing: it imports Optuna

        print(f"error: {mask_text(str(error), '')}", file=sys.stderr)  # a URL in a --set value
        return EXIT_BAD_INPUT
    except WorkerError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_WORKER
    except KeyboardInterrupt:  # Ctrl-C while starting (the run's own handler takes it later)
        print(STOPPED_STARTING, file=sys.stderr)
        return 128 + int(signal.SIGINT)
    except _Interrupted as stop:  # SIGTERM or SIGUSR1 (SLURM) while starting: the same
        print(STOPPED_STARTING.replace("SIGINT", signal.Signals(stop.signum).name),
              file=sys.stderr)
        return 128 + stop.signum
    finally:
        if early is not None:  # not taken over by the supervisor: stopped, its folder removed
            early.abort()


def _print_config(raw: dict[str, Any]) -> int:
    """Print ``raw`` validated and resolved (:func:`~lightning_hpo.launch.config.resolved_config`)
    as YAML; exit code 0. A refusal raises :class:`~lightning_hpo.errors.ConfigError`."""
    import yaml

    from lightning_hpo.launch.config import parse_config, resolved_config

    print(yaml.safe_dump(resolved_config(parse_config(raw)), sort_keys=False,
                         default_flow_style=None, width=100), end="")
    return 0


def _run(args: argparse.Namespace, raw: dict[str, Any], config_file: Path, started: float,
         early: EarlyWorkers | None) -> int:
    """Validate ``raw`` and run it (the workers may have started meanwhile); the exit code.
    Errors that name the storage are printed with its secrets masked."""
    from rich.console import Console  # imported once the workers import torch (see top)

    from lightning_hpo.launch.config import parse_config
    from lightning_hpo.launch.runner import launch
    from lightning_hpo.storage import mask, mask_text, storage_outage

    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    console = Console(highlight=False, markup=False, soft_wrap=True)
    storage_spec = ""
    try:
        cfg = parse_config(raw)
        storage_spec = cfg.storage
        mode: Literal["live", "lines", "quiet"] = (
            "quiet" if args.quiet else ("live" if console.is_terminal else "lines")
        )
        outcome = launch(cfg, console=console, mode=mode, check=args.check,
                         config_file=config_file, started=started, early=early)
    except ConfigError as error:
        message = mask_text(str(error), storage_spec)  # any URL's password, not only the spec's
        print(f"error: {message}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:  # the storage gone mid-run: one line; anything else: as is
        reason = storage_outage(error, storage_spec) if storage_spec else None
        if reason is None:
            raise
        print(f"error: storage: lost {mask(storage_spec)} mid-run ({reason}); the trials that "
              "were running keep their checkpoints: run the same command again once it is "
              "back", file=sys.stderr)
        return EXIT_STORAGE_LOST
    if outcome.stopped_by is not None:
        return 128 + int(outcome.stopped_by)
    if outcome.failed is not None:
        print(f"error: {outcome.failed}", file=sys.stderr)
        return EXIT_ALL_FAILED
    return 0


if __name__ == "__main__":
    fast_exit(main())  # the config check imported torch: skip its 2-s teardown
