"""Say it once: a worker's log shows each warning and each library notice the first time only.

A worker trains many trials in one process, and Lightning repeats its notices with every
``Trainer`` (the accelerator banner, a logging tip) and its warnings with every ``fit``
(``log_every_n_steps`` larger than the epoch, with the epoch's batch count in the text). In a
slot's log (``workers/slotN.log``) each is said the first time and not again: messages count
as the same when they differ only in numbers and paths (:func:`message_key`).

The launcher's own records (loggers under ``lightning_hpo.launch``) are events, one per trial
or per crash, and are never held back. The warning Lightning gives for every trial folder
("Checkpoint directory ... exists and is not empty") is not said at all: the launcher puts each
trial's logs next to its checkpoints on purpose, nor its hint to start a process with ``srun``
(a worker is not a SLURM task on purpose: :mod:`lightning_hpo.launch.config.slurm`).
"""

from __future__ import annotations

import logging
import re
import warnings
from typing import TextIO

from lightning_hpo.launch.checks.quiet import SRUN_HINT

__all__ = ["SaidOnce", "message_key", "say_once"]

_PATH = re.compile(r"(?:[A-Za-z]:)?(?:[\\/][^\s'\"`:,()\[\]]+)+")
_NUMBER = re.compile(r"\d+(?:\.\d+)?(?:e[-+]?\d+)?")
#: Records of these loggers are always shown (the launcher's events).
_EVENT_LOGGERS = "lightning_hpo.launch"


def message_key(text: str) -> str:
    """``text`` with its paths and numbers masked: what makes two messages "the same".

    Example::

        >>> message_key("The number of training batches (9) is smaller than 50")
        'The number of training batches (#) is smaller than #'
        >>> message_key("Checkpoint directory /runs/q/trial_00007 exists")
        'Checkpoint directory PATH exists'
    """
    return _NUMBER.sub("#", _PATH.sub("PATH", text))


class SaidOnce:
    """The messages said so far (by :func:`message_key`).

    Example::

        >>> said = SaidOnce()
        >>> said.first("GPU available: False"), said.first("GPU available: False")
        (True, False)
        >>> said.first("batches (9)"), said.first("batches (40)")
        (True, False)
    """

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def first(self, text: str) -> bool:
        """True the first time a message like ``text`` is seen."""
        key = message_key(text)
        if key in self._seen:
            return False
        self._seen.add(key)
        return True


class _OnceFilter(logging.Filter):
    """Passes a library's log record the first time its message is seen."""

    def __init__(self, said: SaidOnce) -> None:
        super().__init__()
        self._said = said

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name.startswith(_EVENT_LOGGERS):
            return True
        return self._said.first(f"{record.name}:{record.levelno}:{record.getMessage()}")


def say_once() -> SaidOnce:
    """Make this process say each warning and each library log message once (call it after
    the logging handlers are set up: Lightning installs its own on import).

    Returns:
        The record of what was said (warnings and log records share it).
    """
    said = SaidOnce()
    once = _OnceFilter(said)
    loggers = [logging.getLogger()] + [
        logger for logger in logging.Logger.manager.loggerDict.values()
        if isinstance(logger, logging.Logger)
    ]
    for logger in loggers:
        for handler in logger.handlers:
            if once not in handler.filters:
                handler.addFilter(once)
    warnings.filterwarnings("ignore", message=r"Checkpoint directory .* exists and is not empty")
    # A worker is not a SLURM task on purpose (launch.slurm): Lightning's hint to start it with
    # srun, given where srun exists, is wrong here.
    warnings.filterwarnings("ignore", message=SRUN_HINT)
    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if said.first(f"{category.__name__}:{filename}:{lineno}:{message}"):
            shown(message, category, filename, lineno, file, line)

    warnings.showwarning = show
    return said
