"""Channels-last memory layout for a convolutional network's training on CPU.

PyTorch's CPU convolutions (oneDNN) run faster on channels-last tensors than on the default
NCHW layout. The values are the same up to the order of float sums (which training can amplify
over many steps, as any change of kernel does).

Two things make it safe to switch on:

* :func:`wants_channels_last` is the pure rule: ``True`` always, ``"auto"`` on a CPU device for
  a network with a 2-D convolution (on a GPU the gain needs tensor cores, and ``"auto"`` leaves
  it off), ``False`` never.
* :func:`match_state_layouts` gives every optimizer state tensor the strides of its parameter.
  Torch's fused SGD (``fused=True``, used by :class:`~lightning_hpo.builtin.models.ImageClassifier`)
  reads a momentum buffer as if it had its parameter's strides: a buffer restored from a
  checkpoint written in the other layout (a trial paused on a CPU and resumed on a GPU, or the
  other way) would be applied to the wrong elements, silently. CUDA's fused kernel is given
  matching strides all the same.

Example::

    >>> import torch
    >>> from torch import nn
    >>> wants_channels_last("auto", "cpu", nn.Conv2d(1, 2, 3)), wants_channels_last(
    ...     "auto", "cuda", nn.Conv2d(1, 2, 3)), wants_channels_last("auto", "cpu", nn.Linear(2, 2))
    (True, False, False)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

import torch
from torch import nn


def wants_channels_last(setting: bool | Literal["auto"], device_type: str, net: nn.Module) -> bool:
    """Whether ``net`` trains in the channels-last layout on a device of ``device_type``
    (``"cpu"``, ``"cuda"``, ...) under the model's ``channels_last`` setting.

    Example::

        >>> from torch import nn
        >>> wants_channels_last(True, "cuda", nn.Linear(2, 2)), wants_channels_last(
        ...     False, "cpu", nn.Conv2d(1, 1, 1))
        (True, False)
    """
    if setting is True or setting is False:
        return setting
    return device_type == "cpu" and any(isinstance(m, nn.Conv2d) for m in net.modules())


def match_state_layouts(optimizers: Iterable[torch.optim.Optimizer]) -> int:
    """Give each optimizer state tensor shaped like its parameter that parameter's strides (the
    values copied); returns how many were re-laid (0 when all matched already).

    Example::

        >>> import torch
        >>> w = torch.nn.Parameter(torch.zeros(2, 3, 4, 4).to(memory_format=torch.channels_last))
        >>> sgd = torch.optim.SGD([w], lr=0.1, momentum=0.9)
        >>> sgd.state[w]["momentum_buffer"] = torch.ones(2, 3, 4, 4)  # NCHW, from a checkpoint
        >>> match_state_layouts([sgd]), sgd.state[w]["momentum_buffer"].stride() == w.stride()
        (1, True)
    """
    changed = 0
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for param in group["params"]:
                state: dict[str, Any] = optimizer.state.get(param, {})
                for key, value in state.items():
                    if (isinstance(value, torch.Tensor) and value.shape == param.shape
                            and value.stride() != param.stride()):
                        state[key] = torch.empty_like(param, dtype=value.dtype).copy_(value)
                        changed += 1
    return changed
