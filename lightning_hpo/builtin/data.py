"""Data modules: ``digits`` (offline, the default) and ``fashion_mnist`` (torchvision, local root).

Both yield ``(images, labels)`` batches with images of shape ``(N, 1, 28, 28)`` (float32,
normalised) and labels of shape ``(N,)`` (int64, 10 classes), so every model here fits both.

* :class:`DigitsDataModule`: scikit-learn's bundled ``load_digits()`` (1,797 8x8 images), resized
  to 28x28, with a seeded stratified train/validation split. No download; prepared once per
  process (cached), so building many data modules in one process is cheap.
* :class:`FashionMNISTDataModule`: torchvision's ``FashionMNIST`` read from a local ``root``
  (train split for training, test split for validation); ``download=True`` fetches it where
  there is internet.

Both are :class:`~lightning_hpo.builtin.tensor_data.TensorDataModule` subclasses: the decoded
tensors are prepared once per process (a launcher worker reuses them for its next trial with the
same data arguments), kept on the trial's device when they fit, and batched by indexing there. On
the fallback path (``on_device: false``, or a GPU too full) a ``DataLoader`` reads the host tensors
with ``pin_memory`` on CUDA, and Lightning copies each batch with ``non_blocking=True``.

Example::

    >>> dm = build_datamodule("digits", batch_size=32)
    >>> dm.setup("fit")
    >>> images, labels = next(iter(dm.train_dataloader()))
    >>> images.shape, labels.shape
    (torch.Size([32, 1, 28, 28]), torch.Size([32]))
"""

from __future__ import annotations

import contextlib
import functools
import logging
import math
import os
import struct
from collections.abc import Hashable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningDataModule
from torch import Tensor

from lightning_hpo._registry import build, defaults, resolve_class
from lightning_hpo.builtin.tensor_data import TensorDataModule
from lightning_hpo.errors import ConfigError, field_float, field_int

__all__ = [
    "DATAMODULES",
    "DigitsDataModule",
    "FashionMNISTDataModule",
    "build_datamodule",
    "datamodule_class",
    "datamodule_hyperparameters",
]

log = logging.getLogger(__name__)

_IMAGE_SIZE = 28
#: Fashion-MNIST training-set pixel mean and standard deviation (on the [0, 1] scale).
_FASHION_MNIST_MEAN, _FASHION_MNIST_STD = 0.2860, 0.3530
#: Uncompressed IDX files torchvision's ``FashionMNIST`` reads from ``<root>/FashionMNIST/raw``.
_FASHION_MNIST_FILES = (
    "train-images-idx3-ubyte",
    "train-labels-idx1-ubyte",
    "t10k-images-idx3-ubyte",
    "t10k-labels-idx1-ubyte",
)


#: scikit-learn's ``load_digits()``: 1,797 images of 10 classes (the test suite checks both).
_DIGITS_SAMPLES, _DIGITS_CLASSES = 1797, 10
#: The seeds scikit-learn's ``train_test_split`` takes (numpy's ``RandomState``).
_MAX_SPLIT_SEED = 2**32 - 1


def _digits_split_sizes(val_fraction: float) -> tuple[int, int]:
    """The training and validation sizes of the digits' stratified split at ``val_fraction``,
    as scikit-learn's ``train_test_split`` computes them (``ceil(val_fraction * 1797)``
    validation images, the rest for training), without loading the digits.

    Raises:
        ConfigError: ``data.val_fraction``, when a side would hold fewer images than there
            are classes: scikit-learn's stratified split refuses it (every trial would fail).

    Example::

        >>> _digits_split_sizes(0.2)
        (1437, 360)
        >>> try:
        ...     _digits_split_sizes(0.9995)
        ... except ConfigError as error:
        ...     print(error)
        data.val_fraction: is 0.9995, which leaves 0 of the 1797 digits for training, but a
        stratified split needs at least one of each of the 10 classes on each side: give from
        0.0051 to 0.9944
    """
    n, classes = _DIGITS_SAMPLES, _DIGITS_CLASSES
    n_val = math.ceil(val_fraction * n)
    n_train = n - n_val
    if min(n_train, n_val) >= classes:
        return n_train, n_val
    # The fractions that leave ``classes`` on each side, to 4 decimals, inside the range.
    low = math.floor((classes - 1) / n * 1e4 + 1) / 1e4
    high = math.floor((n - classes) / n * 1e4) / 1e4
    side, left = ("training", n_train) if n_train < classes else ("validation", n_val)
    raise ConfigError(
        "data.val_fraction",
        f"is {val_fraction}, which leaves {left} of the {n} digits for {side}, but a "
        f"stratified split needs at least one of each of the {classes} classes on each side: "
        f"give from {low:g} to {high:g}",
    )


@functools.lru_cache(maxsize=1)
def _digits_tensors() -> tuple[Tensor, Tensor]:
    """All 1,797 digits as normalised ``(N, 1, 28, 28)`` float32 images and int64 labels.

    Cached per process; callers index into these tensors and must not modify them in place.
    """
    from sklearn.datasets import load_digits

    digits = load_digits()
    images = torch.as_tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    images = F.interpolate(
        images, size=(_IMAGE_SIZE, _IMAGE_SIZE), mode="bilinear", align_corners=False
    ).clamp_(0.0, 1.0)
    # One fixed mean/std for the whole set, like the published MNIST constants: the split
    # (and so the seed) does not change the input scale.
    images = (images - images.mean()) / images.std()
    labels = torch.as_tensor(digits.target, dtype=torch.int64)
    return images, labels


def _digits_split(
    val_fraction: float, seed: int
) -> tuple[tuple[Tensor, Tensor], tuple[Tensor, Tensor]]:
    """Seeded stratified train/validation split of the digits: ``((x, y), (x, y))``."""
    from sklearn.model_selection import train_test_split

    images, labels = _digits_tensors()
    try:
        train_idx, val_idx = train_test_split(
            torch.arange(len(labels)).numpy(),
            test_size=val_fraction,
            stratify=labels.numpy(),
            random_state=seed,
        )
    except ValueError as exc:  # too few samples per class on one side
        raise ConfigError(
            "data.val_fraction", f"is {val_fraction}, too extreme for a stratified split ({exc})"
        ) from exc
    train_idx, val_idx = torch.as_tensor(train_idx), torch.as_tensor(val_idx)
    return (images[train_idx], labels[train_idx]), (images[val_idx], labels[val_idx])


class DigitsDataModule(TensorDataModule):
    """scikit-learn's handwritten digits, resized to 28x28: an offline stand-in for MNIST.

    The 1,797 8x8 images (pixel values 0..16) are scaled to [0, 1], resized to 28x28 with
    bilinear interpolation, then normalised to zero mean and unit variance over the whole set.
    The train/validation split is stratified by class and fixed by ``seed``; with the defaults
    it holds 1,437 training and 360 validation images.

    Args:
        batch_size: images per batch (per device under DDP), ``>= 1``.
        val_fraction: share of images held out for validation, in ``(0, 1)``, leaving each
            side at least one image per class (0.0051 to 0.9944).
        seed: seed of the split (not of the shuffling, which follows ``seed_everything``),
            ``0`` to ``2**32 - 1``.
        num_workers: ``DataLoader`` worker processes on the fallback path, ``>= 0``.
        on_device: ``"auto"``, ``true`` or ``false``: keep the tensors on the trial's device
            (see :mod:`lightning_hpo.builtin.tensor_data`).

    Example::

        >>> from lightning_hpo import DigitsDataModule
        >>> dm = DigitsDataModule(batch_size=128, seed=1)
        >>> dm.setup("fit")
        >>> len(dm.train_set), len(dm.val_set)
        (1437, 360)
    """

    def __init__(
        self,
        batch_size: int = 64,
        val_fraction: float = 0.2,
        seed: int = 0,
        num_workers: int = 0,
        on_device: bool | str = "auto",
    ) -> None:
        super().__init__(batch_size, num_workers, on_device)
        self.val_fraction = field_float(
            "data.val_fraction", val_fraction, low=0.0, high=1.0, low_open=True
        )
        _digits_split_sizes(self.val_fraction)  # refused here, before any trial loads the data
        self.seed = field_int("data.seed", seed, minimum=0)
        if self.seed > _MAX_SPLIT_SEED:
            raise ConfigError("data.seed", f"is {seed}, but must be at most 2**32 - 1 "
                              f"({_MAX_SPLIT_SEED}), the seeds scikit-learn's split takes")
        self.save_hyperparameters()

    def data_key(self) -> Hashable:
        return ("digits", self.val_fraction, self.seed)

    def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
        return _digits_split(self.val_fraction, self.seed)


def _fashion_mnist_found(root: str) -> bool:
    """Whether torchvision's ``FashionMNIST(root)`` finds its data without downloading.

    Mirrors torchvision 0.29's checks: the four uncompressed IDX files under
    ``<root>/FashionMNIST/raw``, or the legacy ``training.pt``/``test.pt`` pair under
    ``<root>/FashionMNIST/processed``.
    """
    base = os.path.join(root, "FashionMNIST")
    raw = all(os.path.isfile(os.path.join(base, "raw", name)) for name in _FASHION_MNIST_FILES)
    legacy = all(
        os.path.isfile(os.path.join(base, "processed", name)) for name in ("training.pt", "test.pt")
    )
    return raw or legacy


#: The IDX magic numbers of Fashion-MNIST's files: unsigned bytes in 3 dimensions (images) or 1
#: (labels).
_IDX_MAGIC = {3: 2051, 1: 2049}


def _fashion_mnist_idx_problem(root: str) -> str | None:
    """What makes torchvision's ``FashionMNIST(root)`` fail to read the four raw IDX files
    (see :func:`_fashion_mnist_found`), from their headers and sizes alone (a few bytes
    read): a file that is not IDX (of unsigned bytes), a size other than its header says (a
    truncated copy), or not as many labels as images; None when there is nothing to say
    (or torchvision reads the legacy ``processed`` files instead)."""
    base = os.path.join(root, "FashionMNIST")
    if all(os.path.isfile(os.path.join(base, "processed", name))
           for name in ("training.pt", "test.pt")):
        return None
    names = iter(_FASHION_MNIST_FILES)
    for images_name, labels_name in zip(names, names, strict=True):
        counts = []
        for name, dims, what in ((images_name, 3, "images"), (labels_name, 1, "labels")):
            path, shown = os.path.join(base, "raw", name), f"FashionMNIST/raw/{name}"
            header_size = 4 * (dims + 1)
            try:
                with open(path, "rb") as file:
                    header = file.read(header_size)
                size = os.path.getsize(path)
            except OSError as error:
                return f"cannot read {shown}: {error.strerror or error}"
            if (len(header) < header_size
                    or struct.unpack(">I", header[:4])[0] != _IDX_MAGIC[dims]):
                return f"{shown} is not an IDX file of {what} (its header is not one)"
            shape = struct.unpack(f">{dims}I", header[4:])
            expected = header_size + math.prod(shape)
            if size != expected:
                return (f"{shown} has {size} bytes, but its header says {shape[0]} {what}, "
                        f"{expected} bytes (a truncated copy?)")
            counts.append(shape[0])
        if counts[0] != counts[1]:
            return (f"FashionMNIST/raw/{images_name} holds {counts[0]} images, but "
                    f"{labels_name} {counts[1]} labels")
    return None


class FashionMNISTDataModule(TensorDataModule):
    """Fashion-MNIST (Xiao et al., 2017) through torchvision: 60,000 train and 10,000 test images.

    The train split is used for training and the test split for validation. torchvision reads
    the IDX files into uint8 tensors, which are scaled and normalised as ``ToTensor`` and
    ``Normalize((0.2860,), (0.3530,))`` would, once per process for the whole set (about
    220 MB of float32), instead of through PIL per image and epoch.

    Args:
        root: directory holding ``FashionMNIST/raw/train-images-idx3-ubyte`` and the three other
            uncompressed IDX files, as torchvision lays them out.
        batch_size: images per batch (per device under DDP), ``>= 1``.
        download: fetch the files into ``root`` when missing (needs internet; done on global
            rank 0 only, in ``prepare_data``).
        num_workers: ``DataLoader`` worker processes on the fallback path, ``>= 0``.
        on_device: ``"auto"``, ``true`` or ``false``: keep the tensors on the trial's device
            (see :mod:`lightning_hpo.builtin.tensor_data`).

    Raises:
        ConfigError: ``data.root`` when the files are missing and ``download`` is false,
            or when they are there but torchvision could not read them (a truncated
            copy: their headers and sizes are checked, a few bytes read).

    Example::

        >>> dm = FashionMNISTDataModule(root="data", batch_size=128)  # doctest: +SKIP
    """

    def __init__(
        self,
        root: str = "data",
        batch_size: int = 64,
        download: bool = False,
        num_workers: int = 0,
        on_device: bool | str = "auto",
    ) -> None:
        super().__init__(batch_size, num_workers, on_device)
        if not isinstance(root, str | os.PathLike):
            raise ConfigError("data.root", f"must be a directory path, got {root!r}")
        if not isinstance(download, bool):
            raise ConfigError("data.download", f"must be true or false, got {download!r}")
        self.root = os.fspath(root)
        self.download = download
        self.save_hyperparameters()
        self._check_found()  # fail at build time, before any trial starts

    def _check_found(self) -> None:
        if not self.download and not _fashion_mnist_found(self.root):
            root = self.root
            raise ConfigError(
                "data.root",
                f"no Fashion-MNIST files under '{root}' (expected "
                f"{root}/FashionMNIST/raw/train-images-idx3-ubyte ...); set data.download: true "
                "on a machine with internet, or copy the four IDX files there",
            )
        problem = _fashion_mnist_idx_problem(self.root) if _fashion_mnist_found(self.root) else None
        if problem is not None:
            raise ConfigError("data.root", f"cannot read the Fashion-MNIST files under "
                              f"'{self.root}': {problem}")

    def _dataset(self, train: bool, download: bool) -> Any:
        from torchvision import datasets

        return datasets.FashionMNIST(self.root, train=train, download=download)

    def prepare_data(self) -> None:
        if self.download:
            for train in (True, False):
                self._dataset(train, download=True)

    def data_key(self) -> Hashable:
        # The files' sizes and modification times: new files under the same root are new data.
        raw = os.path.join(self.root, "FashionMNIST", "raw")
        stats = []
        for name in _FASHION_MNIST_FILES:
            with contextlib.suppress(OSError):
                info = os.stat(os.path.join(raw, name))
                stats.append((name, info.st_size, info.st_mtime_ns))
        return ("fashion_mnist", os.path.realpath(self.root), tuple(stats))

    def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
        self._check_found()
        splits = []
        for train in (True, False):
            try:
                dataset = self._dataset(train, download=False)
            except (OSError, RuntimeError, ValueError) as error:  # torchvision's IDX reader
                raise ConfigError(
                    "data.root",
                    f"cannot read the Fashion-MNIST {'training' if train else 'test'} files "
                    f"under '{self.root}' (truncated or not IDX?): {error}",
                ) from error
            images = dataset.data.unsqueeze(1).to(torch.float32).div_(255.0)
            images = images.sub_(_FASHION_MNIST_MEAN).div_(_FASHION_MNIST_STD)
            splits.append((images, dataset.targets.to(torch.int64)))
        return splits[0], splits[1]


#: Registry of data module names accepted by ``data.name`` in a config.
DATAMODULES: dict[str, type[LightningDataModule]] = {
    "digits": DigitsDataModule,
    "fashion_mnist": FashionMNISTDataModule,
}


def build_datamodule(name: str, **kwargs: Any) -> LightningDataModule:
    """Build a data module from a registry name or a ``"package.module:Class"`` path.

    Args:
        name: a key of :data:`DATAMODULES` or an import path to a ``LightningDataModule``
            subclass.
        **kwargs: constructor arguments (``batch_size``, ``root``, ...); unknown keys are
            refused unless the class takes ``**kwargs``.

    Raises:
        ConfigError: ``data.name`` for an unknown or unimportable name, ``data.<key>`` for an
            unknown argument or a bad value.

    Example::

        >>> from lightning_hpo import build_datamodule
        >>> build_datamodule("digits", batch_size=128).batch_size
        128
    """
    datamodule = build("data", name, DATAMODULES, LightningDataModule, kwargs)
    log.debug("built data module %s with %s", name, kwargs)
    return datamodule


def datamodule_class(name: str) -> type[LightningDataModule]:
    """The class a registry name or ``"package.module:Class"`` path stands for, not built.

    Raises:
        ConfigError: ``data.name`` for an unknown or unimportable name.

    Example::

        >>> datamodule_class("digits").__name__
        'DigitsDataModule'
    """
    return resolve_class("data", name, DATAMODULES, LightningDataModule)


def datamodule_hyperparameters(name: str) -> dict[str, Any]:
    """Constructor arguments of a data module and their defaults.

    Args:
        name: a key of :data:`DATAMODULES` or a ``"package.module:Class"`` path.

    Raises:
        ConfigError: ``data.name`` for an unknown or unimportable name.

    Example::

        >>> datamodule_hyperparameters("digits")["batch_size"]
        64
    """
    return defaults(datamodule_class(name))
