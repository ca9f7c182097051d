"""``PruningCallback`` under ``strategy="ddp_spawn"`` on 2 CPU processes (test_distributed.py).

Usage: ``python tests/_ddp_spawn_script.py STORAGE_KIND OUT_DIR``, STORAGE_KIND one of
``memory`` (Optuna's default, a study in this process's memory), ``sqlite`` (a URL) or
``leader`` (``lightning_hpo.create_study``, which is for ``strategy="ddp"``).

The fit runs in two processes Lightning spawns for it, on copies of the callback; the objective
here, in the parent, calls ``raise_if_pruned`` as the documentation says. Three trials, an
``ASHAPruner`` with rungs at epochs 1 and 2 (reduction factor 2) on a metric that is the learning
rate itself, so the pruner's decisions are known: the second trial (lr 0.5) is worse at epoch 1
than the first (lr 0.1) and is stopped there; the third (lr 0.05) is better and goes on.
``OUT_DIR/trials.json`` gets each trial's state, intermediate values and user attributes, or
``OUT_DIR/error.txt`` the error the first trial ended with.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import lightning as L
import optuna
import torch
from torch.utils.data import DataLoader, TensorDataset

import lightning_hpo as hpo

LRS = [0.1, 0.5, 0.05]


def _loader() -> DataLoader[Any]:
    x = torch.linspace(0, 1, 16).unsqueeze(1)
    return DataLoader(TensorDataset(x, x), batch_size=4)


class LrIsTheMetric(L.LightningModule):
    """Logs ``metric`` = its learning rate at every validation."""

    def __init__(self, lr: float) -> None:
        super().__init__()
        self.lr = lr
        self.layer = torch.nn.Linear(1, 1)

    def training_step(self, batch: Any, index: int) -> torch.Tensor:
        x, y = batch
        return torch.nn.functional.mse_loss(self.layer(x), y)

    def validation_step(self, batch: Any, index: int) -> None:
        self.log("metric", self.lr)  # the same on both ranks

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.lr)

    def train_dataloader(self) -> DataLoader[Any]:
        return _loader()

    def val_dataloader(self) -> DataLoader[Any]:
        return _loader()


def objective(trial: Any) -> float:
    lr = trial.suggest_categorical("lr", LRS)
    pruning = hpo.PruningCallback(trial, monitor="metric")
    trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp_spawn", max_epochs=2,
                        callbacks=[pruning], logger=False, enable_checkpointing=False,
                        enable_progress_bar=False, enable_model_summary=False)
    trainer.fit(LrIsTheMetric(lr))
    pruning.raise_if_pruned()
    return float(trainer.callback_metrics["metric"])


def main() -> None:
    kind, out = sys.argv[1], Path(sys.argv[2])
    pruner = hpo.ASHAPruner(min_resource=1, max_resource=2, reduction_factor=2)
    if kind == "leader":
        study = hpo.create_study(pruner=pruner, storage=f"sqlite:///{out / 'study.db'}")
    else:
        storage = None if kind == "memory" else f"sqlite:///{out / 'study.db'}"
        study = optuna.create_study(pruner=pruner, storage=storage)
    for lr in LRS:
        study.enqueue_trial({"lr": lr})
    try:
        study.optimize(objective, n_trials=len(LRS))
    except Exception as error:  # the one-line error a user reads
        (out / "error.txt").write_text(f"{type(error).__name__}: {error}")
        return
    (out / "trials.json").write_text(json.dumps([
        {"state": t.state.name, "values": {str(k): v for k, v in t.intermediate_values.items()},
         "attrs": t.user_attrs} for t in study.trials]))


if __name__ == "__main__":
    main()
