"""What the supervisor and its workers share: environment names, the slot spec, events.

Light on purpose (no torch): the supervisor imports it.

Events are JSON lines ``{"e": kind, "t": unix seconds, ...}`` on a pipe, in this order per trial:
``start`` (claimed) -> ``fit_start`` (params known, training begins) -> ``epoch``... -> ``end``;
plus ``ready`` once and ``exit`` at the end of a worker.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["CONFIG_ENV", "TRIAL_LIMIT", "WORKER_ENV", "EventWriter", "WorkerSpec"]

#: The validated config's raw mapping, as JSON (environment, so passwords stay out of ``ps``).
CONFIG_ENV = "LIGHTNING_HPO_CONFIG"
#: The worker's :class:`WorkerSpec`, as JSON.
WORKER_ENV = "LIGHTNING_HPO_WORKER"
#: The exit reason of a worker that ran its ``max_trials``; the supervisor starts a fresh one.
TRIAL_LIMIT = "trial limit reached"


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

    @property
    def device_label(self) -> str:
        """``cuda:0,1`` or ``cpu:0``: what the status table and the trial record show."""
        return f"{'cuda' if self.kind == 'gpu' else 'cpu'}:{','.join(map(str, self.devices))}"

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
