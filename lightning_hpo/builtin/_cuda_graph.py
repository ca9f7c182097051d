"""A training step's forward, loss and backward replayed from one CUDA graph.

A small network's step on a GPU is bound by the host: each of its kernels costs the host more
Python, dispatch and autograd time than the GPU spends on it. Captured once as a CUDA graph
(``torch.cuda.graph``), the same kernels are launched by one call. Only forward, loss and
backward are captured: the optimiser step, gradient clipping and everything Lightning does
around the step stay eager, so any optimiser, scheduler or clipping works, and ``global_step``,
hooks and checkpoints are unchanged.

How a step runs (:class:`StepGraph`): the first :data:`EAGER_STEPS` steps of a ``fit`` run
eagerly (a trial stopped at its first rung rarely pays for a capture); the next one runs
:data:`WARMUP_RUNS` warm-up passes on a side stream (leaving no trace in training), captures and
replays; every later batch of the captured shape is copied into the graph's inputs and replayed,
and a batch of another shape (an epoch's last, smaller one) runs eagerly. A capture that fails
is reported once per process and the step stays eager for the rest of the ``fit``. When capture
applies at all is :func:`capture_blockers`'s decision: one CUDA device, no DDP, 32-bit
precision, no gradient accumulation, no anomaly detection.

Example (no GPU needed to ask)::

    >>> capture_blockers(device_type="cpu", single_device=True, precision="32-true",
    ...                  accumulate_grad_batches=1)
    ('the device is cpu, not cuda',)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn

__all__ = [
    "EAGER_STEPS",
    "WARMUP_RUNS",
    "Captured",
    "StepGraph",
    "capture_blockers",
    "say_off_once",
    "trainer_blockers",
]

log = logging.getLogger(__name__)

#: Eager steps of each ``fit`` before the capture.
EAGER_STEPS = 8
#: Forward and backward passes on the capture stream before the capture (PyTorch's advice,
#: as ``torch.cuda.make_graphed_callables`` does: libraries' lazy set-up happens outside it).
WARMUP_RUNS = 2
#: Precisions whose step is captured: a mixed-precision step scales its loss and may skip the
#: optimiser step after reading the gradients back, which a graph does not follow.
_PRECISIONS = frozenset({"32-true", "32"})
_failures_reported: set[str] = set()
_off_reported: set[str] = set()

#: A step's loss of one batch: ``loss_fn(x, y)``, differentiable in the module's parameters.
LossFn = Callable[[Tensor, Tensor], Tensor]


def capture_blockers(*, device_type: str, single_device: bool, precision: str,
                     accumulate_grad_batches: int, anomaly: bool = False) -> tuple[str, ...]:
    """Why a training step cannot be captured, one reason each; empty when it can.

    Args:
        device_type: the trainer's root device type (``"cuda"``, ``"cpu"``, ...).
        single_device: whether the strategy trains on one device in one process (DDP wraps the
            module and all-reduces during backward, which a graph does not capture).
        precision: the trainer's precision (``"32-true"``).
        accumulate_grad_batches: the trainer's; a graph's backward overwrites the gradients.
        anomaly: whether autograd's anomaly detection is on.

    Example::

        >>> capture_blockers(device_type="cuda", single_device=False, precision="16-mixed",
        ...                  accumulate_grad_batches=2)  # doctest: +NORMALIZE_WHITESPACE
        ('the strategy is not one device in one process (DDP)',
         'precision is 16-mixed, not 32-true', 'accumulate_grad_batches is 2, not 1')
    """
    reasons = []
    if device_type != "cuda":
        reasons.append(f"the device is {device_type}, not cuda")
    if not single_device:
        reasons.append("the strategy is not one device in one process (DDP)")
    if str(precision) not in _PRECISIONS:
        reasons.append(f"precision is {precision}, not 32-true")
    if accumulate_grad_batches != 1:
        reasons.append(f"accumulate_grad_batches is {accumulate_grad_batches}, not 1")
    if anomaly:
        reasons.append("autograd anomaly detection is on")
    return tuple(reasons)


def trainer_blockers(trainer: Any) -> tuple[str, ...]:
    """:func:`capture_blockers` of a Lightning ``Trainer`` as it is configured for ``fit``."""
    from lightning.pytorch.strategies import SingleDeviceStrategy

    return capture_blockers(
        device_type=trainer.strategy.root_device.type,
        single_device=isinstance(trainer.strategy, SingleDeviceStrategy),
        precision=str(trainer.precision),
        accumulate_grad_batches=int(trainer.accumulate_grad_batches),
        anomaly=torch.is_anomaly_enabled(),
    )


@dataclass
class Captured:
    """One batch shape's forward, loss and backward, captured: see :meth:`of`."""

    graph: Any  # torch.cuda.CUDAGraph
    x: Tensor
    y: Tensor
    loss: Tensor
    params: list[Tensor]
    grads: list[Tensor | None]

    @classmethod
    def of(cls, module: nn.Module, loss_fn: LossFn, x: Tensor, y: Tensor) -> Captured:
        """Capture ``loss_fn`` and its backward for batches shaped like ``(x, y)``.

        Nothing is computed for training: the warm-up's gradients are returned and dropped,
        its changes to buffers and to the CUDA random state are undone, and a capture runs no
        kernel. Each parameter's ``.grad`` is None afterwards until the first :meth:`replay`.

        Raises:
            RuntimeError: from PyTorch, when something in the step cannot be captured.
        """
        device = x.device
        params: list[Tensor] = [p for p in module.parameters() if p.requires_grad]
        static_x, static_y = x.detach().clone(), y.detach().clone()
        stream = torch.cuda.Stream(device=device)
        stream.wait_stream(torch.cuda.current_stream(device))
        buffers = [b.detach().clone() for b in module.buffers()]
        rng = torch.cuda.get_rng_state(device)
        with torch.cuda.stream(stream):
            for _ in range(WARMUP_RUNS):
                torch.autograd.grad(loss_fn(static_x, static_y), params, allow_unused=True)
        torch.cuda.current_stream(device).wait_stream(stream)
        with torch.no_grad():
            for buffer, saved in zip(module.buffers(), buffers, strict=True):
                buffer.copy_(saved)
        torch.cuda.set_rng_state(rng, device)
        for p in params:
            p.grad = None  # the backward below allocates them in the graph's memory
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, stream=stream):
            loss = loss_fn(static_x, static_y)
            loss.backward()
        grads = [p.grad for p in params]  # the graph's gradient tensors: not computed yet
        for p in params:
            p.grad = None  # until the first replay puts them back, filled
        return cls(graph, static_x, static_y, loss.detach(), params, grads)

    def fits(self, x: Tensor, y: Tensor) -> bool:
        """Whether ``(x, y)`` can be copied into the captured inputs."""
        return (x.shape == self.x.shape and y.shape == self.y.shape and x.dtype == self.x.dtype
                and y.dtype == self.y.dtype and x.device == self.x.device)

    def replay(self, x: Tensor, y: Tensor) -> Tensor:
        """The loss of ``(x, y)``, its gradients in the parameters' ``.grad``; the returned
        tensor is the graph's and is overwritten by the next replay."""
        self.x.copy_(x)
        self.y.copy_(y)
        self.graph.replay()
        for p, grad in zip(self.params, self.grads, strict=True):
            if p.grad is not grad:  # set to None (zero_grad) or replaced by an eager step
                p.grad = grad
        return self.loss


def say_off_once(blockers: Sequence[str]) -> None:
    """Warn, once per process and reasons, that steps asked to be captured stay eager."""
    text = "; ".join(blockers)
    if text and text not in _off_reported:
        _off_reported.add(text)
        log.warning("cuda_graphs: training steps stay eager (no CUDA graph): %s", text)


class StepGraph:
    """When a module's training step runs from a CUDA graph, for one ``fit``.

    ``run(module, loss_fn, x, y)`` returns the batch's loss with its gradients already in
    ``.grad`` (from the graph), or None: then the caller runs the step eagerly. The caller
    then skips both ``zero_grad`` and ``backward`` for a replayed step (``replayed``).

    Example::

        >>> graph = StepGraph(blockers=("the device is cpu, not cuda",))
        >>> graph.run(nn.Linear(2, 2), lambda x, y: x.sum(), torch.zeros(1, 2), torch.zeros(1))
        >>> graph.replayed, graph.off
        (False, 'the device is cpu, not cuda')
    """

    #: How a capture is made: :meth:`Captured.of`, replaceable in tests.
    capture: Callable[[nn.Module, LossFn, Tensor, Tensor], Captured] = staticmethod(Captured.of)

    def __init__(self, blockers: Sequence[str] = (), eager_steps: int = EAGER_STEPS) -> None:
        self.off: str | None = "; ".join(blockers) or None
        self.replayed = False
        self.replays = 0
        self._eager_left = eager_steps
        self._captured: Captured | None = None

    def __reduce__(self) -> tuple[Any, ...]:
        # a copied or pickled module gets a step graph of its own, never this one's capture
        return (StepGraph, (("a copy of a module starts without a graph",),))

    @property
    def captured(self) -> bool:
        """Whether a graph has been captured in this ``fit``."""
        return self._captured is not None

    def run(self, module: nn.Module, loss_fn: LossFn, x: Tensor, y: Tensor) -> Tensor | None:
        """The loss of ``(x, y)`` from the graph (capturing it first when due), or None."""
        self.replayed = False
        if self.off is not None:
            return None
        captured = self._captured
        if captured is None:
            if self._eager_left > 0:
                self._eager_left -= 1
                return None
            try:
                captured = self._captured = type(self).capture(module, loss_fn, x, y)
            except RuntimeError as error:
                self.off = f"capture failed: {error}".splitlines()[0]
                for p in module.parameters():
                    p.grad = None
                if self.off not in _failures_reported:
                    _failures_reported.add(self.off)
                    log.warning("training steps stay eager (no CUDA graph): %s", self.off)
                return None
            log.info("training step captured as a CUDA graph for batches of shape %s",
                     tuple(x.shape))
        elif not captured.fits(x, y):
            return None
        loss = captured.replay(x, y)
        self.replayed = True
        self.replays += 1
        return loss
