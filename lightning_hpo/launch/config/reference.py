"""The field reference: every launcher field's type, default, allowed values and doc, in
Markdown, generated from the definition (:mod:`~lightning_hpo.launch.config._fields`), never
written by hand. ``python scripts/config_reference.py`` prints it.

Example::

    >>> text = field_reference()
    >>> "| `reduction_factor` | integer | 3 | >= 2 |" in text
    True
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from lightning_hpo.launch.config._fields import Field, FieldDoc, fields_of
from lightning_hpo.launch.config._spec import (
    LOGGER_FIELD,
    SAMPLER_FIELDS,
    TOP_FIELDS,
    TRAINER_DOCS,
    TRAINER_KEYS,
    CheckpointSpec,
    HeartbeatSpec,
    PrunerSpec,
    StopSpec,
)
from lightning_hpo.launch.config.devices import DevicesSpec

__all__ = ["SECTION_SPECS", "field_reference", "reference_rows"]

#: The sections read by a dataclass of the definition, in the file's order.
SECTION_SPECS: dict[str, type] = {
    "pruner": PrunerSpec, "devices": DevicesSpec, "stop": StopSpec,
    "checkpoint": CheckpointSpec, "heartbeat": HeartbeatSpec,
}
_COLUMNS = ("field", "type", "default", "allowed", "applies to", "description")


def _yaml(value: Any) -> str:
    """A default as YAML writes it."""
    return {None: "null", True: "true", False: "false"}.get(value, str(value)) if isinstance(
        value, bool | type(None)) else str(value)


def _row(name: str, doc: FieldDoc, type_words: str, default: str, allowed: str) -> tuple[str, ...]:
    applies = doc.applies or (f"pruner {', '.join(doc.pruners)}" if doc.pruners else "")
    unit = f" ({doc.unit})" if doc.unit else ""
    return (f"`{name}`", type_words + unit, doc.default_text or default, allowed, applies,
            doc.doc)


def _field_row(item: Field) -> tuple[str, ...]:
    return _row(item.name, item.doc, item.type_words, _yaml(item.default), item.allowed_words)


def _trainer_rows() -> Iterator[tuple[str, ...]]:
    from lightning_hpo.launch.config._parse import type_words

    yield _row("logger", LOGGER_FIELD, LOGGER_FIELD.type_text, "", LOGGER_FIELD.allowed_text)
    names = {"int": "integer", "float": "number", "str": "string", "bool": "true or false",
             "NoneType": "null"}
    for key, types in TRAINER_KEYS.items():
        words = " or ".join(names[t.__name__] for t in (
            types if isinstance(types, tuple) else (types,)))
        default = "pruner.max_resource" if key == "max_epochs" else "Lightning's"
        yield _row(key, FieldDoc(TRAINER_DOCS[key]), words, default, type_words(key))


def reference_rows() -> dict[str, list[tuple[str, ...]]]:
    """Each section's rows (top level: ``""``): ``field, type, default, allowed, applies to,
    description``."""
    def plain(docs: dict[str, FieldDoc]) -> list[tuple[str, ...]]:
        return [_row(key, doc, doc.type_text, "", doc.allowed_text) for key, doc in docs.items()]

    rows = {"": plain(TOP_FIELDS), "sampler": plain(SAMPLER_FIELDS)}
    rows.update({key: [_field_row(item) for item in fields_of(cls)]
                 for key, cls in SECTION_SPECS.items()})
    rows["trainer"] = list(_trainer_rows())
    return rows


def field_reference() -> str:
    """Every field of the launcher's config as Markdown: one table per section."""
    lines = ["# Config fields", "", "Generated from the launcher's definition "
             "(`lightning_hpo.launch.config.field_reference()`); `--print-config` prints a "
             "config with every field resolved."]
    for section, rows in reference_rows().items():
        lines += ["", f"## `{section}:`" if section else "## Top level", "",
                  "| " + " | ".join(_COLUMNS) + " |", "|" + "---|" * len(_COLUMNS)]
        lines += ["| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |"
                  for row in rows]
    return "\n".join(lines) + "\n"
