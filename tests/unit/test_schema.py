"""The trial records (``lightning_hpo.schema``): one type each, one writer, one reader.

The types are checked by round trip and by what a reader makes of values another tool (or an
older version) wrote; the "one writer" rule is checked on the package's source: the only calls
that store a record's attribute are in ``lightning_hpo/launch/study/trials.py``.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from lightning_hpo.schema import (
    ATTR,
    PAUSED_KEYS,
    SEGMENT_KEYS,
    Owner,
    Pause,
    ResumePoint,
    Segment,
    is_paused,
    with_segment,
)

PACKAGE = Path(__file__).resolve().parents[2] / "lightning_hpo"
RECORD_ATTRS = {"PAUSED", "SEGMENTS", "RESUME_POINT", "OWNER"}


def _trial(state: str = "RUNNING", **attrs: Any) -> SimpleNamespace:
    return SimpleNamespace(state=SimpleNamespace(name=state), user_attrs=attrs)


# -- round trips ------------------------------------------------------------------------------


@pytest.mark.parametrize("pause", [
    Pause(3, "/r/trial_00001/resume.ckpt", 1.7e9, None, "rung 3"),
    Pause(0, None, 1.7e9, 9, "wall-clock budget reached; stopped after epoch 0"),
    Pause(),
], ids=["at-rung", "interrupted", "empty"])
def test_a_pause_reads_back_as_written(pause: Pause) -> None:
    stored = pause.to_attr()
    assert tuple(stored) == PAUSED_KEYS
    assert Pause.read(stored) == pause


def test_a_segment_reads_back_as_written_open_and_closed() -> None:
    opened = Segment(10.0, None, slot=1, device="cuda:0,1", from_epoch=3, how="running")
    closed = opened.closed(25.5, 9, "paused")
    for segment in (opened, closed):
        stored = segment.to_attr()
        assert tuple(stored) == SEGMENT_KEYS
        assert Segment.read(stored) == segment
    assert (closed.start, closed.end, closed.epochs, closed.devices) == (10.0, 25.5, 6, 2)
    assert opened.epochs is None


def test_a_resume_point_and_an_owner_read_back_as_written() -> None:
    point = ResumePoint(7, "/runs/s/trial_00002/resume.ckpt")
    assert ResumePoint.read(point.to_attr()) == point
    assert ResumePoint.of(_trial(**{ATTR.RESUME_POINT: point.to_attr()})) == point
    owner = Owner("node-1.cluster", 31337, 12)
    assert Owner.read(owner.token) == owner
    assert Owner.of(_trial(**{ATTR.OWNER: owner.token})) == owner


# -- lenient readers --------------------------------------------------------------------------


@pytest.mark.parametrize("value", [None, "paused", 3, [1, 2], True])
def test_what_is_not_a_mapping_is_no_pause(value: object) -> None:
    assert Pause.read(value) is None


def test_fields_of_another_form_read_as_none() -> None:
    pause = Pause.read({"epoch": True, "checkpoint": 5, "since": "now", "target": -1, "why": ""})
    assert pause == Pause()
    assert pause.at_rung  # no target: it waits at a rung
    segment = Segment.read({"start": 1, "end": None, "slot": "one", "from_epoch": 2.0})
    assert segment == Segment(1.0, None)
    assert ResumePoint.read({"epoch": "x", "checkpoint": "/a.ckpt"}) == ResumePoint(0, "/a.ckpt")


@pytest.mark.parametrize("entry", [
    {"end": 5.0}, {"start": "t0"}, {"start": 5.0, "end": 4.0}, {"start": float("nan")}, [1, 2],
], ids=["no-start", "text-start", "ends-before-start", "nan-start", "not-a-mapping"])
def test_a_segment_without_a_usable_start_is_none(entry: object) -> None:
    assert Segment.read(entry) is None


@pytest.mark.parametrize("token", [
    None, 42, "", "host", "host:12", "host:pid:3", "host:12:n", ":12:3x",
])
def test_a_token_that_is_not_host_pid_n_is_no_owner(token: object) -> None:
    assert Owner.read(token) is None


def test_a_host_name_may_hold_colons() -> None:
    assert Owner.read("fe80::1:4242:0") == Owner("fe80::1", 4242, 0)


# -- "is it paused", and the segment list -----------------------------------------------------


@pytest.mark.parametrize(("state", "paused", "expected"), [
    ("RUNNING", {"epoch": 2, "target": None}, True),
    ("RUNNING", {}, True),
    ("RUNNING", None, False),
    ("RUNNING", "yes", False),
    ("COMPLETE", {"epoch": 2}, False),  # a finished trial's last pause, left behind
    ("PRUNED", {"epoch": 2}, False),
    ("WAITING", {"epoch": 2}, False),
])
def test_is_paused_is_a_running_trial_with_a_pause(
    state: str, paused: object, expected: bool
) -> None:
    trial = _trial(state, **{ATTR.PAUSED: paused})
    assert is_paused(trial) is expected
    assert (Pause.of(trial) is not None) is expected


def test_a_closed_segment_replaces_the_open_entry_it_listed() -> None:
    first = Segment(0.0, 4.0, slot=0, from_epoch=0, to_epoch=2, how="paused").to_attr()
    opened = Segment(9.0, None, slot=1, from_epoch=2, how="running")
    trial = _trial(**{ATTR.SEGMENTS: [first, opened.to_attr()]})
    assert Segment.open_last(trial) == opened
    stored = with_segment(trial, opened.closed(12.0, 4, "complete"))
    assert stored == [first, opened.closed(12.0, 4, "complete").to_attr()]
    # nothing open: the new one is appended; a list of another form is started afresh
    assert with_segment(_trial(**{ATTR.SEGMENTS: [first]}), opened)[-1] == opened.to_attr()
    assert with_segment(_trial(**{ATTR.SEGMENTS: "junk"}), opened) == [opened.to_attr()]
    assert Segment.open_last(_trial(**{ATTR.SEGMENTS: [first]})) is None


# -- one writer -------------------------------------------------------------------------------


def _record_writes(path: Path) -> list[str]:
    """``set_user_attr`` / ``set_trial_user_attr`` calls in ``path`` whose key is a record's
    attribute (``ATTR.PAUSED``, ...), as ``"file:line"``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("set_user_attr", "set_trial_user_attr")):
            continue
        for arg in node.args[:2]:
            if (isinstance(arg, ast.Attribute) and isinstance(arg.value, ast.Name)
                    and arg.value.id == "ATTR" and arg.attr in RECORD_ATTRS):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}")
    return found


def test_only_the_trial_records_module_stores_a_record() -> None:
    writes = [w for path in sorted(PACKAGE.rglob("*.py")) for w in _record_writes(path)]
    assert writes, "the search found no write at all: it is broken"
    assert {w.split(":")[0] for w in writes} == {"lightning_hpo/launch/study/trials.py"}, writes


def test_the_schema_imports_neither_optuna_nor_torch() -> None:
    code = "import sys, lightning_hpo.schema; print(sorted({'optuna', 'torch'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
