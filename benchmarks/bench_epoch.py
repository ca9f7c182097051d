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

Example::

    python benchmarks/bench_epoch.py --epochs 5 --repeats 3
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings
from collections.abc import Sequence

import lightning.pytorch as pl
import torch
import torch.nn.functional as F
from _record import Figure, machine_line, write_figures

from lightning_hpo.data import DigitsDataModule
from lightning_hpo.models import LeNet

TARGET_RATIO = 1.3
LR = 0.1


class EpochTimer(pl.Callback):
    """Seconds of each training epoch (its validation included), first to last hook."""

    def __init__(self) -> None:
        self.seconds: list[float] = []
        self._start = 0.0

    def on_train_epoch_start(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self._start = time.perf_counter()

    def on_train_epoch_end(self, trainer: pl.Trainer, pl_module: pl.LightningModule) -> None:
        self.seconds.append(time.perf_counter() - self._start)


def quiet_single_thread() -> None:
    """What both benchmarks of a LeNet epoch set first: 1 torch thread, no Lightning chatter."""
    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)
    warnings.filterwarnings("ignore", module="lightning")
    torch.set_num_threads(1)


def lightning_epochs(
    epochs: int, batch_size: int, seed: int, callbacks: Sequence[pl.Callback] = ()
) -> list[float]:
    """Seconds of each of ``epochs`` epochs of ``Trainer.fit`` (warm-up included), with
    ``callbacks`` added to the trainer."""
    pl.seed_everything(seed, verbose=False)
    timer = EpochTimer()
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=epochs,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=[timer, *callbacks],
    )
    trainer.fit(LeNet(lr=LR), datamodule=DigitsDataModule(batch_size=batch_size))
    return timer.seconds


def plain_epochs(epochs: int, batch_size: int, seed: int) -> list[float]:
    """Seconds of each of ``epochs`` epochs of a hand-written loop (warm-up included)."""
    pl.seed_everything(seed, verbose=False)
    net = LeNet(lr=LR).net
    optimizer = torch.optim.SGD(net.parameters(), lr=LR, momentum=0.0, weight_decay=0.0)
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
    parser.add_argument("--json", metavar="PATH", help="also write the figures for run_all.py")
    args = parser.parse_args(argv)
    if args.epochs < 1 or args.repeats < 1:
        parser.error("--epochs and --repeats must be >= 1")

    quiet_single_thread()
    print(machine_line())
    print(f"torch threads: {torch.get_num_threads()} (pinned for both paths)")
    print(
        f"LeNet relu on digits, batch {args.batch_size}, SGD lr {LR}; {args.epochs} timed epochs"
        f" + 1 warm-up per run, {args.repeats} runs per path"
    )

    per_run: dict[str, list[float]] = {"lightning": [], "plain": []}
    for repeat in range(args.repeats):
        # Alternate the order so neither path always runs on a warmer machine.
        paths = [("lightning", lightning_epochs), ("plain", plain_epochs)]
        for name, run in paths if repeat % 2 == 0 else paths[::-1]:
            seconds = run(args.epochs + 1, args.batch_size, seed=repeat)[1:]  # drop warm-up
            per_run[name].append(statistics.fmean(seconds))

    print(f"\n{'path':<10} {'median s/epoch':>15} {'min':>8} {'max':>8}")
    for name, values in per_run.items():
        print(
            f"{name:<10} {statistics.median(values):>15.4f}"
            f" {min(values):>8.4f} {max(values):>8.4f}"
        )
    ratio = statistics.median(per_run["lightning"]) / statistics.median(per_run["plain"])
    ok = ratio <= TARGET_RATIO
    print(f"\n{'PASS' if ok else 'MISS'}  ratio lightning/plain: {ratio:.2f}x "
          f"(target <= {TARGET_RATIO}x)")
    lightning, plain = (statistics.median(per_run[k]) for k in ("lightning", "plain"))
    write_figures(args.json, [Figure(
        "Lightning vs plain PyTorch loop, s/epoch", "bench_epoch.py", f"{lightning:.4f} s",
        f"{plain:.4f} s plain loop", f"{ratio:.2f}x", f"<= {TARGET_RATIO}x", ok)])
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
