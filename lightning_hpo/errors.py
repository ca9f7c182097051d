"""Errors a user can act on, and the checks that raise them, one message template each.

Every error that comes from user input names the field it is about and what is allowed, so the
CLI can print it as one line and exit with code 2. Two templates:

* a config field or a registry argument (:func:`field_int`, :func:`field_float`,
  :func:`field_choice`): a :class:`ConfigError` with the field's dotted name;
* an argument of the Python API (:func:`argument_int`, :func:`argument_bool`): a ``ValueError`` in
  Optuna's words, "The value of `reduction_factor` is 1, but must be `reduction_factor >= 2`."

Example::

    >>> raise ConfigError("pruner.reduction_factor", "is 1, but must be an integer >= 2")
    Traceback (most recent call last):
    ...
    lightning_hpo.errors.ConfigError: pruner.reduction_factor: is 1, but must be an integer >= 2
    >>> field_int("stop.n_trials", None, minimum=1, optional=True) is None
    True
    >>> argument_int("reduction_factor", 1, 2)
    Traceback (most recent call last):
    ...
    ValueError: The value of `reduction_factor` is 1, but must be `reduction_factor >= 2`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from numbers import Integral, Real
from typing import Any, Literal, overload

__all__ = [
    "EXIT_BAD_INPUT",
    "ConfigError",
    "TrialsFailedError",
    "WorkerError",
    "argument_bool",
    "argument_int",
    "field_choice",
    "field_float",
    "field_int",
    "field_keys",
    "is_finite_number",
]

#: The exit code of every command-line tool of ours for bad input (as argparse uses).
EXIT_BAD_INPUT = 2


class ConfigError(ValueError):
    """Bad user input: a config field, a search space, a model or data name, a CLI argument.

    Args:
        field: the dotted name of the offending field (``"space.lr.loguniform"``, ``"model.name"``).
        message: what is wrong and what is allowed, without the field name. It is made one
            line: a user's class or a parser may raise text over several lines, and the CLI
            prints one (each line break, with the spaces around it, becomes one space).

    Example::

        >>> from lightning_hpo import ConfigError
        >>> str(ConfigError("model", "refused:\\n  - model.momentum: is 5.0\\n  - other"))
        'model: refused: - model.momentum: is 5.0 - other'
    """

    def __init__(self, field: str, message: str) -> None:
        self.field = field
        self.message = re.sub(r"\s*\n\s*", " ", message.strip())
        super().__init__(f"{field}: {self.message}")


class WorkerError(RuntimeError):
    """A worker died where the launcher cannot go on without it (checking the config); the
    message names its pid, how it ended and its log. The CLI prints it as one line, exit 1."""


class TrialsFailedError(RuntimeError):
    """A run ran trials and every one of them ended FAIL: not bad input (the config passed its
    checks), but nothing was learned. The message is the line the CLI prints before it exits
    with code 1: how many failed and the first failure's reason, on one line.

    Args:
        message: the one line (:func:`lightning_hpo.launch.runner.all_failed`'s).
        study: the study the trials are in (``error.study.trials`` holds each one's reason in
            its ``user_attrs``), or None.

    Example::

        >>> error = TrialsFailedError("every trial of this run failed (1 of 1); the first, "
        ...                           "trial 0: RuntimeError: boom")
        >>> str(error), error.study
        ('every trial of this run failed (1 of 1); the first, trial 0: RuntimeError: boom', None)
    """

    def __init__(self, message: str, study: Any = None) -> None:
        super().__init__(message)
        self.study = study


# --- config fields: each returns the value (a plain Python number) or raises ConfigError ---


@overload
def field_int(
    field: str, value: Any, *, minimum: int, optional: Literal[False] = False
) -> int: ...
@overload
def field_int(field: str, value: Any, *, minimum: int, optional: bool) -> int | None: ...
def field_int(field: str, value: Any, *, minimum: int, optional: bool = False) -> int | None:
    """``value`` as an int ``>= minimum`` (``None`` stays ``None`` when ``optional``).

    Raises:
        ConfigError: ``field``, for a bool, a non-integer or a value below ``minimum``.
    """
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, Integral) or value < minimum:
        raise ConfigError(field, f"is {value!r}, but must be an integer >= {minimum}")
    return int(value)


def is_finite_number(value: Any) -> bool:
    """Whether ``value`` is a real number (not a bool) that a float holds: not NaN, not an
    infinity, not an integer beyond the largest float (``math.isfinite`` raises for one).

    Example::

        >>> is_finite_number(3), is_finite_number(float("nan")), is_finite_number(10**400)
        (True, False, False)
    """
    if isinstance(value, bool) or not isinstance(value, Real):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:  # an int of more than ~308 digits
        return False


def field_float(
    field: str,
    value: Any,
    *,
    low: float,
    high: float = math.inf,
    low_open: bool = False,
    high_open: bool = True,
) -> float:
    """``value`` as a float in the interval from ``low`` to ``high``.

    ``low_open``/``high_open`` exclude the bound itself: ``low=0, low_open=True`` is ``> 0``.

    Raises:
        ConfigError: ``field``, for a bool, a non-number, NaN or a value outside the interval.
    """
    if math.isinf(high):
        allowed = f"a number {'>' if low_open else '>='} {low:g}"
    else:
        left, right = "(" if low_open else "[", ")" if high_open else "]"
        allowed = f"a number in {left}{low:g}, {high:g}{right}"
    if isinstance(value, bool) or not isinstance(value, Real):
        raise ConfigError(field, f"must be {allowed}, got {value!r}")
    if not is_finite_number(value) and not (isinstance(value, float) and math.isinf(value)):
        raise ConfigError(field, f"is {value!r}, but must be {allowed}")  # NaN, 10**400
    number = float(value)
    too_low = number <= low if low_open else number < low
    too_high = number >= high if high_open else number > high
    if too_low or too_high:
        raise ConfigError(field, f"is {value!r}, but must be {allowed}")
    return number


def field_choice(field: str, value: Any, allowed: tuple[str, ...] | list[str]) -> str:
    """``value`` when it is one of ``allowed``.

    Raises:
        ConfigError: ``field``, listing what is allowed.
    """
    if value not in allowed:
        raise ConfigError(field, f"is {value!r}; allowed: {', '.join(allowed)}")
    return str(value)


def field_keys(section: Mapping[str, Any], allowed: Sequence[str], where: str) -> None:
    """Refuse a key of ``section`` (the config's ``where`` section; ``""``: the top level)
    that is not in ``allowed``.

    Raises:
        ConfigError: ``<where>.<key>: unknown field; allowed: ...`` (the first, sorted).

    Example::

        >>> field_keys({"count": 2, "gpus": 1}, ("count", "per_trial"), "devices")
        Traceback (most recent call last):
        ...
        lightning_hpo.errors.ConfigError: devices.gpus: unknown field; allowed: count, per_trial
    """
    unknown = sorted(set(section) - set(allowed))
    if unknown:
        field_name = f"{where}.{unknown[0]}" if where else str(unknown[0])
        raise ConfigError(field_name, f"unknown field; allowed: {', '.join(sorted(allowed))}")


# --- arguments of the Python API (pruners, rung arithmetic, schedules): ValueError ----------


def argument_int(name: str, value: object, minimum: int) -> int:
    """``value`` when it is an int (not a bool: ``True`` epochs is a bug) ``>= minimum``.

    Raises:
        ValueError: in Optuna's template, naming ``name``.
    """
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"The value of `{name}` is {value!r}, but must be an integer `{name} >= {minimum}`."
        )
    if value < minimum:
        raise ValueError(f"The value of `{name}` is {value}, but must be `{name} >= {minimum}`.")
    return value


def argument_bool(name: str, value: object) -> bool:
    """``value`` when it is ``True`` or ``False``.

    Raises:
        ValueError: in Optuna's template, naming ``name``.
    """
    if not isinstance(value, bool):
        raise ValueError(f"The value of `{name}` is {value!r}, but must be True or False.")
    return value
