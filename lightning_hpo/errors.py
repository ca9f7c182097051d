"""Errors a user can act on.

Every error that comes from user input names the field it is about and what is allowed, so the
CLI can print it as one line and exit with code 2. Example::

    >>> raise ConfigError("pruner.reduction_factor", "is 1, but must be an integer >= 2")
    Traceback (most recent call last):
    ...
    lightning_hpo.errors.ConfigError: pruner.reduction_factor: is 1, but must be an integer >= 2
"""

from __future__ import annotations

__all__ = ["EXIT_BAD_INPUT", "ConfigError"]

#: The exit code of every command-line tool of ours for bad input (as argparse uses).
EXIT_BAD_INPUT = 2


class ConfigError(ValueError):
    """Bad user input: a config field, a search space, a model or data name, a CLI argument.

    Args:
        field: the dotted name of the offending field (``"space.lr.loguniform"``, ``"model.name"``).
        message: what is wrong and what is allowed, without the field name.
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(f"{field}: {message}")
