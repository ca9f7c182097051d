"""What the supervisor and its workers share: environment names, the slot spec, events.

Light on purpose (no torch): the supervisor imports it.

Events are JSON lines ``{"e": kind, "t": unix seconds, ...}`` on a pipe, in this order per trial:
``start`` (claimed) -> ``fit_start`` (params known, training begins) -> ``epoch``... -> ``end``
(an ``epoch`` per epoch trained, with its ``value`` where the epoch validated; ``end``
with the params too, for a trial that failed before its fit started);
plus ``ready`` once and ``exit`` at the end of a worker. A worker started before the study
exists (:attr:`WorkerSpec.hold`) imports torch and Lightning while the launcher goes on; one
that checks the config (:attr:`WorkerSpec.check`) then says ``checked`` (with the notes to
show) or ``refused`` (a :class:`~lightning_hpo.errors.ConfigError`'s field and message), unless
the go line is in its pipe already: the first worker to finish importing answers for all.

The other way, on a second pipe, the supervisor sends :data:`GO_LINE` once the study exists (to
held workers), and :class:`StopOrder` lines when the study's own budget is spent, followed by
:data:`STOP_SIGNAL` so that a worker in the middle of an epoch reads them at once. SIGTERM
stays what it was: an interruption (the trial pauses at its last checkpoint, for the next run
to resume); when the launcher sends it because it was stopped itself, an interrupt
:class:`StopOrder` saying so comes first, and the paused trial keeps its words.
"""

from __future__ import annotations

import json
import os
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from lightning_hpo.schema import device_label

__all__ = [
    "CONFIG_ENV",
    "GO_LINE",
    "INTERRUPTS",
    "RANKS_LOST",
    "RESTART_REASONS",
    "STOP_SIGNAL",
    "TRIAL_LIMIT",
    "WORKER_ENV",
    "EventWriter",
    "StopOrder",
    "WorkerSpec",
    "read_go",
    "read_stop_orders",
]

#: The validated config's raw mapping, as JSON (environment, so passwords stay out of ``ps``).
CONFIG_ENV = "LIGHTNING_HPO_CONFIG"
#: The worker's :class:`WorkerSpec`, as JSON.
WORKER_ENV = "LIGHTNING_HPO_WORKER"
#: The exit reason of a worker that ran its ``max_trials``; the supervisor starts a fresh one.
TRIAL_LIMIT = "trial limit reached"
#: The exit reason of a DDP slot's worker after a trial failed on one of its other ranks, or
#: left them in a collective: their process group cannot train on, so the supervisor starts a
#: fresh worker, which starts fresh ranks (not counted as a death of the slot).
RANKS_LOST = "its DDP ranks must start again"
#: Exit reasons after which the supervisor starts the slot's worker again.
RESTART_REASONS = frozenset({TRIAL_LIMIT, RANKS_LOST})
#: Sent to a worker after a :class:`StopOrder` is written to its control pipe: "read it now".
STOP_SIGNAL = signal.SIGUSR1
#: The signals that interrupt the launcher: the running trials pause at their last checkpoint and
#: the command exits with 128 + the signal's number (130, 143, 138), for the same command to
#: resume them. SIGUSR1 is what SLURM sends ahead of a time limit when asked
#: (``--signal=B:USR1@120``); to a worker it stays :data:`STOP_SIGNAL`.
INTERRUPTS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
#: The supervisor's word to a held worker, on its control pipe: the study exists, start.
GO_LINE = b'{"go": true}\n'


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
    hold: bool = False  # started before the study exists: wait for GO_LINE before claiming
    check: bool = False  # check the config against the real classes first (checked/refused)
    # unless the go line came already (another worker answered and the study exists)

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
    """The supervisor's order to stop because the study's budget is spent, or (``interrupt``)
    why the SIGTERM that follows it was sent.

    The trial a worker trains then ends PRUNED, keeping the values it reported, with
    ``reason`` and where it stopped in its ``stop_reason`` attribute; the worker claims no more.
    An interrupt order comes right before the supervisor's SIGTERM, which pauses the trial: the
    worker's handler reads it, and the trial's pause says why the launcher stopped (``launcher
    stopped by SIGINT``) instead of the signal the worker got.

    Args:
        reason: the stop criterion, e.g.
            ``"wall-clock budget reached (stop.max_wallclock_time=200 s)"``.
        now: False: stop at the next epoch boundary (``stop.grace`` is running); True: stop at
            the next training batch.
        interrupt: the launcher itself was stopped (a signal); ``reason`` says how.

    Example::

        line = StopOrder("wall-clock budget reached", now=False).to_line()
        assert StopOrder.from_line(line) == StopOrder("wall-clock budget reached", now=False)
    """

    reason: str
    now: bool
    interrupt: bool = False

    def to_line(self) -> str:
        """One JSON line (well under ``PIPE_BUF``, so a pipe write of it is atomic)."""
        extra = {"interrupt": True} if self.interrupt else {}
        return json.dumps({"stop": self.reason, "now": self.now, **extra}) + "\n"

    @classmethod
    def from_line(cls, line: str) -> StopOrder:
        raw = json.loads(line)
        return cls(str(raw["stop"]), bool(raw["now"]), bool(raw.get("interrupt", False)))


def read_stop_orders(fd: int) -> list[StopOrder]:
    """The stop orders waiting on a non-blocking control pipe (none when ``fd`` is -1).

    Each order is written in one atomic write, so a read returns whole lines; the end of one
    that :func:`read_go` had begun reading when a signal's handler came here is skipped.
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
    orders = []
    for line in data.decode(errors="replace").splitlines():
        if not line.strip() or line.strip() == GO_LINE.decode().strip():
            continue
        try:
            orders.append(StopOrder.from_line(line))
        except (ValueError, KeyError, TypeError):  # the rest of a line read_go had begun
            continue
    return orders


def read_go(fd: int, keep_waiting: Callable[[], bool], *, wait: bool = True) -> bool:
    """Wait on a control pipe until the supervisor's :data:`GO_LINE`; True when it came.

    Reads byte by byte up to the line's end, so the stop orders written after it stay in the
    pipe for :func:`read_stop_orders`. False when the pipe closes (the launcher is gone or gave
    up: a refused config) or ``keep_waiting()`` turns False (a signal arrived). Without
    ``wait``, only what is in the pipe already is read: False when the go line is not there
    (yet).
    """
    line = b""
    while keep_waiting():
        ready, _, _ = select.select([fd], [], [], 0.2 if wait or line else 0)
        if not ready:
            if not wait and not line:
                return False
            continue
        try:
            byte = os.read(fd, 1)
        except BlockingIOError:
            continue
        if not byte:
            return False
        line += byte
        if byte == b"\n":
            if line == GO_LINE:
                return True
            line = b""
    return False
