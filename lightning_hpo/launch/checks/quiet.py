"""Lightning's per-Trainer lines (seed, devices, tips) off while the launcher checks a config,
and its hint to start the command with ``srun`` where ``srun`` exists (the launcher is started
as it should be; its workers drop the same hint,
:func:`~lightning_hpo.launch.worker._once.say_once`).

Example::

    with quiet_lightning():
        Trainer(accelerator="cpu", devices=1)   # no "GPU available: ..." lines
"""

from __future__ import annotations

import contextlib
import logging
import warnings
from collections.abc import Iterator

__all__ = ["SRUN_HINT", "quiet_lightning"]

#: The start of Lightning's warning where ``srun`` exists and the process was not started by it.
SRUN_HINT = r"The `srun` command is available on your system"


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Lightning's loggers at WARNING inside the block, as they were after it; its ``srun``
    hint ignored inside the block."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=SRUN_HINT)
            yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
