"""``lightning_hpo.launch.checks.quiet``: the launcher's config checks build real Trainers without
Lightning's per-Trainer lines, and without its hint to prepend ``srun`` where ``srun`` exists
(``--check`` of a LightningCLI project printed it on a SLURM login node)."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import lightning as L
import pytest

from lightning_hpo.launch.checks.quiet import quiet_lightning


@pytest.fixture
def srun_on_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An ``srun`` on PATH, and this process not a SLURM task (the hint's condition)."""
    fake = tmp_path / "srun"
    fake.write_text("#!/bin/sh\nexit 1\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ.get('PATH', '')}")
    for name in [n for n in os.environ if n.startswith(("SLURM_", "SRUN_"))]:
        monkeypatch.delenv(name)


def _srun_hints(build: bool) -> list[str]:
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        if build:
            L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
        else:
            with quiet_lightning():
                L.Trainer(accelerator="cpu", devices=1, logger=False, enable_checkpointing=False)
    return [str(w.message) for w in seen if "srun" in str(w.message)]


@pytest.mark.usefixtures("srun_on_path")
def test_the_srun_hint_is_dropped_inside_the_block_and_only_there() -> None:
    assert len(_srun_hints(build=True)) == 1  # Lightning says it: the condition holds
    assert _srun_hints(build=False) == []


def test_lightning_s_loggers_are_at_warning_inside_and_as_they_were_after() -> None:
    logger = logging.getLogger("lightning.pytorch")
    before = logger.level
    logger.setLevel(logging.INFO)
    try:
        with quiet_lightning():
            assert logger.level == logging.WARNING
            assert logging.getLogger("lightning.fabric").level == logging.WARNING
        assert logger.level == logging.INFO
    finally:
        logger.setLevel(before)
