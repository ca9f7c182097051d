"""One Syne Tune trial of ``syne_tune_moasha.py``: LeNet on digits, error and size reported.

The trial the launcher runs for ``configs/lenet_error_vs_size.yaml``, written the way Syne
Tune's documentation writes a training script: the hyperparameters ``lr``, ``momentum`` and
``width`` (and the config space's constant ``epochs``) arrive as ``--name value`` arguments,
with ``--st_checkpoint_dir`` added by the backend; after every epoch the script reports
``validation_error`` and ``parameters`` (what :class:`lightning_hpo.builtin.models.LeNet` logs at
each validation) with the 1-based epoch to ``syne_tune.Reporter``, and the tuner kills it (SIGKILL)
when MOASHA says stop. The same model and data as our launcher's trials (``LeNet(lr=,
momentum=, width=)``, ``DigitsDataModule()`` with its defaults), one torch thread, Lightning's
default logger and checkpointing in the trial's folder.

For the benchmark only (``SYNE_BENCH_TIMES``, as ``syne_tune_train.py``): one JSON line per
event in ``<folder>/<trial_id>.jsonl``: the process start with the configuration, each epoch's
end with both values, the end of training.
"""

from __future__ import annotations

import time

START = time.time()  # before the imports: what a user waits for includes them

import argparse  # noqa: E402
from pathlib import Path  # noqa: E402

import lightning.pytorch as pl  # noqa: E402
import torch  # noqa: E402
from syne_tune import Reporter  # noqa: E402
from syne_tune_train import TimesLog  # noqa: E402

from lightning_hpo.builtin.data import DigitsDataModule  # noqa: E402
from lightning_hpo.builtin.models import LeNet  # noqa: E402

METRICS = ("validation_error", "parameters")


class SyneTuneReport(pl.Callback):
    """Reports both objectives to Syne Tune after every epoch, 1-based."""

    def __init__(self, times: TimesLog) -> None:
        self.report = Reporter()
        self.times = times

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        now = time.time()
        epoch = pl_module.current_epoch + 1
        values = {m: float(trainer.callback_metrics[m].item()) for m in METRICS}
        self.times.write(epoch=epoch, time=now, **values)
        self.report(epoch=epoch, **values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lr", type=float, required=True)
    parser.add_argument("--momentum", type=float, required=True)
    parser.add_argument("--width", type=float, required=True)
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--st_checkpoint_dir", required=True, help="added by Syne Tune")
    args = parser.parse_args()
    trial_dir = Path(args.st_checkpoint_dir).parent  # <tuner folder>/<trial_id>/checkpoints
    times = TimesLog(int(trial_dir.name))
    config = {"lr": args.lr, "momentum": args.momentum, "width": args.width}
    times.write(trial_id=int(trial_dir.name), start=START, config=config)
    torch.set_num_threads(1)
    model = LeNet(lr=args.lr, momentum=args.momentum, width=args.width)
    trainer = pl.Trainer(
        max_epochs=args.epochs, accelerator="cpu", devices=1, default_root_dir=str(trial_dir),
        callbacks=[SyneTuneReport(times)], enable_progress_bar=False,
        enable_model_summary=False,
    )
    try:
        trainer.fit(model, datamodule=DigitsDataModule())
    finally:
        times.write(end=time.time())


if __name__ == "__main__":
    main()
