"""``PruningCallback``: the bridge between a Lightning ``Trainer`` and an Optuna trial.

The pruner decides, the callback carries: at the end of every validation epoch rank 0 reads the
monitored metric, reports it to the trial at step ``epoch + 1`` (epochs completed, counted from
1), asks the study's pruner, and shares the answer with every rank through the strategy's
``broadcast``; all ranks then stop after the same epoch. One code path serves one device and DDP.
"""

from __future__ import annotations

import logging
import math
from typing import Any

import lightning as L
import optuna
from typing_extensions import override

from lightning_hpo.errors import ConfigError
from lightning_hpo.schema import ATTR

__all__ = ["PruningCallback"]

_logger = logging.getLogger(__name__)


class PruningCallback(L.Callback):
    """Report a metric to an Optuna trial every epoch and stop training when the pruner says so.

    Works with any ``Trainer``: one device, several devices with ``strategy="ddp"`` (create the
    study with :func:`lightning_hpo.create_study` so every rank trains the same trial), CPU or
    GPU. Only global rank 0 writes to the storage: the reported values, and for a pruned trial
    the epoch it stopped at in the user attribute ``pruned_at_epoch``
    (:attr:`lightning_hpo.schema.ATTR.PRUNED_AT_EPOCH`).

    Args:
        trial: the trial of the objective (an :class:`optuna.trial.Trial`, or what
            :func:`lightning_hpo.create_study`'s ``optimize`` passes to the objective).
        monitor: a metric the LightningModule logs once per validation epoch, e.g.
            ``"validation_error"``.

    Example::

        def objective(trial):
            model = LeNet(lr=trial.suggest_float("lr", 1e-2, 1.0, log=True))
            pruning = PruningCallback(trial, monitor="validation_error")
            trainer = L.Trainer(max_epochs=27, callbacks=[pruning])
            trainer.fit(model, datamodule=DigitsDataModule(batch_size=64))
            pruning.raise_if_pruned()
            return trainer.callback_metrics["validation_error"].item()
    """

    def __init__(self, trial: optuna.trial.Trial | Any, monitor: str = "validation_error") -> None:
        super().__init__()
        self.trial = trial
        self.monitor = monitor
        self.pruned_at_epoch: int | None = None
        self._last_step: int | None = None

    @property
    def pruned(self) -> bool:
        """True once the pruner stopped this trial."""
        return self.pruned_at_epoch is not None

    @override
    def on_fit_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.pruned_at_epoch = None
        self._last_step = None
        if trainer.world_size > 1:
            self._check_same_trial_on_every_rank(trainer)

    def _check_same_trial_on_every_rank(self, trainer: L.Trainer) -> None:
        mine = (self.trial.number, dict(self.trial.params))
        leader = trainer.strategy.broadcast(mine, src=0)
        if leader != mine:
            raise RuntimeError(
                f"lightning_hpo: rank {trainer.global_rank} trains trial {mine[0]} {mine[1]} but "
                f"rank 0 trains trial {leader[0]} {leader[1]}. Under strategy='ddp' every rank "
                "re-runs the script and asks its own trial; create the study with "
                "lightning_hpo.create_study(...) / load_study(...) so all ranks follow rank 0."
            )

    @override
    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        if trainer.sanity_checking:
            return
        step = trainer.current_epoch + 1
        if step == self._last_step:  # several validations in one epoch: report the epoch once
            return
        self._last_step = step
        value = self._read_metric(trainer)
        should_prune = False
        if trainer.is_global_zero:
            self.trial.report(value, step)
            should_prune = bool(self.trial.should_prune())
        should_prune = trainer.strategy.broadcast(should_prune, src=0)
        if should_prune:
            self.pruned_at_epoch = step
            if trainer.is_global_zero:
                self.trial.set_user_attr(ATTR.PRUNED_AT_EPOCH, step)
                _logger.info("trial %d pruned at epoch %d (%s=%.4g)",
                             self.trial.number, step, self.monitor, value)
        trainer.should_stop = trainer.should_stop or should_prune

    def _read_metric(self, trainer: L.Trainer) -> float:
        metrics = trainer.callback_metrics
        if self.monitor not in metrics:
            logged = ", ".join(sorted(metrics)) or "none"
            raise ConfigError(
                "monitor",
                f"'{self.monitor}' is not logged by the LightningModule; logged metrics: {logged}",
            )
        value = float(metrics[self.monitor])
        if not math.isfinite(value):
            _logger.warning("%s is %s at epoch %d", self.monitor, value, trainer.current_epoch + 1)
        return value

    def raise_if_pruned(self) -> None:
        """Raise :class:`optuna.TrialPruned` if the pruner stopped this trial; call after ``fit``.

        Example::

            trainer.fit(model, datamodule=data)
            pruning.raise_if_pruned()   # Optuna records the trial as PRUNED
        """
        if self.pruned_at_epoch is not None:
            raise optuna.TrialPruned(
                f"trial {self.trial.number} pruned at epoch {self.pruned_at_epoch}"
            )
