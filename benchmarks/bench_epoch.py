"""Seconds per epoch of LeNet on digits: through Lightning vs. a plain PyTorch loop, same run.

Both paths train the same network (``LeNet(lr=0.1).net``, relu) with the same SGD, batch size and
DataLoaders (those of ``DigitsDataModule``: 1,437 training and 360 validation images), and an
epoch is one pass over the training set plus a validation pass that computes the loss and the
error. The Lightning path is ``Trainer.fit`` with the module's logging (``train_loss``,
``validation_loss``, ``validation_error``), no logger, progress bar or checkpointing; its epoch is
timed from ``on_train_epoch_start`` to ``on_train_epoch_end`` (validation runs in between), so
the trainer's one-off set-up is not counted. The first epoch of every run is a warm-up and is
excluded. Torch runs on 1 thread for both paths. Each repetition gives the mean seconds per
epoch; the table shows the median (and range) over repetitions, then the ratio
Lightning / plain against the target of 1.3x.

``--batch-size 8`` makes the per-step overhead dominate: the case of a small network on a GPU,
where a step is bound by the host.

Example::

    python benchmarks/bench_epoch.py --epochs 5 --repeats 3
    python benchmarks/bench_epoch.py --models lenet --batch-size 8
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from collections.abc import Sequence
from typing import Any

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from _record import Figure, machine_line, write_figures

from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import ImageClassifier, build_model

TARGET_RATIO = 1.3
LR = 0.1
CPU = torch.device("cpu")


def sync(device: torch.device) -> None:
    """Wait for ``device``'s queued work (CUDA runs it asynchronously), so a clock read after
    it counts that work."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


class EpochTimer(pl.Callback):
    """Seconds of each training epoch (its validation included), first to last hook; on a
    CUDA ``device`` the clock is read after the device's queued work is done."""

    def __init__(self, device: torch.device = CPU) -> None:
        self.device = device
        self.seconds: list[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        sync(self.device)
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        sync(self.device)
        self.seconds.append(time.perf_counter() - self._start)


def quiet_single_thread() -> None:
    """What both benchmarks of a LeNet epoch set first: 1 torch thread, no Lightning chatter."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")
    torch.set_num_threads(1)


def _model(name: str, **args: Any) -> ImageClassifier:
    model = build_model(name, lr=LR, **args)
    assert isinstance(model, ImageClassifier)
    return model


def lightning_epochs(
    epochs: int, batch_size: int, seed: int, callbacks: Sequence[pl.Callback] = (),
    model: str = "lenet", device: torch.device = CPU,
    datamodule: pl.LightningDataModule | None = None, model_args: dict[str, Any] | None = None,
) -> list[float]:
    """Seconds of each of ``epochs`` epochs of ``Trainer.fit`` (warm-up included), with
    ``callbacks`` added to the trainer, on ``device`` (CPU or CUDA), on ``datamodule``
    (default: the digits at ``batch_size``), the model built with ``model_args`` besides
    ``lr``."""
    pl.seed_everything(seed, verbose=False)
    timer = EpochTimer(device)
    trainer = pl.Trainer(
        accelerator="gpu" if device.type == "cuda" else "cpu",
        devices=1,
        max_epochs=epochs,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[timer, *callbacks],
    )
    trainer.fit(_model(model, **(model_args or {})),
                datamodule=datamodule or DigitsDataModule(batch_size=batch_size))
    return timer.seconds


def plain_epochs(epochs: int, batch_size: int, seed: int, model: str = "lenet") -> list[float]:
    """Seconds of each of ``epochs`` epochs of a hand-written loop (warm-up included)."""
    pl.seed_everything(seed, verbose=False)
    module = _model(model)
    net, optimizer = module.net, module.configure_optimizers()
    data = DigitsDataModule(batch_size=batch_size)
    data.setup("fit")
    train_loader, val_loader = data.train_dataloader(), data.val_dataloader()
    seconds = []
    for _ in range(epochs):
        start = time.perf_counter()
        net.train()
        train_loss = torch.zeros(())
        for x, y in train_loader:
            optimizer.zero_grad()
            loss = F.cross_entropy(net(x), y)
            loss.backward()
            optimizer.step()
            train_loss += loss.detach() * len(y)
        net.eval()
        val_loss, wrong, total = torch.zeros(()), 0, 0
        with torch.no_grad():
            for x, y in val_loader:
                logits = net(x)
                val_loss += F.cross_entropy(logits, y, reduction="sum")
                wrong += int((logits.argmax(dim=1) != y).sum())
                total += len(y)
        _ = (float(train_loss), float(val_loss) / total, wrong / total)  # as Lightning reads them
        seconds.append(time.perf_counter() - start)
    return seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python benchmarks/bench_epoch.py --epochs 5 --repeats 3",
    )
    parser.add_argument("--epochs", type=int, default=5, help="timed epochs per run (default 5)")
    parser.add_argument("--repeats", type=int, default=3, help="runs per path (default 3)")
    parser.add_argument("--batch-size", type=int, default=64, help="batch size (default 64)")
    parser.add_argument("--models", default="lenet,dropout_mlp",
                        help="comma-separated: lenet, dropout_mlp (default both)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.repeats < 1:
        parser.error("--epochs and --repeats must be >= 1")
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    if not models or any(m not in ("lenet", "dropout_mlp") for m in models):
        parser.error(f"--models: {args.models!r}; allowed: lenet, dropout_mlp, comma-separated")

    quiet_single_thread()
    print(machine_line())
    print(f"torch threads: {torch.get_num_threads()} (pinned for both paths)")
    print(
        f"{', '.join(models)} on digits, batch {args.batch_size}, SGD lr {LR}; {args.epochs} "
        f"timed epochs + 1 warm-up per run, {args.repeats} runs per path"
    )

    figures, all_ok = [], True
    print(f"\n{'model':<12} {'path':<10} {'median s/epoch':>15} {'min':>8} {'max':>8}")
    for model in models:
        per_run: dict[str, list[float]] = {"lightning": [], "plain": []}
        for repeat in range(args.repeats):
            # Alternate the order so neither path always runs on a warmer machine.
            paths = [("lightning", lightning_epochs), ("plain", plain_epochs)]
            for name, run in paths if repeat % 2 == 0 else paths[::-1]:
                seconds = run(args.epochs + 1, args.batch_size, seed=repeat, model=model)[1:]
                per_run[name].append(statistics.fmean(seconds))  # warm-up dropped above
        for name, values in per_run.items():
            print(f"{model:<12} {name:<10} {statistics.median(values):>15.4f}"
                  f" {min(values):>8.4f} {max(values):>8.4f}")
        lightning, plain = (statistics.median(per_run[k]) for k in ("lightning", "plain"))
        ratio = lightning / plain
        ok = ratio <= TARGET_RATIO
        all_ok = all_ok and ok
        print(f"{'PASS' if ok else 'MISS'}  {model}: ratio lightning/plain {ratio:.2f}x "
              f"(target <= {TARGET_RATIO}x)")
        figures.append(Figure(
            f"{model}: Lightning vs plain PyTorch loop, s/epoch (batch {args.batch_size})",
            "bench_epoch.py", f"{lightning:.4f} s", f"{plain:.4f} s plain loop",
            f"{ratio:.2f}x", f"<= {TARGET_RATIO}x", ok))
    write_figures(args.json, figures)
    return 0 if all_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
