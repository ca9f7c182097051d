"""Models the launcher tests load through ``model: {name: "_launch_models:Class"}``."""

from __future__ import annotations

from typing import Any

from lightning_hpo.models import LeNet


class ExplodingLeNet(LeNet):
    """A user model with a bug: training raises whenever ``lr`` is above 0.1."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.hparams.lr > 0.1:
            raise RuntimeError(f"boom at lr={self.hparams.lr:.3f}")
        return super().training_step(batch, batch_idx)
