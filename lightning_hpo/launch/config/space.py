"""The YAML search-space grammar and its translation to Optuna distributions.

A search space maps hyperparameter names to one of::

    lr:          {loguniform: [0.01, 1.0]}    # float, log scale, low > 0
    momentum:    {uniform: [0.0, 0.99]}       # float, linear scale
    batch_size:  {randint: [32, 256]}         # int, both ends included
    activation:  {choice: [relu, sigmoid]}    # one of the listed values
    num_classes: 10                           # a constant: passed as is, never searched

Every range needs ``low < high`` (a one-point range is a constant). Errors are
:class:`~lightning_hpo.errors.ConfigError` naming the field, e.g.
``space.lr.loguniform: low is 0, but a log range needs low > 0``.

Example::

    >>> space = parse_space({"lr": {"loguniform": [0.01, 1.0]}, "num_classes": 10})
    >>> sorted(space)
    ['lr', 'num_classes']
    >>> space["lr"]
    FloatDistribution(high=1.0, log=True, low=0.01, step=None)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from optuna.distributions import (
    BaseDistribution,
    CategoricalDistribution,
    FloatDistribution,
    IntDistribution,
)

from lightning_hpo.errors import ConfigError, is_finite_number
from lightning_hpo.launch.config.cli_spec import SECTIONS

__all__ = ["KINDS", "Space", "check_in_space", "parse_space", "suggest", "to_yaml"]

#: The distribution kinds the grammar knows.
KINDS = ("loguniform", "uniform", "randint", "choice")

#: A parsed space: a distribution to search, or a constant.
Space = dict[str, BaseDistribution | Any]

_SCALAR = (bool, int, float, str, type(None))


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _parse_range(field: str, kind: str, bounds: Any) -> tuple[Any, Any]:
    if not isinstance(bounds, list | tuple) or len(bounds) != 2:
        raise ConfigError(field, f"must be a list [low, high], got {bounds!r}")
    low, high = bounds
    if kind == "randint":
        if not all(isinstance(b, int) and not isinstance(b, bool) for b in (low, high)):
            raise ConfigError(field, f"bounds must be integers, got {bounds!r}")
    elif not all(is_finite_number(b) for b in (low, high)):
        raise ConfigError(field, f"bounds must be finite numbers, got {bounds!r}")
    if low >= high:
        raise ConfigError(
            field, f"low is {low} and high is {high}, but must be low < high "
            "(for a single value, give the constant itself)"
        )
    if kind == "loguniform" and low <= 0:
        raise ConfigError(field, f"low is {low}, but a log range needs low > 0")
    return low, high


def _section_hint(name: str, inner: str, dotted: bool) -> str:
    """Why ``space.<name>: {<inner>: ...}`` is no range: ``name`` is a section, nested."""
    if name not in SECTIONS or inner in KINDS:
        return ""
    if dotted:  # a LightningCLI config: its keys are dotted
        argument = inner if inner.isidentifier() else "<argument>"
        return (f"; {name} is a section, not a hyperparameter: name one of its arguments by "
                f"its dotted key, space.{name}.{argument}")
    argument = inner if inner.isidentifier() and name in ("model", "data") else "lr"
    return (f"; {name} is a section, not a hyperparameter: a space key names a model or data "
            f"argument (space.{argument}), and {name}.* keys need a LightningCLI config")


def _parse_one(name: str, spec: Any, field: str, dotted: bool = False) -> BaseDistribution | Any:
    if isinstance(spec, _SCALAR):
        return spec
    if not isinstance(spec, Mapping):
        raise ConfigError(
            field, f"must be a constant or one of {{{': ..., '.join(KINDS)}: ...}}, got {spec!r}"
        )
    if len(spec) != 1:
        hint = _section_hint(name, str(sorted(map(str, spec))[0]), dotted)
        raise ConfigError(
            field, f"must have exactly one key out of {', '.join(KINDS)}, got "
            f"{sorted(spec, key=str)}{hint}"
        )
    ((kind, value),) = spec.items()
    if kind not in KINDS:
        raise ConfigError(
            field, f"unknown distribution '{kind}'; allowed: {', '.join(KINDS)}, or a "
            f"constant{_section_hint(name, str(kind), dotted)}"
        )
    sub = f"{field}.{kind}"
    if kind == "choice":
        if not isinstance(value, list | tuple) or not value:
            raise ConfigError(sub, f"must be a non-empty list of values, got {value!r}")
        if not all(isinstance(v, _SCALAR) for v in value):
            raise ConfigError(sub, "choices must be numbers, strings, booleans or null")
        if len(set(map(repr, value))) != len(value):
            raise ConfigError(sub, f"choices must be distinct, got {list(value)!r}")
        equal = [(a, b) for i, a in enumerate(value) for b in value[i + 1:] if a == b]
        if equal:  # Optuna finds a choice by ==: a trial that draws true would get 1
            a, b = equal[0]
            raise ConfigError(sub, f"choices must be distinct, got {list(value)!r}: {a!r} and "
                              f"{b!r} are equal to Python (and Optuna, which would give the "
                              "first for both); quote them as strings to keep both")
        return CategoricalDistribution(list(value))
    low, high = _parse_range(sub, kind, value)
    if kind == "randint":
        return IntDistribution(low, high)
    return FloatDistribution(float(low), float(high), log=kind == "loguniform")


def parse_space(raw: Any, field: str = "space", *, dotted: bool = False) -> Space:
    """Parse a search space from its YAML form into Optuna distributions and constants.

    Args:
        raw: a mapping of hyperparameter name to specification (see the module docstring).
        field: the dotted name to use in error messages.
        dotted: names may be dotted keys (``model.init_args.lr``, a LightningCLI's keys).

    Returns:
        A dict of name to :class:`optuna.distributions.BaseDistribution` or constant.

    Raises:
        ConfigError: naming ``space.<name>`` and what is allowed.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(field, f"must be a mapping of hyperparameter name to range, got {raw!r}")
    space: Space = {}
    for name, spec in raw.items():
        parts = name.split(".") if isinstance(name, str) and dotted else [name]
        if not all(isinstance(part, str) and part.isidentifier() for part in parts):
            dotted_parts = name.split(".") if isinstance(name, str) else []
            if (not dotted and len(dotted_parts) > 1 and dotted_parts[0] in SECTIONS
                    and all(part.isidentifier() for part in dotted_parts)):
                own = dotted_parts[-1] if dotted_parts[0] in ("model", "data") else "lr"
                raise ConfigError(f"{field}.{name}", "is a dotted key, which needs a "
                                  "LightningCLI config (model: {class_path: package.module."
                                  "Class}); with model and data by name, a space key is a model "
                                  f"or data argument's own name (space.{own})")
            what = ("dotted keys of the CLI (model.hidden_dim, optimizer.init_args.lr)" if dotted
                    else "identifiers")
            read = (f" (YAML read this key as {type(name).__name__} {name!r}: quote it)"
                    if not isinstance(name, str) and name is not None else "")
            raise ConfigError(f"{field}.{name}", f"hyperparameter names must be {what}{read}")
        space[name] = _parse_one(name, spec, f"{field}.{name}", dotted)
    return space


def suggest(trial: Any, space: Space) -> dict[str, Any]:
    """Ask ``trial`` for a value of every searched hyperparameter; constants pass through.

    ``trial`` is an :class:`optuna.trial.Trial` (or what ``lightning_hpo.create_study`` passes
    to an objective). Values of enqueued trials (initial configurations) come back as given.

    Example::

        params = suggest(trial, parse_space({"lr": {"loguniform": [0.01, 1.0]}, "seed": 0}))
    """
    params: dict[str, Any] = {}
    for name, dist in space.items():
        if isinstance(dist, FloatDistribution):
            params[name] = trial.suggest_float(name, dist.low, dist.high, log=dist.log)
        elif isinstance(dist, IntDistribution):
            params[name] = trial.suggest_int(name, dist.low, dist.high, log=dist.log)
        elif isinstance(dist, CategoricalDistribution):
            params[name] = trial.suggest_categorical(name, dist.choices)
        else:
            params[name] = dist
    return params


def to_yaml(space: Space) -> dict[str, Any]:
    """The inverse of :func:`parse_space` (for printing a config back to the user)."""
    out: dict[str, Any] = {}
    for name, dist in space.items():
        if isinstance(dist, FloatDistribution):
            out[name] = {"loguniform" if dist.log else "uniform": [dist.low, dist.high]}
        elif isinstance(dist, IntDistribution):
            out[name] = {"randint": [dist.low, dist.high]}
        elif isinstance(dist, CategoricalDistribution):
            out[name] = {"choice": list(dist.choices)}
        else:
            out[name] = dist
    return out


def check_in_space(params: Mapping[str, Any], space: Space, field: str) -> None:
    """Check that a fixed configuration (e.g. an ``initial`` entry) lies inside ``space``.

    Raises:
        ConfigError: naming ``field.<name>`` for an unknown name or a value outside its range.
    """
    searched = {n: d for n, d in space.items() if isinstance(d, BaseDistribution)}
    for name, value in params.items():
        if name not in searched:
            allowed = ", ".join(sorted(searched)) or "none"
            raise ConfigError(
                f"{field}.{name}", f"is not a searched hyperparameter; allowed: {allowed}"
            )
        dist = searched[name]
        if isinstance(dist, CategoricalDistribution):
            if value not in dist.choices:
                raise ConfigError(
                    f"{field}.{name}", f"{value!r} is not one of {list(dist.choices)}"
                )
            continue
        assert isinstance(dist, FloatDistribution | IntDistribution)  # what parse_space makes
        if not _is_number(value):
            quoted = " (a string: write the number without quotes)" if isinstance(value, str) \
                else ""
            raise ConfigError(f"{field}.{name}", f"{value!r} is not a number{quoted}; the range "
                              f"is [{dist.low}, {dist.high}]")
        if not dist.low <= value <= dist.high:
            raise ConfigError(
                f"{field}.{name}", f"{value!r} is outside the range [{dist.low}, {dist.high}]"
            )
        elif isinstance(dist, IntDistribution) and not isinstance(value, int):
            raise ConfigError(f"{field}.{name}", f"{value!r} must be an integer")
