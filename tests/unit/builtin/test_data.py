"""Data modules: digits preparation and split, Fashion-MNIST through real torchvision parsing."""

from __future__ import annotations

import hashlib
import struct
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from lightning_hpo.builtin.data import (
    DATAMODULES,
    DigitsDataModule,
    FashionMNISTDataModule,
    build_datamodule,
    datamodule_class,
    datamodule_hyperparameters,
)
from lightning_hpo.errors import ConfigError

_NUM_DIGITS = 1797


def _digits(**kwargs: Any) -> DigitsDataModule:
    datamodule = DigitsDataModule(**kwargs)
    datamodule.setup("fit")
    return datamodule


def _labels(dataset: TensorDataset) -> torch.Tensor:
    return dataset.tensors[1]


# --- registry and argument checks ---


def test_registry_names() -> None:
    assert {"digits": DigitsDataModule, "fashion_mnist": FashionMNISTDataModule} == DATAMODULES


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        pytest.param("digits", DigitsDataModule, id="digits"),
        pytest.param("lightning_hpo.builtin.data:DigitsDataModule", DigitsDataModule,
                     id="import-path"),
    ],
)
def test_build_datamodule(name: str, cls: type) -> None:
    datamodule = build_datamodule(name, batch_size=16)
    assert type(datamodule) is cls
    assert datamodule.batch_size == 16
    assert datamodule.hparams["batch_size"] == 16


def test_unknown_datamodule_name() -> None:
    with pytest.raises(ConfigError) as info:
        build_datamodule("mnist")
    assert info.value.field == "data.name"
    assert "allowed: digits, fashion_mnist, or a 'package.module:Class' path" in str(info.value)


def test_model_is_not_a_datamodule() -> None:
    with pytest.raises(ConfigError, match="not a LightningDataModule subclass"):
        build_datamodule("lightning_hpo.builtin.models:LeNet")


def test_unknown_datamodule_argument_lists_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        build_datamodule("digits", root="data")
    assert info.value.field == "data.root"
    assert info.value.message.endswith(
        "allowed: batch_size, val_fraction, seed, num_workers, on_device"
    )


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        pytest.param({"batch_size": 0}, "data.batch_size", id="batch-0"),
        pytest.param({"batch_size": 32.0}, "data.batch_size", id="batch-float"),
        pytest.param({"batch_size": "64"}, "data.batch_size", id="batch-string"),
        pytest.param({"num_workers": -1}, "data.num_workers", id="workers-negative"),
        pytest.param({"val_fraction": 0.0}, "data.val_fraction", id="val-0"),
        pytest.param({"val_fraction": 1.0}, "data.val_fraction", id="val-1"),
        pytest.param({"val_fraction": 0.001}, "data.val_fraction", id="val-too-small"),
        pytest.param({"seed": -1}, "data.seed", id="seed-negative"),
    ],
)
def test_bad_digits_argument_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        _digits(**kwargs)
    assert info.value.field == field


def test_datamodule_class() -> None:
    assert datamodule_class("fashion_mnist") is FashionMNISTDataModule
    assert datamodule_class("lightning_hpo.builtin.data:DigitsDataModule") is DigitsDataModule
    with pytest.raises(ConfigError, match="^data.name: unknown data module 'x'"):
        datamodule_class("x")


def test_datamodule_hyperparameters() -> None:
    assert datamodule_hyperparameters("digits") == {
        "batch_size": 64,
        "val_fraction": 0.2,
        "seed": 0,
        "num_workers": 0,
        "on_device": "auto",
    }
    assert datamodule_hyperparameters("fashion_mnist") == {
        "root": "data",
        "batch_size": 64,
        "download": False,
        "num_workers": 0,
        "on_device": "auto",
    }


# --- digits ---


def test_digits_batches_are_28x28_normalised_images() -> None:
    datamodule = _digits(batch_size=32)
    images, labels = next(iter(datamodule.train_dataloader()))
    assert images.shape == (32, 1, 28, 28)
    assert images.dtype == torch.float32
    assert labels.shape == (32,)
    assert labels.dtype == torch.int64


def test_digits_value_range() -> None:
    datamodule = _digits()
    images = torch.cat([datamodule.train_set.tensors[0], datamodule.val_set.tensors[0]])
    labels = torch.cat([_labels(datamodule.train_set), _labels(datamodule.val_set)])
    assert torch.isfinite(images).all()
    # Normalised over the whole set.
    assert float(images.mean()) == pytest.approx(0.0, abs=1e-4)
    assert float(images.std()) == pytest.approx(1.0, abs=1e-4)
    # Blank background (the top-left pixel is 0 in every 8x8 digit) is the darkest value:
    # scaling and resizing kept 0 as the minimum and added no undershoot.
    assert torch.all(images[:, 0, 0, 0] == images.min())
    assert int(labels.min()) == 0
    assert int(labels.max()) == 9


@pytest.mark.parametrize(
    ("val_fraction", "n_train", "n_val"),
    [
        pytest.param(0.2, 1437, 360, id="default-0.2"),
        pytest.param(0.5, 898, 899, id="half"),
        pytest.param(0.1, 1617, 180, id="tenth"),
    ],
)
def test_digits_split_sizes(val_fraction: float, n_train: int, n_val: int) -> None:
    datamodule = _digits(val_fraction=val_fraction)
    assert (len(datamodule.train_set), len(datamodule.val_set)) == (n_train, n_val)
    assert n_train + n_val == _NUM_DIGITS


@pytest.mark.parametrize(
    ("val_fraction", "words"),
    [
        pytest.param(0.9995, "leaves 0 of the 1797 digits for training", id="no-training"),
        pytest.param(0.995, "leaves 8 of the 1797 digits for training", id="8-for-training"),
        pytest.param(0.0001, "leaves 1 of the 1797 digits for validation", id="1-for-validation"),
        pytest.param(0.001, "leaves 2 of the 1797 digits for validation", id="2-for-validation"),
        pytest.param(0.005, "leaves 9 of the 1797 digits for validation", id="9-for-validation"),
    ],
)
def test_a_split_the_stratification_refuses_is_refused_when_built(
    val_fraction: float, words: str
) -> None:
    """Before, only ``setup`` (in every trial) found it, in scikit-learn's words: the config
    check, which builds the module at both ends of the space without loading data, said OK."""
    with pytest.raises(ConfigError) as info:
        DigitsDataModule(val_fraction=val_fraction)  # no setup: nothing loaded
    assert str(info.value) == (
        f"data.val_fraction: is {val_fraction}, which {words}, but a stratified split needs at "
        "least one of each of the 10 classes on each side: give from 0.0051 to 0.9944")


@pytest.mark.parametrize("val_fraction", [0.0051, 0.5, 0.9944])
def test_the_fractions_the_refusal_offers_split(val_fraction: float) -> None:
    datamodule = _digits(val_fraction=val_fraction)
    assert min(len(datamodule.train_set), len(datamodule.val_set)) >= 10


def test_the_split_sizes_are_computed_as_scikit_learn_splits() -> None:
    """The check computes the split's sizes without the data: the digits' size and classes,
    and for fractions around both limits, the sizes scikit-learn's split makes (or that it
    refuses the same ones)."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    from lightning_hpo.builtin.data import _DIGITS_CLASSES, _DIGITS_SAMPLES, _digits_split_sizes

    labels = load_digits().target
    assert (len(labels), len(set(labels.tolist()))) == (_DIGITS_SAMPLES, _DIGITS_CLASSES)
    indices = np.arange(len(labels))
    fractions = [0.0001, 0.001, 0.005, 0.00501, 0.0050084, 0.0051, 0.2, 0.5, 0.9944, 0.99443,
                 0.994436, 0.9945, 0.9995, 0.99999]
    for fraction in fractions:
        try:
            train, val = train_test_split(indices, test_size=fraction, stratify=labels,
                                          random_state=0)
        except ValueError:
            with pytest.raises(ConfigError):
                _digits_split_sizes(fraction)
        else:
            assert _digits_split_sizes(fraction) == (len(train), len(val)), fraction


def test_a_seed_the_split_cannot_take_names_the_seed() -> None:
    """Before: every trial failed with 'data.val_fraction: is 0.2, too extreme for a stratified
    split (The 'random_state' parameter ...)'."""
    with pytest.raises(ConfigError) as info:
        DigitsDataModule(seed=2**32)
    assert str(info.value) == ("data.seed: is 4294967296, but must be at most 2**32 - 1 "
                               "(4294967295), the seeds scikit-learn's split takes")
    assert DigitsDataModule(seed=2**32 - 1).seed == 2**32 - 1


def test_digits_split_is_stratified() -> None:
    datamodule = _digits(val_fraction=0.2)
    train = Counter(_labels(datamodule.train_set).tolist())
    val = Counter(_labels(datamodule.val_set).tolist())
    assert set(train) == set(val) == set(range(10))
    for label in range(10):
        total = train[label] + val[label]
        assert abs(val[label] - 0.2 * total) <= 1, (label, train[label], val[label])


def _samples(dataset: TensorDataset) -> list[tuple[bytes, int]]:
    """Each sample's identity: its image's exact bytes, and its label."""
    images, labels = dataset.tensors
    pairs = zip(images, labels, strict=True)
    return [(image.numpy().tobytes(), int(label)) for image, label in pairs]


@pytest.mark.parametrize("val_fraction", [0.2, 0.5], ids=["default-0.2", "half"])
def test_digits_split_is_a_partition(val_fraction: float) -> None:
    """Every one of scikit-learn's 1,797 digits is in exactly one of the two sets.

    A sample is identified by its image's bytes (the 1,797 8x8 digits are all different, and
    so are their 28x28 versions, as asserted here): no sample is in both sets or twice in one,
    and together the sets hold as many samples, of each label, as the data.
    """
    from sklearn.datasets import load_digits

    datamodule = _digits(val_fraction=val_fraction)
    train, val = _samples(datamodule.train_set), _samples(datamodule.val_set)
    assert len(set(train)) == len(train) and len(set(val)) == len(val)  # no repeats
    assert not set(train) & set(val)  # disjoint
    digits = load_digits()
    assert len({image.tobytes() for image in digits.images}) == _NUM_DIGITS  # all different
    assert len(train) + len(val) == _NUM_DIGITS  # so together they are all the digits
    assert Counter(label for _, label in train + val) == Counter(digits.target.tolist())


_SPLIT_DIGEST = """
import hashlib, sys
from lightning_hpo.builtin.data import DigitsDataModule
datamodule = DigitsDataModule(val_fraction=0.2, seed=7)
datamodule.setup("fit")
for dataset in (datamodule.train_set, datamodule.val_set):
    images, labels = dataset.tensors
    print(hashlib.sha256(images.numpy().tobytes() + labels.numpy().tobytes()).hexdigest())
"""


@pytest.mark.slow
def test_digits_split_same_seed_same_split_in_every_process() -> None:
    """A fresh process (a launcher worker) splits the digits as this one does, sample for sample.

    In one process the split is cached, so only a second process recomputes it.
    """
    datamodule = _digits(val_fraction=0.2, seed=7)
    here = [
        hashlib.sha256(d.tensors[0].numpy().tobytes() + d.tensors[1].numpy().tobytes()).hexdigest()
        for d in (datamodule.train_set, datamodule.val_set)
    ]
    out = subprocess.run([sys.executable, "-c", _SPLIT_DIGEST], capture_output=True, text=True,
                         check=True, timeout=300)
    assert out.stdout.split() == here


def test_digits_split_different_seed_different_split() -> None:
    seed_0 = _digits(seed=0).val_set
    seed_1 = _digits(seed=1).val_set
    assert not torch.equal(seed_0.tensors[0], seed_1.tensors[0])
    # ... but the same class proportions.
    assert Counter(_labels(seed_0).tolist()) == Counter(_labels(seed_1).tolist())


def test_digits_prepared_once_per_process() -> None:
    first, second = _digits(batch_size=8), _digits(batch_size=256)
    assert first.train_set is not None and second.train_set is not None
    assert first.train_set.tensors[0] is second.train_set.tensors[0]  # cached, not rebuilt


@pytest.mark.parametrize("on_device", [pytest.param("auto", id="tensors"),
                                       pytest.param(False, id="dataloader")])
def test_train_loader_shuffles_and_val_loader_does_not(on_device: bool | str) -> None:
    datamodule = _digits(batch_size=64, on_device=on_device)
    torch.manual_seed(0)
    train_a = torch.cat([y for _, y in datamodule.train_dataloader()])
    loader = datamodule.train_dataloader()
    if on_device == "auto":  # a new order per epoch, from the seed and the epoch
        loader.sampler.set_epoch(1)  # type: ignore[union-attr]
    train_b = torch.cat([y for _, y in loader])
    assert not torch.equal(train_a, train_b)
    assert sorted(train_a.tolist()) == sorted(train_b.tolist())
    val_a = torch.cat([y for _, y in datamodule.val_dataloader()])
    val_b = torch.cat([y for _, y in datamodule.val_dataloader()])
    assert torch.equal(val_a, val_b)
    assert torch.equal(val_a, _labels(datamodule.val_set))
    assert len(datamodule.train_dataloader()) == 23  # ceil(1437 / 64)


def test_loader_before_setup_is_an_error() -> None:
    with pytest.raises(RuntimeError, match="setup"):
        DigitsDataModule().train_dataloader()


def test_no_pin_memory_on_cpu_trainer() -> None:
    datamodule = DigitsDataModule(on_device=False)
    datamodule.trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False)
    datamodule.setup("fit")
    assert datamodule.train_dataloader().pin_memory is False  # type: ignore[union-attr]
    assert datamodule.val_dataloader().pin_memory is False  # type: ignore[union-attr]


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_pin_memory_on_cuda_trainer() -> None:
    datamodule = DigitsDataModule(on_device=False)
    datamodule.trainer = pl.Trainer(accelerator="cuda", devices=1, logger=False)
    datamodule.setup("fit")
    assert datamodule.train_dataloader().pin_memory is True  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("num_workers", "persistent"),
    [pytest.param(0, False, id="in-process"), pytest.param(2, True, id="workers")],
)
def test_persistent_workers_only_with_workers(num_workers: int, persistent: bool) -> None:
    loader = _digits(num_workers=num_workers, on_device=False).train_dataloader()
    assert isinstance(loader, DataLoader)
    assert loader.num_workers == num_workers
    assert loader.persistent_workers is persistent


# --- Fashion-MNIST (tiny real IDX files, parsed by torchvision) ---

def test_fashion_mnist_reads_idx_files(
    fashion_root: tuple[Path, dict[bool, tuple[np.ndarray, np.ndarray]]],
) -> None:
    root, data = fashion_root
    datamodule = build_datamodule("fashion_mnist", root=str(root), batch_size=4)
    datamodule.setup("fit")
    assert (len(datamodule.train_set), len(datamodule.val_set)) == (20, 10)

    images, labels = next(iter(datamodule.train_dataloader()))
    assert images.shape == (4, 1, 28, 28)
    assert images.dtype == torch.float32
    assert labels.dtype == torch.int64

    # Validation = the test split, in file order, ToTensor + Normalize((0.2860,), (0.3530,)).
    test_images, test_labels = data[False]
    images, labels = next(iter(datamodule.val_dataloader()))
    expected = (torch.from_numpy(test_images[:4]).float() / 255.0 - 0.2860) / 0.3530
    torch.testing.assert_close(images[:, 0], expected)
    assert labels.tolist() == test_labels[:4].tolist()


@pytest.mark.parametrize(
    "missing",
    [
        pytest.param(None, id="empty-root"),
        pytest.param("t10k-labels-idx1-ubyte", id="one-file-missing"),
    ],
)
def test_fashion_mnist_missing_files_name_the_root(
    fashion_root: tuple[Path, Any], tmp_path: Path, missing: str | None
) -> None:
    if missing is None:
        root = tmp_path / "empty"
    else:
        root = fashion_root[0]
        (root / "FashionMNIST" / "raw" / missing).unlink()
    with pytest.raises(ConfigError) as info:
        FashionMNISTDataModule(root=str(root))
    assert info.value.field == "data.root"
    assert info.value.message.startswith(f"no Fashion-MNIST files under '{root}'")
    assert f"{root}/FashionMNIST/raw/train-images-idx3-ubyte" in info.value.message
    assert "data.download: true" in info.value.message


def _cut(path: Path, keep: int) -> None:
    path.write_bytes(path.read_bytes()[:keep])


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        pytest.param(lambda raw: _cut(raw / "train-images-idx3-ubyte", 15000),
                     "FashionMNIST/raw/train-images-idx3-ubyte has 15000 bytes, but its header "
                     "says 20 images, 15696 bytes (a truncated copy?)", id="truncated-images"),
        pytest.param(lambda raw: _cut(raw / "t10k-labels-idx1-ubyte", 12),
                     "FashionMNIST/raw/t10k-labels-idx1-ubyte has 12 bytes, but its header says "
                     "10 labels, 18 bytes (a truncated copy?)", id="truncated-labels"),
        pytest.param(lambda raw: (raw / "train-labels-idx1-ubyte").write_bytes(b"<html>" * 9),
                     "FashionMNIST/raw/train-labels-idx1-ubyte is not an IDX file of labels (its "
                     "header is not one)", id="not-idx"),
        pytest.param(lambda raw: _cut(raw / "t10k-images-idx3-ubyte", 3),
                     "FashionMNIST/raw/t10k-images-idx3-ubyte is not an IDX file of images (its "
                     "header is not one)", id="shorter-than-a-header"),
        pytest.param(lambda raw: (raw / "t10k-labels-idx1-ubyte").write_bytes(
                         struct.pack(">II", 2049, 9) + bytes(9)),
                     "FashionMNIST/raw/t10k-images-idx3-ubyte holds 10 images, but "
                     "t10k-labels-idx1-ubyte 9 labels", id="fewer-labels"),
    ],
)
def test_fashion_mnist_files_torchvision_cannot_read_are_refused_when_built(
    fashion_root: tuple[Path, Any], damage: Any, words: str
) -> None:
    """Before, the module was built (the files are there) and every trial failed reading them
    (a ConfigError or torchvision's bare AssertionError): the config check said OK."""
    root = fashion_root[0]
    damage(root / "FashionMNIST" / "raw")
    with pytest.raises(ConfigError) as info:
        FashionMNISTDataModule(root=str(root))  # headers and sizes only: nothing loaded
    assert str(info.value) == (
        f"data.root: cannot read the Fashion-MNIST files under '{root}': {words}")


def test_fashion_mnist_download_must_be_bool(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        FashionMNISTDataModule(root=str(tmp_path), download="yes")  # type: ignore[arg-type]
    assert info.value.field == "data.download"
