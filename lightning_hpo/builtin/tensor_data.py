"""Data that fits in memory: decoded once per process, kept on the trial's device, batched by
indexing.

A launcher worker trains many trials in one process. :class:`TensorDataModule` keeps the decoded
tensors in a per-process cache keyed by :meth:`TensorDataModule.data_key` (batch size and worker
count are not part of it), and their copy on the trial's device too. :class:`TensorBatches`
draws a seeded permutation per epoch and one indexing operation per batch on the device: no
loader processes, no collation, no host-to-device copy. ``on_device`` says where the tensors go:
``"auto"`` (default) on the trial's device when they fit (always on CPU; on CUDA when they take
at most a quarter of the GPU's free memory), else a pinned ``DataLoader`` over the host tensors;
``True`` on the device whatever its free memory; ``False`` always the ``DataLoader``. The path
taken is in :attr:`TensorDataModule.data_path` and logged.

Shuffling follows :class:`torch.utils.data.DistributedSampler`: epoch ``e``'s order is
``randperm(n)`` seeded with ``seed + e`` (``seed`` from rank 0, saved in checkpoints), so a
resumed trial sees the batches it would have seen; under DDP each rank takes every
``world_size``-th example. Your own data subclasses it with two methods (see
``examples/own_datamodule.py``)::

    class Moons(TensorDataModule):
        def data_key(self) -> Hashable:
            return ("moons", self.noise)

        def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
            x, y = make_moons(1000, noise=self.noise, random_state=0)
            x, y = torch.as_tensor(x, dtype=torch.float32), torch.as_tensor(y)
            return (x[:800], y[:800]), (x[800:], y[800:])
"""

from __future__ import annotations

import collections
import logging
import math
import time
from collections.abc import Hashable, Iterator, Sequence
from typing import Any, Literal

import torch
from lightning.pytorch import LightningDataModule
from torch import Tensor
from torch.utils.data import DataLoader, TensorDataset

from lightning_hpo.errors import ConfigError, field_int

__all__ = ["TensorBatches", "TensorDataModule", "clear_data_cache"]

log = logging.getLogger(__name__)

#: Share of a GPU's free memory the tensors may take under ``on_device: auto``.
_GPU_SHARE = 0.25
#: Data keys whose tensors a process keeps (least recently used goes first).
_CACHE_ENTRIES = 2

_Tensors = tuple[Tensor, ...]
_Split = tuple[_Tensors, _Tensors]


class _Cache:
    """The per-process store: host tensors by key, and their device copies by (key, device)."""

    def __init__(self) -> None:
        self.host: collections.OrderedDict[Hashable, _Split] = collections.OrderedDict()
        self.device: dict[tuple[Hashable, str], _Split] = {}
        self.prefetched: dict[Hashable, float] = {}  # seconds it took, until a setup says so

    def clear(self) -> None:
        self.host.clear()
        self.device.clear()
        self.prefetched.clear()

    def host_tensors(self, key: Hashable, load: Any) -> tuple[_Split, bool]:
        """The host tensors of ``key`` (loaded by ``load()`` on a miss), and whether cached."""
        if key in self.host:
            self.host.move_to_end(key)
            return self.host[key], True
        split = load()
        self.host[key] = split
        while len(self.host) > _CACHE_ENTRIES:
            old, _ = self.host.popitem(last=False)
            for entry in [k for k in self.device if k[0] == old]:
                del self.device[entry]
        return split, False

    def on_device(self, key: Hashable, split: _Split, device: torch.device) -> tuple[_Split, bool]:
        """``split`` copied to ``device`` once per key (``split`` itself on the CPU)."""
        if device.type == "cpu":
            return split, True
        entry = (key, str(device))
        if entry in self.device:
            return self.device[entry], True
        moved = tuple(tuple(t.to(device) for t in part) for part in split)
        self.device[entry] = moved  # type: ignore[assignment]
        return moved, False  # type: ignore[return-value]


_CACHE = _Cache()


def clear_data_cache() -> None:
    """Forget every cached tensor of this process (host and device copies).

    Example::

        >>> clear_data_cache()
    """
    _CACHE.clear()


class _EpochOrder:
    """Which examples a rank takes in an epoch, in which order (``DistributedSampler``'s rule).

    Lightning calls :meth:`set_epoch` on a loader's ``sampler`` before every epoch.
    """

    def __init__(self, n: int, shuffle: bool, seed: int, rank: int, world_size: int) -> None:
        self.n, self.shuffle, self.seed = n, shuffle, seed
        self.rank, self.world_size = rank, world_size
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(self.n / self.world_size)

    def indices(self) -> Tensor | None:
        """This rank's example indices for the epoch, or None for all examples in order."""
        if not self.shuffle and self.world_size == 1:
            return None
        if self.shuffle:
            generator = torch.Generator()
            generator.manual_seed(self.seed + self.epoch)
            order = torch.randperm(self.n, generator=generator)
        else:
            order = torch.arange(self.n)
        total = len(self) * self.world_size
        if total > self.n:  # pad by repeating from the start, so every rank has as many
            order = torch.cat([order, order.repeat(math.ceil(total / self.n))[: total - self.n]])
        return order[self.rank : total : self.world_size]


class TensorBatches:
    """Batches of in-memory tensors by indexing: what a ``DataLoader`` over a
    ``TensorDataset`` yields, with one indexing operation per batch and no worker processes.

    Lightning accepts it wherever a ``DataLoader`` goes, moves nothing (the tensors are already
    on the device) and calls ``sampler.set_epoch`` each epoch.

    Args:
        tensors: tensors with the same first dimension (e.g. images and labels), on one device.
        batch_size: examples per batch, ``>= 1``; the last batch may be smaller.
        shuffle: a new seeded order every epoch (training), or the tensors' order (validation).
        seed: base seed of the order (the order of epoch ``e`` is seeded with ``seed + e``).
        rank: this process's DDP rank; ``world_size``: the number of ranks.

    Example::

        >>> import torch
        >>> from lightning_hpo import TensorBatches
        >>> batches = TensorBatches((torch.arange(10), torch.arange(10) * 2), batch_size=4)
        >>> [x.tolist() for x, _ in batches]
        [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
        >>> len(TensorBatches((torch.arange(10),), batch_size=4, rank=1, world_size=2))
        2
    """

    def __init__(
        self,
        tensors: Sequence[Tensor],
        batch_size: int,
        shuffle: bool = False,
        seed: int = 0,
        rank: int = 0,
        world_size: int = 1,
    ) -> None:
        if not tensors or any(len(t) != len(tensors[0]) for t in tensors):
            raise ValueError("TensorBatches needs tensors with the same first dimension")
        self.tensors = tuple(tensors)
        self.batch_size = batch_size
        self.sampler = _EpochOrder(len(tensors[0]), shuffle, seed, rank, world_size)
        self.batch_sampler = None  # Lightning looks for one wherever it finds a ``sampler``

    def __len__(self) -> int:
        return math.ceil(len(self.sampler) / self.batch_size)

    def __iter__(self) -> Iterator[tuple[Tensor, ...]]:
        order = self.sampler.indices()
        size = len(self.sampler)
        if order is not None:
            order = order.to(self.tensors[0].device)
        for start in range(0, size, self.batch_size):
            if order is None:
                yield tuple(t[start : start + self.batch_size] for t in self.tensors)
            else:
                index = order[start : start + self.batch_size]
                yield tuple(t[index] for t in self.tensors)


def _check_on_device(value: Any) -> bool | Literal["auto"]:
    if value is True or value is False or value == "auto":
        return value  # type: ignore[no-any-return]
    raise ConfigError("data.on_device", f"is {value!r}; allowed: auto, true, false")


def _nbytes(split: _Split) -> int:
    return sum(t.element_size() * t.nelement() for part in split for t in part)


class TensorDataModule(LightningDataModule):
    """A data module whose data fits in memory as tensors (see the module's docstring).

    Subclasses implement :meth:`data_key` and :meth:`load_tensors`; this class does the
    caching, the placement, the batching and the fallback to a ``DataLoader``.

    Args:
        batch_size: examples per batch (per device under DDP), ``>= 1``.
        num_workers: ``DataLoader`` processes on the fallback path, ``>= 0`` (unused when the
            tensors are on the device).
        on_device: ``"auto"``, ``True`` or ``False`` (see the module's docstring).

    Attributes:
        train_set, val_set: ``TensorDataset`` views of the host tensors, after ``setup``.
        data_path: which path ``setup`` took, in words, for logs and the study.
    """

    def __init__(
        self, batch_size: int, num_workers: int = 0, on_device: bool | str = "auto"
    ) -> None:
        super().__init__()
        self.batch_size = field_int("data.batch_size", batch_size, minimum=1)
        self.num_workers = field_int("data.num_workers", num_workers, minimum=0)
        self.on_device = _check_on_device(on_device)
        self.train_set: TensorDataset | None = None
        self.val_set: TensorDataset | None = None
        self.data_path = "not set up"
        self._device_split: _Split | None = None
        self._seed = 0
        self._rank, self._world_size = 0, 1

    @property
    def uses_loader(self) -> bool:
        """Whether batches come from a ``DataLoader`` (the fallback path), after ``setup``."""
        return self._device_split is None

    def data_key(self) -> Hashable:
        """What identifies the tensors :meth:`load_tensors` returns: modules with equal keys
        share them within a process. Include every argument that changes the data, and
        nothing that does not (not ``batch_size``)."""
        raise NotImplementedError(f"{type(self).__name__} must define data_key()")

    def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
        """The training and the validation tensors (a tuple such as ``(images, labels)``
        each), on the CPU, with the same first dimension (at least 1) within each split; what
        it returns is checked, and a ``ValueError`` names what is wrong. Called once per
        process and key; the result is shared, so it must not be modified in place afterwards."""
        raise NotImplementedError(f"{type(self).__name__} must define load_tensors()")

    def _name(self) -> str:
        return type(self).__name__

    def _load(self) -> _Split:
        """:meth:`load_tensors`, checked: two non-empty splits of tensors, each split's
        tensors with one first dimension (a ``ValueError`` naming the method otherwise)."""
        where = f"{self._name()}.load_tensors()"
        loaded = self.load_tensors()
        if not isinstance(loaded, tuple | list) or len(loaded) != 2:
            raise ValueError(f"{where} must return (training tensors, validation tensors), "
                             f"got {type(loaded).__name__}")
        for name, part in zip(("training", "validation"), loaded, strict=True):
            if (not isinstance(part, tuple | list) or not part
                    or not all(isinstance(t, Tensor) for t in part)):
                got = ([type(t).__name__ for t in part] if isinstance(part, tuple | list)
                       else type(part).__name__)
                raise ValueError(f"{where}: the {name} split must be a non-empty tuple of "
                                 f"tensors such as (images, labels), got {got}")
            sizes = [len(t) if t.dim() else 0 for t in part]
            if len(set(sizes)) != 1 or sizes[0] == 0:
                raise ValueError(f"{where}: the {name} tensors must have one first dimension "
                                 f"of at least 1 example, got {sizes}")
        return tuple(loaded[0]), tuple(loaded[1])

    def _key(self) -> Hashable:
        key = self.data_key()
        try:
            hash(key)
        except TypeError as error:
            raise TypeError(f"{self._name()}.data_key() must return something hashable (a "
                            f"tuple, not a list), got {key!r}") from error
        return key

    def prefetch(self) -> None:
        """Load the tensors into this process's cache now (what :meth:`setup` does first), so
        that a later ``setup`` of a module with the same :meth:`data_key` finds them there.
        The launcher's workers call it while they wait for the study. Loads once per process.

        Example::

            >>> from lightning_hpo.builtin.data import DigitsDataModule
            >>> DigitsDataModule(batch_size=32).prefetch()
            >>> dm = DigitsDataModule(batch_size=64)
            >>> dm.setup("fit")
            >>> dm.data_path.endswith("reused)") or "prepared in" in dm.data_path
            True
        """
        started = time.perf_counter()
        key = self._key()
        if not _CACHE.host_tensors(key, self._load)[1]:
            _CACHE.prefetched[key] = time.perf_counter() - started

    def setup(self, stage: str) -> None:
        if self.train_set is not None:
            return
        started = time.perf_counter()
        key = self._key()
        split, cached = _CACHE.host_tensors(key, self._load)
        prefetched = _CACHE.prefetched.pop(key, None)  # its loading is said by this setup
        self.train_set, self.val_set = TensorDataset(*split[0]), TensorDataset(*split[1])
        trainer = self.trainer  # None when the module is used outside a Trainer
        device = torch.device("cpu") if trainer is None else trainer.strategy.root_device
        if trainer is not None:
            self._rank, self._world_size = trainer.global_rank, trainer.world_size
            self._seed = trainer.strategy.broadcast(torch.initial_seed() % 2**62)
        else:
            self._seed = torch.initial_seed() % 2**62
        size = _nbytes(split)
        fits, why = self._fits(size, device)
        if fits:
            self._device_split, on_device_before = _CACHE.on_device(key, split, device)
            reused = cached and on_device_before and prefetched is None
            took = time.perf_counter() - started + (prefetched or 0.0)
            when = "" if prefetched is None else ", before the first trial"
            self.data_path = (
                f"{self._name()}: tensors on {device} ({size / 1e6:.1f} MB, "
                f"{'reused' if reused else f'prepared in {took:.2f} s{when}'})"
            )
        else:
            self._device_split = None
            self.data_path = (
                f"{self._name()}: DataLoader over host tensors, {self.num_workers} worker "
                f"process(es) ({why})"
            )
        log.info("%s", self.data_path)

    def state_dict(self) -> dict[str, Any]:
        """The seed of the batch order, saved in checkpoints: a resumed trial shuffles as the
        paused one did, whatever its process was seeded with."""
        return {"shuffle_seed": self._seed}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._seed = int(state_dict.get("shuffle_seed", self._seed))

    def _fits(self, size: int, device: torch.device) -> tuple[bool, str]:
        if self.on_device is False:
            return False, "data.on_device is false"
        if self.on_device is True or device.type == "cpu":
            return True, ""
        if device.type == "cuda":
            free, _ = torch.cuda.mem_get_info(device)
            if size <= _GPU_SHARE * free:
                return True, ""
            return False, (
                f"{size / 1e6:.1f} MB is over {_GPU_SHARE:.0%} of the {free / 1e6:.0f} MB free "
                f"on {device}"
            )
        return False, f"free memory of {device.type} unknown; set data.on_device: true to use it"

    def _batches(self, part: int, shuffle: bool) -> TensorBatches | DataLoader[Any]:
        dataset = self.train_set if part == 0 else self.val_set
        if dataset is None:
            raise RuntimeError(f"{self._name()}.setup() must run before its data loaders")
        if self._device_split is not None:
            return TensorBatches(
                self._device_split[part], self.batch_size, shuffle=shuffle, seed=self._seed,
                rank=self._rank, world_size=self._world_size,
            )
        trainer = self.trainer
        return DataLoader(
            dataset,
            batch_size=self.batch_size,
            shuffle=shuffle,
            num_workers=self.num_workers,
            pin_memory=trainer is not None and trainer.strategy.root_device.type == "cuda",
            persistent_workers=self.num_workers > 0,
        )

    def train_dataloader(self) -> TensorBatches | DataLoader[Any]:
        return self._batches(0, shuffle=True)

    def val_dataloader(self) -> TensorBatches | DataLoader[Any]:
        return self._batches(1, shuffle=False)
