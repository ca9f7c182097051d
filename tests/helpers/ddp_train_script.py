"""Train LeNet on digits with ``strategy="ddp"`` on 2 CPU processes (gloo); run by test_ddp.py.

Usage: ``python tests/helpers/ddp_train_script.py OUT_DIR EPOCHS``. Lightning re-runs this script
for rank 1; each rank writes ``OUT_DIR/rank<global_rank>.json`` with what it saw per epoch.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import lightning.pytorch as pl
import torch

from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import LeNet


class _RecordEpochs(pl.Callback):
    def __init__(self) -> None:
        self.epochs: list[dict[str, float | int]] = []

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        metrics = trainer.callback_metrics
        self.epochs.append(
            {
                "epoch": trainer.current_epoch + 1,
                "validation_error": float(metrics["validation_error"]),
                "validation_loss": float(metrics["validation_loss"]),
                "train_loss": float(metrics["train_loss"]),
                "num_training_batches": int(trainer.num_training_batches),
                "num_val_batches": int(sum(trainer.num_val_batches)),
            }
        )


def main(out_dir: Path, epochs: int) -> None:
    pl.seed_everything(0, verbose=False)
    record = _RecordEpochs()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=2,
        strategy="ddp",
        max_epochs=epochs,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        callbacks=[record],
    )
    trainer.fit(LeNet(lr=0.1), datamodule=DigitsDataModule(batch_size=64))
    result = {"global_rank": trainer.global_rank, "world_size": trainer.world_size}
    (out_dir / f"rank{trainer.global_rank}.json").write_text(
        json.dumps({**result, "epochs": record.epochs})
    )
    # Leave the process group before the interpreter exits, as PyTorch asks: torch 2.14's gloo
    # otherwise aborts now and then at exit ("terminate called without an active exception").
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(Path(sys.argv[1]), int(sys.argv[2]))
