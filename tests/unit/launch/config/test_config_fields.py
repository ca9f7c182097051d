"""The launcher's config defined once: every field of the definition (``_fields``) is read by
:func:`parse_config`, printed by :func:`resolved_config` and listed by :func:`field_reference`,
and nothing else is."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from lightning_hpo.errors import ConfigError
from lightning_hpo.launch.config import (
    TOP_LEVEL,
    TRAINER_KEYS,
    Config,
    PrunerSpec,
    apply_overrides,
    field_reference,
    parse_config,
    resolved_config,
)
from lightning_hpo.launch.config._fields import Field, applies, fields_of
from lightning_hpo.launch.config._parse import PRUNER_KEYS
from lightning_hpo.launch.config._spec import SAMPLER_FIELDS, TOP_DEFAULTS, TOP_FIELDS
from lightning_hpo.launch.config.reference import SECTION_SPECS, reference_rows
from lightning_hpo.storage import mask

BASE: dict[str, Any] = {
    "study": "fields", "model": {"name": "lenet"},
    "space": {"lr": {"loguniform": [0.01, 1.0]}},
    "pruner": {"name": "asha", "max_resource": 9}, "trainer": {"max_epochs": 9},
    "stop": {"n_trials": 4, "max_wallclock_time": 600},
}
FIELDS = [(section, item) for section, cls in SECTION_SPECS.items() for item in fields_of(cls)]
IDS = [f"{section}.{item.name}" for section, item in FIELDS]


def _variant(section: str, item: Field) -> dict[str, Any]:
    """BASE with a pruner (and storage) where ``section.item`` applies."""
    raw = {**BASE, "pruner": dict(BASE["pruner"])}
    if section == "heartbeat":
        raw["storage"] = "postgresql://u:p@db/s"
        raw["heartbeat"] = {}
    if item.doc.pruners is not None:
        raw["pruner"]["name"] = item.doc.pruners[-1]
    if item.doc.when is not None:
        raw["pruner"] = {**raw["pruner"], "name": "asha", "mode": "promotion"}
    assert applies(item, parse_config(raw).pruner)
    return raw


def _yaml(value: Any) -> str:
    return yaml.safe_dump(value, default_flow_style=True).strip().removesuffix("\n...")


def _same(a: Config, b: Config) -> bool:
    return (dataclasses.replace(a, raw={}, storage=mask(a.storage))
            == dataclasses.replace(b, raw={}, storage=mask(b.storage)))


def test_every_field_of_the_definition_is_in_the_reference() -> None:
    text = field_reference()
    rows = reference_rows()
    for section, item in FIELDS:
        assert f"| `{item.name}` |" in text
        assert any(row[0] == f"`{item.name}`" and row[5] == item.doc.doc
                   for row in rows[section]), (section, item.name)
    assert [row[0] for row in rows[""]] == [f"`{key}`" for key in TOP_LEVEL]
    assert [row[0] for row in rows["sampler"]] == [f"`{key}`" for key in SAMPLER_FIELDS]
    assert [row[0] for row in rows["trainer"]] == [f"`{key}`" for key in ("logger", *TRAINER_KEYS)]
    for section in (*SECTION_SPECS, "sampler", "trainer"):
        assert f"## `{section}:`" in text
    assert all(len(row) == 6 and row[5] for section_rows in rows.values() for row in section_rows)


def test_the_key_lists_are_derived_from_the_definition() -> None:
    assert tuple(TOP_FIELDS) == TOP_LEVEL
    assert set(SECTION_SPECS) | {"sampler", "trainer"} <= set(TOP_LEVEL)
    assert PRUNER_KEYS["asha"] == ("mode", "finish_best")
    assert PRUNER_KEYS["sync_sh"] == ("prefact", "resume", "finish_best")
    assert PRUNER_KEYS["none"] == ()


@pytest.mark.parametrize(("section", "item"), FIELDS, ids=IDS)
def test_a_fields_default_reads_as_leaving_it_out(section: str, item: Field) -> None:
    raw = _variant(section, item)
    given = parse_config(apply_overrides(raw, [f"{section}.{item.name}={_yaml(item.default)}"]))
    left_out = parse_config(apply_overrides(raw, [f"~{section}.{item.name}"])
                            if item.name in raw.get(section, {}) else raw)
    assert _same(given, left_out)


def _bad_values(item: Field) -> list[Any]:
    if item.choices:
        return ["bogus", 3]
    if item.kind is bool:
        return ["maybe", 1]
    low = item.doc.minimum
    assert low is not None, item.name
    values: list[Any] = ["x", True, low if item.doc.above else low - 1]
    if item.kind is int:
        values.append(low + 0.5)
    if item.doc.maximum is not None:
        values.append(item.doc.maximum + 1)
    return values


@pytest.mark.parametrize(("section", "item"), FIELDS, ids=IDS)
def test_a_value_outside_a_fields_rule_is_refused_naming_that_field(section: str,
                                                                    item: Field) -> None:
    raw = _variant(section, item)
    for value in _bad_values(item):
        if section == "pruner" and item.name == "name":
            broken = {**raw, "pruner": {**raw["pruner"], "name": value}}
        else:
            broken = {**raw, section: {**raw.get(section, {}), item.name: value}}
        with pytest.raises(ConfigError) as info:
            parse_config(broken)
        assert info.value.field == f"{section}.{item.name}", (value, str(info.value))
        assert "\n" not in str(info.value)


@pytest.mark.parametrize("section", [key for key in SECTION_SPECS if key != "pruner"])
def test_a_section_takes_exactly_the_definitions_keys(section: str) -> None:
    raw = _variant(section, fields_of(SECTION_SPECS[section])[0])
    with pytest.raises(ConfigError) as info:
        parse_config({**raw, section: {**raw.get(section, {}), "colour": 1}})
    names = sorted(item.name for item in fields_of(SECTION_SPECS[section]))
    assert str(info.value) == f"{section}.colour: unknown field; allowed: {', '.join(names)}"


@pytest.mark.parametrize("name", ["asha", "hyperband", "sync_sh", "sync_hyperband", "none"])
def test_a_pruner_takes_exactly_the_definitions_keys_for_its_name(name: str) -> None:
    keys = sorted(item.name for item in fields_of(PrunerSpec) if item.name != "name" and (
        item.doc.pruners is None or name in item.doc.pruners))
    with pytest.raises(ConfigError) as info:
        parse_config({**BASE, "pruner": {"name": name, "max_resource": 9, "colour": 1}})
    assert str(info.value) == f"pruner.colour: unknown field; allowed: {', '.join(keys)}"


def _every_field(pruner: dict[str, Any]) -> dict[str, Any]:
    return {
        **BASE, "storage": "postgresql://u:secret@db/s", "run_dir": "out", "seed": 3,
        "sampler": "tpe", "pruner": {"max_resource": 9, "min_resource": 1,
                                     "reduction_factor": 2, **pruner},
        "devices": {"per_trial": 1, "trials_per_device": 2, "accelerator": "cpu", "count": 2},
        "stop": {"n_trials": 5, "max_wallclock_time": 60.5, "max_failed_trials": 2,
                 "grace": 3, "max_retries": 0},
        "checkpoint": {"every": "rung", **({"max_paused": 3}
                                           if pruner.get("mode") == "promotion" else {})},
        "heartbeat": {"interval": 5, "grace_period": 11},
        "trainer": {"max_epochs": 9, "logger": "csv", "gradient_clip_val": 0.5,
                    "accumulate_grad_batches": 2, "limit_val_batches": 0.5},
    }


@pytest.mark.parametrize("pruner", [
    {"name": "sync_sh", "prefact": 2, "resume": False, "finish_best": False},
    {"name": "asha", "mode": "promotion", "finish_best": False},
    {"name": "hyperband", "mode": "stop"},
], ids=["sync", "promotion", "stop"])
def test_a_config_with_every_field_set_resolves_to_itself(pruner: dict[str, Any]) -> None:
    raw = _every_field(pruner)
    cfg = parse_config(raw)
    printed = resolved_config(cfg)
    for key, cls in SECTION_SPECS.items():  # the definition's fields that apply, in its order
        assert list(printed[key]) == [item.name for item in fields_of(cls)
                                      if applies(item, cfg.pruner)]
        for name, value in raw[key].items():
            assert printed[key][name] == value, (key, name)
    assert _same(parse_config(yaml.safe_load(yaml.safe_dump(printed))), cfg)


@pytest.mark.parametrize(("pruner", "key", "message"), [
    ({"name": "asha", "finish_best": True}, "pruner.finish_best",
     "applies to pruner mode: promotion (asha or hyperband), sync_sh and sync_hyperband only; "
     "the pruner is asha with mode stop"),
    ({"name": "sync_sh"}, "checkpoint.max_paused",
     "applies to pruner mode: promotion (asha or hyperband) only; the pruner is sync_sh"),
    ({"name": "asha", "prefact": 2}, "pruner.prefact", "is for pruner sync_sh or sync_hyperband, "
     "and the pruner is asha"),
], ids=["finish-best", "max-paused", "prefact"])
def test_a_field_where_it_does_not_apply_is_refused(pruner: dict[str, Any], key: str,
                                                    message: str) -> None:
    raw = {**BASE, "pruner": {**pruner, "max_resource": 9}, "checkpoint": {"max_paused": 2}}
    if key != "checkpoint.max_paused":
        del raw["checkpoint"]
    with pytest.raises(ConfigError) as info:
        parse_config(raw)
    assert info.value.field == key and info.value.message.startswith(message), str(info.value)


ROOT = Path(__file__).resolve().parents[4]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}


def test_help_names_print_config_and_the_reference() -> None:
    done = subprocess.run([sys.executable, "-m", "lightning_hpo.launch", "--help"],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0
    assert "--print-config" in done.stdout.split("example:")[-1]
    assert "--list-fields" in done.stdout.split("example:")[-1]


def test_list_fields_prints_the_reference(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "lightning_hpo.launch", "--list-fields"],
                          capture_output=True, text=True, timeout=120, env=ENV, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == field_reference()
    assert list(tmp_path.iterdir()) == []


def test_the_script_prints_the_reference() -> None:
    done = subprocess.run([sys.executable, str(ROOT / "scripts" / "config_reference.py")],
                          capture_output=True, text=True, timeout=120, env=ENV)
    assert done.returncode == 0, done.stderr
    assert done.stdout == field_reference()


def test_the_top_levels_defaults_are_the_definitions() -> None:
    """A config that leaves the top-level keys out gets TOP_DEFAULTS, which the reference
    prints: the defaults are written once."""
    cfg = parse_config({key: value for key, value in BASE.items()
                        if key not in TOP_DEFAULTS})
    assert (cfg.run_dir, cfg.data, cfg.metric, cfg.direction, cfg.initial, cfg.sampler, cfg.seed,
            cfg.pruner.name) == tuple(TOP_DEFAULTS[key] for key in (
                "run_dir", "data", "metric", "direction", "initial", "sampler", "seed", "pruner"))
    for key, value in TOP_DEFAULTS.items():
        shown = "null" if value is None else ("[]" if value == [] else str(value))
        assert TOP_FIELDS[key].default_text == shown, key
