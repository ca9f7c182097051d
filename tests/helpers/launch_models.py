"""Models (and a data module) the launcher tests load through ``model: {name:
"helpers.launch_models:Class"}`` (``data: {name: "helpers.launch_models:LoaderData"}``)."""

from __future__ import annotations

from typing import Any

from lightning.pytorch import LightningDataModule

from lightning_hpo.builtin.models import LeNet


class ExplodingLeNet(LeNet):
    """A user model with a bug: training raises whenever ``lr`` is above 0.1."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.hparams.lr > 0.1:
            raise RuntimeError(f"boom at lr={self.hparams.lr:.3f}")
        return super().training_step(batch, batch_idx)


class FailsOnRankOne(LeNet):
    """Under DDP, the trial of the tests' initial configuration (``lr`` exactly 0.1) raises on
    rank 1 only, mid-epoch, while rank 0 waits for it in the gradient all-reduce."""

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        if self.trainer.global_rank == 1 and self.hparams.lr == 0.1 and batch_idx == 1:
            raise RuntimeError("boom on rank 1")
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


class SlowToCheckpoint(LeNet):
    """LeNet whose every checkpoint takes at least 100 ms to make (a sleep while it is built),
    as a large model's does: far over 5% of its short epochs, so ``checkpoint.every: auto``
    writes the resume checkpoint after each fit's first epoch (the measurement) and then only
    at the fit's last epoch."""

    def on_save_checkpoint(self, checkpoint: dict[str, Any]) -> None:
        import time

        time.sleep(0.1)


class MeetsAnotherLauncher(LeNet):
    """LeNet whose training starts only once two launchers on the study have each started a
    trial: a worker marks its launcher (its parent's pid) in ``RUN_DIR/meeting`` and waits (at
    most 300 s) for a second launcher's mark. A test of two launchers sharing a study then
    cannot pass or fail by which started first: a trial takes under a second, and one launcher
    can otherwise run the whole study before the other has imported torch."""

    def on_train_start(self) -> None:
        import os
        import time
        from pathlib import Path

        meeting = Path(self.trainer.default_root_dir).parents[1] / "meeting"
        meeting.mkdir(parents=True, exist_ok=True)
        (meeting / str(os.getppid())).touch()
        deadline = time.monotonic() + 300
        while len(list(meeting.iterdir())) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError(f"no second launcher started a trial ({meeting})")
            time.sleep(0.1)


class LoaderData(LightningDataModule):
    """A user's data module as most are written: random 28x28 images, its ``batch_size`` taken as
    given and passed to its ``DataLoader``s (which refuse 0 or a negative one)."""

    def __init__(self, batch_size: Any = 8, samples: int = 32) -> None:
        super().__init__()
        self.batch_size, self.samples = batch_size, samples

    def setup(self, stage: str) -> None:
        import torch
        from torch.utils.data import TensorDataset

        images = torch.randn(self.samples, 1, 28, 28, generator=torch.Generator().manual_seed(0))
        self.data = TensorDataset(images, torch.arange(self.samples) % 10)

    def train_dataloader(self) -> Any:
        from torch.utils.data import DataLoader

        return DataLoader(self.data, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> Any:
        from torch.utils.data import DataLoader

        return DataLoader(self.data, batch_size=self.batch_size)
