"""Several ``optimize`` calls under ``strategy="ddp"`` on 2 CPU processes (test_distributed.py).

Usage: ``python tests/helpers/ddp_optimize_script.py STORAGE_KIND OUT_DIR [--raise-in-fit]``,
STORAGE_KIND one of ``memory`` (an ``InMemoryStorage`` object), ``journal`` (a journal file path)
or ``sqlite`` (a URL). Lightning re-runs this script for rank 1.

What it does, on every rank, in order:

1. study ``first``: ``optimize(n_trials=2)``, then ``optimize(n_trials=1)``;
2. study ``second`` (a new study, one after the other in the same script):
   ``optimize(n_trials=2, catch=(ValueError,))`` whose first trial raises on rank 0 only,
   after training: the study records it FAIL and both ranks go on to the next trial;
3. study ``second`` again: ``optimize(n_trials=2)`` whose objective raises ``ValueError`` on
   rank 0 only, after training, outside ``catch``: every rank must exit non-zero with it.

Each rank appends what it trained (study, trial, the model's own hyperparameters) to
``OUT_DIR/rank<k>.jsonl``, rank 0 writes the studies' trials to ``OUT_DIR/studies.json`` before
step 3, and each rank writes the error it ended with to ``OUT_DIR/error<k>.txt``.

With ``--raise-in-fit``: study ``first``, ``optimize(n_trials=1)``, then ``optimize(n_trials=1)``
whose trial raises on rank 0 only, *inside* ``fit`` (at the end of the first epoch), while rank 1
waits in a collective for it: every rank must still exit with the error. ``--raise-in-fit=1``:
the same on rank 1 (rank 0 waits for it); ``--caught``: that second ``optimize`` has
``n_trials=2, catch=(ValueError,)``, which must not let the ranks go on to a second trial.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import lightning as L
import optuna

import lightning_hpo as hpo

_EPOCHS = 2


def _rank() -> int:
    return int(os.environ.get("LOCAL_RANK", "0"))


def _storage(kind: str, out_dir: Path) -> Any:
    if kind == "memory":
        return optuna.storages.InMemoryStorage()
    if kind == "journal":  # a path, opened by create_study on rank 0 (and its followers)
        return str(out_dir / "study.journal")
    if kind == "sqlite":
        return f"sqlite:///{out_dir / 'study.db'}"
    raise SystemExit(f"unknown storage kind {kind!r}")


class _RaiseOnRank(L.Callback):
    """Raises on one rank at the end of the first training epoch."""

    def __init__(self, rank: int) -> None:
        self.rank = rank

    def on_train_epoch_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.global_rank == self.rank:
            raise ValueError(f"boom inside fit on rank {self.rank}")


def _objective(
    out_dir: Path, study: str, raise_at: set[int], in_fit: int | None = None
) -> Any:
    def objective(trial: optuna.Trial) -> float:
        model = hpo.DropoutMLP(
            lr=trial.suggest_float("lr", 1e-2, 0.5, log=True),
            num_hiddens_1=trial.suggest_categorical("num_hiddens_1", [16, 32, 64]),
            dropout_1=trial.suggest_float("dropout_1", 0.0, 0.5),
            momentum=0.9,
        )
        pruning = hpo.PruningCallback(trial, monitor="validation_error")
        trainer = L.Trainer(
            accelerator="cpu", devices=2, strategy="ddp", max_epochs=_EPOCHS,
            callbacks=[pruning, *([] if in_fit is None else [_RaiseOnRank(in_fit)])],
            logger=False, enable_checkpointing=False,
            enable_progress_bar=False, enable_model_summary=False,
        )
        trainer.fit(model, datamodule=hpo.DigitsDataModule(batch_size=64))
        row = {
            "study": study,
            "trial": trial.number,
            "params": {k: model.hparams[k] for k in ("lr", "num_hiddens_1", "dropout_1")},
            "layer_width": int(model.net[1].out_features),
            "epochs": trainer.current_epoch,
        }
        with open(out_dir / f"rank{trainer.global_rank}.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        if trainer.global_rank == 0 and trial.number in raise_at:
            raise ValueError(f"boom in {study} trial {trial.number}")
        pruning.raise_if_pruned()
        return float(trainer.callback_metrics["validation_error"])

    return objective


def _trials(study: Any) -> list[dict[str, Any]]:
    return [{"number": t.number, "state": t.state.name, "params": t.params} for t in study.trials]


def main(kind: str, out_dir: Path, raise_in_fit: int | None, caught: bool) -> None:
    storage = _storage(kind, out_dir)
    sampler = optuna.samplers.RandomSampler(seed=0)
    first = hpo.create_study(storage=storage, study_name="first", sampler=sampler)
    if raise_in_fit is not None:
        first.optimize(_objective(out_dir, "first", set()), n_trials=1)
        failing = _objective(out_dir, "first", set(), in_fit=raise_in_fit)
        if caught:
            first.optimize(failing, n_trials=2, catch=(ValueError,))
        else:
            first.optimize(failing, n_trials=1)
        return
    first.optimize(_objective(out_dir, "first", set()), n_trials=2)
    first.optimize(_objective(out_dir, "first", set()), n_trials=1)
    second = hpo.create_study(storage=storage, study_name="second", sampler=sampler)
    second.optimize(_objective(out_dir, "second", {0}), n_trials=2, catch=(ValueError,))
    if not hpo.is_follower():
        studies = {"first": _trials(first), "second": _trials(second)}
        (out_dir / "studies.json").write_text(json.dumps(studies))
    second.optimize(_objective(out_dir, "second", {2}), n_trials=2)
    (out_dir / f"error{_rank()}.txt").write_text("no error")


if __name__ == "__main__":
    out = Path(sys.argv[2])
    flags = sys.argv[3:]
    rank = next((int(f.partition("=")[2] or 0) for f in flags if f.startswith("--raise-in-fit")),
                None)
    try:
        main(sys.argv[1], out, raise_in_fit=rank, caught="--caught" in flags)
    except ValueError as error:
        (out / f"error{_rank()}.txt").write_text(f"{type(error).__name__}: {error}")
        raise
