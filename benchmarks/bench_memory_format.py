"""LeNet's ``Trainer.fit`` on the digits in the channels-last layout against the default, same run.

The launcher gives its built-in models ``channels_last: auto``
(:mod:`lightning_hpo.builtin._memory_format`): on a CPU, a network with a 2-D convolution trains
with its weights, and so its activations, in the channels-last layout, where oneDNN's convolutions
are faster. This measures what that is
worth where it is on: a whole ``Trainer.fit`` of ``LeNet`` on ``DigitsDataModule`` (1,437
training and 360 validation images, a validation pass each epoch), one torch thread, no logger,
checkpointing or progress bar, for both activations (relu with max pooling, sigmoid with
average pooling) and several batch sizes. The two layouts run alternately, each pair a few
seconds apart, so drift of the machine falls on both; a warm-up fit runs first. The figure is
the median over the pairs of the per-pair ratio (channels-last seconds over default seconds);
both layouts reach the same validation error up to the order of float sums (printed).

    python benchmarks/bench_memory_format.py                  # 3 repeats, 9 epochs
    python benchmarks/bench_memory_format.py --repeats 1 --epochs 2 --batch-sizes 128

Target: below 1.00x (the layout is on by default in the launcher only where it is a gain).
"""

from __future__ import annotations

import argparse
import logging
import statistics
import time
import warnings

import lightning.pytorch as pl
import torch
from _record import Figure, machine_line, write_figures

from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import LeNet

TARGET_RATIO = 1.0


def fit_seconds(channels_last: bool, activation: str, batch_size: int, epochs: int) -> tuple[
        float, float]:
    """Wall-clock seconds of one ``Trainer.fit`` (its set-up included) and the final
    validation error."""
    pl.seed_everything(0, verbose=False)
    model = LeNet(lr=0.1, activation=activation, channels_last=channels_last)  # type: ignore[arg-type]
    trainer = pl.Trainer(max_epochs=epochs, accelerator="cpu", devices=1, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False)
    data = DigitsDataModule(batch_size=batch_size)
    start = time.perf_counter()
    trainer.fit(model, datamodule=data)
    return time.perf_counter() - start, float(trainer.callback_metrics["validation_error"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="pairs per configuration")
    parser.add_argument("--epochs", type=int, default=9, help="epochs per fit")
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--activations", nargs="+", default=["relu", "sigmoid"],
                        choices=["relu", "sigmoid"])
    parser.add_argument("--json", help="write the headline figure here")
    args = parser.parse_args(argv)
    for name, values in (("--repeats", [args.repeats]), ("--epochs", [args.epochs]),
                         ("--batch-sizes", args.batch_sizes)):
        bad = [v for v in values if v < 1]
        if bad:
            parser.error(f"{name}: is {bad[0]}, but must be >= 1")
    torch.set_num_threads(1)
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore")
    print(machine_line())
    fit_seconds(True, "relu", 128, 1)  # warm-up: oneDNN's kernels, the data's first load
    fit_seconds(False, "relu", 128, 1)
    ratios: list[float] = []
    print(f"{'activation':<10} {'batch':>5} {'default s':>10} {'channels-last s':>16} "
          f"{'ratio':>6}  validation error (default, channels-last)")
    for activation in args.activations:
        for batch_size in args.batch_sizes:
            for repeat in range(args.repeats):
                order = (False, True) if repeat % 2 == 0 else (True, False)
                results = {laid: fit_seconds(laid, activation, batch_size, args.epochs)
                           for laid in order}
                ratio = results[True][0] / results[False][0]
                ratios.append(ratio)
                print(f"{activation:<10} {batch_size:>5} {results[False][0]:>10.2f} "
                      f"{results[True][0]:>16.2f} {ratio:>6.2f}  "
                      f"{results[False][1]:.4f}, {results[True][1]:.4f}")
    median = statistics.median(ratios)
    met = median < TARGET_RATIO
    print(f"channels-last / default, median of {len(ratios)} pairs: {median:.2f}x "
          f"(range {min(ratios):.2f}-{max(ratios):.2f}; target < {TARGET_RATIO:.2f}x: "
          f"{'met' if met else 'MISSED'})")
    write_figures(args.json, [Figure(
        "LeNet fit time, channels-last layout (CPU)", "bench_memory_format.py",
        f"{median:.2f}x of the default", "the default layout, same run", f"{median:.2f}x",
        f"< {TARGET_RATIO:.2f}x", met)])
    return 0 if met else 1


if __name__ == "__main__":
    raise SystemExit(main())
