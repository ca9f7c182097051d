"""The report's :mod:`~lightning_hpo.report.opening`: a study by storage spec and name, or as
``NAME@STORAGE``, and errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from _report_support import make_launcher_study

from lightning_hpo.errors import ConfigError
from lightning_hpo.report import load, load_ref


def test_load_takes_the_only_study_and_names_fields(tmp_path: Path) -> None:
    spec = str(tmp_path / "one.journal")
    make_launcher_study(spec, "only")
    assert load(spec).study_name == "only"
    assert load_ref(f"only@{spec}").study_name == "only"
    with pytest.raises(ConfigError) as caught:
        load(spec, "missing")
    assert caught.value.field == "study" and "only" in caught.value.message
    with pytest.raises(ConfigError) as caught:
        load_ref("only")  # a bare name and no storage
    assert caught.value.field == "storage"
