"""Callback overhead per epoch: LeNet on digits with and without ``PruningCallback``, same run.

All paths run the same ``Trainer.fit`` (LeNet relu, lr 0.1, batch 64, 1 torch thread, no logger,
progress bar or checkpointing, as the launcher's workers train). The ``journal`` and ``sqlite``
paths add a ``PruningCallback`` on a real trial of a study with ``ASHAPruner(1,
reduction_factor=3)`` (rungs at epochs 1, 3, 9, ...) on a journal file (the launcher's default
storage) or an SQLite file, so every epoch reports to the storage and rung epochs make a real
pruning decision; the trial is the only one in its study, so it is never pruned and every path
trains every epoch.
Runs rotate between the paths; the first epoch of each run is a warm-up and is dropped.

Two figures:

* ``A/B``: median seconds per epoch with the callback / without, minus 1. Epoch times on a
  shared machine vary by a few percent, so this is the honest end-to-end figure but a noisy one.
* ``in-hook``: the median seconds spent inside the callback's own hooks per epoch (the
  validation's end, and the epoch's end where it reports), measured around them, over the
  median seconds of an epoch: the overhead itself, without the noise around it.

Target (issue 6): overhead under 2% of an epoch.

    python benchmarks/bench_callback.py                 # 6 runs x 6 epochs per path (~1 min)
    python benchmarks/bench_callback.py --repeats 10 --epochs 10
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import optuna
from _record import Figure, machine_line, write_figures
from bench_epoch import lightning_epochs, quiet_single_thread

from lightning_hpo import ASHAPruner, PruningCallback

TARGET = 0.02  # fraction of an epoch
STORAGES = ("journal", "sqlite")


class _TimedPruning(PruningCallback):
    """``PruningCallback`` with the seconds spent in its hooks recorded, per epoch."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.hook_seconds: list[float] = []
        self._seconds = 0.0  # this epoch's on_validation_end

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        start = time.perf_counter()
        super().on_validation_end(trainer, pl_module)  # notes that fit validated (no I/O)
        self._seconds = time.perf_counter() - start

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        start = time.perf_counter()
        super().on_train_epoch_end(trainer, pl_module)  # reports, asks the pruner, broadcasts
        self.hook_seconds.append(self._seconds + time.perf_counter() - start)


def run(epochs: int, seed: int, storage: Any) -> tuple[list[float], list[float]]:
    """One fit; returns (seconds per epoch, seconds in the callback per epoch), warm-up first.

    ``storage`` None trains without the callback.
    """
    if storage is None:
        return lightning_epochs(epochs, 64, seed), []
    study = optuna.create_study(storage=storage, pruner=ASHAPruner(1, reduction_factor=3),
                                study_name=f"callback-{seed}")
    pruning = _TimedPruning(study.ask(), monitor="validation_error")
    seconds = lightning_epochs(epochs, 64, seed, callbacks=[pruning])
    pruning.raise_if_pruned()  # never: the only trial at every rung continues
    return seconds, pruning.hook_seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--epochs", type=int, default=6, help="timed epochs per run (default 6)")
    parser.add_argument("--repeats", type=int, default=6, help="runs per path (default 6)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.repeats < 1:
        parser.error("--epochs and --repeats must be >= 1")
    quiet_single_thread()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    print(machine_line())
    print(f"LeNet relu on digits, batch 64, 1 thread; {args.epochs} timed epochs + 1 warm-up per "
          f"run, {args.repeats} runs per path; the callback with ASHAPruner(1, reduction_factor=3)")

    paths = ["without", *STORAGES]
    epochs: dict[str, list[float]] = {name: [] for name in paths}
    hooks: dict[str, list[float]] = {name: [] for name in STORAGES}
    with tempfile.TemporaryDirectory() as tmp:
        storages = {
            "journal": optuna.storages.JournalStorage(
                optuna.storages.journal.JournalFileBackend(str(Path(tmp) / "callback.journal"))),
            "sqlite": f"sqlite:///{Path(tmp) / 'callback.db'}",
        }
        for repeat in range(args.repeats):
            shift = repeat % len(paths)
            for name in paths[shift:] + paths[:shift]:
                seconds, hook = run(args.epochs + 1, repeat, storages.get(name))
                epochs[name].extend(seconds[1:])
                if name in hooks:
                    hooks[name].extend(hook[1:])

    median = {name: statistics.median(values) for name, values in epochs.items()}
    print(f"\n{'path':<18} {'epochs':>6} {'median s/epoch':>15} {'min':>8} {'max':>8} "
          f"{'in hook ms':>11}")
    for name, values in epochs.items():
        hook = f"{statistics.median(hooks[name]) * 1e3:>11.2f}" if name in hooks else f"{'-':>11}"
        label = "no callback" if name == "without" else f"callback, {name}"
        print(f"{label:<18} {len(values):>6} {median[name]:>15.4f} {min(values):>8.4f} "
              f"{max(values):>8.4f} {hook}")
    figures, ok = [], True
    for name in STORAGES:
        ab = median[name] / median["without"] - 1
        hook = statistics.median(hooks[name])
        in_hook = hook / median[name]
        ok_ab, ok_hook = ab < TARGET, in_hook < TARGET
        ok = ok and ok_ab and ok_hook
        print(f"{'PASS' if ok_ab else 'MISS'}  {name}: A/B overhead (with / without - 1) "
              f"< {TARGET:.0%}: {ab:+.2%}")
        print(f"{'PASS' if ok_hook else 'MISS'}  {name}: in-hook time / epoch time "
              f"< {TARGET:.0%}: {in_hook:.2%}")
        figures += [
            Figure(f"PruningCallback overhead per epoch, {name} (A/B)", "bench_callback.py",
                   f"{median[name]:.4f} s/epoch", f"{median['without']:.4f} s without",
                   f"{ab:+.2%}", f"< {TARGET:.0%}", ok_ab),
            Figure(f"PruningCallback time in its hook, {name}", "bench_callback.py",
                   f"{hook * 1e3:.2f} ms/epoch", f"{median[name]:.4f} s/epoch",
                   f"{in_hook:.2%}", f"< {TARGET:.0%}", ok_hook),
        ]
    write_figures(args.json, figures)
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
