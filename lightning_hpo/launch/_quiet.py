"""Lightning's per-Trainer lines (seed, devices, tips) off while the launcher checks a config.

Example::

    with quiet_lightning():
        Trainer(accelerator="cpu", devices=1)   # no "GPU available: ..." lines
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator

__all__ = ["quiet_lightning"]


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    """Lightning's loggers at WARNING inside the block, as they were after it."""
    loggers = [logging.getLogger(name) for name in ("lightning.pytorch", "lightning.fabric")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.WARNING)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels, strict=True):
            logger.setLevel(level)
