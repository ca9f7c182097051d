"""The report's :mod:`~lightning_hpo.report.opening`: a study by storage spec and name, or as
``NAME@STORAGE``, and errors naming the field."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers.report_support import make_launcher_study

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


@pytest.mark.parametrize(
    ("inserted", "expected"),
    [
        pytest.param(b'{"op_code": 4, "worker_id": "w", "study_id": 0', "Expecting ',' "
                     "delimiter on line 4 (a record cut short", id="record-cut-short"),
        pytest.param(b"{}", "line 4 is not a journal record (", id="json-not-a-record"),
        pytest.param(b"[1, 2]", "line 4 is not a journal record (", id="json-list"),
    ],
)
def test_a_journal_with_a_bad_line_inside_names_that_line(
    tmp_path: Path, inserted: bytes, expected: str
) -> None:
    """It said "Expecting ',' delimiter: line 1 column 48" (a position in the bad line, not in
    the file), or "cannot open t.journal: 'op_code'" for a line of JSON that is no record."""
    path = tmp_path / "t.journal"
    make_launcher_study(str(path), "demo")
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join([*lines[:3], inserted + b"\n", *lines[3:]]))
    before = path.read_bytes()
    with pytest.raises(ConfigError) as caught:
        load(str(path))
    assert str(caught.value).startswith(f"storage: {path} is not a valid Optuna journal file: "
                                        f"{expected}"), caught.value
    assert path.read_bytes() == before
