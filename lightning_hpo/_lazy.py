"""Public names imported on first use: a package's ``__getattr__`` and ``__dir__`` (PEP 562).

``import lightning_hpo`` must not import torch, and ``lightning_hpo.report.snapshot`` must not
import pandas or matplotlib: each package lists where its names live and imports a module only
when one of its names is first read (then keeps the value, so the next read is a plain lookup).

Example::

    >>> import types
    >>> exports = {"sqrt": "math"}
    >>> module = types.ModuleType("demo")
    >>> module.__getattr__, module.__dir__ = lazy_exports(module, exports, ["sqrt"])
    >>> module.__getattr__("sqrt")(9.0), "sqrt" in vars(module)
    (3.0, True)
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from types import ModuleType
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: ModuleType, exports: Mapping[str, str], public: Sequence[str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``(__getattr__, __dir__)`` for ``package``: ``exports`` maps each name to its module.

    Raises (from ``__getattr__``):
        AttributeError: a name that is not in ``exports``, in Python's own words.
    """

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module '{package.__name__}' has no attribute '{name}'")
        value = getattr(importlib.import_module(module), name)
        setattr(package, name, value)
        return value

    def __dir__() -> list[str]:
        return sorted(set(vars(package)) | set(public))

    return __getattr__, __dir__
