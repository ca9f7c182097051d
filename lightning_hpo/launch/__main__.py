"""``python -m lightning_hpo.launch [CONFIG] [--set key=value ...]``: run a study on all devices.

Examples::

    python -m lightning_hpo.launch                                  # the quickstart, offline, CPU
    python -m lightning_hpo.launch configs/lenet_ddp.yaml --set stop.n_trials=8
    python -m lightning_hpo.launch configs/random_search.yaml --quiet

Running the same command again resumes the study. Bad input prints one line naming the field
and exits with code 2, before anything is written to the storage.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from pathlib import Path
from typing import Literal

from rich.console import Console

from lightning_hpo.config import check_against_registry, load_config
from lightning_hpo.errors import ConfigError
from lightning_hpo.storage import mask, mask_text

EXIT_BAD_INPUT = 2


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m lightning_hpo.launch",
        description="Run an asynchronous multi-fidelity HPO study on every device of this "
        "machine: a new trial starts the moment a slot is free. Several machines join one study "
        "through one PostgreSQL storage URL. Running the same command again resumes.",
        epilog="example: python -m lightning_hpo.launch configs/quickstart.yaml "
        "--set stop.n_trials=20 --set pruner.max_resource=9",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("config", nargs="?", type=Path,
                        help="config YAML (default: configs/quickstart.yaml)")
    parser.add_argument("--set", dest="overrides", action="append", default=[],
                        metavar="KEY=VALUE", help="override a field, e.g. stop.n_trials=20")
    parser.add_argument("--quiet", "-q", action="store_true",
                        help="no live table or per-trial lines: the summary only")
    parser.add_argument("--check", action="store_true",
                        help="validate the config and devices, print the plan, write nothing")
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; returns the process exit code."""
    args = _parser().parse_args(argv)
    console = Console(highlight=False, markup=False, soft_wrap=True)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    import optuna

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage_spec = ""
    try:
        cfg = load_config(args.config, args.overrides)
        storage_spec = cfg.storage
        check_against_registry(cfg)
        from lightning_hpo.launch.devices import detect_devices, plan_slots

        kind, n_devices = detect_devices(cfg.devices.accelerator, cfg.devices.count)
        slots = plan_slots(n_devices, cfg.devices.per_trial, cfg.devices.trials_per_device)
        plan = (f"{len(slots)} slot(s) on {n_devices} {kind} device(s), "
                f"{cfg.devices.per_trial} device(s) per trial")
        if args.check:
            console.print(f"config OK: study '{cfg.study}' on {mask(cfg.storage)}; {plan}")
            return 0
        from lightning_hpo.launch.study import fail_stale_trials, open_study
        from lightning_hpo.storage import open_storage

        storage = open_storage(cfg.storage)
        study, created = open_study(cfg, storage)
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
