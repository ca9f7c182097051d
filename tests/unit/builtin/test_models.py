"""Models: the registry, hyperparameter checks, shapes, and that training really learns."""

from __future__ import annotations

import inspect
from typing import Any

import lightning.pytorch as pl
import pytest
import torch
from lightning.pytorch.callbacks import EarlyStopping
from torch import nn

from lightning_hpo.builtin.data import DigitsDataModule
from lightning_hpo.builtin.models import (
    MODELS,
    DropoutMLP,
    ImageClassifier,
    LeNet,
    build_model,
    model_class,
    model_hyperparameters,
)
from lightning_hpo.errors import ConfigError


def _fit(model: pl.LightningModule, max_epochs: int, **trainer_kwargs: Any) -> pl.Trainer:
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=max_epochs,
        enable_checkpointing=False,
        logger=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **trainer_kwargs,
    )
    trainer.fit(model, datamodule=DigitsDataModule(batch_size=64))
    return trainer


# --- registry ---


def test_registry_names() -> None:
    assert {"lenet": LeNet, "dropout_mlp": DropoutMLP} == MODELS


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        pytest.param("lenet", LeNet, id="lenet"),
        pytest.param("dropout_mlp", DropoutMLP, id="dropout_mlp"),
        pytest.param("lightning_hpo.builtin.models:LeNet", LeNet, id="import-path"),
    ],
)
def test_build_model_by_name_or_path(name: str, cls: type) -> None:
    model = build_model(name, lr=0.3)
    assert type(model) is cls
    assert model.hparams["lr"] == 0.3


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        pytest.param("resnet", "unknown model 'resnet'; allowed: lenet, dropout_mlp", id="unknown"),
        pytest.param("", "must be a non-empty string", id="empty"),
        pytest.param("no_such.mod:Net", "cannot import module 'no_such.mod'", id="no-module"),
        pytest.param("lightning_hpo.builtin.models:Nope", "has no attribute 'Nope'",
                     id="no-attribute"),
        pytest.param("torch.nn:Linear", "is not a LightningModule subclass", id="not-lightning"),
        pytest.param(
            "lightning_hpo.builtin.data:DigitsDataModule", "not a LightningModule", id="datamodule"
        ),
    ],
)
def test_bad_model_name_names_the_field(name: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match="^model.name: ") as info:
        build_model(name)
    assert info.value.field == "model.name"
    assert fragment in info.value.message


def test_unknown_hyperparameter_lists_allowed() -> None:
    with pytest.raises(ConfigError) as info:
        build_model("lenet", learning_rate=0.1)
    assert info.value.field == "model.learning_rate"
    assert info.value.message.endswith(
        "allowed: lr, momentum, weight_decay, num_classes, activation, width, measure_latency, "
        "cuda_graphs, channels_last"
    )


@pytest.mark.parametrize(
    ("name", "hparams", "field"),
    [
        pytest.param("lenet", {"lr": 0.0}, "model.lr", id="lr-zero"),
        pytest.param("lenet", {"lr": -1}, "model.lr", id="lr-negative"),
        pytest.param("lenet", {"lr": "0.1"}, "model.lr", id="lr-string"),
        pytest.param("lenet", {"lr": float("nan")}, "model.lr", id="lr-nan"),
        pytest.param("lenet", {"momentum": 1.0}, "model.momentum", id="momentum-one"),
        pytest.param("lenet", {"momentum": -0.1}, "model.momentum", id="momentum-negative"),
        pytest.param("lenet", {"weight_decay": -1e-4}, "model.weight_decay", id="wd-negative"),
        pytest.param("lenet", {"num_classes": 1}, "model.num_classes", id="classes-one"),
        pytest.param("lenet", {"num_classes": 10.0}, "model.num_classes", id="classes-float"),
        pytest.param("lenet", {"num_classes": True}, "model.num_classes", id="classes-bool"),
        pytest.param("lenet", {"activation": "tanh"}, "model.activation", id="activation"),
        pytest.param("dropout_mlp", {"dropout_1": 1.0}, "model.dropout_1", id="dropout-one"),
        pytest.param("dropout_mlp", {"dropout_2": -0.5}, "model.dropout_2", id="dropout-neg"),
        pytest.param("dropout_mlp", {"num_hiddens_1": 0}, "model.num_hiddens_1", id="width-0"),
        pytest.param("dropout_mlp", {"num_hiddens_2": 2.5}, "model.num_hiddens_2", id="width-2.5"),
        pytest.param("dropout_mlp", {"num_inputs": 0}, "model.num_inputs", id="inputs-0"),
    ],
)
def test_bad_hyperparameter_value_names_the_field(
    name: str, hparams: dict[str, Any], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_model(name, **hparams)
    assert info.value.field == field
    assert "must be" in info.value.message or "allowed:" in info.value.message
    assert isinstance(info.value, ValueError)


def test_activation_error_lists_choices() -> None:
    with pytest.raises(ConfigError, match=r"^model.activation: is 'tanh'; allowed: relu, sigmoid$"):
        LeNet(activation="tanh")  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        pytest.param(
            "lenet",
            {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "num_classes": 10,
             "activation": "relu", "width": 1.0, "measure_latency": False,
             "cuda_graphs": False, "channels_last": False},
            id="lenet",
        ),
        pytest.param(
            "dropout_mlp",
            {"lr": 0.1, "momentum": 0.0, "weight_decay": 0.0, "num_classes": 10,
             "num_inputs": 784, "num_hiddens_1": 256, "num_hiddens_2": 256, "dropout_1": 0.5,
             "dropout_2": 0.5, "measure_latency": False, "cuda_graphs": False,
             "channels_last": False},
            id="dropout_mlp",
        ),
    ],
)  # fmt: skip
def test_model_hyperparameters_are_constructor_defaults(
    name: str, expected: dict[str, Any]
) -> None:
    assert model_hyperparameters(name) == expected
    # ... which are exactly what a default model records.
    assert dict(build_model(name).hparams) == expected


@pytest.mark.parametrize(
    ("name", "cls"),
    [
        pytest.param("lenet", LeNet, id="name"),
        pytest.param("lightning_hpo.builtin.models:DropoutMLP", DropoutMLP, id="import-path"),
    ],
)
def test_model_class_resolves_without_building(name: str, cls: type) -> None:
    assert model_class(name) is cls


def test_model_hyperparameters_unknown_name() -> None:
    with pytest.raises(ConfigError, match="^model.name: unknown model 'x'"):
        model_hyperparameters("x")


def test_save_hyperparameters_records_given_values() -> None:
    model = DropoutMLP(lr=0.02, momentum=0.9, num_hiddens_1=32, dropout_2=0.1)
    assert model.hparams["lr"] == 0.02
    assert model.hparams["momentum"] == 0.9
    assert model.hparams["num_hiddens_1"] == 32
    assert model.hparams["dropout_2"] == 0.1
    assert set(model.hparams) == set(inspect.signature(DropoutMLP).parameters)


def test_optimizer_is_sgd_with_hyperparameters() -> None:
    optimizer = LeNet(lr=0.05, momentum=0.5, weight_decay=1e-4).configure_optimizers()
    assert isinstance(optimizer, torch.optim.SGD)
    group = optimizer.param_groups[0]
    assert (group["lr"], group["momentum"], group["weight_decay"]) == (0.05, 0.5, 1e-4)


def test_logged_metrics_declared() -> None:
    assert ImageClassifier.LOGGED_METRICS == ("train_loss", "validation_loss", "validation_error",
                                              "parameters", "latency_ms")
    assert ImageClassifier.OPTIONAL_METRICS == {"latency_ms": "measure_latency"}
    assert LeNet.LOGGED_METRICS is DropoutMLP.LOGGED_METRICS


# --- networks ---


@pytest.mark.parametrize(
    ("name", "hparams"),
    [
        pytest.param("lenet", {}, id="lenet-relu"),
        pytest.param("lenet", {"activation": "sigmoid", "num_classes": 3}, id="lenet-sigmoid-3"),
        pytest.param("dropout_mlp", {}, id="mlp"),
        pytest.param("dropout_mlp", {"num_hiddens_1": 8, "num_classes": 5}, id="mlp-small"),
    ],
)
def test_output_shape(name: str, hparams: dict[str, Any]) -> None:
    logits = build_model(name, **hparams)(torch.randn(7, 1, 28, 28))
    assert logits.shape == (7, hparams.get("num_classes", 10))
    assert torch.isfinite(logits).all()


@pytest.mark.parametrize(
    ("activation", "act", "pool"),
    [
        pytest.param("relu", nn.ReLU, nn.MaxPool2d, id="relu-max"),
        pytest.param("sigmoid", nn.Sigmoid, nn.AvgPool2d, id="sigmoid-avg"),
    ],
)
def test_lenet_layers(activation: str, act: type, pool: type) -> None:
    net = LeNet(activation=activation).net  # type: ignore[arg-type]
    kinds = [type(layer) for layer in net]
    assert kinds.count(act) == 4
    assert kinds.count(pool) == 2
    convs = [layer for layer in net if isinstance(layer, nn.Conv2d)]
    assert [(c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (6, (5, 5), (2, 2)),
        (16, (5, 5), (0, 0)),
    ]
    linears = [layer for layer in net if isinstance(layer, nn.Linear)]
    assert [(lin.in_features, lin.out_features) for lin in linears] == [
        (400, 120),
        (120, 84),
        (84, 10),
    ]


def test_xavier_init_bounds_and_zero_bias() -> None:
    torch.manual_seed(0)
    for layer in LeNet().net:
        if isinstance(layer, nn.Conv2d | nn.Linear):
            receptive_field = layer.weight[0, 0].numel()  # 25 for a 5x5 conv, 1 for dense
            fan_in = layer.weight.shape[1] * receptive_field
            fan_out = layer.weight.shape[0] * receptive_field
            bound = (6.0 / (fan_in + fan_out)) ** 0.5
            assert layer.weight.abs().max() <= bound
            assert layer.weight.abs().max() > 0.8 * bound  # uniform, so close to the bound
            assert torch.count_nonzero(layer.bias) == 0


def test_dropout_active_only_in_training() -> None:
    model = DropoutMLP(dropout_1=0.5, dropout_2=0.5)
    x = torch.randn(4, 1, 28, 28)
    model.eval()
    assert torch.equal(model(x), model(x))
    model.train()
    torch.manual_seed(0)
    assert not torch.equal(model(x), model(x))


# --- learning (real training on the offline digits) ---


def test_lenet_learns_digits_within_10_epochs() -> None:
    pl.seed_everything(0, verbose=False)
    model = LeNet(lr=0.1, activation="relu")
    target = EarlyStopping("validation_error", mode="min", patience=10, stopping_threshold=0.15)
    trainer = _fit(model, max_epochs=10, callbacks=[target])
    metrics = trainer.callback_metrics
    always = set(ImageClassifier.LOGGED_METRICS) - set(ImageClassifier.OPTIONAL_METRICS)
    assert always <= set(metrics)
    assert "latency_ms" not in metrics  # only with measure_latency=True
    assert float(metrics["parameters"]) == 61706
    assert float(metrics["validation_error"]) < 0.15
    assert trainer.current_epoch <= 10

    # validation_error is exactly 1 - accuracy over the whole validation set.
    datamodule = trainer.datamodule
    model.eval()
    with torch.no_grad():
        wrong = total = 0
        for x, y in datamodule.val_dataloader():
            wrong += int((model(x).argmax(dim=1) != y).sum())
            total += len(y)
    assert total == 360
    assert float(metrics["validation_error"]) == pytest.approx(wrong / total, abs=1e-6)


def test_dropout_mlp_learns_digits_within_10_epochs() -> None:
    pl.seed_everything(0, verbose=False)
    target = EarlyStopping("validation_error", mode="min", patience=10, stopping_threshold=0.3)
    trainer = _fit(DropoutMLP(lr=0.1), max_epochs=10, callbacks=[target])
    assert float(trainer.callback_metrics["validation_error"]) < 0.3


@pytest.mark.parametrize(("width", "parameters"), [(0.25, 4157), (0.5, 15738), (1.0, 61706)])
def test_lenet_width_scales_every_layer(width: float, parameters: int) -> None:
    model = LeNet(width=width)
    assert sum(p.numel() for p in model.parameters()) == parameters
    assert model(torch.zeros(2, 1, 28, 28)).shape == (2, 10)


@pytest.mark.parametrize(("kwargs", "field"), [
    ({"width": 0}, "model.width"), ({"measure_latency": "yes"}, "model.measure_latency")])
def test_bad_width_or_latency_flag_names_the_field(kwargs: dict[str, Any], field: str) -> None:
    with pytest.raises(ConfigError) as info:
        build_model("lenet", **kwargs)
    assert info.value.field == field


def test_measure_latency_logs_milliseconds_per_example_and_the_parameter_count() -> None:
    pl.seed_everything(0, verbose=False)
    model = LeNet(lr=0.1, width=0.5, measure_latency=True)
    trainer = _fit(model, max_epochs=1)
    metrics = trainer.callback_metrics
    assert 0.0 < float(metrics["latency_ms"]) < 1000.0
    assert float(metrics["parameters"]) == 15738
