"""In-memory tensor data: batches by indexing, the per-process cache, where the tensors go."""

from __future__ import annotations

import logging
import math
import os
import re
import subprocess
import sys
from collections.abc import Hashable, Iterator, Sequence
from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import Tensor
from torch.utils.data import DataLoader, DistributedSampler

from lightning_hpo.builtin.data import DigitsDataModule, FashionMNISTDataModule
from lightning_hpo.builtin.models import LeNet
from lightning_hpo.builtin.tensor_data import TensorBatches, TensorDataModule, clear_data_cache
from lightning_hpo.errors import ConfigError


@pytest.fixture(autouse=True)
def _empty_cache() -> Iterator[None]:
    clear_data_cache()
    yield
    clear_data_cache()


# --- TensorBatches: the order rule is DistributedSampler's, example for example ---


@pytest.mark.parametrize("n", [1, 7, 64, 101])
@pytest.mark.parametrize("world_size", [1, 2, 3])
@pytest.mark.parametrize("shuffle", [True, False], ids=["shuffle", "in-order"])
@pytest.mark.parametrize("epoch", [0, 5])
def test_each_rank_takes_what_distributed_sampler_gives_it(
    n: int, world_size: int, shuffle: bool, epoch: int
) -> None:
    examples = torch.arange(n)
    for rank in range(world_size):
        batches = TensorBatches((examples,), batch_size=4, shuffle=shuffle, seed=11, rank=rank,
                                world_size=world_size)
        batches.sampler.set_epoch(epoch)
        reference = DistributedSampler(examples, num_replicas=world_size, rank=rank,
                                       shuffle=shuffle, seed=11)  # type: ignore[arg-type]
        reference.set_epoch(epoch)
        got = [x for (batch,) in batches for x in batch.tolist()]
        assert got == list(reference)
        assert len(batches) == math.ceil(len(reference) / 4)
        assert [len(b) for (b,) in batches][:-1] == [4] * (len(batches) - 1)


def test_batches_keep_the_tensors_together_and_cover_every_example() -> None:
    x = torch.arange(50) * 10
    y = torch.arange(50)
    batches = TensorBatches((x, y), batch_size=8, shuffle=True, seed=3)
    seen = []
    for bx, by in batches:
        assert torch.equal(bx, by * 10)
        seen += by.tolist()
    assert sorted(seen) == list(range(50)) and seen != list(range(50))


def test_the_order_depends_on_seed_and_epoch_only() -> None:
    def order(seed: int, epoch: int) -> list[int]:
        batches = TensorBatches((torch.arange(30),), batch_size=30, shuffle=True, seed=seed)
        batches.sampler.set_epoch(epoch)
        torch.manual_seed(epoch * 1000 + 1)  # the global RNG plays no part
        return next(iter(batches))[0].tolist()

    assert order(1, 2) == order(1, 2)
    assert order(1, 2) != order(1, 3)
    assert order(1, 2) != order(2, 2)


def test_in_order_batches_are_views() -> None:
    x = torch.arange(10.0)
    (first,) = next(iter(TensorBatches((x,), batch_size=4)))
    assert first.data_ptr() == x.data_ptr()  # no copy when nothing is reordered


def test_tensors_of_different_lengths_are_refused() -> None:
    with pytest.raises(ValueError, match="same first dimension"):
        TensorBatches((torch.zeros(3), torch.zeros(4)), batch_size=2)


# --- TensorDataModule: cache, placement, the path taken ---


class _Counting(TensorDataModule):
    """A user's own module: counts how often its data is loaded."""

    loads = 0

    def __init__(self, batch_size: int = 4, size: int = 10, on_device: bool | str = "auto",
                 num_workers: int = 0) -> None:
        super().__init__(batch_size, num_workers, on_device)
        self.size = size

    def data_key(self) -> Hashable:
        return ("counting", self.size)

    def load_tensors(self) -> tuple[Sequence[Tensor], Sequence[Tensor]]:
        type(self).loads += 1
        x = torch.arange(float(self.size)).unsqueeze(1)
        return (x, x.squeeze(1).long()), (x[:3], x[:3, 0].long())


def _set_up(module: TensorDataModule) -> TensorDataModule:
    module.setup("fit")
    return module


def test_data_is_loaded_once_per_key_whatever_the_batch_size() -> None:
    _Counting.loads = 0
    first = _set_up(_Counting(batch_size=2))
    second = _set_up(_Counting(batch_size=5))
    assert _Counting.loads == 1
    assert first.train_set.tensors[0] is second.train_set.tensors[0]  # type: ignore[union-attr]
    assert "tensors on cpu" in second.data_path and "reused" in second.data_path
    assert "prepared in" in first.data_path
    _set_up(_Counting(size=11))
    assert _Counting.loads == 2


def test_the_cache_keeps_the_two_most_recent_keys() -> None:
    _Counting.loads = 0
    for size in (10, 11, 10, 12, 10, 11):  # 11 is evicted by 12, then loaded again
        _set_up(_Counting(size=size))
    assert _Counting.loads == 4


def test_prefetched_data_is_loaded_once_and_its_first_setup_says_when() -> None:
    """A worker prefetches while it waits for the study: the first trial's setup loads
    nothing and says the data was prepared before it; the next one says reused."""
    _Counting.loads = 0
    _Counting(batch_size=3).prefetch()
    _Counting(batch_size=9).prefetch()  # once per process and key
    assert _Counting.loads == 1
    first = _set_up(_Counting(batch_size=2))
    second = _set_up(_Counting(batch_size=5))
    assert _Counting.loads == 1
    assert re.fullmatch(r"_Counting: tensors on cpu \(0\.0 MB, prepared in \d+\.\d\d s, before "
                        r"the first trial\)", first.data_path), first.data_path
    assert second.data_path == "_Counting: tensors on cpu (0.0 MB, reused)"


def test_the_path_taken_is_logged(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="lightning_hpo.builtin.tensor_data"):
        _set_up(_Counting(on_device=False, num_workers=0))
    assert caplog.messages == [
        "_Counting: DataLoader over host tensors, 0 worker process(es) (data.on_device is false)"
    ]


@pytest.mark.parametrize("on_device", ["auto", True])
def test_on_a_cpu_trainer_batches_are_tensor_views(on_device: bool | str) -> None:
    module = _Counting(batch_size=4, on_device=on_device)
    module.trainer = pl.Trainer(accelerator="cpu", devices=1, logger=False)
    module.setup("fit")
    loader = module.train_dataloader()
    assert isinstance(loader, TensorBatches)
    assert sorted(int(v) for _, y in loader for v in y) == list(range(10))
    assert isinstance(module.val_dataloader(), TensorBatches)


def test_on_device_false_gives_a_dataloader_over_the_same_tensors() -> None:
    module = _set_up(_Counting(batch_size=4, on_device=False))
    loader = module.train_dataloader()
    assert isinstance(loader, DataLoader)
    assert sorted(int(v) for _, y in loader for v in y) == list(range(10))


@pytest.mark.parametrize("bad", ["yes", 1, None, "cuda"])
def test_a_bad_on_device_names_the_field(bad: Any) -> None:
    with pytest.raises(ConfigError) as info:
        _Counting(on_device=bad)
    assert info.value.field == "data.on_device"
    assert info.value.message == f"is {bad!r}; allowed: auto, true, false"


def test_a_module_without_the_two_methods_says_which_is_missing() -> None:
    class Half(TensorDataModule):
        def data_key(self) -> Hashable:
            return "half"

    with pytest.raises(NotImplementedError, match="Half must define load_tensors"):
        Half(batch_size=2).setup("fit")


_X = torch.zeros(4, 2)


@pytest.mark.parametrize(
    ("returned", "message"),
    [
        ((_X, _X), "the training split must be a non-empty tuple of tensors such as (images, "
                   "labels), got Tensor"),  # one split's tensors, not two splits
        (((_X, torch.zeros(3)), (_X,)), "the training tensors must have one first dimension of "
                                        "at least 1 example, got [4, 3]"),
        (((_X,), (torch.zeros(0, 2),)), "the validation tensors must have one first dimension "
                                        "of at least 1 example, got [0]"),
        (((_X,), ()), "the validation split must be a non-empty tuple of tensors such as "
                      "(images, labels), got []"),
        (((_X,), ([1, 2],)), "the validation split must be a non-empty tuple of tensors such "
                             "as (images, labels), got ['list']"),
        ((_X,), "must return (training tensors, validation tensors), got tuple"),
        (None, "must return (training tensors, validation tensors), got NoneType"),
    ],
    ids=["one-split", "lengths", "empty", "no-tensors", "not-tensors", "one-element", "none"],
)
def test_what_load_tensors_returns_is_checked_and_named(returned: Any, message: str) -> None:
    class Own(TensorDataModule):
        def data_key(self) -> Hashable:
            return ("own", message)

        def load_tensors(self) -> Any:
            return returned

    with pytest.raises(ValueError) as info:
        Own(batch_size=2).setup("fit")
    separator = " " if message.startswith("must") else ": "
    assert str(info.value) == f"Own.load_tensors(){separator}{message}"


def test_an_unhashable_data_key_is_named() -> None:
    class Listed(_Counting):
        def data_key(self) -> Any:
            return ["counting", self.size]

    with pytest.raises(TypeError, match=r"Listed.data_key\(\) must return something hashable "
                                        r"\(a tuple, not a list\), got \['counting', 10\]"):
        Listed().setup("fit")


def test_fashion_mnist_new_files_under_the_same_root_are_new_data(
    fashion_root: tuple[Path, dict[bool, tuple[np.ndarray, np.ndarray]]],
) -> None:
    root, _ = fashion_root
    first = FashionMNISTDataModule(root=str(root), batch_size=4)
    key = first.data_key()
    assert FashionMNISTDataModule(root=str(root), batch_size=8).data_key() == key
    labels = root / "FashionMNIST" / "raw" / "t10k-labels-idx1-ubyte"
    stat = labels.stat()
    os.utime(labels, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert FashionMNISTDataModule(root=str(root), batch_size=4).data_key() != key


def test_fashion_mnist_tensors_match_torchvision_transforms(
    fashion_root: tuple[Path, dict[bool, tuple[np.ndarray, np.ndarray]]],
) -> None:
    """The tensors equal what ToTensor + Normalize give image by image through PIL."""
    from torchvision import datasets, transforms

    root, _ = fashion_root
    module = _set_up(FashionMNISTDataModule(root=str(root), batch_size=4))
    transform = transforms.Compose(
        [transforms.ToTensor(), transforms.Normalize((0.2860,), (0.3530,))]
    )
    for train, dataset in ((True, module.train_set), (False, module.val_set)):
        reference = datasets.FashionMNIST(str(root), train=train, transform=transform)
        images, labels = dataset.tensors  # type: ignore[union-attr]
        for index in range(len(reference)):
            image, label = reference[index]
            torch.testing.assert_close(images[index], image)
            assert int(labels[index]) == label


# --- through Lightning ---


def _fit(datamodule: TensorDataModule, lr: float, epochs: int = 1) -> pl.Trainer:
    pl.seed_everything(0, verbose=False)
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=epochs, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, num_sanity_val_steps=0)
    trainer.fit(LeNet(lr=lr), datamodule=datamodule)
    return trainer


def test_logged_metrics_are_the_means_over_every_example() -> None:
    """With a learning rate too small to move the weights, the epoch's train loss is the mean
    loss over the training set, and the validation metrics are those of the whole set."""
    datamodule = DigitsDataModule(batch_size=100)  # 1,437 = 14 x 100 + 37: unequal batches
    trainer = _fit(datamodule, lr=1e-30)
    model = trainer.lightning_module
    model.eval()
    with torch.no_grad():
        x, y = datamodule.train_set.tensors  # type: ignore[union-attr]
        train_loss = F.cross_entropy(model(x), y)
        x, y = datamodule.val_set.tensors  # type: ignore[union-attr]
        logits = model(x)
    metrics = trainer.callback_metrics
    torch.testing.assert_close(metrics["train_loss"], train_loss, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(metrics["validation_loss"], F.cross_entropy(logits, y),
                               rtol=1e-5, atol=1e-6)
    assert float(metrics["validation_error"]) == pytest.approx(
        float((logits.argmax(1) != y).float().mean()), abs=1e-7
    )


def test_tensor_path_and_dataloader_path_learn_alike() -> None:
    errors = {}
    for on_device in ("auto", False):
        trainer = _fit(DigitsDataModule(batch_size=64, on_device=on_device), lr=0.1, epochs=3)
        errors[on_device] = float(trainer.callback_metrics["validation_error"])
    assert errors["auto"] < 0.15 and errors[False] < 0.15
    assert abs(errors["auto"] - errors[False]) < 0.05


def test_an_epoch_sees_the_batches_it_would_see_after_a_resume() -> None:
    """The order of epoch e depends on the seed and e, not on the epochs this process ran."""
    def epoch_labels(epochs_run_before: int) -> list[int]:
        pl.seed_everything(5, verbose=False)
        module = _set_up(_Counting(batch_size=3))
        loader = module.train_dataloader()
        for epoch in range(epochs_run_before):
            loader.sampler.set_epoch(epoch)  # type: ignore[union-attr]
            list(loader)
        loader.sampler.set_epoch(2)  # type: ignore[union-attr]
        return [int(v) for _, y in loader for v in y]

    assert epoch_labels(0) == epoch_labels(2)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_on_a_cuda_trainer_the_tensors_stay_on_the_gpu() -> None:
    module = DigitsDataModule(batch_size=64)
    module.trainer = pl.Trainer(accelerator="cuda", devices=1, logger=False)
    module.setup("fit")
    x, _ = next(iter(module.train_dataloader()))
    assert x.is_cuda and "tensors on cuda:0" in module.data_path
    again = DigitsDataModule(batch_size=32)
    again.trainer = module.trainer
    again.setup("fit")
    assert "reused" in again.data_path


@pytest.mark.slow
def test_the_own_datamodule_example_prepares_once_and_reuses(tmp_path: Path) -> None:
    example = Path(__file__).resolve().parents[3] / "examples" / "own_datamodule.py"
    result = subprocess.run([sys.executable, str(example)], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    lines = [line for line in result.stdout.splitlines() if line.startswith("trial ")]
    assert len(lines) == 4, result.stdout
    assert lines[0].startswith("trial 0: Blobs: tensors on cpu (") and "prepared in" in lines[0]
    assert all("Blobs: tensors on cpu (" in line and "reused" in line for line in lines[1:])


def test_a_truncated_fashion_mnist_file_names_the_root(
    fashion_root: tuple[Path, dict[bool, tuple[np.ndarray, np.ndarray]]],
) -> None:
    root, _ = fashion_root
    images = root / "FashionMNIST" / "raw" / "train-images-idx3-ubyte"
    whole = images.read_bytes()
    images.write_bytes(whole[:5000])
    with pytest.raises(ConfigError) as info:  # when built (the config check builds it)
        FashionMNISTDataModule(root=str(root), batch_size=4)
    assert info.value.field == "data.root"
    assert info.value.message.startswith(f"cannot read the Fashion-MNIST files under '{root}': "
                                         "FashionMNIST/raw/train-images-idx3-ubyte has 5000 bytes")
    # Cut after the module was built: setup (torchvision reading it) says so.
    images.write_bytes(whole)
    datamodule = FashionMNISTDataModule(root=str(root), batch_size=4)
    images.write_bytes(whole[:5000])
    with pytest.raises(ConfigError) as info:
        datamodule.setup("fit")
    assert info.value.field == "data.root"
    assert info.value.message.startswith(
        f"cannot read the Fashion-MNIST files under '{root}': FashionMNIST/raw/"
        "train-images-idx3-ubyte has 5000 bytes")
