"""One definition of each launcher field, and the one reader it drives.

A section's fields are the fields of its frozen dataclass (:class:`~lightning_hpo.launch.config.
PrunerSpec`, ``StopSpec``...), declared with :func:`spec`: the annotation is the type (``int``,
``float``, ``bool``, a ``Literal`` of choices, ``| None`` where null is allowed), the dataclass
default is the default, and the :class:`FieldDoc` in its metadata says the rest (minimum, unit,
which pruners it is for, one sentence). :func:`read_fields` reads a section by it with the
one-line :class:`~lightning_hpo.errors.ConfigError` messages; the reference
(:func:`~lightning_hpo.launch.config.reference.field_reference`) and ``--print-config`` read the
same definition.

Example::

    >>> from lightning_hpo.launch.config import StopSpec
    >>> read_fields(StopSpec, {"n_trials": 8}, "stop")["max_retries"]
    2
    >>> read_fields(StopSpec, {"grace": -1}, "stop")
    Traceback (most recent call last):
    ...
    lightning_hpo.errors.ConfigError: stop.grace: is -1, but must be seconds >= 0
"""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Union, get_args, get_origin, get_type_hints

from lightning_hpo.errors import ConfigError, field_choice, field_int, field_keys, is_finite_number

__all__ = ["Field", "FieldDoc", "applies", "fields_of", "read_fields", "read_value", "spec"]



@dataclasses.dataclass(frozen=True)
class FieldDoc:
    """What a field's annotation and default do not say: its rule, where it applies, its doc."""

    #: One sentence for the reference.
    doc: str
    #: The least value of a number (``above``: the value must exceed it); ``maximum``: the most.
    minimum: int | None = None
    maximum: int | None = None
    above: bool = False
    #: The unit of a number (``seconds``, ``epochs``), in the reference and a float's message.
    unit: str = ""
    #: The ``pruner.name`` values that take this key (None: every pruner, or not a pruner key).
    pruners: tuple[str, ...] | None = None
    #: Whether the field applies to a parsed ``PrunerSpec`` (set otherwise, it is refused), and
    #: the same in words (``applies to <words> only``).
    when: Callable[[Any], bool] | None = None
    applies: str = ""
    #: ``check(field, value) -> value`` in place of the generic check (a message of its own).
    check: Callable[[str, Any], Any] | None = None
    #: For the reference, where the annotation or the default does not say it.
    type_text: str = ""
    default_text: str = ""
    allowed_text: str = ""


def spec(default: Any, doc: str, **rules: Any) -> Any:
    """A dataclass field with ``default`` and its :class:`FieldDoc` (``doc`` and ``rules``)."""
    return dataclasses.field(default=default, metadata={"doc": FieldDoc(doc, **rules)})


@dataclasses.dataclass(frozen=True)
class Field:
    """One field of a section, resolved from its dataclass: what :func:`read_value` checks."""

    name: str
    kind: type  # int, float, bool or str
    optional: bool  # null allowed
    choices: tuple[str, ...]  # a Literal's values; empty otherwise
    default: Any
    doc: FieldDoc

    @property
    def type_words(self) -> str:
        """The type in the reference's words (``integer``, ``seconds or null``...)."""
        if self.doc.type_text:
            return self.doc.type_text
        words = {int: "integer", float: "number", bool: "true or false", str: "string"}
        text = "choice" if self.choices else words[self.kind]
        return f"{text} or null" if self.optional else text

    @property
    def allowed_words(self) -> str:
        """What values are allowed, in words (``>= 2``, ``auto, epoch, rung``)."""
        doc = self.doc
        if doc.allowed_text:
            return doc.allowed_text
        if self.choices:
            return ", ".join(self.choices)
        if doc.minimum is None:
            return ""
        if doc.maximum is not None:
            return f"{doc.minimum} to {doc.maximum}"
        return f"{'>' if doc.above else '>='} {doc.minimum}"


_FIELDS: dict[type, tuple[Field, ...]] = {}


def fields_of(cls: type) -> tuple[Field, ...]:
    """The declared fields (those made with :func:`spec`) of dataclass ``cls``, in order."""
    if cls not in _FIELDS:
        hints = get_type_hints(cls)
        _FIELDS[cls] = tuple(
            Field(item.name, *_kind(hints[item.name]), item.default, item.metadata["doc"])
            for item in dataclasses.fields(cls) if "doc" in item.metadata)
    return _FIELDS[cls]


def _kind(hint: Any) -> tuple[type, bool, tuple[str, ...]]:
    """``(kind, optional, choices)`` of an annotation: ``int``, ``int | None``, a ``Literal``."""
    args = get_args(hint)
    if get_origin(hint) in (Union, types.UnionType):
        inner = [arg for arg in args if arg is not type(None)]
        assert len(inner) == 1, hint
        kind, _, choices = _kind(inner[0])
        return kind, True, choices
    if get_origin(hint) is Literal:
        return str, False, tuple(str(arg) for arg in args)
    assert hint in (int, float, bool, str), hint
    return hint, False, ()


def read_value(path: str, item: Field, value: Any) -> Any:
    """``value`` of field ``item`` (named ``path``) checked, as a plain Python value.

    Raises:
        ConfigError: ``path`` and what is allowed: the messages of :func:`~lightning_hpo.errors.
            field_int` and :func:`~lightning_hpo.errors.field_choice`, ``must be true or
            false``, ``must be seconds > 0``.
    """
    doc = item.doc
    if doc.check is not None:
        return doc.check(path, value)
    if value is None and item.optional:
        return None
    if item.choices:
        return field_choice(path, value, item.choices)
    if item.kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(path, f"is {value!r}, but must be true or false")
        return value
    if item.kind is int:
        assert doc.minimum is not None, path
        number = field_int(path, value, minimum=doc.minimum + doc.above)
        if doc.maximum is not None and number > doc.maximum:
            raise ConfigError(path, f"is {number}, but must be an integer from {doc.minimum} to "
                              f"{doc.maximum}")
        return number
    if item.kind is float:
        low = 0 if doc.minimum is None else doc.minimum
        if not is_finite_number(value) or value < low or (doc.above and value == low):
            raise ConfigError(path, f"is {value!r}, but must be {doc.unit or 'a number'} "
                              f"{'>' if doc.above else '>='} {low}")
        return float(value)
    if not isinstance(value, str) or not value:
        raise ConfigError(path, f"is {value!r}, but must be a non-empty string")
    return value


def read_fields(cls: type, raw: Any, where: str,
                keys: Sequence[str] | None = None) -> dict[str, Any]:
    """Section ``where`` of the config, read by ``cls``'s definition: every field's value.

    Args:
        cls: the section's dataclass.
        raw: the section as written (a mapping).
        where: the section's name (``"stop"``).
        keys: the fields this section may hold (default: all); the others get their default.

    Raises:
        ConfigError: ``where`` when ``raw`` is not a mapping, ``where.key`` for an unknown key
            (:func:`~lightning_hpo.errors.field_keys`) or a bad value (:func:`read_value`), the
            first in the definition's order.
    """
    if not isinstance(raw, Mapping):
        raise ConfigError(where, f"must be a mapping, got {raw!r}")
    defined = fields_of(cls)
    names = [item.name for item in defined] if keys is None else list(keys)
    field_keys(raw, names, where)
    return {item.name: read_value(f"{where}.{item.name}", item, raw.get(item.name, item.default))
            if item.name in names else item.default for item in defined}


def applies(item: Field, pruner: Any) -> bool:
    """Whether field ``item`` applies with ``pruner`` (a parsed ``PrunerSpec``)."""
    doc = item.doc
    return ((doc.pruners is None or pruner.name in doc.pruners)
            and (doc.when is None or doc.when(pruner)))


def check_applies(cls: type, raw: Mapping[str, Any], where: str, pruner: Any) -> None:
    """Refuse a field of section ``where`` given (not null) where it does not apply.

    Raises:
        ConfigError: ``where.key: applies to ... only; the pruner is ...``.
    """
    for item in fields_of(cls):
        if item.doc.when is not None and raw.get(item.name) is not None and not applies(
                item, pruner):
            used = pruner.name + (f" with mode {pruner.mode}"
                                  if pruner.name in ("asha", "hyperband") else "")
            raise ConfigError(f"{where}.{item.name}", f"applies to {item.doc.applies} only; "
                              f"the pruner is {used}")
