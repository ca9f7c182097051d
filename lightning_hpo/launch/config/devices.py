"""Worker slots: which devices each concurrent trial gets. The ``devices:`` section, pure
planning, and one detector.

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
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config._fields import read_fields, spec
from lightning_hpo.launch.config.slurm import usable_cores

__all__ = [
    "ACCELERATORS",
    "DevicesSpec",
    "Slot",
    "cuda_possible",
    "detect_devices",
    "gpus_without_torch",
    "needs_gpu_count",
    "parse_devices",
    "WORKER_MEMORY",
    "machine_memory",
    "plan_slots",
    "threads_per_process",
]

Accelerator = Literal["auto", "cpu", "gpu"]
ACCELERATORS: tuple[str, ...] = get_args(Accelerator)
#: NVIDIA's driver: a folder per GPU, and its control device.
NVIDIA_GPUS, NVIDIA_CONTROL = "/proc/driver/nvidia/gpus", "/dev/nvidiactl"
#: WSL's GPU bridge and ROCm's driver: GPUs only CUDA (HIP) itself can count.
OTHER_GPU_FILES = ("/dev/dxg", "/dev/kfd")
#: Files that exist where a GPU torch could use may be.
GPU_FILES = (NVIDIA_GPUS, NVIDIA_CONTROL, *OTHER_GPU_FILES)


@dataclass(frozen=True)
class DevicesSpec:
    """``devices:``: how trials share the machine's devices (GPUs, else CPU cores)."""

    per_trial: int = spec(1, "The devices each trial trains on (DDP when more than 1).",
                          minimum=1)
    trials_per_device: int = spec(1, "The trials that share one device (1 when per_trial > 1).",
                                  minimum=1)
    accelerator: Accelerator = spec("auto", "GPUs, CPU cores, or GPUs where any is visible.")
    count: int | None = spec(None, "How many devices to use.", minimum=1,
                             default_text="null (all visible)")


def parse_devices(raw: Any) -> DevicesSpec:
    """The config's ``devices`` section, validated.

    Raises:
        ConfigError: naming the field (``devices.per_trial: is 0, but must be ...``).

    Example::

        >>> parse_devices({"accelerator": "cpu", "count": 2})
        DevicesSpec(per_trial=1, trials_per_device=1, accelerator='cpu', count=2)
    """
    spec_ = DevicesSpec(**read_fields(DevicesSpec, raw, "devices"))
    if spec_.per_trial > 1 and spec_.trials_per_device > 1:
        raise ConfigError(
            "devices.trials_per_device",
            "must be 1 when devices.per_trial > 1 (a DDP trial owns its devices)",
        )
    return spec_


@dataclass(frozen=True)
class Slot:
    """One worker slot: its index and the device ids (GPU ordinals or CPU core indices)."""

    index: int
    devices: tuple[int, ...]


#: Memory one worker process holds of its own once it has imported torch and Lightning (about
#: 0.8 GiB resident on Linux with the shared libraries; this is a floor): a plan whose processes
#: need more than the machine has is refused before any of them starts.
WORKER_MEMORY = 256 << 20


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (POSIX ``sysconf``), None where unknown."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, OSError, ValueError):
        return None


def plan_slots(n_devices: int, per_trial: int = 1, trials_per_device: int = 1,
               memory: int | None = None) -> list[Slot]:
    """Split ``n_devices`` into slots of ``per_trial`` devices, each device shared by
    ``trials_per_device`` slots. Leftover devices (``n_devices % per_trial``) stay idle.
    With ``memory`` (bytes, :func:`machine_memory`), the slots' processes (``per_trial`` each)
    must fit in it at :data:`WORKER_MEMORY` each: ``trials_per_device: 1000`` for 10 started
    2,000 processes that each import torch.

    Raises:
        ConfigError: when a trial needs more devices than there are, or the processes more
            memory (naming ``devices.trials_per_device``, or ``devices.count`` when each device
            has one slot, and the most that fit).

    Example::

        >>> len(plan_slots(2, trials_per_device=4, memory=8 << 30))
        8
        >>> try:
        ...     plan_slots(2, trials_per_device=1000, memory=24 << 30)
        ... except ConfigError as error:
        ...     print(error.field, "|", error.message.split(";")[1])
        devices.trials_per_device |  at most 48 here
    """
    if n_devices < 1:
        raise ConfigError("devices", "no device is available")
    if per_trial > n_devices:
        raise ConfigError(
            "devices.per_trial", f"is {per_trial}, but only {n_devices} device(s) are available"
        )
    groups = [tuple(range(start, start + per_trial))
              for start in range(0, n_devices - per_trial + 1, per_trial)]
    processes = len(groups) * per_trial * trials_per_device
    if memory is not None and processes * WORKER_MEMORY > memory:
        fit = memory // WORKER_MEMORY
        field, value, most = (("devices.trials_per_device", trials_per_device,
                               fit // (len(groups) * per_trial)) if trials_per_device > 1
                              else ("devices.count", n_devices, fit))
        raise ConfigError(field, f"is {value}: {processes} worker processes, each importing "
                          f"torch and Lightning (at least {WORKER_MEMORY >> 20} MiB each), need "
                          f"more than this machine's {memory / (1 << 30):.1f} GiB of memory; "
                          f"at most {most} here")
    slots = [group for group in groups for _ in range(trials_per_device)]
    return [Slot(index, devices) for index, devices in enumerate(slots)]


def detect_devices(
    accelerator: Literal["auto", "cpu", "gpu"] = "auto", count: int | None = None,
    gpus: int | None = None,
) -> tuple[Literal["cpu", "gpu"], int]:
    """The accelerator to use and how many devices: visible CUDA GPUs (``CUDA_VISIBLE_DEVICES``
    respected), else the CPU cores this process may run on (no more than SLURM allocated:
    :func:`~lightning_hpo.launch.config.slurm.usable_cores`). ``gpus`` is the number of visible
    GPUs when it is known already (:func:`gpus_without_torch`); None counts them here, with
    torch, only where one may exist (:func:`needs_gpu_count`).

    Raises:
        ConfigError: ``devices.accelerator`` is gpu but none is visible, or ``devices.count``
            asks for more devices than exist.
    """
    if not needs_gpu_count(accelerator):
        gpus = 0
    elif gpus is None:
        import torch

        gpus = torch.cuda.device_count()  # reads CUDA_VISIBLE_DEVICES; does not start CUDA
    if accelerator == "gpu" and gpus == 0:
        raise ConfigError("devices.accelerator", "is gpu, but no CUDA device is visible")
    kind: Literal["cpu", "gpu"] = "gpu" if gpus > 0 else "cpu"
    available = gpus if kind == "gpu" else usable_cores()
    if count is not None:
        if count > available:
            raise ConfigError(
                "devices.count", f"is {count}, but only {available} {kind} device(s) exist"
            )
        available = count
    return kind, available


def needs_gpu_count(accelerator: str) -> bool:
    """Whether ``devices.accelerator`` needs the GPUs counted: ``gpu``, or ``auto`` where a GPU
    may exist (:func:`cuda_possible`).

    Example::

        >>> needs_gpu_count("cpu"), needs_gpu_count("gpu")
        (False, True)
    """
    return accelerator == "gpu" or (accelerator == "auto" and cuda_possible())


def cuda_possible() -> bool:
    """False when this machine certainly has no GPU that torch could use (Linux without any of
    :data:`GPU_FILES`): ``accelerator: auto`` is then the CPU, known without importing torch
    (seconds). True elsewhere, where only ``torch.cuda.device_count()`` can tell.

    Example::

        >>> cuda_possible() in (True, False)
        True
    """
    if not sys.platform.startswith("linux"):
        return True
    return any(os.path.exists(path) for path in GPU_FILES)


def gpus_without_torch(
    environ: Mapping[str, str] | None = None, gpus_dir: str = NVIDIA_GPUS
) -> int | None:
    """How many GPUs ``torch.cuda.device_count()`` will see, read from NVIDIA's driver folder
    and ``CUDA_VISIBLE_DEVICES`` without importing torch; None where that cannot be told so
    (not Linux, WSL or ROCm, a driver without its folder, GPUs named by UUID or MIG id).

    Like CUDA, ``CUDA_VISIBLE_DEVICES`` is read up to its first invalid entry (a repeat, a
    negative or out-of-range index): ``"1,0"`` on 2 GPUs is 2, ``"1,-1,0"`` is 1, ``""`` is 0.
    The launcher still counts with torch; this only lets the workers start before it does
    (:mod:`~lightning_hpo.launch.processes.early`), and a count that differs restarts them.

    Example::

        >>> import tempfile
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     for bus in ("0000:07:00.0", "0000:0a:00.0"):
        ...         os.mkdir(os.path.join(folder, bus))
        ...     [gpus_without_torch({}, folder), gpus_without_torch({"CUDA_VISIBLE_DEVICES": "1"},
        ...      folder), gpus_without_torch({"CUDA_VISIBLE_DEVICES": "GPU-8f2c"}, folder)]
        [2, 1, None]
    """
    environ = os.environ if environ is None else environ
    if not sys.platform.startswith("linux") or any(map(os.path.exists, OTHER_GPU_FILES)):
        return None
    try:
        physical = len(os.listdir(gpus_dir))
    except FileNotFoundError:
        return None if os.path.exists(NVIDIA_CONTROL) else 0
    except OSError:
        return None
    visible = environ.get("CUDA_VISIBLE_DEVICES")
    if visible is None:
        return physical
    seen: list[int] = []
    for entry in (item.strip() for item in visible.split(",")):
        if entry and not entry.lstrip("-").isdigit():
            return None  # a UUID or a MIG id: only CUDA knows what it names
        if not entry or int(entry) < 0 or int(entry) >= physical or int(entry) in seen:
            break
        seen.append(int(entry))
    return len(seen)


def threads_per_process(n_cores: int, n_processes: int) -> int:
    """Torch threads for each of ``n_processes`` sharing ``n_cores`` (at least 1)."""
    return max(1, n_cores // max(1, n_processes))


def split_cores(share: int, loader_workers: int) -> tuple[int, int]:
    """Torch threads and ``DataLoader`` processes for one training process that owns ``share``
    cores and asks for ``loader_workers``: the loader gets at most ``share - 1`` processes (one
    core each; PyTorch runs them on one thread), torch the cores left (at least 1), so a
    device's slots never run more threads than the cores they share.

    Example::

        >>> split_cores(8, 3), split_cores(2, 4), split_cores(1, 2), split_cores(4, 0)
        ((5, 3), (1, 1), (1, 0), (4, 0))
    """
    workers = min(max(0, loader_workers), max(0, share - 1))
    return max(1, share - workers), workers


def visible_gpus(devices: Sequence[int], parent: str | None) -> str:
    """``CUDA_VISIBLE_DEVICES`` for a worker on the launcher's GPUs ``devices`` (indices as
    torch counts them in the launcher), given the launcher's own ``CUDA_VISIBLE_DEVICES``
    (``parent``; None or empty: all GPUs, numbered as the driver does).

    Example::

        >>> visible_gpus([0], None), visible_gpus([0], "3"), visible_gpus([1, 2], "4,6,7")
        ('0', '3', '6,7')
    """
    ids = [item.strip() for item in parent.split(",")] if parent and parent.strip() else None
    return ",".join(ids[d] if ids is not None and d < len(ids) else str(d) for d in devices)
