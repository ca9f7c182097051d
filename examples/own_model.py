"""Your own model and data: a LightningModule and a LightningDataModule written here, not taken
from lightning_hpo's registry, tuned twice.

1. **A plain Optuna study**: an ordinary objective builds ``MLP`` and ``DigitFeatures`` from
   ``trial.suggest_*`` values and trains them with :class:`lightning_hpo.PruningCallback` in the
   Trainer; ``study.optimize`` with :class:`lightning_hpo.ASHAPruner` stops bad trials early.
2. **The launcher**: the same two classes named by class path in a config,
   ``model: {name: "own_model:MLP"}`` and ``data: {name: "own_model:DigitFeatures"}``; the
   search space names their constructor arguments. The launcher builds both at the low and the
   high end of every range before it starts, and trains each trial in a worker process.

What a model needs for both: constructor arguments for its hyperparameters (plain values, saved
with ``save_hyperparameters()``), and ``self.log("validation_error", ...)`` once per
validation epoch (the metric ``PruningCallback`` and ``metric:`` name). ``LOGGED_METRICS`` is
optional: with it, the launcher refuses a ``metric`` the model never logs before anything runs.

Run it (about 20 s on 2 CPU cores; ``--out DIR`` keeps both studies' journal files there)::

    python examples/own_model.py

    plain study.optimize: 10 trials, 3 complete, 7 pruned; 38 epochs of 90
      best validation_error 0.0361 with lr=0.216, hidden=113, dropout=0.4893
    Study 'own-model-launcher' stopped: all trials done.
    ...
    launcher with own_model:MLP: 8 trials, 3 complete, 5 pruned; 34 epochs of 72
      best validation_error 0.0361 with lr=0.216, hidden=113, dropout=0.4893

For the launcher's workers to import ``own_model``, its folder must be on ``PYTHONPATH`` where
the launcher runs (``python -m lightning_hpo.launch`` also finds modules in the folder it is
started from); ``main()`` sets it for its workers.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import warnings
from pathlib import Path

import lightning as L
import optuna
import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.utils.data import DataLoader, TensorDataset

from lightning_hpo import ASHAPruner, PruningCallback

MAX_EPOCHS = 9


class DigitFeatures(L.LightningDataModule):
    """scikit-learn's handwritten digits (1,797 images, offline) as 64 features in [0, 1]; a
    stratified split of 1,437 training and 360 validation examples.

    Args:
        batch_size: examples per batch, ``>= 1``.
        seed: seed of the split.

    Example::

        >>> data = DigitFeatures(batch_size=32)
        >>> data.setup("fit")
        >>> x, y = next(iter(data.train_dataloader()))
        >>> tuple(x.shape), y.dtype
        ((32, 64), torch.int64)
    """

    def __init__(self, batch_size: int = 64, seed: int = 0) -> None:
        super().__init__()
        self.batch_size, self.seed = batch_size, seed
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        from sklearn.datasets import load_digits
        from sklearn.model_selection import train_test_split

        x, y = load_digits(return_X_y=True)
        x_train, x_val, y_train, y_val = train_test_split(
            x / 16.0, y, test_size=360, stratify=y, random_state=self.seed
        )
        self.train_set = TensorDataset(torch.as_tensor(x_train, dtype=torch.float32),
                                       torch.as_tensor(y_train))
        self.val_set = TensorDataset(torch.as_tensor(x_val, dtype=torch.float32),
                                     torch.as_tensor(y_val))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=360)


class MLP(L.LightningModule):
    """One hidden layer with dropout, for 64 input features and 10 classes; SGD with momentum.

    Logs ``train_loss`` and ``validation_error`` (the share of misclassified validation
    examples) once per epoch.

    Args:
        lr: SGD learning rate, ``> 0``.
        hidden: width of the hidden layer, ``>= 1``.
        dropout: drop probability after the hidden layer, in ``[0, 1)``.

    Example::

        >>> MLP(hidden=16)(torch.zeros(5, 64)).shape
        torch.Size([5, 10])
    """

    #: What the model logs: the launcher checks ``metric`` against it.
    LOGGED_METRICS = ("train_loss", "validation_error")

    def __init__(self, lr: float = 0.1, hidden: int = 64, dropout: float = 0.2) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(64, hidden), nn.ReLU(), nn.Dropout(dropout), nn.Linear(hidden, 10)
        )

    def forward(self, x: Tensor) -> Tensor:
        """Logits of shape ``(N, 10)`` for features of shape ``(N, 64)``."""
        return self.net(x)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        error = (self(x).argmax(dim=1) != y).float().mean()
        self.log("validation_error", error, on_epoch=True, batch_size=len(y))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)


def objective(trial: optuna.Trial) -> float:
    """Part 1: an ordinary Optuna objective over ``MLP`` and ``DigitFeatures``."""
    L.seed_everything(trial.number, verbose=False)  # each trial's result can be reproduced
    model = MLP(
        lr=trial.suggest_float("lr", 1e-3, 1.0, log=True),
        hidden=trial.suggest_int("hidden", 8, 128),
        dropout=trial.suggest_float("dropout", 0.0, 0.5),
    )
    pruning = PruningCallback(trial, monitor="validation_error")
    trainer = L.Trainer(
        accelerator="cpu", max_epochs=MAX_EPOCHS, callbacks=[pruning], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(model, datamodule=DigitFeatures(batch_size=64))
    pruning.raise_if_pruned()  # Optuna records the trial as PRUNED, at the epoch it stopped
    return trainer.callback_metrics["validation_error"].item()


def describe(label: str, study: optuna.Study) -> str:
    """Two lines: the trials' states, the epochs trained of those without pruning, the best."""
    states = [t.state.name for t in study.trials]
    epochs = sum(len(t.intermediate_values) for t in study.trials)
    best = study.best_trial
    return (f"{label}: {len(states)} trials, {states.count('COMPLETE')} complete, "
            f"{states.count('PRUNED')} pruned; {epochs} epochs of {len(states) * MAX_EPOCHS}\n"
            f"  best validation_error {best.value:.4f} with "
            + ", ".join(f"{k}={v:.4g}" for k, v in best.params.items()))


def main(out: Path) -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    # One small in-memory dataset: loader processes would cost more than they save.
    warnings.filterwarnings("ignore", ".*does not have many workers.*")
    journal = optuna.storages.journal.JournalFileBackend(str(out / "plain.journal"))
    study = optuna.create_study(
        study_name="own-model-plain",
        storage=optuna.storages.JournalStorage(journal),
        direction="minimize",
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=ASHAPruner(min_resource=1, max_resource=MAX_EPOCHS, reduction_factor=3),
    )
    study.optimize(objective, n_trials=10)
    print(describe("plain study.optimize", study))

    import lightning_hpo.launch

    here = str(Path(__file__).resolve().parent)
    # The workers import "own_model:MLP" too: put this folder on their path.
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [here, *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    study = lightning_hpo.launch.run({
        "study": "own-model-launcher",
        "storage": str(out / "launcher.journal"),
        "run_dir": str(out / "runs"),
        "model": {"name": "own_model:MLP"},
        "data": {"name": "own_model:DigitFeatures", "batch_size": 64},
        "space": {
            "lr": {"loguniform": [0.001, 1.0]},
            "hidden": {"randint": [8, 128]},
            "dropout": {"uniform": [0.0, 0.5]},
        },
        "sampler": {"name": "random", "seed": 0},
        "pruner": {"name": "asha", "min_resource": 1, "max_resource": MAX_EPOCHS,
                   "reduction_factor": 3},
        "devices": {"accelerator": "cpu", "count": 1},
        "stop": {"n_trials": 8},
    })
    print(describe("launcher with own_model:MLP", study))


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="folder for the studies (default: temporary)")
    args = parser.parse_args()
    if args.out is not None:
        args.out.mkdir(parents=True, exist_ok=True)
        main(args.out)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(Path(tmp))
