"""What the supervisor and its workers share: environment names, the slot spec, events.

Light on purpose (no torch): the supervisor imports it.

Events are JSON lines ``{"e": kind, "t": unix seconds, ...}`` on a pipe, in this order per trial:
``start`` (claimed) -> ``fit_start`` (params known, training begins) -> ``epoch``... -> ``end``;
plus ``ready`` once and ``exit`` at the end of a worker.

The other way, on a second pipe, the supervisor sends :class:`StopOrder` lines when the study's
own budget is spent, followed by :data:`STOP_SIGNAL` so that a worker in the middle of an epoch
reads them at once. SIGTERM stays what it was: an interruption (the trial ends FAIL).
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

from lightning_hpo.schema import device_label

__all__ = [
    "CONFIG_ENV",
    "STOP_SIGNAL",
    "TRIAL_LIMIT",
    "WORKER_ENV",
    "EventWriter",
    "StopOrder",
    "WorkerSpec",
    "read_stop_orders",
]

#: The validated config's raw mapping, as JSON (environment, so passwords stay out of ``ps``).
CONFIG_ENV = "LIGHTNING_HPO_CONFIG"
#: The worker's :class:`WorkerSpec`, as JSON.
WORKER_ENV = "LIGHTNING_HPO_WORKER"
#: The exit reason of a worker that ran its ``max_trials``; the supervisor starts a fresh one.
TRIAL_LIMIT = "trial limit reached"
#: Sent to a worker after a :class:`StopOrder` is written to its control pipe: "read it now".
STOP_SIGNAL = signal.SIGUSR1


@dataclass(frozen=True)
class WorkerSpec:
    """What the supervisor tells a worker about its slot."""

    slot: int
    devices: tuple[int, ...]
    kind: str  # "cpu" | "gpu"
    threads: int  # torch threads per process
    launcher_pid: int
    events_fd: int
    deadline: float | None  # unix seconds; no trial is claimed after it
    generation: int = 0  # restarts of this slot so far (varies the sampler's seed)
    max_trials: int | None = None  # leave after this many trials (the benchmark's baseline)
    control_fd: int = -1  # read end of the supervisor's stop-order pipe (-1: none)

    @property
    def device_label(self) -> str:
        """``cuda:0,1`` or ``cpu:0``: what the status table and the trial record show.

        Example::

            >>> WorkerSpec(slot=1, devices=(2, 3), kind="gpu", threads=1, launcher_pid=1,
            ...            events_fd=-1, deadline=None).device_label
            'cuda:2,3'
        """
        return device_label(self.kind, self.devices)

    @classmethod
    def from_json(cls, text: str) -> WorkerSpec:
        raw = json.loads(text)
        return cls(**{**raw, "devices": tuple(raw["devices"])})


class EventWriter:
    """Writes events to the supervisor; goes quiet if the supervisor is gone (fd -1: off)."""

    def __init__(self, fd: int) -> None:
        self._file = os.fdopen(fd, "w", buffering=1) if fd >= 0 else None

    def emit(self, event: str, **fields: Any) -> None:
        if self._file is None:
            return
        try:
            self._file.write(json.dumps({"e": event, "t": time.time(), **fields}) + "\n")
        except (OSError, ValueError):
            self._file = None


@dataclass(frozen=True)
class StopOrder:
    """The supervisor's order to stop because the study's budget is spent.

    The trial a worker trains then ends PRUNED, keeping the values it reported, with
    ``reason`` and where it stopped in its ``stop_reason`` attribute; the worker claims no more.

    Args:
        reason: the stop criterion, e.g.
            ``"wall-clock budget reached (stop.max_wallclock_time=200 s)"``.
        now: False: stop at the next epoch boundary (``stop.grace`` is running); True: stop at
            the next training batch.

    Example::

        line = StopOrder("wall-clock budget reached", now=False).to_line()
        assert StopOrder.from_line(line) == StopOrder("wall-clock budget reached", now=False)
    """

    reason: str
    now: bool

    def to_line(self) -> str:
        """One JSON line (well under ``PIPE_BUF``, so a pipe write of it is atomic)."""
        return json.dumps({"stop": self.reason, "now": self.now}) + "\n"

    @classmethod
    def from_line(cls, line: str) -> StopOrder:
        raw = json.loads(line)
        return cls(str(raw["stop"]), bool(raw["now"]))


def read_stop_orders(fd: int) -> list[StopOrder]:
    """The stop orders waiting on a non-blocking control pipe (none when ``fd`` is -1).

    Each order is written in one atomic write, so a read returns whole lines.
    """
    if fd < 0:
        return []
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # BlockingIOError: nothing more for now
            break
        if not chunk:
            break
        data += chunk
    return [StopOrder.from_line(line) for line in data.decode().splitlines() if line.strip()]
