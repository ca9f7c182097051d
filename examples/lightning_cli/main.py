"""A small Lightning project, trained the way its owner trains it::

    python main.py fit --config config.yaml

Nothing in it knows about lightning_hpo: ``tune.yaml`` next to it tunes it as it is
(``python -m lightning_hpo.launch tune.yaml``, run in this folder). It shows what a LightningCLI
project usually holds: a CLI subclass that links the data module's shape to the model, a model
without ``configure_optimizers`` (its optimizer and scheduler come from ``config.yaml``), and a
callback and a logger of its own in the config.
"""

from __future__ import annotations

import torch
from lightning.pytorch import Callback, LightningDataModule, LightningModule, Trainer
from lightning.pytorch.cli import LightningCLI
from sklearn.datasets import load_digits
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class DigitsData(LightningDataModule):
    """scikit-learn's bundled 8x8 digits (offline), split 80/20 with a fixed seed."""

    def __init__(self, batch_size: int = 64, val_fraction: float = 0.2) -> None:
        super().__init__()
        if not 0.0 < val_fraction < 1.0:
            raise ValueError(f"val_fraction must be in (0, 1), got {val_fraction}")
        self.batch_size = batch_size
        self.val_fraction = val_fraction
        self.num_features = 64
        self.num_classes = 10

    def setup(self, stage: str) -> None:
        x, y = load_digits(return_X_y=True)
        x = torch.tensor(x / 16.0, dtype=torch.float32)
        y = torch.tensor(y, dtype=torch.long)
        order = torch.randperm(len(x), generator=torch.Generator().manual_seed(0))
        n_val = int(len(x) * self.val_fraction)
        self.val = TensorDataset(x[order[:n_val]], y[order[:n_val]])
        self.train = TensorDataset(x[order[n_val:]], y[order[n_val:]])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train, batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val, batch_size=256)


class Classifier(LightningModule):
    """An MLP; its optimizer and learning-rate scheduler are the config's."""

    def __init__(self, in_features: int, num_classes: int, hidden_dim: int = 64,
                 dropout: float = 0.1) -> None:
        super().__init__()
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout must be in [0, 1), got {dropout}")
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Linear(in_features, hidden_dim), nn.ReLU(), nn.Dropout(dropout),
            nn.Linear(hidden_dim, num_classes),
        )

    def training_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> torch.Tensor:
        x, y = batch
        loss = nn.functional.cross_entropy(self.net(x), y)
        self.log("train_loss", loss, on_epoch=True, on_step=False)
        return loss

    def validation_step(self, batch: tuple[torch.Tensor, torch.Tensor], _: int) -> None:
        x, y = batch
        logits = self.net(x)
        self.log("val_loss", nn.functional.cross_entropy(logits, y), sync_dist=True)
        self.log("val_acc", (logits.argmax(-1) == y).float().mean(), sync_dist=True)


class EpochLog(Callback):
    """Appends one line per finished epoch to ``<trainer.log_dir>/<filename>`` (the logger's
    run folder; under the launcher, the trial's folder)."""

    def __init__(self, filename: str = "epochs.txt") -> None:
        self.filename = filename

    def on_train_epoch_end(self, trainer: Trainer, pl_module: LightningModule) -> None:
        folder = trainer.log_dir or trainer.default_root_dir  # a broadcast: every rank calls it
        if trainer.is_global_zero:
            path = f"{folder}/{self.filename}"
            with open(path, "a", encoding="utf-8") as file:
                file.write(f"{trainer.current_epoch + 1}\n")


class ShopCLI(LightningCLI):
    """The project's CLI: the data module's shape goes to the model."""

    def add_arguments_to_parser(self, parser) -> None:  # noqa: ANN001 (jsonargparse's)
        parser.link_arguments("data.num_features", "model.in_features", apply_on="instantiate")
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")


def cli_main(args=None) -> None:  # noqa: ANN001 (what LightningCLI takes)
    ShopCLI(Classifier, DigitsData, args=args)


if __name__ == "__main__":
    cli_main()
