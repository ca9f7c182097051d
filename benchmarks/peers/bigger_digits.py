"""Digits with each image ``repeat`` times an epoch: ``bench_peers.py --long``'s 10x longer epochs.

The data module both systems train in the long variant (our launcher builds it by
``class_path``, the plain Optuna script imports it). The repeats are shuffled with the rest, so
an epoch is ``repeat`` times the work of the quickstart's, on the same validation set.

Example::

    >>> dm = RepeatedDigits(batch_size=128, repeat=10)
    >>> dm.setup("fit")
    >>> len(dm.train_set), len(dm.val_set)
    (14370, 360)
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

from torch import Tensor

from lightning_hpo.builtin.data import DigitsDataModule


class RepeatedDigits(DigitsDataModule):
    """:class:`~lightning_hpo.builtin.data.DigitsDataModule` whose training split is repeated."""

    def __init__(self, batch_size: int = 64, repeat: int = 10, num_workers: int = 0,
                 on_device: bool | str = "auto") -> None:
        super().__init__(batch_size=batch_size, num_workers=num_workers, on_device=on_device)
        self.repeat = repeat

    def data_key(self) -> Hashable:
        return (super().data_key(), "repeat", self.repeat)

    def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
        train, val = super().load_tensors()
        return [t.repeat(self.repeat, *([1] * (t.dim() - 1))) for t in train], val
