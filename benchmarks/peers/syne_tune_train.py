"""One Syne Tune trial: the training script ``syne_tune_asha.py``'s ``LocalBackend`` starts.

Syne Tune's documented pattern: the hyperparameters (and the config space's constants
``epochs`` and ``repeat``) arrive as ``--name value`` arguments, with ``--st_checkpoint_dir``
added by the backend; the script reports to ``syne_tune.Reporter`` after every epoch and the
tuner stops it (SIGKILL) when ASHA says so. Here LeNet on digits with Lightning, reporting
``validation_error`` with the 1-based epoch from a callback at ``on_validation_end`` (skipping
the sanity check), one torch thread, Lightning's default logger and checkpointing in the
trial's folder.

For the benchmark only: when ``SYNE_BENCH_TIMES`` names a folder, the trial appends one JSON
line per event to ``<folder>/<trial_id>.jsonl`` (the process start, taken before the imports,
with the configuration; each epoch's end with the value reported; the end of training). Lines
are appended and flushed as they happen because a stopped trial is killed, not told.
"""

from __future__ import annotations

import time

START = time.time()  # before the imports: what a user waits for includes them

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from syne_tune import Reporter  # noqa: E402

from lightning_hpo.builtin.data import DigitsDataModule  # noqa: E402
from lightning_hpo.builtin.models import LeNet  # noqa: E402


class TimesLog:
    """Appends the benchmark's timing events to ``$SYNE_BENCH_TIMES/<trial_id>.jsonl``."""

    def __init__(self, trial_id: int) -> None:
        folder = os.environ.get("SYNE_BENCH_TIMES")
        self.path = Path(folder) / f"{trial_id}.jsonl" if folder else None

    def write(self, **event: Any) -> None:
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(json.dumps(event) + "\n")


class SyneTuneReport(pl.Callback):
    """Reports ``validation_error`` to Syne Tune after every epoch, 1-based."""

    def __init__(self, times: TimesLog) -> None:
        self.report = Reporter()
        self.times = times

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        now = time.time()
        epoch = pl_module.current_epoch + 1
        error = trainer.callback_metrics["validation_error"].item()
        self.times.write(epoch=epoch, time=now, validation_error=error)
        self.report(epoch=epoch, validation_error=error)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--batch_size", type=int, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    parser.add_argument("--activation", required=True)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--repeat", type=int, default=1, help="each image N times an epoch")
    parser.add_argument("--st_checkpoint_dir", required=True, help="added by Syne Tune")
    args = parser.parse_args()
    trial_dir = Path(args.st_checkpoint_dir).parent  # <tuner folder>/<trial_id>/checkpoints
    times = TimesLog(int(trial_dir.name))
    config = {"lr": args.lr, "batch_size": args.batch_size, "momentum": args.momentum,
              "activation": args.activation}
    times.write(trial_id=int(trial_dir.name), start=START, config=config)
    torch.set_num_threads(1)
    model = LeNet(lr=args.lr, momentum=args.momentum, activation=args.activation)
    data: pl.LightningDataModule = DigitsDataModule(batch_size=args.batch_size)
    if args.repeat > 1:
        from bigger_digits import RepeatedDigits  # the 10x longer epochs of bench_peers --long

        data = RepeatedDigits(batch_size=args.batch_size, repeat=args.repeat)
    trainer = pl.Trainer(
        max_epochs=args.epochs, accelerator="cpu", devices=1, default_root_dir=str(trial_dir),
        callbacks=[SyneTuneReport(times)], enable_progress_bar=False,
        enable_model_summary=False,
    )
    try:
        trainer.fit(model, datamodule=data)
    finally:
        times.write(end=time.time())


if __name__ == "__main__":
    main()
