"""``--print-config`` and :func:`lightning_hpo.launch.config.resolved_config`: the config the
launcher runs, every field filled in, read back as the same config."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from lightning_hpo.launch.config import (
    Config,
    load_config,
    parse_config,
    resolved_config,
    shipped_configs,
)
from lightning_hpo.storage import mask


def _same(a: Config, b: Config) -> bool:
    """Equal but for ``raw`` and a storage password (printed masked)."""
    return (dataclasses.replace(a, raw={}, storage=mask(a.storage))
            == dataclasses.replace(b, raw={}, storage=mask(b.storage)))


@pytest.mark.parametrize("name", sorted(shipped_configs()))
def test_a_shipped_config_resolved_reads_back_as_itself(name: str) -> None:
    cfg = load_config(name)
    text = yaml.safe_dump(resolved_config(cfg), sort_keys=False)
    assert _same(parse_config(yaml.safe_load(text)), cfg)


@pytest.mark.parametrize("overrides", [
    ["pruner.name=sync_sh", "pruner.prefact=2", "pruner.resume=false"],
    ["pruner.mode=promotion", "pruner.finish_best=false", "checkpoint.max_paused=4"],
    ["pruner.name=none"],
    ["sampler={class: 'optuna.samplers:QMCSampler', scramble: true}"],
    ["metric=[validation_error, parameters]", "direction=[minimize, minimize]"],
    ["storage=postgresql://u:p@db/s", "heartbeat={interval: 5}"],
], ids=["sync-sh", "promotion", "no-pruner", "sampler-class", "two-objectives", "heartbeat"])
def test_every_section_resolved_reads_back_as_itself(overrides: list[str]) -> None:
    cfg = load_config("quickstart", overrides)
    assert _same(parse_config(yaml.safe_load(yaml.safe_dump(resolved_config(cfg)))), cfg)


def test_defaults_are_filled_in_and_the_password_masked() -> None:
    cfg = load_config("quickstart", ["storage=postgresql://hpo:secret@db/studies"])
    printed = resolved_config(cfg)
    assert printed["storage"] == "postgresql://hpo:***@db/studies"
    assert printed["stop"]["max_retries"] == 2 and printed["checkpoint"]["every"] == "auto"
    assert printed["trainer"]["max_epochs"] == cfg.max_epochs == 9
    assert "secret" not in yaml.safe_dump(printed)


def test_a_lightning_cli_projects_sections_are_kept_as_written(tmp_path: Path) -> None:
    (tmp_path / "project.yaml").write_text("model: {hidden: 8}\n")
    raw = {"study": "p", "cli": "main:cli_main", "config": [str(tmp_path / "project.yaml")],
           "space": {"model.hidden": {"randint": [4, 16]}},
           "pruner": {"name": "asha", "max_resource": 3}, "stop": {"n_trials": 4},
           "trainer": {"logger": "csv"}}
    printed = resolved_config(parse_config(raw))
    assert printed["cli"] == "main:cli_main" and printed["config"] == raw["config"]
    assert printed["trainer"] == {"logger": "csv"}
    assert _same(parse_config(printed), parse_config(raw))


def _launch(args: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    return subprocess.run([sys.executable, "-m", "lightning_hpo.launch", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120, env=env)


def test_print_config_prints_the_resolved_config_and_writes_nothing(tmp_path: Path) -> None:
    done = _launch(["quickstart", "--print-config", "--set", "stop.n_trials=5",
                    "--set", "storage=postgresql://u:secret@h/db"], tmp_path)
    assert done.returncode == 0, done.stderr
    printed = yaml.safe_load(done.stdout)
    assert printed["stop"]["n_trials"] == 5 and printed["storage"] == "postgresql://u:***@h/db"
    assert printed == resolved_config(load_config("quickstart", [
        "stop.n_trials=5", "storage=postgresql://u:secret@h/db"]))
    assert list(tmp_path.iterdir()) == []


def test_print_config_refuses_a_bad_value_in_one_line(tmp_path: Path) -> None:
    done = _launch(["quickstart", "--print-config", "--set", "pruner.reduction_factor=1"],
                   tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.splitlines() == [
        "error: pruner.reduction_factor: is 1, but must be an integer >= 2"]
    assert list(tmp_path.iterdir()) == []
