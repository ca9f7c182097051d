"""Python's cyclic garbage collector paused while a worker imports torch and Lightning.

Importing them builds hundreds of thousands of objects that live as long as the process, and
the collector, which runs after every 700 or so allocations (its default threshold), looks at
them over and over while they are made: a noticeable part of the CPU a worker's imports take,
before its first trial. Paused during the imports and the objects then frozen (:func:`gc.freeze`:
moved where no later collection looks at them), that work is not done, and no full collection
during training walks them again. The price: the little cyclic garbage the imports leave is kept
for the process's life.

Only the worker's ``__main__`` pauses it (``python -m lightning_hpo.launch.worker``, and the
DDP ranks Lightning starts the same way); a library import of the module leaves the collector
of the importing process alone.

Example::

    with imports_without_collection(__name__ == "__main__"):
        import torch
"""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

__all__ = ["imports_without_collection"]


@contextlib.contextmanager
def imports_without_collection(pause: bool = True) -> Iterator[None]:
    """Run the block (a process's imports) with the cyclic garbage collector paused, then
    freeze every object it tracks and turn it back on as it was; with ``pause=False``, only
    run the block.

    Example::

        >>> import gc
        >>> before = gc.get_freeze_count()
        >>> with imports_without_collection():
        ...     paused = not gc.isenabled()
        ...     objects = [[] for _ in range(10)]
        >>> paused, gc.isenabled(), gc.get_freeze_count() >= before + 10
        (True, True, True)
        >>> gc.unfreeze()  # (for the doctest's process)
    """
    if not pause:
        yield
        return
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()
