"""A plain Optuna study over LeNet on digits, with our ASHA pruner and PruningCallback.

Run it (about a minute on 2 CPU cores)::

    python examples/callback_quickstart.py

Nothing here is specific to lightning_hpo but the two names it imports: an ordinary objective,
an ordinary ``study.optimize``. Bad learning rates stop after 1 or 3 epochs instead of 9.
"""

from __future__ import annotations

import lightning as L
import optuna

from lightning_hpo import ASHAPruner, DigitsDataModule, LeNet, PruningCallback

MAX_EPOCHS = 9


def objective(trial: optuna.Trial) -> float:
    model = LeNet(lr=trial.suggest_float("lr", 1e-2, 1.0, log=True))
    data = DigitsDataModule(batch_size=trial.suggest_int("batch_size", 32, 256))
    pruning = PruningCallback(trial, monitor="validation_error")
    trainer = L.Trainer(
        accelerator="cpu", max_epochs=MAX_EPOCHS, callbacks=[pruning], logger=False,
        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
    )
    trainer.fit(model, datamodule=data)
    pruning.raise_if_pruned()  # Optuna records the trial as PRUNED, at the epoch it stopped
    return trainer.callback_metrics["validation_error"].item()


def main() -> None:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        direction="minimize",
        sampler=optuna.samplers.RandomSampler(seed=0),
        pruner=ASHAPruner(min_resource=1, max_resource=MAX_EPOCHS, reduction_factor=3),
    )
    study.enqueue_trial({"lr": 0.1, "batch_size": 128})  # a known-good start
    study.optimize(objective, n_trials=20)
    states = [t.state.name for t in study.trials]
    epochs = sum(len(t.intermediate_values) for t in study.trials)
    print(f"{states.count('COMPLETE')} complete, {states.count('PRUNED')} pruned; "
          f"{epochs} epochs trained of {len(states) * MAX_EPOCHS} without pruning")
    print(f"best validation_error {study.best_value:.4f} with {study.best_params}")


if __name__ == "__main__":
    main()
