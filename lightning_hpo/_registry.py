"""Name lookup, construction and hyperparameter checks shared by ``models`` and ``data``.

A *section* is the config key a registry answers to (``"model"`` or ``"data"``); every error
names ``<section>.<field>`` so the CLI can print it as one line. Example::

    >>> from lightning.pytorch import LightningModule
    >>> from lightning_hpo.builtin.models import MODELS
    >>> resolve_class("model", "lightning_hpo.builtin.models:LeNet", MODELS,
    ...               LightningModule).__name__
    'LeNet'
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Mapping
from typing import Any, TypeVar, cast

from lightning_hpo.errors import ConfigError

__all__ = ["accepts_any_keyword", "build", "defaults", "init_parameters", "resolve_class"]

_T = TypeVar("_T")


def resolve_class(
    section: str, name: str, registry: Mapping[str, type[_T]], base: type, key: str = "name"
) -> type[_T]:
    """Return the class for a registry name or a ``"package.module:Class"`` path.

    Args:
        section: config section used in error fields (``"model"``, ``"data"``).
        name: a key of ``registry`` or an import path ``"package.module:Class"``.
        registry: the known names.
        base: the class the result must subclass (``LightningModule``, ``LightningDataModule``).
        key: the field's key in errors (``name``; ``class`` for ``sampler.class``).

    Raises:
        ConfigError: on ``<section>.<key>`` when the name is unknown, cannot be imported, or is
            not a subclass of ``base``.
    """
    field = f"{section}.{key}"
    allowed = f"allowed: {', '.join(registry)}, or a 'package.module:Class' path"
    if not isinstance(name, str) or not name:
        raise ConfigError(field, f"must be a non-empty string, got {name!r}; {allowed}")
    if name in registry:
        return registry[name]
    if ":" not in name:
        noun = "data module" if section == "data" else section
        raise ConfigError(field, f"unknown {noun} {name!r}; {allowed}")
    module_name, _, attr = name.partition(":")
    if not module_name or not attr:
        raise ConfigError(field, f"{name!r} is not a 'package.module:Class' path; {allowed}")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(field, f"cannot import module {module_name!r} ({exc})") from exc
    obj: Any = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(field, f"module {module_name!r} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise ConfigError(field, f"{name!r} is not a {base.__name__} subclass")
    return cast("type[_T]", obj)


def init_parameters(cls: type) -> dict[str, inspect.Parameter]:
    """Keyword-capable parameters of ``cls.__init__`` (no ``self``, ``*args``, ``**kwargs``)."""
    params = inspect.signature(cls).parameters
    return {
        key: param
        for key, param in params.items()
        if key != "self"
        and param.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }


def accepts_any_keyword(cls: type) -> bool:
    params = inspect.signature(cls).parameters.values()
    return any(param.kind is inspect.Parameter.VAR_KEYWORD for param in params)


def defaults(cls: type) -> dict[str, Any]:
    """Constructor defaults of ``cls``; a required argument maps to ``inspect.Parameter.empty``."""
    return {key: param.default for key, param in init_parameters(cls).items()}


def build(
    section: str, name: str, registry: Mapping[str, type[_T]], base: type, kwargs: Mapping[str, Any]
) -> _T:
    """Resolve ``name`` and instantiate it with ``kwargs`` after checking every key is known.

    Raises:
        ConfigError: on ``<section>.name`` for a bad name, on ``<section>.<key>`` for an unknown
            or missing argument (value errors are the class's own, also ConfigErrors for ours).
    """
    cls = resolve_class(section, name, registry, base)
    params = init_parameters(cls)
    if not accepts_any_keyword(cls):
        allowed = ", ".join(params) or "none"
        for key in kwargs:
            if key not in params:
                raise ConfigError(
                    f"{section}.{key}", f"unknown hyperparameter for {name!r}; allowed: {allowed}"
                )
    for key, param in params.items():
        if param.default is inspect.Parameter.empty and key not in kwargs:
            raise ConfigError(f"{section}.{key}", f"is required by {name!r} but was not given")
    return cls(**kwargs)
