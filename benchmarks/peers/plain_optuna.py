"""The script a user writes without us: plain Optuna + optuna-integration's Lightning callback.

The same search as ``make demo`` (the quickstart): LeNet on scikit-learn's digits, the same
space, successive halving with rungs at epochs 1, 3 and 9 (Optuna's ``SuccessiveHalvingPruner``
is asynchronous successive halving), 9 epochs at most, one torch thread. Run it once per worker
process on one journal file, as Optuna's documentation does for parallel optimisation::

    python plain_optuna.py --storage s.journal --worker 0 &
    python plain_optuna.py --storage s.journal --worker 1

``--storage`` may be an RDB URL instead (Optuna's other documented way to share a study),
as ``bench_peers.py --storage`` runs it. Only one thing differs from the documented example,
for a fair comparison (see ``bench_peers.py``): the epoch reported to the pruner is 1-based
(optuna-integration reports ``current_epoch``, 0-based, which would put its rungs at epochs 2,
4 and 10). The benchmark
creates the study before it starts the workers and enqueues the configurations both systems
train, so the two systems train the same ones. ``--times`` writes when each trial started,
each epoch ended and each trial ended (unix seconds), which the benchmark reads; it costs one
``time.time()`` a call.
``--channels-last`` trains LeNet in the channels-last layout, as our launcher does on a CPU
(``bench_peers.py --plain-channels-last``: the comparison without that difference).
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

START = time.time()  # before the imports: what a user waits for includes them

import lightning.pytorch as pl  # noqa: E402
import optuna  # noqa: E402
import torch  # noqa: E402
from optuna.storages import JournalStorage  # noqa: E402
from optuna.storages.journal import JournalFileBackend  # noqa: E402
from optuna_integration import PyTorchLightningPruningCallback  # noqa: E402

from lightning_hpo.builtin.data import DigitsDataModule  # noqa: E402
from lightning_hpo.builtin.models import LeNet  # noqa: E402

TIMES: list[dict[str, Any]] = []


class OneBasedPruning(PyTorchLightningPruningCallback):
    """optuna-integration's callback, reporting epoch ``k`` after ``k`` epochs (not ``k - 1``)."""

    def on_validation_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        TIMES[-1]["epochs"].append(time.time())
        score = trainer.callback_metrics[self.monitor].item()
        epoch = pl_module.current_epoch + 1
        self._trial.report(score, step=epoch)
        if self._trial.should_prune():
            raise optuna.TrialPruned(f"Trial was pruned at epoch {epoch}.")


def objective(trial: optuna.Trial, args: argparse.Namespace) -> float:
    TIMES.append({"trial": trial.number, "start": time.time(), "epochs": []})
    lr = trial.suggest_float("lr", 0.01, 1.0, log=True)
    batch_size = trial.suggest_int("batch_size", 32, 256)
    momentum = trial.suggest_float("momentum", 0.0, 0.9)
    activation = trial.suggest_categorical("activation", ["relu", "sigmoid"])
    model = LeNet(lr=lr, momentum=momentum, activation=activation,
                  channels_last=args.channels_last)
    data: pl.LightningDataModule = DigitsDataModule(batch_size=batch_size)
    if args.repeat > 1:
        from bigger_digits import RepeatedDigits  # the 10x longer epochs of bench_peers --long

        data = RepeatedDigits(batch_size=batch_size, repeat=args.repeat)
    trainer = pl.Trainer(
        max_epochs=args.epochs, accelerator="cpu", devices=1,
        default_root_dir=f"{args.run_dir}/trial_{trial.number}",
        callbacks=[OneBasedPruning(trial, monitor="validation_error")],
        enable_progress_bar=False, enable_model_summary=False,
    )
    try:
        trainer.fit(model, datamodule=data)
    finally:
        TIMES[-1]["end"] = time.time()
    return trainer.callback_metrics["validation_error"].item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--storage", required=True,
                        help="journal file shared by the workers, or an RDB URL "
                        "(sqlite:///FILE, postgresql://...)")
    parser.add_argument("--study", default="plain-optuna")
    parser.add_argument("--worker", type=int, default=0, help="this worker's sampler seed")
    parser.add_argument("--n-trials", type=int, default=20, help="trials this worker runs")
    parser.add_argument("--epochs", type=int, default=9)
    parser.add_argument("--run-dir", default="runs/plain-optuna")
    parser.add_argument("--repeat", type=int, default=1, help="each image N times an epoch")
    parser.add_argument("--times", help="write the timestamps here (JSON)")
    parser.add_argument("--channels-last", action="store_true",
                        help="LeNet(channels_last=True): the layout our launcher gives its "
                        "built-in models on a CPU, one argument away for this script too")
    args = parser.parse_args()
    torch.set_num_threads(1)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = (args.storage if "://" in args.storage
               else JournalStorage(JournalFileBackend(args.storage)))
    study = optuna.create_study(
        study_name=args.study, storage=storage, direction="minimize", load_if_exists=True,
        sampler=optuna.samplers.RandomSampler(seed=args.worker),
        pruner=optuna.pruners.SuccessiveHalvingPruner(min_resource=1, reduction_factor=3),
    )
    study.optimize(lambda t: objective(t, args), n_trials=args.n_trials)
    if args.times:
        with open(args.times, "w") as f:
            json.dump({"process_start": START, "trials": TIMES}, f)


if __name__ == "__main__":
    main()
