"""Worker slots: which devices each concurrent trial gets. Pure planning plus one detector.

A *slot* runs one trial at a time, forever taking the next one. With ``per_trial`` devices a
trial trains with DDP on all of them; with ``trials_per_device`` several slots share a device
(small models leave most of a GPU idle). On a machine without GPUs the devices are CPU cores:
each slot gets ``per_trial`` processes, and threads are divided so slots do not oversubscribe.

Example::

    >>> [s.devices for s in plan_slots(4, per_trial=2, trials_per_device=1)]
    [(0, 1), (2, 3)]
    >>> [s.devices for s in plan_slots(2, per_trial=1, trials_per_device=2)]
    [(0,), (0,), (1,), (1,)]
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Literal

from lightning_hpo.errors import ConfigError

__all__ = ["Slot", "detect_devices", "plan_slots", "threads_per_process"]


@dataclass(frozen=True)
class Slot:
    """One worker slot: its index and the device ids (GPU ordinals or CPU core indices)."""

    index: int
    devices: tuple[int, ...]


def plan_slots(n_devices: int, per_trial: int = 1, trials_per_device: int = 1) -> list[Slot]:
    """Split ``n_devices`` into slots of ``per_trial`` devices, each device shared by
    ``trials_per_device`` slots. Leftover devices (``n_devices % per_trial``) stay idle.

    Raises:
        ConfigError: when a trial needs more devices than there are.
    """
    if n_devices < 1:
        raise ConfigError("devices", "no device is available")
    if per_trial > n_devices:
        raise ConfigError(
            "devices.per_trial", f"is {per_trial}, but only {n_devices} device(s) are available"
        )
    groups = [tuple(range(start, start + per_trial))
              for start in range(0, n_devices - per_trial + 1, per_trial)]
    slots = [group for group in groups for _ in range(trials_per_device)]
    return [Slot(index, devices) for index, devices in enumerate(slots)]


def detect_devices(
    accelerator: Literal["auto", "cpu", "gpu"] = "auto", count: int | None = None
) -> tuple[Literal["cpu", "gpu"], int]:
    """The accelerator to use and how many devices: visible CUDA GPUs (``CUDA_VISIBLE_DEVICES``
    respected), else the CPU cores this process may run on.

    Raises:
        ConfigError: ``devices.accelerator`` is gpu but none is visible, or ``devices.count``
            asks for more devices than exist.
    """
    gpus = 0
    if accelerator in ("auto", "gpu"):
        import torch

        gpus = torch.cuda.device_count()  # reads CUDA_VISIBLE_DEVICES; does not start CUDA
    if accelerator == "gpu" and gpus == 0:
        raise ConfigError("devices.accelerator", "is gpu, but no CUDA device is visible")
    kind: Literal["cpu", "gpu"] = "gpu" if gpus > 0 else "cpu"
    available = gpus if kind == "gpu" else len(os.sched_getaffinity(0))
    if count is not None:
        if count > available:
            raise ConfigError(
                "devices.count", f"is {count}, but only {available} {kind} device(s) exist"
            )
        available = count
    return kind, available


def threads_per_process(n_cores: int, n_processes: int) -> int:
    """Torch threads for each of ``n_processes`` sharing ``n_cores`` (at least 1)."""
    return max(1, n_cores // max(1, n_processes))
