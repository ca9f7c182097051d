"""A study with two objectives under ``strategy="ddp"`` on 2 CPU processes
(test_callbacks_multiobjective.py), and the tiny model both that test and this script train.

Usage: ``python tests/helpers/ddp_multiobjective_script.py OUT_DIR [--slow-follower]``. Lightning
re-runs this script for rank 1.

:class:`TwoMetrics` logs two metrics per validation epoch: ``validation_error``, a deterministic
function of its ``quality`` hyperparameter and the epoch (``quality + 0.1 / epochs done``), and
``param_count``, its parameter count (``6 * width + 1``), logged once, at the first epoch. So
every decision of the pruner is known in advance (:data:`PLAN`, :data:`EXPECTED`).

What the script does: ``lightning_hpo.create_study(directions=["minimize", "minimize"])`` on an
SQLite file with ``ASHAPruner(1, max_resource=3, reduction_factor=2)`` (rungs 1, 2), rank 0
enqueues :data:`PLAN`'s trials, and every rank runs ``optimize(n_trials=len(PLAN))`` with the
PruningCallback monitoring ``["validation_error", "param_count"]``. Each rank appends, per trial,
the epochs it trained, the epoch it was pruned at, and the user attributes its trial object holds
(a follower's records what the callback wrote through it: nothing) to ``OUT_DIR/rank<k>.jsonl``.
A follower also appends each call of a storage method that writes, should there be one, to
``OUT_DIR/writes<k>.txt`` (only rank 0 may write). Each rank writes ``OUT_DIR/done<k>.txt`` once
``optimize`` returned; rank 0 then waits for ``done1.txt`` before it exits.

With ``--slow-follower`` (the first two trials only): rank 1 lingers :data:`SLOW_S` seconds in
its last trial, after ``fit``, and rank 0 exits without waiting; rank 1 must still return from
``optimize``. A watchdog ends rank 1 with code 3 and ``OUT_DIR/hung1.txt`` 5 s later if not.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

import lightning as L
import optuna
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

MAX_EPOCHS = 3
SLOW_S = 3.0  # --slow-follower: how long rank 1 lingers in its last trial
MONITOR = ["validation_error", "param_count"]

#: The trials, in order: ``(width, quality)``.
PLAN = [(8, 0.5), (8, 0.6), (8, 0.2), (1, 0.9)]

#: What ASHA (rungs 1 and 2, keep max(1, n // 2), Pareto order) does with :data:`PLAN`:
#: trial -> epoch it is pruned at, or None (completes 3 epochs).
#: 0 first everywhere; 1 dominated by 0 at rung 1 (n=2, keep 1); 2 dominates 0 (rung 1: n=3,
#: keep 1; rung 2: n=2, keep 1); 3 has the fewest parameters: on the front with 2 at rung 1
#: (n=4, keep 2, second after 2, which has the lower error), then at rung 2 (n=3, keep 1) second
#: again: pruned.
EXPECTED: dict[int, int | None] = {0: None, 1: 1, 2: None, 3: 2}


def param_count(width: int) -> int:
    return 6 * width + 1  # Linear(4, width) + Linear(width, 1)


def error_at(quality: float, epochs_done: int) -> float:
    return quality + 0.1 / epochs_done


class TwoMetrics(L.LightningModule):
    """A tiny regression whose logged metrics are fixed by its hyperparameters."""

    def __init__(self, width: int, quality: float) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(4, width), nn.ReLU(), nn.Linear(width, 1))

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        return nn.functional.mse_loss(self.net(x), y)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        error = error_at(self.hparams["quality"], self.current_epoch + 1)
        self.log("validation_error", error)
        if self.current_epoch == 0:  # logged once: it stays in callback_metrics
            self.log("param_count", float(sum(p.numel() for p in self.parameters())))

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.01)


class TinyData(L.LightningDataModule):
    def __init__(self) -> None:
        super().__init__()
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(32, 4, generator=generator)
        self.data = TensorDataset(x, x.sum(dim=1, keepdim=True))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=8)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=8)


def trainer_args() -> dict[str, Any]:
    return dict(max_epochs=MAX_EPOCHS, limit_train_batches=2, limit_val_batches=1,
                num_sanity_val_steps=0, logger=False, enable_checkpointing=False,
                enable_progress_bar=False, enable_model_summary=False)


def _spy_on_storage_writes(out_dir: Path, rank: int) -> None:
    """Record every call, in this process, of a storage method that writes (``set_*``,
    ``create_*``, ``delete_*``), on every Optuna storage class, to ``OUT_DIR/writes<rank>.txt``."""
    classes = [optuna.storages.InMemoryStorage, optuna.storages.RDBStorage,
               optuna.storages.JournalStorage, optuna.storages._CachedStorage]
    for cls in classes:
        for name in dir(cls):
            if name.startswith(("set_", "create_", "delete_")) and callable(getattr(cls, name)):
                setattr(cls, name, _spied(getattr(cls, name), f"{cls.__name__}.{name}",
                                          out_dir / f"writes{rank}.txt"))


def _spied(method: Any, label: str, path: Path) -> Any:
    def spied(*args: Any, **kwargs: Any) -> Any:
        with open(path, "a") as f:
            f.write(label + "\n")
        return method(*args, **kwargs)

    return spied


def main(out_dir: Path, slow_follower: bool) -> None:
    import lightning_hpo as hpo

    rank = int(os.environ.get("LOCAL_RANK", "0"))
    if hpo.is_follower():
        _spy_on_storage_writes(out_dir, rank)
    plan = PLAN[:2] if slow_follower else PLAN

    study = hpo.create_study(
        storage=f"sqlite:///{out_dir / 'study.db'}", study_name="mo-ddp",
        directions=["minimize", "minimize"],
        pruner=hpo.ASHAPruner(1, max_resource=MAX_EPOCHS, reduction_factor=2),
        sampler=optuna.samplers.RandomSampler(seed=0),
    )
    if not hpo.is_follower():
        for width, quality in plan:
            study.enqueue_trial({"width": width, "quality": quality})
    watchdog: list[threading.Timer] = []

    def objective(trial: Any) -> tuple[float, float]:
        model = TwoMetrics(width=trial.suggest_categorical("width", [1, 8]),
                           quality=trial.suggest_float("quality", 0.0, 1.0))
        pruning = hpo.PruningCallback(trial, monitor=MONITOR)
        trainer = L.Trainer(accelerator="cpu", devices=2, strategy="ddp", callbacks=[pruning],
                            **trainer_args())
        trainer.fit(model, datamodule=TinyData())
        row = {"trial": trial.number, "epochs": trainer.current_epoch,
               "pruned_at_epoch": pruning.pruned_at_epoch, "rank": trainer.global_rank,
               "pid": os.getpid(),
               "follower_attrs": dict(getattr(trial, "user_attrs", {}))
               if trainer.global_rank else None}
        with open(out_dir / f"rank{trainer.global_rank}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if slow_follower and trainer.global_rank == 1 and trial.number == len(plan) - 1:
            # Rank 0 ends optimize and exits while this rank is still in its last trial; give
            # this rank 5 s after that to return from optimize, then stop it.
            watchdog.append(threading.Timer(SLOW_S + 5.0, _hung, args=(out_dir, rank)))
            watchdog[0].start()
            time.sleep(SLOW_S)
        pruning.raise_if_pruned()
        metrics = trainer.callback_metrics
        return float(metrics["validation_error"]), float(metrics["param_count"])

    study.optimize(objective, n_trials=len(plan))
    for timer in watchdog:
        timer.cancel()
    (out_dir / f"done{rank}.txt").write_text("optimize returned")
    if not slow_follower and not hpo.is_follower():
        # Rank 0's exit removes the mailbox (atexit): wait for rank 1 to have read the end of
        # optimize first (see test_ddp_a_follower_slower_than_rank_zero_at_the_end_exits).
        deadline = time.monotonic() + 120
        while not (out_dir / "done1.txt").exists() and time.monotonic() < deadline:
            time.sleep(0.05)


def _hung(out_dir: Path, rank: int) -> None:
    (out_dir / f"hung{rank}.txt").write_text("still in optimize after rank 0 exited")
    os._exit(3)


if __name__ == "__main__":
    main(Path(sys.argv[1]), slow_follower="--slow-follower" in sys.argv[2:])
