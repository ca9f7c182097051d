"""Image classifiers to tune: ``LeNet`` and ``DropoutMLP``, and the registry the config uses.

Both are :class:`ImageClassifier` subclasses, which holds the one training/validation logic:
plain SGD (the fused kernel where the device has one), cross-entropy, and three logged metrics
(:attr:`ImageClassifier.LOGGED_METRICS`): ``train_loss`` and ``validation_loss`` (mean loss per
example) and ``validation_error`` (share of misclassified validation examples), each over all
DDP ranks. They are summed on the device during the epoch and logged once per epoch after one
all-reduce, with the values ``self.log(..., on_epoch=True, sync_dist=True)`` would give: a
per-step ``self.log`` costs host time that is a small network's whole step on a GPU.

``cuda_graphs`` replays the training step's forward, loss and backward from a CUDA graph on one
CUDA device at 32-bit precision (:mod:`lightning_hpo.builtin._cuda_graph`); ``channels_last``
trains in the channels-last layout, which oneDNN's CPU convolutions are faster on
(:mod:`lightning_hpo.builtin._memory_format`). Both default to ``False`` in the classes, since a
user's callback or hook may change the model or ``view`` an output where these would not hold;
the launcher gives its built-in models ``"auto"``.

Every hyperparameter is checked in ``__init__``; a bad one raises
:class:`~lightning_hpo.errors.ConfigError` naming ``model.<name>``. Example::

    >>> model = build_model("lenet", lr=0.05)
    >>> model.hparams.lr, model(torch.zeros(2, 1, 28, 28)).shape
    (0.05, torch.Size([2, 10]))
    >>> sorted(model_hyperparameters("dropout_mlp"))[:3]
    ['channels_last', 'cuda_graphs', 'dropout_1']
"""

from __future__ import annotations

import logging
import time
from typing import Any, Literal

import torch
import torch.nn.functional as F
from lightning.pytorch import LightningModule
from torch import Tensor, nn

from lightning_hpo._registry import build, defaults, resolve_class
from lightning_hpo.builtin._cuda_graph import StepGraph, say_off_once, trainer_blockers
from lightning_hpo.builtin._memory_format import match_state_layouts, wants_channels_last
from lightning_hpo.errors import ConfigError, field_choice, field_float, field_int

__all__ = [
    "MODELS",
    "DropoutMLP",
    "ImageClassifier",
    "LeNet",
    "build_model",
    "model_class",
    "model_hyperparameters",
]

log = logging.getLogger(__name__)

_ACTIVATIONS: tuple[str, ...] = ("relu", "sigmoid")
#: Device types whose SGD has a fused kernel used here (checked in torch 2.4-2.14).
_FUSED_SGD_DEVICES = frozenset({"cuda", "cpu"})


class ImageClassifier(LightningModule):
    """Base class: SGD training of ``self.net`` with cross-entropy, logging the tuned metrics.

    Subclasses build ``self.net`` (an ``nn.Module`` from images to logits) and call
    ``self.save_hyperparameters()``; everything else (optimiser, steps, metrics) lives here.

    Args:
        lr: SGD learning rate, ``> 0``.
        momentum: SGD momentum, in ``[0, 1)``.
        weight_decay: L2 penalty, ``>= 0``.
        num_classes: number of classes, ``>= 2``.
        measure_latency: time each validation batch's forward pass and log ``latency_ms``
            (milliseconds per example; on a GPU the device is synchronised around it, which
            costs some throughput).
        cuda_graphs: replay the training step's forward, loss and backward from a CUDA graph
            where it applies (one CUDA device, no DDP, 32-bit precision, no gradient
            accumulation): the same training in fewer host launches. ``True`` says once why
            where it cannot apply; ``"auto"`` uses it where it applies and is silent elsewhere;
            ``False`` (the default here; the launcher's built-in models take ``"auto"``) never.
            A replay runs the step as captured: a model changed during ``fit`` (parameters
            frozen or added, hooks registered by a callback) needs ``False``.
        channels_last: train in the channels-last memory layout (faster convolutions on a
            CPU; values that differ only in the order of float sums). ``True`` wherever it runs,
            ``"auto"`` on a CPU device for a network with a 2-D convolution, ``False`` (the
            default here; the launcher's built-in models take ``"auto"``) never. The network
            is put back in the default layout when ``fit`` ends. A hook or subclass that calls
            ``.view`` on a convolution's output needs ``False`` (or ``.reshape``).

    Example::

        >>> class Linear(ImageClassifier):
        ...     def __init__(self, lr: float = 0.1) -> None:
        ...         super().__init__(lr=lr)
        ...         self.save_hyperparameters()
        ...         self.net = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))
        >>> Linear().configure_optimizers().defaults["lr"]
        0.1
    """

    #: Metrics this module logs; a config's ``metric`` must be one of them. ``parameters`` (the
    #: number of trainable parameters, the same every epoch) and ``latency_ms`` (the forward
    #: pass's mean milliseconds per validation example, on the trial's device; logged only with
    #: ``measure_latency=True``) are objectives that are not training metrics.
    LOGGED_METRICS: tuple[str, ...] = ("train_loss", "validation_loss", "validation_error",
                                       "parameters", "latency_ms")
    #: Metrics logged only when a constructor argument is true: ``{metric: argument}``.
    OPTIONAL_METRICS: dict[str, str] = {"latency_ms": "measure_latency"}

    net: nn.Module

    def __init__(
        self,
        lr: float = 0.1,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        num_classes: int = 10,
        measure_latency: bool = False,
        cuda_graphs: bool | Literal["auto"] = False,
        channels_last: bool | Literal["auto"] = False,
    ) -> None:
        super().__init__()
        if not isinstance(measure_latency, bool):
            raise ConfigError("model.measure_latency",
                              f"is {measure_latency!r}, but must be true or false")
        self._cuda_graphs = _true_false_or_auto("model.cuda_graphs", cuda_graphs)
        self._channels_last = _true_false_or_auto("model.channels_last", channels_last)
        self._laid_channels_last = False
        self._step_graph = StepGraph(blockers=("not in fit",))
        self._measure_latency = measure_latency
        self._parameter_count: int | None = None
        self._lr = field_float("model.lr", lr, low=0.0, low_open=True)
        self._momentum = field_float("model.momentum", momentum, low=0.0, high=1.0)
        self._weight_decay = field_float("model.weight_decay", weight_decay, low=0.0)
        self._num_classes = field_int("model.num_classes", num_classes, minimum=2)
        self._train_sums = _EpochSums()  # loss
        self._train_logged = False
        self._val_sums = _EpochSums()  # loss, wrong predictions

    def __setattr__(self, name: str, value: Any) -> None:
        # Lightning sets ``_current_fx_name`` around every hook call, about 40 times a training
        # step; ``nn.Module.__setattr__`` checks parameters, buffers and submodules each time,
        # a noticeable share of a small network's step. For a string or None it ends in
        # ``object.__setattr__`` anyway, so go there directly.
        if name == "_current_fx_name" and (value is None or isinstance(value, str)):
            object.__setattr__(self, name, value)
        else:
            super().__setattr__(name, value)

    def forward(self, x: Tensor) -> Tensor:
        """Logits of shape ``(N, num_classes)`` for images ``x`` of shape ``(N, 1, 28, 28)``."""
        return self.net(x)

    def setup(self, stage: str) -> None:
        # Before the strategy moves the module to its device (the layout moves with it), wraps
        # it for DDP and restores a checkpoint's weights into it (copied into this layout).
        device = self.trainer.strategy.root_device.type if self._trainer is not None else "cpu"
        if wants_channels_last(self._channels_last, device, self.net):
            self.net.to(memory_format=torch.channels_last)
            self._laid_channels_last = True

    def teardown(self, stage: str) -> None:
        if self._laid_channels_last:  # the module is left as it was built
            self.net.to(memory_format=torch.contiguous_format)
            self._laid_channels_last = False

    def on_train_start(self) -> None:
        # After the checkpoint's optimizer state is restored, before the first step.
        relaid = match_state_layouts(self.trainer.optimizers)
        if relaid:
            log.debug("%d optimizer state tensors given their parameters' layout", relaid)

    def on_fit_start(self) -> None:
        if self._cuda_graphs is False:
            blockers: tuple[str, ...] = ("model.cuda_graphs is false",)
        else:
            blockers = trainer_blockers(self.trainer)
            if self._cuda_graphs is True:
                say_off_once(blockers)  # asked for, but not possible here ("auto": silent)
        self._step_graph = StepGraph(blockers=blockers)

    def on_fit_end(self) -> None:
        self._step_graph = StepGraph(blockers=("not in fit",))  # the graph's memory goes back

    def on_train_epoch_start(self) -> None:
        self._train_sums.reset(1, self.device)
        self._train_logged = False

    def _loss_of(self, x: Tensor, y: Tensor) -> Tensor:
        return F.cross_entropy(self(x), y)

    def training_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> Tensor:
        x, y = batch
        loss = self._step_graph.run(self, self._loss_of, x, y)
        if loss is None:  # eager
            loss = self._loss_of(x, y)
        self._train_sums.add(len(y), loss)
        # The epoch's mean is logged once, from its last step, as an epoch-level value of
        # training_step: seen where per-step self.log(on_epoch=True) made it seen (every
        # callback's on_train_epoch_end, the CSV row of the epoch), not before the epoch ends.
        if batch_idx + 1 == self.trainer.num_training_batches:
            self._log_train_loss()
        return loss

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
        # Lightning zeroes gradients after training_step, before backward: a replayed step's
        # gradients are already there
        if not self._step_graph.replayed:
            super().optimizer_zero_grad(epoch, batch_idx, optimizer)

    def backward(self, loss: Tensor, *args: Any, **kwargs: Any) -> None:
        if not self._step_graph.replayed:  # else the graph ran the backward with the loss
            super().backward(loss, *args, **kwargs)

    def on_train_epoch_end(self) -> None:
        if not self._train_logged:  # the epoch ended before its last batch (a stop)
            self._log_train_loss()

    def _log_train_loss(self) -> None:
        self._train_logged = True
        loss_sum, count = self._train_sums.reduce(self.trainer.strategy)
        if count > 0:  # sync_dist: the value is the same on every rank already; it keeps
            # Lightning from warning that an epoch-level value was not synced
            self.log("train_loss", loss_sum / count, on_step=False, on_epoch=True,
                     sync_dist=True, batch_size=1)

    def on_validation_epoch_start(self) -> None:
        self._val_sums.reset(3 if self._measure_latency else 2, self.device)

    def validation_step(self, batch: tuple[Tensor, Tensor], batch_idx: int) -> None:
        x, y = batch
        if not self._measure_latency:
            logits = self(x)
            self._val_sums.add(len(y), F.cross_entropy(logits, y),
                               (logits.argmax(dim=1) != y).sum())
            return
        cuda = x.device.type == "cuda"
        if cuda:
            torch.cuda.synchronize(x.device)
        start = time.perf_counter()
        logits = self(x)
        if cuda:
            torch.cuda.synchronize(x.device)
        seconds = torch.tensor(time.perf_counter() - start, device=logits.device)
        self._val_sums.add(len(y), F.cross_entropy(logits, y), (logits.argmax(dim=1) != y).sum(),
                           seconds)

    def on_validation_epoch_end(self) -> None:
        sums, count = self._val_sums.reduce(self.trainer.strategy)
        if count > 0:
            self.log("validation_loss", sums[0] / count, sync_dist=True)
            self.log("validation_error", sums[1] / count, sync_dist=True)
            if self._measure_latency:
                self.log("latency_ms", 1000.0 * sums[2] / count, sync_dist=True)
        if self._parameter_count is None:
            self._parameter_count = sum(p.numel() for p in self.parameters() if p.requires_grad)
        self.log("parameters", float(self._parameter_count), sync_dist=True)

    def configure_optimizers(self) -> torch.optim.Optimizer:
        # Lightning moves the module to its device before it calls this, so the device is known.
        return torch.optim.SGD(
            self.parameters(),
            lr=self._lr,
            momentum=self._momentum,
            weight_decay=self._weight_decay,
            fused=self.device.type in _FUSED_SGD_DEVICES,
        )


class _EpochSums:
    """Sums of one epoch kept on the module's device, and the number of examples they cover.

    ``add(n, mean, total)`` adds ``mean * n`` to the first sum and ``total`` to the second, in
    place (one kernel each, nothing read back to the host); :meth:`reduce` sums them over DDP
    ranks in one all-reduce at the epoch's end.

    Example::

        >>> sums = _EpochSums()
        >>> sums.reset(2, torch.device("cpu"))
        >>> sums.add(4, torch.tensor(0.5), torch.tensor(1))
        >>> sums.add(2, torch.tensor(2.0), torch.tensor(2))
        >>> sums.reduce(None)
        ([6.0, 3.0], 6)
    """

    def __init__(self) -> None:
        self._sums = torch.zeros(0)
        self._views: tuple[Tensor, ...] = ()
        self._count = 0

    def reset(self, width: int, device: torch.device) -> None:
        self._sums = torch.zeros(width, device=device)
        self._views = tuple(self._sums[i] for i in range(width))  # made once, not per step
        self._count = 0

    def add(self, n: int, mean: Tensor, *totals: Tensor) -> None:
        self._views[0].add_(mean.detach(), alpha=n)
        for view, total in zip(self._views[1:], totals, strict=False):
            view.add_(total.detach())
        self._count += n

    def reduce(self, strategy: Any) -> tuple[Any, int]:
        """The sums (one float, or a list for several) and the count, summed over all ranks
        (``strategy``: the trainer's, or None for this process alone)."""
        both = torch.cat([self._sums, self._sums.new_tensor([self._count])])
        if strategy is not None:
            both = strategy.reduce(both, reduce_op="sum")
        values = both.tolist()
        sums, count = values[:-1], int(values[-1])
        return (sums[0] if len(sums) == 1 else sums), count


def _true_false_or_auto(field: str, value: Any) -> bool | Literal["auto"]:
    """``value`` when it is a bool or ``"auto"``; else a ConfigError naming ``field``."""
    if not isinstance(value, bool) and value != "auto":
        raise ConfigError(field, f"is {value!r}, but must be true, false or auto")
    return value


def _xavier_init(module: nn.Module) -> None:
    if isinstance(module, nn.Conv2d | nn.Linear):
        nn.init.xavier_uniform_(module.weight)
        if module.bias is not None:
            nn.init.zeros_(module.bias)


class LeNet(ImageClassifier):
    """LeNet-5 (LeCun et al., Proc. IEEE 1998) for ``(N, 1, 28, 28)`` images.

    conv 6@5x5 (padding 2) -> act -> pool 2 -> conv 16@5x5 -> act -> pool 2 -> dense 120 -> act
    -> dense 84 -> act -> dense ``num_classes``; Xavier-uniform weights, zero biases.

    ``activation="relu"`` is the modern variant with max pooling; ``"sigmoid"`` is the classic
    network with average pooling (subsampling). The classic one learns far more slowly, which
    makes the learning rate matter: a good HPO demo.

    Args:
        lr: SGD learning rate, ``> 0``.
        momentum: SGD momentum, in ``[0, 1)``.
        weight_decay: L2 penalty, ``>= 0``.
        num_classes: number of classes, ``>= 2``.
        activation: ``"relu"`` (max pooling) or ``"sigmoid"`` (average pooling).
        width: every layer's channels and units times this (``> 0``; each at least 1): 1.0 is
            LeNet-5 (61,706 parameters with 10 classes), 0.5 about a quarter of them. The knob
            of a study of error against size.
        measure_latency: log ``latency_ms`` (see :class:`ImageClassifier`).
        cuda_graphs: replay training steps from a CUDA graph where it applies (see
            :class:`ImageClassifier`).
        channels_last: train in the channels-last layout (see :class:`ImageClassifier`).

    Example::

        >>> import torch
        >>> from lightning_hpo import LeNet
        >>> LeNet(lr=0.1)(torch.zeros(4, 1, 28, 28)).shape
        torch.Size([4, 10])
    """

    def __init__(
        self,
        lr: float = 0.1,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        num_classes: int = 10,
        activation: Literal["relu", "sigmoid"] = "relu",
        width: float = 1.0,
        measure_latency: bool = False,
        cuda_graphs: bool | Literal["auto"] = False,
        channels_last: bool | Literal["auto"] = False,
    ) -> None:
        super().__init__(lr, momentum, weight_decay, num_classes, measure_latency, cuda_graphs,
                         channels_last)
        activation = field_choice("model.activation", activation, _ACTIVATIONS)  # type: ignore[assignment]
        width = field_float("model.width", width, low=0.0, low_open=True)
        self.save_hyperparameters()
        act: type[nn.Module] = nn.ReLU if activation == "relu" else nn.Sigmoid
        pool: type[nn.Module] = nn.MaxPool2d if activation == "relu" else nn.AvgPool2d
        c1, c2, d1, d2 = (max(1, round(n * width)) for n in (6, 16, 120, 84))
        self.net = nn.Sequential(
            nn.Conv2d(1, c1, kernel_size=5, padding=2), act(), pool(kernel_size=2, stride=2),
            nn.Conv2d(c1, c2, kernel_size=5), act(), pool(kernel_size=2, stride=2),
            nn.Flatten(),
            nn.Linear(c2 * 5 * 5, d1), act(),
            nn.Linear(d1, d2), act(),
            nn.Linear(d2, num_classes),
        )  # fmt: skip
        self.net.apply(_xavier_init)


class DropoutMLP(ImageClassifier):
    """Two-hidden-layer perceptron with dropout (Srivastava et al., JMLR 2014).

    flatten -> dense ``num_hiddens_1`` -> relu -> dropout ``dropout_1`` -> dense ``num_hiddens_2``
    -> relu -> dropout ``dropout_2`` -> dense ``num_classes``; Xavier-uniform weights.

    Args:
        lr: SGD learning rate, ``> 0``.
        momentum: SGD momentum, in ``[0, 1)``.
        weight_decay: L2 penalty, ``>= 0``.
        num_classes: number of classes, ``>= 2``.
        num_inputs: pixels per image (784 for 28x28), ``>= 1``.
        num_hiddens_1: width of the first hidden layer, ``>= 1``.
        num_hiddens_2: width of the second hidden layer, ``>= 1``.
        dropout_1: drop probability after the first hidden layer, in ``[0, 1)``.
        dropout_2: drop probability after the second hidden layer, in ``[0, 1)``.
        measure_latency: log ``latency_ms`` (see :class:`ImageClassifier`).
        cuda_graphs: replay training steps from a CUDA graph where it applies (see
            :class:`ImageClassifier`).
        channels_last: train in the channels-last layout (see :class:`ImageClassifier`).

    Example::

        >>> import torch
        >>> from lightning_hpo import DropoutMLP
        >>> DropoutMLP(num_hiddens_1=64, dropout_2=0.2)(torch.zeros(4, 1, 28, 28)).shape
        torch.Size([4, 10])
    """

    def __init__(
        self,
        lr: float = 0.1,
        momentum: float = 0.0,
        weight_decay: float = 0.0,
        num_classes: int = 10,
        num_inputs: int = 784,
        num_hiddens_1: int = 256,
        num_hiddens_2: int = 256,
        dropout_1: float = 0.5,
        dropout_2: float = 0.5,
        measure_latency: bool = False,
        cuda_graphs: bool | Literal["auto"] = False,
        channels_last: bool | Literal["auto"] = False,
    ) -> None:
        super().__init__(lr, momentum, weight_decay, num_classes, measure_latency, cuda_graphs,
                         channels_last)
        num_inputs = field_int("model.num_inputs", num_inputs, minimum=1)
        num_hiddens_1 = field_int("model.num_hiddens_1", num_hiddens_1, minimum=1)
        num_hiddens_2 = field_int("model.num_hiddens_2", num_hiddens_2, minimum=1)
        dropout_1 = field_float("model.dropout_1", dropout_1, low=0.0, high=1.0)
        dropout_2 = field_float("model.dropout_2", dropout_2, low=0.0, high=1.0)
        self.save_hyperparameters()
        self.net = nn.Sequential(
            nn.Flatten(),
            nn.Linear(num_inputs, num_hiddens_1), nn.ReLU(), nn.Dropout(dropout_1),
            nn.Linear(num_hiddens_1, num_hiddens_2), nn.ReLU(), nn.Dropout(dropout_2),
            nn.Linear(num_hiddens_2, num_classes),
        )  # fmt: skip
        self.net.apply(_xavier_init)


#: Registry of model names accepted by ``model.name`` in a config.
MODELS: dict[str, type[LightningModule]] = {"lenet": LeNet, "dropout_mlp": DropoutMLP}


def build_model(name: str, **hparams: Any) -> LightningModule:
    """Build a model from a registry name or a ``"package.module:Class"`` path.

    Args:
        name: a key of :data:`MODELS` or an import path to a ``LightningModule`` subclass.
        **hparams: constructor arguments (``lr``, ``momentum``, ...); unknown keys are refused
            unless the class takes ``**kwargs``.

    Returns:
        The constructed module.

    Raises:
        ConfigError: ``model.name`` for an unknown or unimportable name, ``model.<key>`` for an
            unknown hyperparameter or a bad value.

    Example::

        >>> from lightning_hpo import build_model
        >>> build_model("lightning_hpo.builtin.models:DropoutMLP", dropout_1=0.2).hparams.dropout_1
        0.2
    """
    model = build("model", name, MODELS, LightningModule, hparams)
    log.debug("built model %s with %s", name, hparams)
    return model


def model_class(name: str) -> type[LightningModule]:
    """The class a registry name or ``"package.module:Class"`` path stands for, not built.

    Raises:
        ConfigError: ``model.name`` for an unknown or unimportable name.

    Example::

        >>> model_class("lenet").LOGGED_METRICS[:3]
        ('train_loss', 'validation_loss', 'validation_error')
    """
    return resolve_class("model", name, MODELS, LightningModule)


def model_hyperparameters(name: str) -> dict[str, Any]:
    """Constructor arguments of a model and their defaults (``inspect.Parameter.empty`` if none).

    Args:
        name: a key of :data:`MODELS` or a ``"package.module:Class"`` path.

    Raises:
        ConfigError: ``model.name`` for an unknown or unimportable name.

    Example::

        >>> model_hyperparameters("lenet")["activation"]
        'relu'
    """
    return defaults(model_class(name))

