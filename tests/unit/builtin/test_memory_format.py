"""Channels-last training: the rule, optimizer state re-laid to its parameters, and fits that
train the same values in either layout (a resume across layouts included)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from torch import nn

from lightning_hpo.builtin._memory_format import match_state_layouts, wants_channels_last
from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import DropoutMLP, ImageClassifier, LeNet
from lightning_hpo.errors import ConfigError

CONV = nn.Sequential(nn.Conv2d(1, 2, 3), nn.Flatten(), nn.Linear(2, 2))
DENSE = nn.Sequential(nn.Flatten(), nn.Linear(4, 2))


@pytest.mark.parametrize(
    ("setting", "device", "net", "expected"),
    [
        (True, "cpu", CONV, True), (True, "cuda", CONV, True), (True, "cpu", DENSE, True),
        (False, "cpu", CONV, False), (False, "cuda", CONV, False), (False, "cpu", DENSE, False),
        ("auto", "cpu", CONV, True), ("auto", "cuda", CONV, False), ("auto", "mps", CONV, False),
        ("auto", "cpu", DENSE, False), ("auto", "cuda", DENSE, False),
    ],
)
def test_the_rule(setting: Any, device: str, net: nn.Module, expected: bool) -> None:
    assert wants_channels_last(setting, device, net) is expected


def _sgd(param_layout: torch.memory_format, buffer_layout: torch.memory_format,
         fused: bool) -> tuple[torch.optim.SGD, nn.Parameter, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    weight = nn.Parameter(torch.randn(4, 3, 5, 5, generator=generator).contiguous(
        memory_format=param_layout))
    sgd = torch.optim.SGD([weight], lr=0.1, momentum=0.9, fused=fused, foreach=False if not fused
                          else None)
    buffer = torch.randn(4, 3, 5, 5, generator=generator)
    sgd.state[weight]["momentum_buffer"] = buffer.contiguous(memory_format=buffer_layout)
    weight.grad = torch.randn(4, 3, 5, 5, generator=generator).contiguous(
        memory_format=param_layout)
    return sgd, weight, weight.detach() - 0.1 * (0.9 * buffer + weight.grad)


LAYOUTS = [(torch.channels_last, torch.contiguous_format),
           (torch.contiguous_format, torch.channels_last)]


@pytest.mark.parametrize(("param_layout", "buffer_layout"), LAYOUTS)
def test_a_re_laid_buffer_keeps_its_values_and_the_fused_step_is_right(
        param_layout: torch.memory_format, buffer_layout: torch.memory_format) -> None:
    sgd, weight, expected = _sgd(param_layout, buffer_layout, fused=True)
    values = sgd.state[weight]["momentum_buffer"].clone()
    assert match_state_layouts([sgd]) == 1
    buffer = sgd.state[weight]["momentum_buffer"]
    assert buffer.stride() == weight.stride() and torch.equal(buffer, values)
    assert match_state_layouts([sgd]) == 0  # laid out once
    sgd.step()
    torch.testing.assert_close(weight.detach(), expected)


@pytest.mark.parametrize(("param_layout", "buffer_layout"), LAYOUTS)
def test_without_it_the_fused_step_misreads_the_buffer(
        param_layout: torch.memory_format, buffer_layout: torch.memory_format) -> None:
    """Why :func:`match_state_layouts` exists (torch 2.14): if this starts passing, torch has
    fixed it, and the re-laying is only a copy."""
    sgd, weight, expected = _sgd(param_layout, buffer_layout, fused=True)
    sgd.step()
    assert not torch.allclose(weight.detach(), expected, atol=1e-3)


def test_only_tensors_shaped_like_their_parameter_are_re_laid() -> None:
    weight = nn.Parameter(torch.zeros(2, 3, 4, 4).to(memory_format=torch.channels_last))
    adam = torch.optim.Adam([weight])
    laid = torch.ones(2, 3, 4, 4).to(memory_format=torch.channels_last)
    adam.state[weight] = {"step": torch.tensor(3.0), "exp_avg": torch.ones(2, 3, 4, 4),
                          "exp_avg_sq": laid, "other": torch.ones(6)}
    assert match_state_layouts([adam]) == 1
    assert adam.state[weight]["exp_avg"].stride() == weight.stride()
    assert adam.state[weight]["step"].shape == () and adam.state[weight]["other"].shape == (6,)
    assert match_state_layouts([torch.optim.SGD([nn.Parameter(torch.zeros(2))], lr=0.1)]) == 0


def test_a_bad_setting_names_the_field() -> None:
    with pytest.raises(ConfigError, match=r"^model.channels_last: is 'yes', but must be true, "
                                          r"false or auto$"):
        LeNet(channels_last="yes")  # type: ignore[arg-type]


class _Layouts(pl.Callback):
    """Whether the first convolution's weight was channels-last at each training batch."""

    def __init__(self) -> None:
        self.seen: list[bool] = []

    def on_train_batch_start(self, trainer: pl.Trainer, module: pl.LightningModule,
                             batch: Any, batch_idx: int) -> None:
        weights = [p for p in module.parameters() if p.dim() == 4]
        self.seen.append(bool(weights) and not weights[-1].is_contiguous())


def _fit(model: ImageClassifier, epochs: int, ckpt_path: str | None = None,
         save: Path | None = None) -> _Layouts:
    layouts = _Layouts()
    trainer = pl.Trainer(accelerator="cpu", devices=1, max_epochs=epochs, logger=False,
                         enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[layouts], limit_train_batches=4,
                         limit_val_batches=2)
    trainer.fit(model, datamodule=DigitsDataModule(batch_size=64), ckpt_path=ckpt_path)
    if save is not None:
        trainer.save_checkpoint(save)
    return layouts


def _lenet(channels_last: Any) -> LeNet:
    pl.seed_everything(0, verbose=False)
    return LeNet(lr=0.05, momentum=0.9, channels_last=channels_last)


@pytest.mark.parametrize(("setting", "laid"), [(True, True), ("auto", True), (False, False)])
def test_a_fit_trains_in_the_layout_asked_for_and_leaves_the_module_as_built(
        setting: Any, laid: bool) -> None:
    model = _lenet(setting)
    layouts = _fit(model, 1)
    assert layouts.seen == [laid] * 4
    assert all(p.is_contiguous() for p in model.parameters())


def test_a_dense_network_is_left_alone_by_auto() -> None:
    model = DropoutMLP(channels_last="auto")
    assert _fit(model, 1).seen == [False] * 4


def test_the_same_values_in_either_layout() -> None:
    plain, laid = _lenet(False), _lenet(True)
    _fit(plain, 2), _fit(laid, 2)
    for a, b in zip(plain.parameters(), laid.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)


@pytest.mark.parametrize(("first", "then"), [(False, True), (True, False)])
def test_a_resume_in_the_other_layout_trains_as_one_fit(tmp_path: Path, first: bool,
                                                       then: bool) -> None:
    """A trial paused in one layout (say on a CPU) and resumed in the other (on a GPU, where
    ``auto`` is off): the checkpoint's momentum buffers are re-laid before the first step."""
    reference = _lenet(False)
    _fit(reference, 2)
    _fit(_lenet(first), 1, save=tmp_path / "epoch1.ckpt")
    resumed = _lenet(then)
    _fit(resumed, 2, ckpt_path=str(tmp_path / "epoch1.ckpt"))
    for a, b in zip(reference.parameters(), resumed.parameters(), strict=True):
        torch.testing.assert_close(a, b, atol=1e-4, rtol=1e-4)
