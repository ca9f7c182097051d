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


class DiesAfterItsLastCheckpoint(LeNet):
    """Each trial's worker is killed (SIGKILL) once, at the end of its first ``fit``: after
    the segment's last resume checkpoint is written, before the study is told how it ended.
    A marker file beside the trial's checkpoints makes the second attempt live."""

    def on_train_end(self) -> None:
        import os
        import signal
        from pathlib import Path

        marker = Path(self.trainer.default_root_dir) / "died-once"
        if not marker.exists():
            marker.touch()
            os.kill(os.getpid(), signal.SIGKILL)


class SlowLeNet(LeNet):
    """LeNet whose training steps each take at least 50 ms (a sleep), so that a test waiting to
    act while an epoch trains has a window that does not shrink when training gets faster."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        import time

        time.sleep(0.05)
        return super().training_step(batch, batch_idx)
